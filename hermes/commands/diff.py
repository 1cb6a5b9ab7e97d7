"""``hermes diff BASE NEW``: what changed between two runs (thin layer over ``hermes.diff``)."""

from __future__ import annotations

from pathlib import Path

import typer

from hermes.commands._util import check_output_path, write_text_atomic


def refuse_overwrite(out: Path, inputs: list[Path], flag: str) -> None:
    """An output must never replace one of the runs it was computed from."""
    check_output_path(out, inputs, flag)


def register(app: typer.Typer) -> None:
    from hermes.diff import RENDERERS

    @app.command("diff")
    def diff_cmd(
        base: Path = typer.Argument(..., help="The earlier run: a Hermes trace (.parquet or a "
                                              "per-rank directory) or profiler output that "
                                              "`hermes import` reads."),
        new: Path = typer.Argument(..., help="The run to compare with it (same kinds)."),
        fmt: str = typer.Option("text", "--format", "-f",
                                help=f"Output format: {', '.join(RENDERERS.names())}."),
        out: Path | None = typer.Option(None, "--out", "-o",
                                        help="Write to this file (atomically) instead of "
                                             "stdout."),
        top: int = typer.Option(20, "--top", min=1,
                                help="Changed operators/kernels shown (JSON keeps all)."),
    ) -> int:
        """Compare two runs: step time (median, p90, the change with its confidence interval
        and significance), the breakdown side by side, the operators and kernels that got
        slower, faster, appeared or went away (per step, with a Mann-Whitney p), and the
        findings that appeared, disappeared or grew. Steps are matched by order, ranks by id,
        kernel names without their template arguments.

        Example: hermes diff base.pt.trace.json.gz new.pt.trace.json.gz --format md --out d.md
        """
        from hermes.diff import compare

        renderer = RENDERERS.get(fmt, flag="--format")
        if out is not None:
            refuse_overwrite(out, [base, new], "--out")
        text = renderer(compare(base, new), top)
        if out is not None:
            write_text_atomic(out, text)
            typer.echo(f"wrote {out}", err=True)
        else:
            typer.echo(text, nl=False)
        return 0
