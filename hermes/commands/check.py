"""``hermes check NEW --baseline BASE``: the CI gate (thin layer over ``hermes.check``)."""

from __future__ import annotations

from pathlib import Path

import typer

from hermes.commands._util import write_text_atomic
from hermes.commands.diff import refuse_overwrite
from hermes.errors import UsageError


def parse_fraction(text: str, flag: str) -> float:
    """``5%``, ``5 %`` or ``0.05`` -> 0.05."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UsageError(f"expected a fraction like 5% or 0.05, got {text!r}",
                         where=flag) from None
    if not 0 <= value < 10:
        raise UsageError(f"{text!r} is out of range (0 to 1000 %)", where=flag)
    return value


def register(app: typer.Typer) -> None:
    @app.command("check")
    def check_cmd(
        new: Path = typer.Argument(..., help="The run to gate: a Hermes trace or profiler "
                                             "output that `hermes import` reads."),
        baseline: list[Path] | None = typer.Option(
            None, "--baseline", "-b",
            help="An earlier run (repeatable: a history whose steps are pooled)."),
        max_regression: str = typer.Option("5%", "--max-regression",
                                           help="Allowed median step-time increase, e.g. 5% "
                                                "or 0.05."),
        alpha: float = typer.Option(0.01, "--alpha", min=1e-6, max=0.5,
                                    help="Significance level of the one-sided Mann-Whitney "
                                         "test over steps."),
        budget: Path | None = typer.Option(None, "--budget",
                                           help="Budget file (TOML): step time, host-bound %, "
                                                "exposed communication %, MFU, findings."),
        junit: Path | None = typer.Option(None, "--junit",
                                          help="Write JUnit XML here (one test case per gate)."),
        md: Path | None = typer.Option(None, "--md",
                                       help="Write Markdown here, e.g. $GITHUB_STEP_SUMMARY."),
        allow_missing: bool = typer.Option(
            False, "--allow-missing",
            help="Gate on the ranks that could be analyzed when a run's analysis left some "
                 "out (they are named either way); without it such a run fails the gate."),
    ) -> int:
        """Gate CI on performance: exit 1 when the median step time regressed beyond
        --max-regression and the slowdown is significant over the steps, a budget is
        broken, or a run could be analyzed only in part (some ranks not analyzed); 0 when
        every gate passes; 2 on bad input. A failed regression names the kernels and
        operators that got slower.

        Example: hermes check new.parquet --baseline main-1.parquet --baseline main-2.parquet
        --budget perf.toml --junit perf.xml --md "$GITHUB_STEP_SUMMARY"
        """
        from hermes.check import (
            check_paths,
            load_budget,
            render_junit,
            render_markdown,
            render_terminal,
        )

        bases = list(baseline or [])
        if not bases and budget is None:
            raise UsageError("nothing to check against", where="hermes check",
                             hint="give --baseline RUN (repeatable) and/or --budget FILE.toml")
        limit = parse_fraction(max_regression, "--max-regression")
        plan = load_budget(budget) if budget is not None else None
        inputs = [new, *bases, *([budget] if budget is not None else [])]
        for out, flag in ((junit, "--junit"), (md, "--md")):
            if out is not None:
                refuse_overwrite(out, inputs, flag)
        verdict = check_paths(new, bases, max_regression=limit, alpha=alpha, budget=plan,
                              allow_missing=allow_missing)
        typer.echo(render_terminal(verdict), nl=False)
        if junit is not None:
            write_text_atomic(junit, render_junit(verdict))
        if md is not None:
            _write_md(md, render_markdown(verdict))
        return verdict.exit_code


def _write_md(path: Path, text: str) -> None:
    """$GITHUB_STEP_SUMMARY is a file other steps append to: add to it rather than replace
    it (a regular file that exists); any other path is written atomically."""
    import os

    if path.exists() and path.is_file() and os.environ.get("GITHUB_STEP_SUMMARY") == str(path):
        with path.open("a", encoding="utf-8") as fh:
            fh.write(text)
    else:
        write_text_atomic(path, text)
