"""The work behind the tools, done the way the CLI commands do it and remembered by content hash.

Each function here calls what the corresponding command in ``hermes/commands/`` calls, so a tool
returns the numbers the command prints: :func:`analyzed` is ``hermes analyze --format json``
(the trace imported in memory when it can be, analyzed and advised, rendered by the JSON
renderer), :func:`run` is one side of ``hermes diff`` / ``hermes check`` (``open_runs``: the
trace imported to a temporary Parquet, analyzed, its per-step totals gathered),
:func:`step_graphs` is what ``hermes whatif`` replays. :class:`Workspace` holds the roots, the
caches and the caps one server uses.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes.mcp.bounds import MAX_BYTES, MAX_ROWS
from hermes.mcp.cache import Cache
from hermes.mcp.paths import Roots


@dataclass
class Analyzed:
    """A trace's analysis and advice, and the ``hermes.analysis/1`` document of the two."""

    analysis: Any
    advice: Any
    doc: dict[str, Any]
    #: the full kernel table (built on first use), best first by total time
    kernels: list[dict[str, Any]] | None = None


@dataclass
class Workspace:
    """What one server works with: its roots, caches, output directory and caps."""

    roots: Roots
    out_dir: Path
    max_rows: int = MAX_ROWS
    max_bytes: int = MAX_BYTES
    cache: Cache = field(default_factory=lambda: Cache(8))

    def trace(self, arg: object, what: str = "trace") -> tuple[Path, str]:
        """The checked real path of a trace argument and its content hash."""
        path = self.roots.resolve(arg, what)
        return path, self.roots.digest(path)


def analyzed(ws: Workspace, arg: object, keep_warmup: bool = False) -> tuple[Analyzed, bool]:
    """``hermes analyze TRACE --format json`` of ``arg`` (and whether the cache had it)."""
    path, digest = ws.trace(arg)
    return ws.cache.get(("analysis", digest, bool(keep_warmup)),
                        lambda: _analyze(path, keep_warmup))


def _analyze(path: Path, keep_warmup: bool) -> Analyzed:
    from hermes.commands._util import hermes_source
    from hermes.commands.analyze import as_rank_failure
    from hermes.pipeline import analyze_and_advise
    from hermes.report import RENDERERS

    with hermes_source(path) as source, as_rank_failure(source, path):
        result, advice = analyze_and_advise(source, keep_warmup=keep_warmup)
    doc = json.loads(RENDERERS.get("json")(result, advice))
    return Analyzed(result, advice, doc)


#: ``kernels(sort=...)``: the column a kernel table is sorted by, and whether descending.
KERNEL_SORTS = {"total_ns": True, "count": True, "mean_ns": True, "max_ns": True,
                "name": False}


def kernel_table(a: Analyzed) -> list[dict[str, Any]]:
    """Every kernel name over all ranks with the figures of ``computation.top_kernels`` (the
    same aggregation, :func:`hermes.analyzers.engine.result.kernel_totals`, not cut at its
    20 rows), sorted as that table is: by total time, descending, ties in first-seen order."""
    if a.kernels is not None:
        return a.kernels
    from hermes.analyzers.engine.result import KERNEL_KEYS, jsonable, kernel_totals

    an = a.analysis
    agg = kernel_totals([rr["computation"].tables.get("kernels") for rr in
                          an.per_rank.values() if "computation" in rr])
    rows: list[dict[str, Any]] = []
    if agg is not None and len(agg):
        agg["mean_ns"] = agg["total_ns"] / agg["count"]
        agg["share_pct"] = 100.0 * agg["total_ns"] / max(float(agg["total_ns"].sum()), 1.0)
        agg = agg.sort_values("total_ns", ascending=False, kind="stable")
        rows = jsonable(agg.reset_index()[["name", *KERNEL_KEYS]].to_dict("records"))
    a.kernels = rows
    return rows


def rank_critical_path(a: Analyzed, rank: int) -> dict[str, Any]:
    """The critical path of one rank, in the shape of the document's ``critical_path`` (which
    is the slowest rank's): its metrics and its top operators."""
    from hermes.analyzers.engine.result import TOP_OPS_N, jsonable

    res = a.analysis.results("critical_path", int(rank))
    out: dict[str, Any] = {"rank": int(rank)}
    out.update({k: v for k, v in res.metrics.items() if not hasattr(v, "columns")})
    out.setdefault("components_pct", {})
    top = res.tables.get("top_ops")
    out["top_ops"] = top.head(TOP_OPS_N) if top is not None else []
    return dict(jsonable(out))


def run(ws: Workspace, arg: object, what: str) -> Any:
    """One run of ``hermes diff`` / ``hermes check`` (a :class:`hermes.diff.runs.Run`, labelled
    with the path as the caller gave it)."""
    path, digest = ws.trace(arg, what)

    def load() -> Any:
        from hermes.diff.runs import load_run, trace_paths

        with trace_paths([path]) as (traced,):
            return load_run(traced, str(arg))

    r, _ = ws.cache.get(("run", digest), load)
    return dataclasses.replace(r, label=str(arg))


def step_graphs(ws: Workspace, arg: object) -> tuple[Any, Any]:
    """The step graphs ``hermes whatif`` replays, and the trace's metadata."""
    path, digest = ws.trace(arg)

    def load() -> tuple[Any, Any]:
        from hermes.commands.whatif import load_any
        from hermes.whatif import graphs

        tr = load_any(path)
        return graphs(tr.events), tr.meta

    value, _ = ws.cache.get(("graphs", digest), load)
    return value
