"""The work behind the tools, done the way the CLI commands do it and remembered by content hash.

Each function here calls what the corresponding command in ``hermes/commands/`` calls, so a tool
returns the numbers the command prints: :func:`analyzed` is ``hermes analyze --format json``
(analyzed and advised, rendered by the JSON renderer), :func:`run` is one side of ``hermes
diff`` / ``hermes check`` (``load_run``: the analysis and the per-step totals of the trace),
:func:`step_graphs` is what ``hermes whatif`` replays. A trace's content is imported once
(:func:`imported`: profiler output to a Hermes Parquet trace kept in the server's scratch folder
until it exits) and analyzed once; every tool on it starts from that import and that analysis,
never from a second one. A Kineto JSON the CLI would import in memory is analyzed so (the first
``analyze`` call as fast as ``hermes analyze``), and imported to Parquet only when a tool that
reads a file (diff, check, whatif, query, report) first needs it; both give the same documents,
which tests/mcp compares with the CLI's. :class:`Workspace` holds the roots, the caches and the
caps one server uses.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import threading
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
    #: content hash -> the Hermes trace of it (an entry that goes finds its files again)
    imports: Cache = field(default_factory=lambda: Cache(64))
    _scratch: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def trace(self, arg: object, what: str = "trace") -> tuple[Path, str]:
        """The checked real path of a trace argument and its content hash."""
        path = self.roots.resolve(arg, what)
        return path, self.roots.digest(path)

    def scratch(self) -> Path:
        """The folder imported traces are kept in (removed when the server exits)."""
        with self._lock:
            if self._scratch is None:
                self._scratch = tempfile.TemporaryDirectory(prefix="hermes-mcp-")
            return Path(self._scratch.name)


def imported(ws: Workspace, path: Path, digest: str) -> Path:
    """The Hermes trace of ``path`` (content hash ``digest``): ``path`` itself when it is one,
    else its import (:func:`hermes.diff.runs.import_trace`, what ``hermes diff`` and ``hermes
    analyze`` import through), made once per content and kept in :meth:`Workspace.scratch`.

    Called before, never inside, a computation of :attr:`Workspace.cache` (both take
    :data:`hermes.mcp.cache.WORK`)."""
    def load() -> Path:
        from hermes.diff.runs import import_trace, is_hermes_trace

        if is_hermes_trace(path):
            return path
        home = ws.scratch() / digest
        done = home / "done"
        if done.is_file():  # imported before (its cache entry went)
            return Path(done.read_text())
        if home.exists():
            import shutil

            shutil.rmtree(home)  # an import that failed half way
        home.mkdir(parents=True)
        out = import_trace(path, home / "trace.parquet")  # the name `hermes diff` gives it
        done.write_text(str(out))
        return out

    value, _ = ws.imports.get(("import", digest), load)
    return Path(value)


def analyzed(ws: Workspace, arg: object, keep_warmup: bool = False) -> tuple[Analyzed, bool]:
    """``hermes analyze TRACE --format json`` of ``arg`` (and whether the cache had it)."""
    path, digest = ws.trace(arg)
    key = ("analysis", digest, bool(keep_warmup))
    found = ws.cache.peek(key)
    if found is not None:
        return found, True
    from hermes.commands._util import in_memory_source

    if in_memory_source(path):  # a Kineto JSON, as the CLI does it: imported in memory
        return ws.cache.get(key, lambda: _analyze(path, keep_warmup))
    source = imported(ws, path, digest)
    return ws.cache.get(key, lambda: _analyze(source, keep_warmup))


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
    from hermes.diff.runs import load_run

    path, digest = ws.trace(arg, what)
    a, _ = analyzed(ws, arg)  # the run's analysis is the trace's (hermes diff: no warm-up)
    source = imported(ws, path, digest)
    r, _ = ws.cache.get(("run", digest), lambda: load_run(source, str(arg), a.analysis))
    return dataclasses.replace(r, label=str(arg))


def step_graphs(ws: Workspace, arg: object) -> tuple[Any, Any]:
    """The step graphs ``hermes whatif`` replays, and the trace's metadata."""
    path, digest = ws.trace(arg)
    source = imported(ws, path, digest)

    def load() -> tuple[Any, Any]:
        from hermes.commands.whatif import load_any
        from hermes.whatif import graphs

        tr = load_any(source)
        return graphs(tr.events), tr.meta

    value, _ = ws.cache.get(("graphs", digest), load)
    return value
