"""``NVTX_EVENTS`` -> steps, host operators and markers on thread lanes.

Ranges (push/pop and start/end, ``eventType`` 59 and 60) and marks (34) become events; a
range's text is its ``text`` or its registered string (``textId``). By text, computed in
Arrow for the whole chunk:

* ``ProfilerStep#N`` and user step markers (``context.STEP_PATTERNS``) -> ``step`` N; their
  windows give every other event its step;
* PyTorch's ``emit_nvtx`` operator ranges (``aten::mm, seq = 12, op_id = 40``) ->
  ``host_op`` named by the operator (``aten::mm``), ``external_id`` its ``op_id``;
* ranges of the NCCL domain (or named ``nccl<Call>``: ``ncclAllReduce``, ``ncclSend``) ->
  ``host_op`` (the call that enqueues the collective kernel, as Kineto's ``nccl:*``
  operators);
* anything else -> ``marker``; marks are instants (``dur_ns`` 0).

``args`` keeps the domain id, and the category and payload where the export fills them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hermes.collectors.importers.nsys.context import STEP_PATTERNS, Context, step_number
from hermes.collectors.importers.nsys.events import (
    LK,
    NULL,
    K,
    Lanes,
    arg_fields,
    args_json,
    batch,
    bools,
    col,
    encode_strings,
)
from hermes.collectors.importers.nsys.sql import Export, text
from hermes.trace.arrowbuf import from_numpy, to_numpy

TABLE = "NVTX_EVENTS"
MARK, PUSH_POP, START_END, DOMAIN_CREATE = 34, 59, 60, 75
EVENT_TYPES = (MARK, PUSH_POP, START_END)
_STEP = "(?i)" + "|".join(f"(?:{p})" for p in STEP_PATTERNS)
_NUMBER = r"(\d+)"
_STEP_NO = "(?i)" + "|".join("(?:" + p.replace(_NUMBER, f"(?P<s{i}>" + _NUMBER[1:], 1) + ")"
                             for i, p in enumerate(STEP_PATTERNS))
_PAYLOADS = ("uint64Value", "int64Value", "doubleValue", "uint32Value", "int32Value",
             "floatValue", "jsonText")


def text_expr(export: Export) -> str:
    parts = [c for c in ("text",) if export.has(TABLE, c)]
    if export.has(TABLE, "textId") and export.has("StringIds", "id", "value"):
        parts.append("(SELECT value FROM StringIds WHERE id = textId)")
    return f"coalesce({', '.join(parts)}, '')" if parts else "''"


def domains(export: Export) -> dict[int, str]:
    """domainId -> name, from the domain-creation rows."""
    if not export.has(TABLE, "eventType", "domainId"):
        return {}
    rows = export.rows(f"SELECT domainId, {text_expr(export)} FROM {TABLE} "
                       f"WHERE eventType = {DOMAIN_CREATE}")
    return {int(d): str(t) for d, t in rows if d is not None and t}


def steps(export: Export, ctx: Context) -> None:
    """The step windows: ranges whose text is a step marker, per rank (the prefilter in SQL
    keeps the rows read few; the patterns decide)."""
    if not export.has(TABLE, "start", "end", "eventType", "globalTid"):
        return
    t = text_expr(export)
    rows = export.rows(f"SELECT start, end, globalTid, {t} AS t FROM {TABLE} "
                       f"WHERE eventType IN ({PUSH_POP}, {START_END}) AND end IS NOT NULL "
                       "AND (t LIKE '%step%' OR t LIKE '%iter%')")
    found = [(r[0], r[1], r[2], n) for r in rows if (n := step_number(r[3])) is not None]
    if not found:
        return
    arr = np.array(found, np.int64)
    rank = ctx.rank_of_tid(arr[:, 2])
    ok = rank >= 0
    arr, rank = arr[ok], rank[ok]
    order = np.lexsort((arr[:, 0], rank))
    ctx.step_rank, ctx.step_start = rank[order].astype(np.int32), arr[order, 0]
    ctx.step_end, ctx.step_no = arr[order, 1], arr[order, 3].astype(np.int32)


def _arg_specs(export: Export) -> list[tuple[str, Any]]:
    """The args columns read: those some row fills (a column of NULLs costs its read)."""
    used = set(export.filled(TABLE, ["category", *_PAYLOADS]))

    def filled(cols: list[str]) -> list[str]:
        return [c for c in cols if c in used]

    ints = filled(["uint64Value", "int64Value", "uint32Value", "int32Value"])
    reals = filled(["doubleValue", "floatValue"])
    specs: list[tuple[str, Any]] = [("category", c) for c in filled(["category"])]
    if ints:
        specs.append(("payload", f"coalesce({', '.join(ints)})"))
    if reals:  # text: a REAL payload keeps its digits
        specs.append(("payload_real", text(f"CAST(coalesce({', '.join(reals)}) AS TEXT)")))
    specs += [("payload_json", text(c)) for c in filled(["jsonText"])]
    return specs


#: SQL over a range's text ``t``: where an emit_nvtx operator's ", seq = " or ", op_id = "
#: follows its name (``aten::mm, seq = 12, op_id = 40, sizes = ...``)
_COMMA = "instr(t, ', ')"
_IS_OP = (f"({_COMMA} > 1 AND (substr(t, {_COMMA}, 8) = ', seq = ' "
          f"OR substr(t, {_COMMA}, 10) = ', op_id = '))")


def source(export: Export) -> str:
    """The rows read: ranges and marks, with their text resolved (``t``)."""
    return (f"(SELECT *, {text_expr(export)} AS t FROM {TABLE} WHERE "
            f"eventType IN ({', '.join(str(e) for e in EVENT_TYPES)}))")


def exprs_of(export: Export) -> tuple[dict[str, str], list[Any]]:
    """The columns to read, and the layout of the args among them. SQLite splits an
    operator's name from its ids (instr/substr, no regex per row in Python) and keeps the
    text of the few rows that may be step markers."""
    out = {"start": "start", "end": "end", "etype": "eventType", "tid": "globalTid",
           "domain": "domainId" if export.has(TABLE, "domainId") else "NULL",
           "name": text(f"CASE WHEN {_IS_OP} THEN substr(t, 1, {_COMMA} - 1) ELSE t END"),
           "op": f"CASE WHEN {_IS_OP} AND instr(t, ', op_id = ') > 0 THEN "
                 "CAST(substr(t, instr(t, ', op_id = ') + 10) AS INTEGER) END",
           "is_op": f"{_IS_OP}",
           "maybe_step": text("CASE WHEN t LIKE '%step%' OR t LIKE '%iter%' THEN t END"),
           "nccl": "t GLOB 'nccl[A-Z]*'"}
    exprs, layout = arg_fields(_Cols(export), TABLE, _arg_specs(export))
    out.update(exprs)
    return out, layout


class _Cols:
    """The export as ``arg_fields`` sees it: an expression over present columns is
    present."""

    def __init__(self, export: Export) -> None:
        self.export = export

    def missing(self, table: str, cols: list[str]) -> list[str]:
        return [c for c in cols if "(" not in c and not self.export.has(table, c)]


def required() -> list[str]:
    return ["start", "eventType", "globalTid"]


def to_batch(chunk: pa.Table, ctx: Context, domain_names: dict[int, str],
             arg_layout: list[Any]) -> dict[str, Any] | None:
    tid = col(chunk, "tid")
    rank = ctx.rank_of_tid(tid)
    keep = rank >= 0
    if not keep.all():
        ctx.skipped[TABLE] = ctx.skipped.get(TABLE, 0) + int((~keep).sum())
        chunk = chunk.filter(pa.array(keep))
        rank, tid = rank[keep], tid[keep]
    n = chunk.num_rows
    if not n:
        return None
    ts = col(chunk, "start")
    etype = col(chunk, "etype")
    end = np.where(etype == MARK, ts, col(chunk, "end"))
    end = np.where(end < 0, ts, end)
    is_range = etype != MARK
    maybe = chunk.column("maybe_step").combine_chunks()
    is_step = bools(pc.match_substring_regex(maybe, _STEP)) & is_range
    is_op = (col(chunk, "is_op", 0) == 1) & is_range
    domain = col(chunk, "domain")
    nccl_ids = [d for d, name in domain_names.items() if name.upper() == "NCCL"]
    is_nccl = (col(chunk, "nccl", 0) == 1) | np.isin(domain, nccl_ids)
    kind = np.where(is_step, K["step"], np.where((is_op | is_nccl) & is_range,
                                                  K["host_op"], K["marker"]))
    name = chunk.column("name").combine_chunks()
    step_no = np.full(n, -1, np.int64)
    if is_step.any():
        groups = pc.extract_regex(maybe, _STEP_NO)
        found = pc.coalesce(*(pc.struct_field(groups, f"s{i}")
                              for i in range(len(STEP_PATTERNS))))
        step_no = np.where(is_step, to_numpy(pc.cast(found, pa.int64()).fill_null(-1)), -1)
    op_id = np.where(is_op, col(chunk, "op"), -1)
    step = np.where(step_no >= 0, step_no, ctx.step_at(rank, ts))
    lanes = Lanes.of(tid, ctx.thread_lane)
    cols = batch(rank=rank, lanes=lanes, lane_kind=np.full(n, LK["host"]), kind=kind,
                 name=encode_strings(name), ts=ts, end=end, step=step,
                 args=args_json(chunk, arg_layout, [("domain", np.where(domain < 0, NULL,
                                                                         domain))]))
    cols["external_id"] = from_numpy(op_id.astype(np.int64), op_id < 0)
    ctx.ops.add(tid, ts, end, op_id)
    return cols
