"""``hermes analyze TRACE``: bottleneck analysis of a trace (thin layer over ``hermes.analyze``)."""

from __future__ import annotations

from pathlib import Path

import typer

from hermes.commands._util import check_output_path, progress, write_text_atomic
from hermes.report import formats_help


def register(app: typer.Typer) -> None:
    @app.command("analyze")
    def analyze_cmd(
        trace: Path = typer.Argument(
            ..., help="Trace file (.parquet) or directory of per-rank files."),
        fmt: str = typer.Option("text", "--format", "-f",
                                help=f"Output format: {formats_help()}."),
        out: Path | None = typer.Option(None, "--out", "-o",
                                        help="Write the report to this file (atomically) "
                                             "instead of stdout."),
        rank: list[int] | None = typer.Option(None, "--rank", "-r",
                                              help="Analyze only this rank (repeatable)."),
        top: int = typer.Option(10, "--top", help="Findings shown in text/md output."),
        workers: int = typer.Option(0, "--workers", "-j",
                                    help="Analyze ranks in this many processes (0: in-process)."),
        scheduler: str | None = typer.Option(
            None, "--scheduler", help="Run ranks on this Dask scheduler (tcp://HOST:PORT; "
            "'local': a local Dask cluster of --workers); default $DASK_SCHEDULER_ADDRESS, "
            "else this machine. Needs pip install 'hermes-profiler[cluster]'."),
        allow_missing: bool = typer.Option(
            False, "--allow-missing", help="Exit 0 even if some ranks could not be analyzed "
            "(they are listed in the report either way)."),
        keep_warmup: bool = typer.Option(
            False, "--keep-warmup",
            help="Analyze a warm-up first step too (one over 10x the median of the others is "
                 "left out by default and reported)."),
    ) -> int:
        """Find what holds a training run back: the verdict (host-, device-, io- or
        communication-bound), the step time breakdown and typed findings with evidence, sorted
        by the share of step time they cost.

        Example: hermes analyze run.parquet --format json --out analysis.json
        """
        from hermes.pipeline import analyze_and_advise
        from hermes.report import RENDERERS

        renderer = RENDERERS.get(fmt, flag="--format")
        if out is not None:
            check_output_path(out)
        from hermes.analyzers.executor import make_executor

        executor = make_executor(scheduler, workers)
        try:
            with progress("analyzing ranks") as bar:
                result, advice = analyze_and_advise(
                    trace, ranks=rank or None, workers=workers,
                    progress=lambda done, total: bar.update(completed=done, total=total),
                    keep_warmup=keep_warmup, executor=executor)
        finally:
            executor.close()
        text = renderer(result, advice, top)
        if out is not None:
            write_text_atomic(out, text)
            typer.echo(f"wrote {out}", err=True)
        else:
            typer.echo(text, nl=False)
        if result.missing_ranks and not allow_missing:
            named = ", ".join(f"{m['rank']} ({m['error']})" for m in result.missing_ranks)
            typer.echo(f"hermes: error: rank(s) not analyzed: {named}; the report covers the "
                       "others (--allow-missing to accept that)", err=True)
            return 1
        return 0
