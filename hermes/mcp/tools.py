"""The tools' bodies: plain functions of a :class:`Workspace` and the call's arguments that
return a JSON document, bounded (:func:`hermes.mcp.bounds.bounded`). They read the documents the
CLI renders (``hermes analyze --format json``, ``hermes diff --format json``, ``hermes whatif
--format json``) or the objects behind them; none computes a figure of its own.
"""

from __future__ import annotations

from typing import Any

from hermes.errors import UsageError
from hermes.mcp import analysis as an
from hermes.mcp.bounds import bounded
from hermes.mcp.cache import WORK


def _bounded(ws: an.Workspace, doc: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return bounded(doc, max_rows=ws.max_rows, max_bytes=ws.max_bytes, **kw)


def analyze(ws: an.Workspace, trace: str, keep_warmup: bool = False) -> dict[str, Any]:
    a, hit = an.analyzed(ws, trace, keep_warmup)
    doc = dict(a.doc, cached=hit)
    return _bounded(ws, doc, rest="findings(trace, offset=N) pages the findings, kernels(trace) "
                                  "the kernel table; `hermes analyze TRACE --format json` "
                                  "prints the whole document")


def findings(ws: an.Workspace, trace: str, category: str | None = None, offset: int = 0,
             limit: int | None = None) -> dict[str, Any]:
    from hermes.findings import CAUSE_IDS, CAUSES

    a, hit = an.analyzed(ws, trace)
    rows = a.doc["findings"]
    if category:
        if category not in CAUSES and category not in CAUSE_IDS:
            raise UsageError(f"unknown category {category!r}", where="category",
                             hint=f"one of {', '.join(CAUSES)}, or a finding id such as "
                                  f"{CAUSE_IDS[0]}")
        rows = [f for f in rows if category in (f["category"], f["id"])]
    doc = {"trace": trace, "bound": a.doc["bound"], "steps": a.doc["steps"],
           "category": category, "cached": hit, "findings": rows}
    return _bounded(ws, doc, main="findings", offset=offset, limit=limit,
                    rest="call findings again with offset={offset} for the next findings")


def kernels(ws: an.Workspace, trace: str, top: int = 20, sort: str = "total_ns",
            offset: int = 0) -> dict[str, Any]:
    if sort not in an.KERNEL_SORTS:
        raise UsageError(f"unknown sort {sort!r}", where="sort",
                         hint=f"one of {', '.join(an.KERNEL_SORTS)}")
    a, hit = an.analyzed(ws, trace)
    rows = an.kernel_table(a)
    if sort != "total_ns":
        desc = an.KERNEL_SORTS[sort]
        rows = sorted(rows, key=lambda r: r[sort], reverse=desc)
    doc = {"trace": trace, "sort": sort, "cached": hit,
           "per_rank": a.doc.get("computation", {}).get("per_rank", []), "kernels": rows}
    return _bounded(ws, doc, main="kernels", offset=offset, limit=top,
                    rest=f"call kernels again with offset={{offset}} (sort={sort!r}) for the "
                         "next rows")


def critical_path(ws: an.Workspace, trace: str, rank: int | None = None) -> dict[str, Any]:
    a, hit = an.analyzed(ws, trace)
    cp = a.doc["critical_path"] if rank is None else an.rank_critical_path(a, rank)
    doc = {"trace": trace, "ranks": a.doc["ranks"], "cached": hit, "critical_path": cp}
    return _bounded(ws, doc, rest="give rank=R for another rank's path")


def memory(ws: an.Workspace, trace: str) -> dict[str, Any]:
    a, hit = an.analyzed(ws, trace)
    per_rank = a.doc.get("memory", {}).get("per_rank", [])
    doc: dict[str, Any] = {"trace": trace, "cached": hit, "memory": {"per_rank": per_rank}}
    if not per_rank:
        doc["note"] = ("the trace holds no device-memory samples (Kineto: profile with "
                       "profile_memory=True; Ascend: the memory records of the profiler)")
    return _bounded(ws, doc)


def diff(ws: an.Workspace, base: str, new: str) -> dict[str, Any]:
    from hermes.diff.compute import diff as compute

    b, n = an.run(ws, base, "base"), an.run(ws, new, "new")
    with WORK:
        doc = compute(b, n).to_dict()
    return _bounded(ws, doc, rest="`hermes diff BASE NEW --format json` prints every row")


def check(ws: an.Workspace, new: str, baselines: list[str] | None = None,
          budget: str | None = None, max_regression: str = "5%", alpha: float = 0.01,
          allow_missing: bool = False) -> dict[str, Any]:
    from hermes.check import check as gate
    from hermes.check import load_budget, render_terminal
    from hermes.commands.check import parse_fraction

    bases = list(baselines or [])
    if not bases and budget is None:
        raise UsageError("nothing to check against", where="check",
                         hint="give baselines (one or more runs) and/or a budget file")
    if not 1e-6 <= float(alpha) <= 0.5:
        raise UsageError(f"alpha {alpha} is out of range (1e-6 to 0.5)", where="alpha")
    limit = parse_fraction(str(max_regression), "max_regression")
    plan = load_budget(ws.roots.resolve(budget, "budget")) if budget is not None else None
    runs = [an.run(ws, new, "new"), *(an.run(ws, b, "baseline") for b in bases)]
    with WORK:
        v = gate(runs[0], runs[1:], limit, float(alpha), plan, allow_missing)
    doc = {"status": v.status, "exit_code": v.exit_code, "new": v.new_label,
           "baselines": v.baseline_labels,
           "gates": [{"name": g.name, "status": g.status, "kind": g.kind, "flagged": g.flagged,
                      "summary": g.summary, "details": g.details} for g in v.gates],
           "responsible": v.responsible, "text": render_terminal(v)}
    from hermes.analyzers.engine.result import jsonable

    return _bounded(ws, jsonable(doc))


#: At most this many optimizations in one what-if call (each is also replayed alone).
MAX_APPLY = 8


def whatif(ws: an.Workspace, trace: str, apply: list[str] | None = None) -> dict[str, Any]:
    from hermes.whatif import predict
    from hermes.whatif.transforms import TRANSFORMS

    specs = [s for s in (apply or []) if s.strip()]
    if len(specs) > MAX_APPLY:
        raise UsageError(f"{len(specs)} optimizations: at most {MAX_APPLY} per call",
                         where="apply")
    gs, meta = an.step_graphs(ws, trace)
    with WORK:
        p = predict(gs, specs, meta)
        if p.unknown and not p.applied and specs:
            why = "; ".join(f"{s}: {r}" for s, r in p.reasons.items())
            raise UsageError(f"cannot replay {', '.join(p.unknown)} on this trace ("
                             + (why or "no what-if transform, or a slow rank whose "
                                "collectives could not be matched across the trace's ranks")
                             + ")", hint="transforms: " + ", ".join(sorted(TRANSFORMS)))
        doc = p.to_dict()
        if len(p.applied) > 1:
            alone = {s: predict(gs, [s], meta).to_dict() for s in p.applied}
            doc["per_optimization"] = {s: {"predicted_ms": d["predicted_ms"],
                                           "speedup": d["speedup"]} for s, d in alone.items()}
    return _bounded(ws, doc)


def report(ws: an.Workspace, trace: str, top: int = 10) -> dict[str, Any]:
    """``hermes analyze TRACE --format html --out FILE``, FILE in the server's output folder
    named by the trace and its content hash (an unchanged trace's report is written once)."""
    from hermes.commands._util import check_output_path, write_text_atomic
    from hermes.commands.analyze import timeline_trace
    from hermes.report import RENDERERS

    path, digest = ws.trace(trace)
    a, hit = an.analyzed(ws, trace)
    source = an.imported(ws, path, digest)
    name = path.name.split(".")[0] or "trace"
    out = ws.out_dir / f"{name}-{digest[:12]}-top{int(top)}.html"
    written = False
    with WORK:
        if not out.is_file():
            ws.out_dir.mkdir(parents=True, exist_ok=True)
            check_output_path(out, [path], file_only=True)
            loaded = timeline_trace(source, None, a.analysis)
            html = RENDERERS.get("html")(a.analysis, a.advice, int(top), trace=loaded)
            write_text_atomic(out, html)
            written = True
    return _bounded(ws, {"path": str(out), "bytes": out.stat().st_size, "written": written,
                         "bound": a.doc["bound"], "steps": a.doc["steps"],
                         "findings": [f["id"] for f in a.doc["findings"]], "cached": hit})




def _query_module() -> Any:
    """:mod:`hermes.query` when this installation has it (with the calls used here)."""
    import importlib

    try:
        q = importlib.import_module("hermes.query")
    except ImportError:
        return None
    return q if all(hasattr(q, n) for n in ("Source", "run", "TABLES")) else None


def query_tool() -> tuple[Any, str] | None:
    """``(function, the tables it offers, for its description)`` of the query tool, or None where
    :mod:`hermes.query` is missing."""
    q = _query_module()
    if q is None:
        return None
    tables = "; ".join(f"{t.name}: {t.description}" for t in q.TABLES.values())
    return query, (f"Tables: {tables}; and every analyzer table as <analyzer>_<table>. "
                   "See the resource hermes://docs/query.")


def query(ws: an.Workspace, trace: str, sql: str) -> dict[str, Any]:
    """``hermes query TRACE SQL --format json`` of at most the row cap's rows: the trace as
    that command reads it (profiler output imported to a Parquet: the server's one import of
    it), the analysis tables from the cached analysis, the rows converted by its JSON
    renderer."""
    import json

    from hermes.commands.query import as_json

    q = _query_module()
    path, digest = ws.trace(trace)
    a, _ = an.analyzed(ws, trace)
    source = an.imported(ws, path, digest)

    def load() -> Any:
        src = q.Source(source, a.advice.attach(a.analysis))
        src.events()  # read now, under the work lock
        return src

    src, hit = ws.cache.get(("query", digest), load)
    with WORK:
        table, more = q.run(src, sql, ws.max_rows)
    doc = {"trace": trace, "columns": table.column_names, "rows": json.loads(as_json(table)),
           "cached": hit}
    out = _bounded(ws, doc, main="rows", rest="add LIMIT/OFFSET to the SQL for other rows")
    if more:
        out.update(truncated=True, rest=f"the first {ws.max_rows} rows: add LIMIT/OFFSET (or "
                                        "a narrower WHERE) to the SQL for the others")
    return out
