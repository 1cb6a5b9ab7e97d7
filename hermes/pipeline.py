"""The public one-call path: ``hermes.analyze(trace) -> Analysis`` with recommendations attached.

It composes the stages in DESIGN.md's order — :func:`hermes.analyzers.engine.run.analyze` (trace ->
findings), then :func:`hermes.advisor.advise` (findings -> recommendations) — and returns the
analysis whose findings carry their recommendations, as ``hermes analyze`` reports them. Call the
stages yourself to keep them apart (e.g. to advise from another rule table).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hermes.advisor import Advice, advise
from hermes.analyzers.engine.executor import Executor
from hermes.analyzers.engine.result import Analysis
from hermes.analyzers.engine.run import Progress
from hermes.analyzers.engine.run import analyze as run_analysis
from hermes.rules import RuleTable


def analyze_and_advise(trace_or_path: Any, ranks: Iterable[int] | None = None, workers: int = 0,
                       progress: Progress | None = None, keep_warmup: bool = False,
                       table: RuleTable | None = None, executor: Executor | None = None,
                       device: str | None = None) -> tuple[Analysis, Advice]:
    """The analysis of a trace (or trace path) and the advisor's recommendations for it;
    ``executor`` runs its ranks (default: the embedded one of ``workers`` processes);
    ``device`` (``--device``): the device the user says ran it, which the advice is fitted to."""
    if device:
        from hermes import devices

        devices.get(device)  # an unknown name: one line, exit 2, before any work
    analysis = run_analysis(trace_or_path, ranks=ranks, workers=workers, progress=progress,
                            keep_warmup=keep_warmup, executor=executor)
    if device:
        from dataclasses import replace

        analysis = replace(analysis, device_option=device)
    # the trace travels on to the advisor so what-if can replay it (estimate = "replay"), with
    # the step graphs the critical path built (``analysis.keep``), let go once it has advised
    advice = advise(analysis, table, trace=trace_or_path if ranks is None else None)
    if analysis.keep is not None:
        analysis.keep.clear()
    return analysis, advice


def preload() -> None:
    """Import now what an analysis and its advice import on first use (the analyzers, the
    what-if replay), for a caller that has time to spare before its trace is there
    (``hermes analyze`` while a forked child imports the file)."""
    import importlib

    from hermes.analyzers.engine.run import load_analyzers

    load_analyzers()
    importlib.import_module("hermes.advisor.replayed")


def analyze(trace_or_path: Any, ranks: Iterable[int] | None = None, workers: int = 0,
            progress: Progress | None = None, keep_warmup: bool = False,
            table: RuleTable | None = None) -> Analysis:
    """Analyze a :class:`hermes.Trace` or a trace path; findings carry their recommendations.

    ``ranks`` restricts to some ranks; ``workers`` > 1 analyzes ranks in that many processes;
    ``progress(done, total)`` is called after each rank. A first step over 10x the median of the
    others (warm-up) is left out and reported in ``Analysis.warmup`` unless ``keep_warmup``.
    """
    analysis, advice = analyze_and_advise(trace_or_path, ranks, workers, progress, keep_warmup,
                                          table)
    return advice.attach(analysis)
