"""``hermes.analyze(trace_or_path)``: run every analyzer and return an :class:`Analysis`.

Map/reduce over ranks, as DESIGN.md's *Scale* section asks: each rank's events are loaded alone
(``hermes.load(path, ranks=[r])`` for a directory of per-rank files, so no process holds every
rank's events), the rank analyzers run on them in dependency order (``base.ordered("rank")``), and
only their results — small tables, metrics, findings — are kept; then the cluster analyzers run over
those per-rank results. ``workers=N`` runs ranks in a pool of N processes (default: in-process, one
rank after the other).

Symptoms are first folded into the cause that explains them (``fold_symptoms``: a slow node
explains its own frequency drop and the other ranks' waits for it). Findings of the same id from
several ranks or analyzers are then merged into one (sub-causes, e.g. of underutilization, live in
its evidence): its ``time_share`` is the **maximum** over ranks — in synchronous training the
slowest rank sets the pace, so the worst rank's loss is the run's loss — its evidence is that of
the rank with the maximum, plus ``per_rank_share`` when more than one rank has it; ``ranks`` and
``steps`` are the unions.

``Analysis.to_dict()`` / ``to_json()`` build the ``hermes analyze --format json`` document of
DESIGN.md (``schema: "hermes.analysis/1"``).
"""

from __future__ import annotations

import importlib
import json
import math
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.base import AnalyzerResult, ClusterContext, RankContext, ordered
from hermes.analyzers.steps import drop_warmup, step_windows
from hermes.analyzers.verdict import Verdict, verdict
from hermes.errors import UsageError
from hermes.findings import MIN_SHARE, Finding

SCHEMA = "hermes.analysis/1"

#: Modules that register analyzers; one not written yet in this tree is skipped.
_MODULES = (
    "hermes.analyzers.overlap", "hermes.analyzers.critical_path", "hermes.analyzers.io",
    "hermes.analyzers.cpu", "hermes.analyzers.fluctuation", "hermes.analyzers.computation",
    "hermes.analyzers.communication", "hermes.analyzers.cluster", "hermes.analyzers.memory",
)

#: Keys of ``breakdown.per_rank`` taken from the overlap analyzer's metrics (percent of step time).
BREAKDOWN_KEYS = ("computation_only_pct", "communication_only_pct", "overlapped_pct",
                  "host_bound_pct", "free_pct", "idle_pct", "compute_pct", "non_compute_pct",
                  "comm_comp_overlap_pct")
TOP_OPS_N = 10

Progress = Callable[[int, int], None]


def load_analyzers() -> None:
    """Import the analyzer modules so that they register themselves."""
    for mod in _MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:  # an analyzer not built yet in this tree
            if exc.name != mod:
                raise


def run_rank(rank: int, events: pd.DataFrame, meta: Any,
             keep_warmup: bool = False) -> dict[str, AnalyzerResult]:
    """Every rank analyzer on one rank's events, in dependency order; a warm-up first step
    (``steps.drop_warmup``) is left out unless ``keep_warmup``."""
    load_analyzers()
    warmup = None
    if not keep_warmup:
        events, warmup = drop_warmup(events)
    results: dict[str, AnalyzerResult] = {}
    for a in ordered("rank"):
        results[a.name] = a.fn(RankContext(rank=rank, events=events, meta=meta, results=results))
    windows = step_windows(events)
    results["steps"] = AnalyzerResult("steps", tables={"windows": windows},
                                      metrics={"warmup": warmup} if warmup else {})
    return results


def _rank_job(path: str, rank: int, keep_warmup: bool = False
              ) -> tuple[int, dict[str, AnalyzerResult]]:
    from hermes.trace import load

    tr = load(path, ranks=[rank])
    return rank, run_rank(rank, tr.events, tr.meta, keep_warmup)


def _trace_ranks(path: Path) -> tuple[list[int], Any, bool]:
    """(ranks, merged metadata, is_directory) without loading events where the footers tell."""
    from hermes.trace.meta import TraceMeta
    from hermes.trace.reader import iter_tables, read_meta, trace_files

    files = trace_files(path)
    metas = [read_meta(f) for f in files]
    meta = TraceMeta.merge(metas)
    if all(m.ranks for m in metas):
        ranks = sorted({int(r) for m in metas for r in m.ranks})
    else:  # footers without a rank list: read the rank column only
        ranks = sorted({int(r) for t, _, _ in iter_tables(path, columns=["rank"])
                        for r in t.column("rank").unique().to_pylist()})
    return ranks, meta, path.is_dir()


def _pick(ranks: list[int], wanted: Iterable[int] | None) -> list[int]:
    if wanted is None:
        return ranks
    want = [int(r) for r in wanted]
    missing = [r for r in want if r not in ranks]
    if missing:
        raise UsageError(f"rank(s) {', '.join(map(str, missing))} not in the trace",
                         hint=f"ranks present: {', '.join(map(str, ranks)) or 'none'}")
    return sorted(set(want))


def analyze(trace_or_path: Any, ranks: Iterable[int] | None = None, workers: int = 0,
            progress: Progress | None = None, keep_warmup: bool = False) -> Analysis:
    """Analyze a :class:`hermes.Trace` or a trace path; ``ranks`` restricts to some ranks.

    ``workers`` > 1 analyzes ranks in that many processes; ``progress(done, total)`` is called
    after each rank. A first step over 10x the median of the others (warm-up: compilation,
    lazy loading, allocator and cache warm-up) is left out of the analysis and reported in
    ``Analysis.warmup``, unless ``keep_warmup``.
    """
    load_analyzers()
    per_rank: dict[int, dict[str, AnalyzerResult]] = {}
    if isinstance(trace_or_path, (str, os.PathLike)):
        path = Path(trace_or_path)
        all_ranks, meta, is_dir = _trace_ranks(path)
        todo = _pick(all_ranks, ranks)
        if workers > 1 and len(todo) > 1:
            with ProcessPoolExecutor(min(workers, len(todo)), mp_context=get_context("spawn")) \
                    as pool:
                for i, (r, res) in enumerate(pool.map(_rank_job, [str(path)] * len(todo), todo,
                                                      [keep_warmup] * len(todo))):
                    per_rank[r] = res
                    if progress:
                        progress(i + 1, len(todo))
        elif is_dir or len(todo) <= 1:
            for i, r in enumerate(todo):
                per_rank[r] = _rank_job(str(path), r, keep_warmup)[1]
                if progress:
                    progress(i + 1, len(todo))
        else:  # one file holding several ranks: read it once, split by rank
            from hermes.trace import load

            tr = load(path, ranks=todo)
            _run_split(tr.events, tr.meta, todo, per_rank, progress, keep_warmup)
    else:
        events = getattr(trace_or_path, "events", None)
        meta = getattr(trace_or_path, "meta", None)
        if not isinstance(events, pd.DataFrame):
            raise UsageError(f"cannot analyze a {type(trace_or_path).__name__}",
                             hint="pass a hermes.Trace (hermes.load(path)) or a trace path")
        present = sorted(int(r) for r in events["rank"].unique()) if len(events) else \
            [int(r) for r in (getattr(meta, "ranks", ()) or (0,))]
        _run_split(events, meta, _pick(present, ranks), per_rank, progress, keep_warmup)
    return _reduce(per_rank, meta)


def _run_split(events: pd.DataFrame, meta: Any, todo: list[int],
               per_rank: dict[int, dict[str, AnalyzerResult]], progress: Progress | None,
               keep_warmup: bool = False) -> None:
    groups = {int(k): g for k, g in events.groupby("rank", observed=True, sort=True)} \
        if len(events) else {}
    for i, r in enumerate(todo):
        ev = groups.get(r, events.iloc[0:0])
        per_rank[r] = run_rank(r, ev.reset_index(drop=True), meta, keep_warmup)
        if progress:
            progress(i + 1, len(todo))


def merge_findings(groups: Iterable[Iterable[Finding]]) -> list[Finding]:
    """Merge findings of the same id across ranks/analyzers: max share (see module)."""
    by_key: dict[str, list[Finding]] = {}
    for fs in groups:
        for f in fs:
            by_key.setdefault(f.id, []).append(f)
    out: list[Finding] = []
    for fs in by_key.values():
        best = max(fs, key=lambda f: f.time_share)
        if len(fs) == 1:
            out.append(best)
            continue
        ranks = tuple(sorted({r for f in fs for r in f.ranks}))
        steps = tuple(sorted({s for f in fs for s in f.steps}))
        evidence = dict(best.evidence)
        if len(ranks) > 1:
            share: dict[str, float] = {}
            for f in fs:
                for r in f.ranks:
                    share[str(r)] = max(share.get(str(r), 0.0), round(f.time_share, 6))
            evidence["per_rank_share"] = share
        out.append(Finding(best.category, best.cause, best.time_share, best.summary, evidence,
                           ranks, steps, recommendations=best.recommendations))
    out.sort(key=lambda f: (-f.time_share, f.id))
    return out


def _without_frequency_drop(f: Finding, by: Finding) -> Finding | None:
    """A rank's underutilization finding less its frequency drop (explained by ``by``)."""
    causes = dict(f.evidence.get("causes") or {})
    drop = causes.pop("frequency_drop", None)
    if drop is None:
        return f
    share = max(0.0, f.time_share - float(drop.get("share", 0.0)))
    if share < MIN_SHARE and not causes:
        return None
    reason = max(causes, key=lambda x: causes[x]["share"]) if causes else ""
    ev = {**f.evidence, "causes": causes, "reason": reason,
          "explained_by": {by.id: {"frequency_drop": drop}}}
    return Finding(f.category, f.cause, share, f.summary, ev, f.ranks, f.steps,
                   recommendations=f.recommendations)


def fold_symptoms(groups: Iterable[Iterable[Finding]]) -> list[list[Finding]]:
    """Fold symptoms into the cause that explains them, before findings are merged.

    A slow node (``computation.slow_node``, ranks S) explains (1) the frequency drop of its own
    ranks (their ``underutilization`` loses that part) and (2) the other ranks' waits for it:
    a ``synchronization_wait`` whose late ranks are all in S keeps only what exceeds the slow
    node's share. The folded part is recorded in the symptom's evidence (``explained_by``); a
    symptom left below ``MIN_SHARE`` is dropped."""
    groups = [list(fs) for fs in groups]
    slow = [f for fs in groups for f in fs if f.id == "computation.slow_node"]
    if not slow:
        return groups
    by = max(slow, key=lambda f: f.time_share)
    s_ranks = {r for f in slow for r in f.ranks}
    out: list[list[Finding]] = []
    for fs in groups:
        kept: list[Finding] = []
        for f in fs:
            g: Finding | None = f
            if f.id == "computation.underutilization" and f.ranks and \
                    set(f.ranks) <= s_ranks:
                g = _without_frequency_drop(f, by)
            elif f.id == "communication.synchronization_wait" and f.ranks and \
                    set(f.ranks) <= s_ranks:
                share = f.time_share - by.time_share
                g = None if share < MIN_SHARE else Finding(
                    f.category, f.cause, share, f.summary,
                    {**f.evidence, "explained_by": {by.id: round(by.time_share, 6)}},
                    f.ranks, f.steps, recommendations=f.recommendations)
            if g is not None:
                kept.append(g)
        out.append(kept)
    return out


def _attach_rules(findings: list[Finding], meta: Any) -> list[Finding]:
    try:
        from hermes.rules import recommend
    except ImportError:  # rule table not in this tree
        return findings
    from dataclasses import replace

    from hermes.findings import Recommendation

    return [replace(f, recommendations=tuple(Recommendation(**r) for r in recommend(f, meta)))
            for f in findings]


def _reduce(per_rank: dict[int, dict[str, AnalyzerResult]], meta: Any) -> Analysis:
    cluster: dict[str, AnalyzerResult] = {}
    for a in ordered("cluster"):
        cluster[a.name] = a.fn(ClusterContext(per_rank=per_rank, meta=meta, results=cluster))
    groups = [res.findings for rr in per_rank.values() for res in rr.values()]
    groups += [res.findings for res in cluster.values()]
    findings = _attach_rules(merge_findings(fold_symptoms(groups)), meta)
    breakdown = []
    for r, rr in per_rank.items():
        m = rr["overlap"].metrics if "overlap" in rr else {}
        row: dict[str, Any] = {"rank": r}
        row.update({k: float(m[k]) for k in BREAKDOWN_KEYS if k in m and m[k] is not None})
        breakdown.append(row)
    v = verdict(breakdown, findings)
    return Analysis(ranks=sorted(per_rank), meta=meta, per_rank=per_rank, cluster=cluster,
                    findings=findings, verdict=v, breakdown_rows=breakdown)


def _steps(per_rank: dict[int, dict[str, AnalyzerResult]]) -> dict[str, Any]:
    """Step count and median/p90 wall time (ms); a step's time is its slowest rank's."""
    frames = [rr["steps"].tables["windows"] for rr in per_rank.values() if "steps" in rr]
    frames = [f for f in frames if len(f)]
    if not frames:
        return {"count": 0, "median_ms": 0.0, "p90_ms": 0.0}
    df = pd.concat(frames, ignore_index=True)
    per_step = df.groupby("step")["dur_ns"].max().to_numpy(np.float64)
    return {"count": int(per_step.size), "median_ms": float(np.median(per_step) / 1e6),
            "p90_ms": float(np.percentile(per_step, 90) / 1e6)}


def jsonable(x: Any) -> Any:
    """Plain JSON values from numpy/pandas ones (NaN -> None, DataFrame -> records)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [jsonable(v) for v in x]
    if isinstance(x, pd.DataFrame):
        return [jsonable(r) for r in x.to_dict("records")]
    if isinstance(x, np.ndarray):
        return [jsonable(v) for v in x.tolist()]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if x is pd.NA or x is pd.NaT:
        return None
    return x


@dataclass
class Analysis:
    """The result of :func:`analyze`: tables, findings, verdict, steps, breakdown, critical path."""

    ranks: list[int]
    meta: Any
    per_rank: dict[int, dict[str, AnalyzerResult]]
    cluster: dict[str, AnalyzerResult]
    findings: list[Finding]
    verdict: Verdict
    breakdown_rows: list[dict[str, Any]] = field(default_factory=list)
    _tables: dict[str, pd.DataFrame] | None = field(default=None, repr=False)

    @property
    def bound(self) -> str:
        return self.verdict.bound

    @property
    def steps(self) -> dict[str, Any]:
        return _steps(self.per_rank)

    @property
    def warmup(self) -> list[dict[str, Any]]:
        """Warm-up first steps left out of the analysis: one entry per rank that had one."""
        return [{"rank": r, **rr["steps"].metrics["warmup"]} for r, rr in self.per_rank.items()
                if "steps" in rr and rr["steps"].metrics.get("warmup")]

    @property
    def breakdown(self) -> pd.DataFrame:
        """One row per rank: the five-part partition and the HTA-compatible figures (%)."""
        return pd.DataFrame(self.breakdown_rows, columns=["rank", *BREAKDOWN_KEYS])

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """``"analyzer.table"`` -> DataFrame; per-rank tables concatenated with a rank column."""
        if self._tables is None:
            parts: dict[str, list[pd.DataFrame]] = {}
            for r, rr in self.per_rank.items():
                for res in rr.values():
                    for name, df in res.tables.items():
                        parts.setdefault(f"{res.name}.{name}", []).append(
                            df.assign(rank=r) if "rank" not in df.columns else df)
            out = {k: pd.concat(v, ignore_index=True) if len(v) > 1 else v[0].reset_index(drop=True)
                   for k, v in parts.items()}
            for k, df in out.items():
                out[k] = df[["rank", *[c for c in df.columns if c != "rank"]]]
            for res in self.cluster.values():
                for name, df in res.tables.items():
                    out[f"{res.name}.{name}"] = df
            self._tables = out
        return self._tables

    @property
    def critical_path(self) -> dict[str, Any]:
        """Critical path of the slowest rank: ``components_pct``, ``top_ops`` (+ its metrics)."""
        have = {r: rr["critical_path"] for r, rr in self.per_rank.items() if "critical_path" in rr}
        if not have:
            return {"components_pct": {}, "top_ops": []}

        def slowness(r: int) -> float:
            w = self.per_rank[r]["steps"].tables["windows"]
            return float(w["dur_ns"].median()) if len(w) else 0.0

        r = max(have, key=slowness)
        res = have[r]
        out: dict[str, Any] = {"rank": r}
        out.update({k: v for k, v in res.metrics.items() if not isinstance(v, pd.DataFrame)})
        out.setdefault("components_pct", {})
        top = res.tables.get("top_ops")
        out["top_ops"] = top.head(TOP_OPS_N) if isinstance(top, pd.DataFrame) else []
        return jsonable(out)

    def results(self, name: str, rank: int | None = None) -> AnalyzerResult:
        """One analyzer's result: of ``rank`` (default: the first) or of a cluster analyzer."""
        if name in self.cluster:
            return self.cluster[name]
        r = self.ranks[0] if rank is None and self.ranks else rank
        try:
            return self.per_rank[r][name]  # type: ignore[index]
        except KeyError:
            have = sorted({n for rr in self.per_rank.values() for n in rr} | set(self.cluster))
            raise UsageError(f"no result {name!r} for rank {r}",
                             hint=f"analyzers: {', '.join(have)}") from None

    def finding(self, fid: str) -> Finding | None:
        """The top finding with id ``fid`` (e.g. ``"io.slow_data_processing"``), if any."""
        return next((f for f in self.findings if f.id == fid), None)

    def to_dict(self) -> dict[str, Any]:
        return jsonable({
            "schema": SCHEMA,
            "source": getattr(self.meta, "source", None),
            "ranks": self.ranks,
            "steps": self.steps,
            "warmup": self.warmup,
            "bound": self.bound,
            "verdict": self.verdict.to_dict(),
            "breakdown": {"per_rank": self.breakdown_rows},
            "critical_path": self.critical_path,
            "findings": [f.to_dict() for f in self.findings],
        })

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent) + "\n"

    def __repr__(self) -> str:
        st = self.steps
        top = ", ".join(f"{f.id} {100 * f.time_share:.1f}%" for f in self.findings[:3]) or "none"
        return (f"<Analysis ranks={len(self.ranks)} steps={st['count']} "
                f"median={st['median_ms']:.3f}ms bound={self.bound} top: {top}>")
