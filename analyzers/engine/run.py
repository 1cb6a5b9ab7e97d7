"""The analysis executor: ``analyze(trace_or_path) -> Analysis``.

Map/reduce over ranks, as DESIGN.md's *Scale* section asks: each rank's events are loaded alone
(``hermes.load(path, ranks=[r])`` for a directory of per-rank files, so no process holds every
rank's events), the rank analyzers run on them in dependency order (``base.ordered("rank")``), and
only their results — small tables, metrics, findings — are kept; then the cluster analyzers run over
those per-rank results, and the findings are folded and merged (:mod:`hermes.analyzers.engine.fold`).
Ranks run on an executor (:mod:`hermes.analyzers.engine.executor`): in-process one after the other by
default, ``workers=N`` in a pool of N processes, or a Dask cluster; each worker reads its rank's
files itself and sends back only the results. A rank that fails twice (load error, analysis error,
dead worker) is named in ``Analysis.missing_ranks``, never silently left out.

Analysis stops at findings: recommendations are the advisor's (``hermes.advisor.advise``), after it.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hermes.analyzers.common import runkind
from hermes.analyzers.common.steps import drop_warmup, step_windows
from hermes.analyzers.engine.base import AnalyzerResult, ClusterContext, Keep, RankContext, ordered
from hermes.analyzers.engine.executor import Executor, Failure, LocalExecutor, usable_cpus
from hermes.analyzers.engine.fold import fold_symptoms, merge_findings
from hermes.analyzers.engine.rankfiles import check_copies, check_rank, load_rank, rank_where
from hermes.analyzers.engine.result import BREAKDOWN_KEYS, Analysis, missing_what, pack
from hermes.analyzers.engine.verdict import remainder_inputs, verdict
from hermes.errors import HermesError, TraceFormatError, UsageError
from hermes.trace.validate import consistency_errors, time_errors

#: Modules that register analyzers (importing one registers its analyzers).
MODULES = (
    "hermes.analyzers.overlap", "hermes.analyzers.critical_path.analysis", "hermes.analyzers.io",
    "hermes.analyzers.cpu", "hermes.analyzers.fluctuation", "hermes.analyzers.computation.analysis",
    "hermes.analyzers.communication.rank", "hermes.analyzers.communication.cluster",
    "hermes.analyzers.cluster", "hermes.analyzers.memory",
    "hermes.analyzers.critical_path.crossrank",
)

Progress = Callable[[int, int], None]


def load_analyzers() -> None:
    """Import the analyzer modules so that they register themselves."""
    for mod in MODULES:
        importlib.import_module(mod)


def run_rank(rank: int, events: pd.DataFrame, meta: Any, keep_warmup: bool = False,
             packed: bool = False, keep: Keep | None = None) -> dict[str, AnalyzerResult]:
    """Every rank analyzer on one rank's events, in dependency order; a warm-up first step
    (``steps.drop_warmup``) is left out unless ``keep_warmup``. ``packed``: each result is
    packed (:func:`hermes.analyzers.engine.result.pack`: the worker-only tables dropped, the others
    compressed) as soon as no analyzer still to run ``needs`` it, so a big table (the per-task
    table of computation) is not held while the later analyzers run. ``keep``: the run's
    :class:`Keep` (what the analyzers hand to the stages after the analysis)."""
    _check_times(events)
    warmup = None
    if not keep_warmup:
        events, warmup = drop_warmup(events)
    return _analyze_rank(rank, events, meta, warmup, packed, keep)


def _check_times(events: pd.DataFrame) -> None:
    """A rank's events pass the time checks every analysis relies on (``hermes validate``'s
    :func:`hermes.trace.validate.time_errors`), else a TraceFormatError naming them (not
    the rank: whoever reports the rank's failure names it)."""
    errors = time_errors(events, "")
    if errors:
        raise TraceFormatError("; ".join(errors),
                               hint="the file was not written by Hermes as is; "
                                    "`hermes validate` lists the problems")


def _analyze_rank(rank: int, events: pd.DataFrame, meta: Any, warmup: dict[str, float] | None,
                  packed: bool, keep: Keep | None = None) -> dict[str, AnalyzerResult]:
    """:func:`run_rank` once the warm-up step is dropped (``warmup``: what was left out)."""
    load_analyzers()
    results: dict[str, AnalyzerResult] = {}
    todo = ordered("rank")
    big = len(events) >= RELEASE_MIN_EVENTS
    if big:
        release_memory()  # what loading (or importing) the trace freed
    side = None if big or packed else _beside(todo, rank, events, meta, keep)
    for i, a in enumerate(todo):
        if side is not None and a.name == side.name:
            continue
        results[a.name] = a.fn(RankContext(rank=rank, events=events, meta=meta, results=results,
                                           keep=keep))
        if packed:
            needed = {n for later in todo[i + 1:] for n in later.needs}
            pack({k: v for k, v in results.items() if k not in needed})
        if big:
            release_memory()
    if side is not None:  # its result where a serial run puts it (the order reports show)
        got = side.result()
        results = {a.name: got if a.name == side.name else results[a.name] for a in todo}
    windows = step_windows(events)
    results["steps"] = AnalyzerResult("steps", tables={"windows": windows},
                                      metrics={"warmup": warmup} if warmup else {})
    return pack(results) if packed else results


#: The analyzer run on a thread of its own beside the others, for a rank analyzed in this
#: process (a trace in memory, not a worker's packed rank) under :data:`RELEASE_MIN_EVENTS`: the
#: longest one that needs no other's result and whose result no other needs. Its numpy passes
#: and compiled lanes let go of the interpreter lock part of the time, so some of it runs on a
#: second core (docs/benchmarks.md has its measured gain). Not for a bigger rank (both would
#: hold their memory at once) nor in a worker process (the other workers have the cores). What
#: it shares with the others is safe across threads: the events are only read, the lazy args'
#: row-group cache and the run's :class:`Keep` take locks.
BESIDE = "critical_path"


class Beside:
    """One analyzer running on its own thread; :meth:`result` waits for it (its error is
    raised there, in the caller's thread)."""

    def __init__(self, name: str, fn: Callable[[], AnalyzerResult]) -> None:
        import threading

        self.name = name
        self._fn = fn
        self._out: AnalyzerResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"hermes-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._out = self._fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller in result()
            self._error = exc

    def result(self) -> AnalyzerResult:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._out is not None
        return self._out


def _beside(todo: list[Any], rank: int, events: pd.DataFrame, meta: Any,
            keep: Keep | None) -> Beside | None:
    """:data:`BESIDE` started on its own thread, where it is independent of every other
    analyzer in ``todo`` and this process has two or more CPUs; else None (run in order)."""
    a = next((a for a in todo if a.name == BESIDE), None)
    if a is None or a.needs or any(BESIDE in b.needs for b in todo) or usable_cpus() < 2:
        return None
    ctx = RankContext(rank=rank, events=events, meta=meta, results={}, keep=keep)
    return Beside(a.name, functools.partial(a.fn, ctx))


#: A rank of at least this many events gives the memory each analyzer freed back to the OS
#: before the next runs: the C allocators (glibc's, Arrow's pool) keep freed memory for reuse,
#: so the heap would otherwise stay at the biggest analyzer's high-water mark, fragmented, for the
#: rest of the run (1 GB Kineto trace, 2.3M events: ~0.1 GiB of peak RSS). A release costs
#: milliseconds, nothing beside the seconds such a rank's analysis takes.
RELEASE_MIN_EVENTS = 1_000_000


def release_memory() -> None:
    """Return freed heap memory to the OS: Arrow's pool (where pyarrow is loaded) and glibc's
    ``malloc_trim``; a no-op where neither is there."""
    import sys

    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (macOS, musl)
        pass


def rank_job(path: str, rank: int, keep_warmup: bool = False, keep: Keep | None = None
              ) -> tuple[int, dict[str, AnalyzerResult]]:
    """One rank, on whichever worker runs it: read that rank's events from ``path`` and analyze
    them; only the results go back to the driver (``keep``: the run's :class:`Keep` when the
    rank runs in the driver's process, else None)."""
    tr = load_rank(path, rank)
    # rows of another rank first: that error names every file the rank is read from
    check_rank(tr.events, rank, rank_where(str(path), rank))
    check_copies(str(path), rank)
    _check_times(tr.events)
    events, warmup = (tr.events, None) if keep_warmup else drop_warmup(tr.events)
    meta = tr.meta
    # once a warm-up step is dropped (a filtered copy), the whole frame is let go here instead
    # of held beside the copy for the whole analysis (an argument stays referenced by its
    # caller until the call returns)
    del tr
    return rank, _analyze_rank(rank, events, meta, warmup, packed=True, keep=keep)


def _rank_results(path: str, keep_warmup: bool, keep: Keep | None, rank: int
                  ) -> dict[str, AnalyzerResult]:
    """``rank_job`` with the rank last, for ``Executor.map`` (a partial of it pickles)."""
    return rank_job(path, rank, keep_warmup, keep)[1]


def _trace_ranks(path: Path) -> tuple[list[int], Any, bool, list[dict[str, Any]]]:
    """(ranks, merged metadata, is_directory, unreadable files) without loading events where
    the footers tell. A file of a directory whose footer cannot be read (truncated: a rank
    that died while writing it) is read once more, then listed as a ``missing_ranks`` entry
    of unknown rank (``{"rank": None, "file": NAME, "error": ..., "attempts": 2}``) and the
    other files are analyzed; a lone file, or a directory of such files only, raises."""
    from hermes.trace.meta import TraceMeta
    from hermes.trace.reader import trace_files

    # merged file by file: a footer may carry every rank's clock offsets (4,096 ranks: 4,096
    # entries in each of 4,096 footers), so the footers are not all held at once
    meta, first, listed = None, None, True
    ranks_seen: set[int] = set()
    files = trace_files(path)
    readable: list[Path] = []
    unread: list[tuple[Path, TraceFormatError]] = []
    for f in files:
        try:
            m = _read_meta_twice(f)
        except TraceFormatError as exc:
            if len(files) == 1:
                raise
            unread.append((f, exc))
            continue
        if readable:  # one run's files only (validate's check: source, run id)
            _check_one_run(readable[0], first, f, m)
        else:
            first = m
        readable.append(f)
        meta = m if meta is None else TraceMeta.merge([meta, m])
        listed = listed and bool(m.ranks)
        ranks_seen.update(int(r) for r in m.ranks)
    if not readable:  # nothing to analyze: the first file's error
        raise unread[0][1]
    meta = meta if meta is not None else TraceMeta()
    if listed and not path.is_dir():  # one file: its rows hold only the ranks it lists
        _check_listed(readable[0], ranks_seen)
    if listed:
        ranks = sorted(ranks_seen)
    else:  # footers without a rank list: read the rank column only
        ranks = sorted(_row_ranks(readable))
    return ranks, meta, path.is_dir(), [_unread_entry(f, exc) for f, exc in unread]


def _row_ranks(files: list[Path]) -> set[int]:
    """The ranks the rows of ``files`` hold (their rank column alone is read)."""
    from hermes.trace.reader import iter_tables

    return {int(r) for f in files for t, _, _ in iter_tables(f, columns=["rank"])
            for r in t.column("rank").unique().to_pylist()}


def _check_listed(f: Path, listed: set[int]) -> None:
    """The rows of trace file ``f`` hold only the ranks its footer lists (``hermes.ranks``,
    which decides the ranks analyzed), else it is refused: the other rows would be left out of
    the analysis without a word. Reads the rank column only."""
    extra = sorted(_row_ranks([f]) - listed)
    if extra:
        raise TraceFormatError(
            f"rows of rank(s) {', '.join(map(str, extra[:5]))} that the footer's hermes.ranks "
            f"({', '.join(map(str, sorted(listed)))}) does not list", path=f,
            hint="the file's footer and rows disagree; re-create it (`hermes validate` lists "
                 "the problems)")


def _check_one_run(f0: Path, m0: Any, f: Path, m: Any) -> None:
    """File ``f`` of a trace directory comes from the run of its first file ``f0`` (the same
    source and run id), else the input as a whole is refused: ranks of two runs analyzed
    together make one cluster of two jobs."""
    errors = consistency_errors([(f0, m0, None), (f, m, None)])
    if errors:
        raise TraceFormatError(errors[0], hint="keep one run's files in the directory "
                                               "(`hermes validate` lists the problems)")


def _read_meta_twice(f: Path) -> Any:
    """``read_meta(f)``, tried once more if it fails (a file still being written, a network
    file system's hiccup): the second failure is raised."""
    from hermes.trace.reader import read_meta

    try:
        return read_meta(f)
    except TraceFormatError:
        return read_meta(f)


def _unread_entry(f: Path, exc: HermesError) -> dict[str, Any]:
    """The ``missing_ranks`` entry of a directory's file whose footer could not be read."""
    why = exc.message + (f" — {exc.hint}" if exc.hint else "")
    return {"rank": None, "file": f.name, "error": why, "attempts": 2}


def _pick(ranks: list[int], wanted: Iterable[int] | None,
          unread: Sequence[dict[str, Any]] = ()) -> list[int]:
    if wanted is None:
        return ranks
    want = [int(r) for r in wanted]
    missing = [r for r in want if r not in ranks]
    if missing:
        files = f"; file(s) that could not be read: {', '.join(m['file'] for m in unread)}" \
            if unread else ""
        raise UsageError(f"rank(s) {', '.join(map(str, missing))} not in the trace",
                         hint=f"ranks present: {', '.join(map(str, ranks)) or 'none'}{files}")
    return sorted(set(want))


def analyze(trace_or_path: Any, ranks: Iterable[int] | None = None, workers: int = 0,
            progress: Progress | None = None, keep_warmup: bool = False,
            executor: Executor | None = None) -> Analysis:
    """Analyze a :class:`hermes.Trace` or a trace path; ``ranks`` restricts to some ranks.

    Ranks of a trace path run on ``executor`` (default: :class:`LocalExecutor` of ``workers``
    processes, in-process when ``workers`` <= 1); a rank that fails twice is listed in
    ``Analysis.missing_ranks``. ``progress(done, total)`` is called after each rank. A first step
    over 10x the median of the others (warm-up: compilation, lazy loading, allocator and cache
    warm-up) is left out of the analysis and reported in ``Analysis.warmup``, unless
    ``keep_warmup``.
    """
    load_analyzers()
    per_rank: dict[int, dict[str, AnalyzerResult]] = {}
    missing: list[dict[str, Any]] = []
    keep = Keep()
    if isinstance(trace_or_path, (str, os.PathLike)):
        path = Path(trace_or_path)
        all_ranks, meta, is_dir, unread = _trace_ranks(path)
        missing += unread
        todo = _pick(all_ranks, ranks, unread)
        if not todo:  # no events, and no rank listed in the footer
            raise TraceFormatError("the trace holds no events: no rank to analyze", path=path,
                                   hint="re-create it from a profile that recorded events")
        ex = executor if executor is not None else LocalExecutor(workers)
        if isinstance(ex, LocalExecutor) and ex.workers <= 1 and not is_dir and len(todo) > 1:
            # one file holding several ranks, in this process: read it once, split by rank
            from hermes.trace import load

            tr = load(path, ranks=todo, lazy_args=True)
            _run_split(tr.events, tr.meta, todo, per_rank, progress, keep_warmup, packed=True,
                       keep=keep)
        else:
            # (ranks run in this process share the run's Keep; a worker's results come alone)
            here = isinstance(ex, LocalExecutor) and (ex.workers <= 1 or len(todo) <= 1)
            job = functools.partial(_rank_results, str(path), keep_warmup, keep if here else None)
            for i, (r, res) in enumerate(ex.map(job, todo)):
                if isinstance(res, Failure):
                    missing.append({"rank": int(r), "error": res.error,
                                    "attempts": res.attempts})
                else:
                    per_rank[int(r)] = res
                if progress:
                    progress(i + 1, len(todo))
            if not per_rank:
                raise HermesError(f"no rank could be analyzed: {_missing_line(missing)}",
                                  path=path)
    else:
        events = getattr(trace_or_path, "events", None)
        meta = getattr(trace_or_path, "meta", None)
        if not isinstance(events, pd.DataFrame):
            raise UsageError(f"cannot analyze a {type(trace_or_path).__name__}",
                             hint="pass a hermes.Trace (hermes.load(path)) or a trace path")
        present = sorted(int(r) for r in events["rank"].unique()) if len(events) else \
            [int(r) for r in (getattr(meta, "ranks", ()) or (0,))]
        # events already in this process are analyzed here: shipping them to workers would cost
        # more than the analysis
        _run_split(events, meta, _pick(present, ranks), per_rank, progress, keep_warmup,
                   keep=keep)
    # results arrive in completion order; the reduce sees ranks in order, as a serial run does
    per_rank = {r: per_rank[r] for r in sorted(per_rank)}
    analysis = _reduce(per_rank, meta)
    analysis.keep = keep
    # ranks in order, then the files of unknown ranks by name
    analysis.missing_ranks = sorted(missing, key=lambda m: (m["rank"] is None, m["rank"] or 0,
                                                            m.get("file") or ""))
    return analysis


def _missing_line(missing: list[dict[str, Any]]) -> str:
    return "; ".join(f"{missing_what(m)}: {m['error']}" for m in missing)


def _run_split(events: pd.DataFrame, meta: Any, todo: list[int],
               per_rank: dict[int, dict[str, AnalyzerResult]], progress: Progress | None,
               keep_warmup: bool = False, packed: bool = False, keep: Keep | None = None) -> None:
    """Ranks of events already in this process, one after the other; ``packed``: results kept
    as a trace path's are (:func:`hermes.analyzers.engine.result.pack`); ``keep``: the run's
    :class:`Keep`."""
    groups = by_rank(events, todo)
    for i, r in enumerate(todo):
        ev = groups.get(r, events.iloc[0:0])
        if not numbered(ev):
            ev = ev.reset_index(drop=True)
        per_rank[r] = run_rank(r, ev, meta, keep_warmup, packed, keep)
        if progress:
            progress(i + 1, len(todo))


def by_rank(events: pd.DataFrame, todo: list[int]) -> dict[int, pd.DataFrame]:
    """``events`` split by rank; the frame itself (no copy) when it holds one rank only, the one
    wanted: the analyzers read their events, and a frame that is the trace's own lets the
    advice's replay take the critical path's step graph without comparing the events."""
    if not len(events):
        return {}
    rank = events["rank"].to_numpy()
    if len(todo) == 1 and (rank == todo[0]).all():
        return {todo[0]: events}
    return {int(k): g for k, g in events.groupby("rank", observed=True, sort=True)}


def numbered(events: pd.DataFrame) -> bool:
    """Whether the frame's index is already 0, 1, ..., n-1 (what ``reset_index`` makes)."""
    ix = events.index
    return isinstance(ix, pd.RangeIndex) and ix.start == 0 and ix.step == 1


def _unplaced(per_rank: dict[int, dict[str, AnalyzerResult]]) -> dict[str, Any]:
    """Mean share (%) of device time the computation analysis could not place on the roofline,
    and the three longest kernel names among it (over all ranks)."""
    comp = [rr["computation"] for rr in per_rank.values() if "computation" in rr]
    pcts = [float(c.metrics.get("no_data_pct") or 0.0) for c in comp]
    # one rank's kernel table at a time (unpacked on access): only its no_data rows are kept
    frames = [f.loc[(f["bound"].astype(str) == "no_data").to_numpy(), ["name", "total_ns"]]
              for f in (c.tables["kernels"] for c in comp if "kernels" in c.tables) if len(f)]
    top: list[str] = []
    if frames:
        k = pd.concat(frames, ignore_index=True).groupby("name")["total_ns"].sum()
        top = [str(n) for n in k.sort_values(ascending=False).head(3).index]
    return {"pct": sum(pcts) / len(pcts) if pcts else 0.0, "top": top}


def _reduce(per_rank: dict[int, dict[str, AnalyzerResult]], meta: Any) -> Analysis:
    cluster: dict[str, AnalyzerResult] = {}
    for a in ordered("cluster"):
        cluster[a.name] = a.fn(ClusterContext(per_rank=per_rank, meta=meta, results=cluster))
    groups = [res.findings for rr in per_rank.values() for res in rr.values()]
    groups += [res.findings for res in cluster.values()]
    findings = merge_findings(fold_symptoms(groups))
    breakdown = []
    for r, rr in per_rank.items():
        m = rr["overlap"].metrics if "overlap" in rr else {}
        row: dict[str, Any] = {"rank": r}
        row.update({k: float(m[k]) for k in BREAKDOWN_KEYS if k in m and m[k] is not None})
        # the rank's parts come from a vendor step summary, not its events (overlap analyzer)
        row["from_summary"] = bool(m.get("from_summary", False))
        if m.get("from_summary"):  # the summary's pipeline bubble (receive time), % of step
            row["bubble_pct"] = float(m.get("bubble_pct", 0.0))
        breakdown.append(row)
    # each rank's kind, as the cpu and io analyzers decided it from its events
    kind = runkind.combine(next((res.metrics["run_kind"] for res in rr.values()
                                 if "run_kind" in res.metrics), None)
                           for rr in per_rank.values())
    v = verdict(breakdown, findings, _unplaced(per_rank), kind,
                remainder_inputs(per_rank, cluster))
    return Analysis(ranks=sorted(per_rank), meta=meta, per_rank=per_rank, cluster=cluster,
                    findings=findings, verdict=v, breakdown_rows=breakdown, run_kind=kind)
