"""``hermes analyze TRACE``: bottleneck analysis of a trace (thin layer over ``hermes.analyze``).

TRACE is a Hermes trace or profiler output (Kineto JSON/.gz, Ascend output), imported in this
process first. The text report is drawn with rich tables on a terminal and stays plain text
when piped (scripts and tests read that layout).
"""

from __future__ import annotations

import contextlib
import functools
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from hermes.commands._util import (
    check_output_path,
    hermes_source,
    hermes_trace,
    progress,
    start_source,
    write_text_atomic,
)
from hermes.report import formats_help

TRACE_HELP = ("Hermes trace (.parquet or per-rank directory), or profiler output to import "
              "first: a PyTorch profiler (Kineto) .json/.json.gz or an Ascend profiler directory; "
              "several profiler files are one per rank, as `hermes import` reads them.")
SAVE_HELP = "Keep the trace imported from profiler output at this .parquet path."


def stdout_is_terminal() -> bool:
    import sys

    return sys.stdout.isatty()


def register(app: typer.Typer) -> None:
    @app.command("analyze")
    def analyze_cmd(
        traces: list[Path] = typer.Argument(..., help=TRACE_HELP, metavar="TRACE..."),
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
        allow_missing: bool = typer.Option(False, "--allow-missing", help=ALLOW_MISSING_HELP),
        keep_warmup: bool = typer.Option(
            False, "--keep-warmup",
            help="Analyze a warm-up first step too (one over 10x the median of the others is "
                 "left out by default and reported)."),
        save_trace: Path | None = typer.Option(None, "--save-trace", help=SAVE_HELP),
        device: str | None = typer.Option(None, "--device", help=DEVICE_HELP),
    ) -> int:
        """Find what holds a training run back: the verdict (host-, device-, io- or
        communication-bound), the step time breakdown and typed findings with evidence, sorted
        by the share of step time they cost.

        Example: hermes analyze trace.pt.trace.json.gz

        Example: hermes analyze run.parquet --format json --out analysis.json

        Example: hermes analyze rank0.pt.trace.json.gz rank1.pt.trace.json.gz

        Example: hermes analyze trace.pt.trace.json.gz --device a100-sxm4-80gb
        """
        trace = traces[0]
        from hermes.analyzers.engine.executor import LocalExecutor, make_executor
        from hermes.report import RENDERERS

        renderer = RENDERERS.get(fmt, flag="--format")
        if out is not None:
            check_output_path(out, [*traces, *([save_trace] if save_trace else [])])
        executor = make_executor(scheduler, workers)
        # one process (no pool, no cluster): a profiler file is imported into memory, in a
        # forked process while this one imports what analyzes it (pandas, the analyzers)
        here = isinstance(executor, LocalExecutor) and executor.workers <= 1 \
            and len(traces) == 1
        started = start_source(trace, save_trace) if here else None
        try:
            from hermes.pipeline import analyze_and_advise, preload

            if started is not None:
                preload()  # while the child still parses
                renderer.load()
            source_of = functools.partial(hermes_source, started=started) if here else \
                hermes_trace
            with sources(traces, save_trace, source_of) as source:
                with progress("analyzing ranks") as bar, as_rank_failure(source, trace):
                    result, advice = analyze_and_advise(
                        source, ranks=rank or None, workers=workers,
                        progress=lambda done, total: bar.update(completed=done, total=total),
                        keep_warmup=keep_warmup, executor=executor, device=device)
                loaded = timeline_trace(source, rank, result) if renderer.wants_trace \
                    else None
        finally:
            if started is not None:
                started.cancel()  # a no-op once its trace was taken
            executor.close()
        if out is None and fmt == "text" and stdout_is_terminal():
            from hermes.report.terminal import print_report

            print_report(result, advice, top)
            return exit_code(result, allow_missing)
        text = renderer(result, advice, top, trace=loaded)
        if out is not None:
            write_text_atomic(out, text)
            typer.echo(f"wrote {out}", err=True)
        else:
            typer.echo(text, nl=False)
        return exit_code(result, allow_missing)


@contextlib.contextmanager
def sources(traces: list[Path], save: Path | None, one: Any = hermes_trace) -> Iterator[Any]:
    """The trace to analyze: ``one(trace, save)`` of a single argument, or several profiler
    files (one per rank) imported together as ``hermes import`` does."""
    if len(traces) == 1:
        with one(traces[0], save) as source:
            yield source
        return
    from hermes.commands._many import imported

    with imported(list(traces), save) as path:
        yield path


@contextlib.contextmanager
def as_rank_failure(source: Any, src: Path) -> Iterator[None]:
    """A trace imported in memory is analyzed in this process: a failure of its analysis is
    the one-line error a trace path's failed rank gives (the executor's), never a traceback."""
    from hermes.errors import HermesError

    try:
        yield
    except Exception as exc:
        from hermes.trace import Trace

        if isinstance(exc, HermesError) or not isinstance(source, Trace):
            raise
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        ranks = ", ".join(f"rank {r}" for r in source.ranks)
        raise HermesError(f"no rank could be analyzed: {ranks}: {last.splitlines()[0]}",
                          path=src) from None


def timeline_trace(source: Any, rank: list[int] | None, result: Any) -> Any:
    """The events a renderer that draws a timeline reads (its columns, the ranks analyzed):
    loaded from a trace path (but its files the analysis could not read), or taken from a
    trace imported in memory."""
    from hermes.report.timeline import columns
    from hermes.trace import Trace, load

    if not isinstance(source, Trace):
        return load(source, columns=columns(), ranks=rank or None,
                    skip=result.unread_files)
    ev = source.events
    if rank:
        ev = ev.loc[ev["rank"].isin([int(r) for r in rank]).to_numpy()]
    return Trace(events=ev[columns()].reset_index(drop=True), meta=source.meta)


#: ``--device``'s help (``analyze`` and ``report``)
DEVICE_HELP = ("The device that ran the trace (a name or alias of `hermes devices`), over what "
               "the trace shows: the advice is fitted to it (the roofline keeps the trace's own "
               "device; `hermes import --device` sets that).")

#: ``--allow-missing``'s help (``analyze`` and ``report``)
ALLOW_MISSING_HELP = ("Exit 0 even if some ranks could not be analyzed (they are listed in the "
                      "report either way).")


def exit_code(result: Any, allow_missing: bool) -> int:
    """0, or 1 naming the ranks that could not be analyzed (unless ``--allow-missing``)."""
    if result.missing_ranks and not allow_missing:
        from hermes.analyzers.engine.result import unread_file

        # (a rank by its number, as `--rank` takes it; a file of unknown ranks by its name)
        named = ", ".join(f"{f'file {f}' if (f := unread_file(m)) else m['rank']} "
                          f"({m['error']})" for m in result.missing_ranks)
        typer.echo(f"hermes: error: rank(s) not analyzed: {named}; the report covers the "
                   "others (--allow-missing to accept that)", err=True)
        return 1
    return 0
