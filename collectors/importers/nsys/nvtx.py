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


def _may_be_step(export: Export) -> str:
    """SQL: the row's text may be a step marker (holds 'step' or 'iter', any case); the
    registered strings are searched once, not per row."""
    like = "LIKE '%step%' OR {0} LIKE '%iter%'"
    terms = []
    if export.has(TABLE, "text"):
        terms.append("text " + like.format("text"))
    if export.has(TABLE, "textId") and export.has("StringIds", "id", "value"):
        own = "text IS NULL AND " if export.has(TABLE, "text") else ""
        terms.append(f"({own}textId IN (SELECT id FROM StringIds WHERE value "
                     + like.format("value") + "))")
    return "(" + " OR ".join(terms) + ")" if terms else "0"


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
    rows = export.rows(f"SELECT start, end, globalTid, {text_expr(export)} FROM {TABLE} "
                       f"WHERE eventType IN ({PUSH_POP}, {START_END}) AND end IS NOT NULL "
                       f"AND {_may_be_step(export)}")
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
    """The args columns read (a row's NULLs are left out of its args)."""
    def present(cols: list[str]) -> list[str]:
        return [c for c in cols if export.has(TABLE, c)]

    ints = present(["uint64Value", "int64Value", "uint32Value", "int32Value"])
    reals = present(["doubleValue", "floatValue"])
    specs: list[tuple[str, Any]] = [("category", c) for c in present(["category"])]
    if ints:
        specs.append(("payload", f"coalesce({', '.join(ints)})"))
    if reals:  # text: a REAL payload keeps its digits
        specs.append(("payload_real", text(f"CAST(coalesce({', '.join(reals)}) AS TEXT)")))
    specs += [("payload_json", text(c)) for c in present(["jsonText"])]
    return specs


def where() -> str:
    """The rows read: ranges and marks."""
    return f"eventType IN ({', '.join(str(e) for e in EVENT_TYPES)})"


def exprs_of(export: Export) -> tuple[dict[str, str], list[Any]]:
    """The columns to read, and the layout of the args among them: a row's own text, else
    the id of its registered string (resolved per chunk, in numpy, as are the operator
    names and ids split from the text, in Arrow: no string work per row in SQL)."""
    has_text = export.has(TABLE, "text")
    has_id = export.has(TABLE, "textId") and export.has("StringIds", "id", "value")
    out = {"start": "start", "end": "end", "etype": "eventType", "tid": "globalTid",
           "domain": "domainId" if export.has(TABLE, "domainId") else "NULL",
           "text": text("text" if has_text else "NULL"),
           "text_id": ("CASE WHEN text IS NULL THEN textId END" if has_text else "textId")
           if has_id else "NULL"}
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


def resolve_text(chunk: pa.Table, strings: pa.Array, codes: np.ndarray) -> pa.Array:
    """Each row's text: its own, else its registered string (``strings[codes]``; ``codes``
    -1: none, '')."""
    own = chunk.column("text").combine_chunks()
    if not (codes >= 0).any():
        return own
    reg = strings.take(pa.array(np.maximum(codes, 0))) if len(strings) else \
        pa.nulls(len(codes), pa.string())
    return pc.if_else(pa.array(codes >= 0), reg, own)


_OP_ID = r"(?s), op_id = [ \t\n\f\r]*(?P<op>[+-]?[0-9]{1,18})"


def operators(t: pa.Array) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """PyTorch's ``emit_nvtx`` operator ranges in texts ``t``: (which are, their names, their
    op ids, -1 where none). An operator's text is its name, ``, seq = `` or ``, op_id = ``
    right after the name's first ``, ``, then the ids: ``aten::mm, seq = 12, op_id = 40``."""
    n = len(t)
    parts = pc.split_pattern(t, ", ", max_splits=1)
    two = to_numpy(pc.list_value_length(parts)) == 2
    flat = pc.list_flatten(parts)
    first = to_numpy(parts.offsets)[:-1]
    head = flat.take(pa.array(first))
    rest = flat.take(pa.array(np.where(two, first + 1, first)))
    is_op = two & (to_numpy(pc.binary_length(head)) > 0) & (
        bools(pc.starts_with(rest, "seq = ")) | bools(pc.starts_with(rest, "op_id = ")))
    op_id = np.full(n, -1, np.int64)
    rows = np.flatnonzero(is_op)
    if len(rows):
        found = pc.struct_field(pc.extract_regex(t.take(pa.array(rows)), _OP_ID), "op")
        op_id[rows] = to_numpy(pc.cast(found, pa.int64()).fill_null(-1))
    name = pc.if_else(pa.array(is_op), head, t) if is_op.any() else t
    return is_op, name, op_id


def to_batch(chunk: pa.Table, ctx: Context, domain_names: dict[int, str],
             arg_layout: list[Any], strings: tuple[pa.Array, Any]) -> dict[str, Any] | None:
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
    values, string_codes = strings
    t = resolve_text(chunk, values, string_codes(col(chunk, "text_id")))
    # a step marker holds 'step' or 'iter' (any case): the patterns run on those rows only
    maybe = np.flatnonzero(bools(pc.match_substring_regex(t, "(?i)step|iter")) & is_range)
    step_no = np.full(n, -1, np.int64)
    if len(maybe):
        groups = pc.extract_regex(t.take(pa.array(maybe)), _STEP_NO)
        # the pattern that matched fills its group, the others are '' (Arrow's unmatched
        # group): joined, the number; too many digits for an int64 is no step
        found = pc.binary_join_element_wise(
            *(pc.struct_field(groups, f"s{i}") for i in range(len(STEP_PATTERNS))), "")
        digits = pc.utf8_length(found)
        found = pc.if_else(pc.and_(pc.greater(digits, 0), pc.less_equal(digits, 18)),
                           found, pa.scalar(None, pa.string()))
        step_no[maybe] = to_numpy(pc.cast(found, pa.int64()).fill_null(-1))
    is_step = step_no >= 0
    is_op, name, op_id = operators(t)
    is_op &= is_range
    op_id = np.where(is_op, op_id, -1)
    domain = col(chunk, "domain")
    nccl_ids = [d for d, name in domain_names.items() if name.upper() == "NCCL"]
    is_nccl = bools(pc.match_substring_regex(t, "^nccl[A-Z]")) | np.isin(domain, nccl_ids)
    kind = np.where(is_step, K["step"], np.where((is_op | is_nccl) & is_range,
                                                  K["host_op"], K["marker"]))
    step = np.where(step_no >= 0, step_no, ctx.step_at(rank, ts))
    lanes = Lanes.of(tid, ctx.thread_lane)
    cols = batch(rank=rank, lanes=lanes, lane_kind=np.full(n, LK["host"]), kind=kind,
                 name=encode_strings(name), ts=ts, end=end, step=step,
                 args=args_json(chunk, arg_layout, [("domain", np.where(domain < 0, NULL,
                                                                         domain))]))
    cols["external_id"] = from_numpy(op_id.astype(np.int64), op_id < 0)
    ctx.ops.add(tid, ts, end, op_id)
    return cols
