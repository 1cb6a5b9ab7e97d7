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
from hermes.trace.arrowbuf import filled, from_numpy, to_numpy
from hermes.trace.arrowbuf import strings as arrow_strings

TABLE = "NVTX_EVENTS"
MARK, PUSH_POP, START_END, DOMAIN_CREATE = 34, 59, 60, 75
EVENT_TYPES = (MARK, PUSH_POP, START_END)
_NUMBER = r"(\d+)"
_STEP = "(?i)" + "|".join(f"(?:{p})" for p in STEP_PATTERNS)
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


def step_rows(export: Export) -> list[tuple]:
    """The ranges whose text may be a step marker: (start, end, globalTid, text); the
    prefilter in SQL keeps the rows read few, the patterns decide (``set_steps``)."""
    if not export.has(TABLE, "start", "end", "eventType", "globalTid"):
        return []
    return export.rows(f"SELECT start, end, globalTid, {text_expr(export)} FROM {TABLE} "
                       f"WHERE eventType IN ({PUSH_POP}, {START_END}) AND end IS NOT NULL "
                       f"AND {_may_be_step(export)}")


def set_steps(ctx: Context, rows: list[tuple]) -> None:
    """The step windows, per rank, from ``step_rows``."""
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
    reg = strings.take(from_numpy(np.maximum(codes, 0))) if len(strings) else \
        pa.nulls(len(codes), pa.string())
    return pc.if_else(from_numpy(codes >= 0), reg, own)


def _utf8_parts(t: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string array's bytes and its n + 1 offsets, as numpy (no copy)."""
    if t.null_count:
        t = t.fill_null("")
    if t.type == pa.large_string():
        offsets = np.frombuffer(t.buffers()[1], np.int64)
    else:
        offsets = np.frombuffer(t.buffers()[1], np.int32)
    offsets = offsets[t.offset: t.offset + len(t) + 1].astype(np.int64)
    data = t.buffers()[2]
    return (np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)), \
        offsets


def _starts_with(data: np.ndarray, at: np.ndarray, end: np.ndarray,
                 prefix: bytes) -> np.ndarray:
    """Whether the bytes from each ``at`` (before its ``end``) begin with ``prefix``: one
    vectorized comparison per byte of the prefix."""
    ok = at + len(prefix) <= end
    last = max(len(data) - 1, 0)
    for j, byte in enumerate(prefix):
        if not ok.any():
            break
        ok &= data[np.minimum(at + j, last)] == byte
    return ok


def _leading_int(data: np.ndarray, at: np.ndarray, end: np.ndarray,
                 width: int = 40) -> np.ndarray:
    """The integer the bytes from each ``at`` (to its ``end``) start with, as SQLite's CAST
    reads one: blanks, a sign, digits, whatever follows ignored; -1 where no digit comes, or
    more than 18. One vectorized step per byte position, over all rows, until every row's
    number has ended (a few steps: op ids are short)."""
    value = np.zeros(len(at), np.int64)
    count = np.zeros(len(at), np.int64)
    neg = np.zeros(len(at), bool)
    state = np.zeros(len(at), np.int8)  # 0 blanks, 1 after the sign, 2 digits, 3 ended
    last = max(len(data) - 1, 0)
    for j in range(width):
        live = state < 3
        if not live.any():
            break
        pos = at + j
        b = np.where(pos < end, data[np.minimum(pos, last)] if len(data) else 0, 0)
        blank = (b == 32) | ((b >= 9) & (b <= 13))
        sign = (b == 43) | (b == 45)
        dig = (b >= 48) & (b <= 57) & live
        first = state == 0
        neg |= first & (b == 45)
        step = dig & (count < 19)
        value = np.where(step, value * 10 + (b.astype(np.int64) - 48), value)
        count += dig
        state = np.where(dig, 2, np.where(first & blank, 0, np.where(first & sign, 1, 3))
                         ).astype(np.int8)
    value = np.where(neg, -value, value)
    return np.where((count > 0) & (count <= 18), value, -1)


_SEQ, _OPID = b", seq = ", b", op_id = "


def operators(t: pa.Array) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """PyTorch's ``emit_nvtx`` operator ranges in texts ``t``: (which are, their names, their
    op ids, -1 where none). An operator's text is its name, then ``, seq = `` or
    ``, op_id = `` at the name's first ``, ``: ``aten::mm, seq = 12, op_id = 40``; its op id
    is the integer after the text's first ``, op_id = ``. Found with Arrow's substring search
    and numpy over the bytes (no regular expression, no string per row)."""
    n = len(t)
    data, offsets = _utf8_parts(t)
    start, end = offsets[:-1], offsets[1:]
    comma = filled(pc.find_substring(t, ", "), -1).astype(np.int64)
    cand = np.flatnonzero(comma > 0)
    is_op = np.zeros(n, bool)
    op_id = np.full(n, -1, np.int64)
    if not len(cand):
        return is_op, t, op_id
    at = start[cand] + comma[cand]
    rows = cand[_starts_with(data, at, end[cand], _SEQ) |
                _starts_with(data, at, end[cand], _OPID)]
    if not len(rows):
        return is_op, t, op_id
    is_op[rows] = True
    found = filled(pc.find_substring(t.take(from_numpy(rows)), _OPID.decode()), -1
                   ).astype(np.int64)
    has = found >= 0
    if has.any():
        r = rows[has]
        op_id[r] = _leading_int(data, start[r] + found[has] + len(_OPID), end[r])
    # the operators' names: each one's bytes up to its first ', ', gathered in one pass
    lens = comma[rows]
    into = np.cumsum(lens) - lens
    idx = np.repeat(start[rows] - into, lens) + np.arange(int(lens.sum()))
    heads = pa.Array.from_buffers(pa.string(), len(rows), [
        None, pa.py_buffer(np.r_[0, np.cumsum(lens)].astype(np.int32)),
        pa.py_buffer(data[idx].tobytes())])
    where = np.full(n, -1, np.int64)
    where[rows] = np.arange(len(rows))
    spread = heads.take(from_numpy(where, where < 0))
    return is_op, pc.coalesce(spread, t), op_id


def to_batch(chunk: pa.Table, ctx: Context, domain_names: dict[int, str],
             arg_layout: list[Any], strings: tuple[pa.Array, Any]) -> dict[str, Any] | None:
    tid = col(chunk, "tid")
    rank = ctx.rank_of_tid(tid)
    keep = rank >= 0
    if not keep.all():
        ctx.skipped[TABLE] = ctx.skipped.get(TABLE, 0) + int((~keep).sum())
        chunk = chunk.filter(from_numpy(keep))
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
    # the patterns are anchored (a row fails at its first bytes): matched first, the numbers
    # are extracted from the few rows that are steps
    maybe = np.flatnonzero(bools(pc.match_substring_regex(t, _STEP)) & is_range)
    step_no = np.full(n, -1, np.int64)
    if len(maybe):
        groups = pc.extract_regex(t.take(from_numpy(maybe)), _STEP_NO)
        # the pattern that matched fills its group, the others are '' (Arrow's unmatched
        # group): joined, the number; too many digits for an int64 is no step
        found = pc.binary_join_element_wise(
            *(pc.struct_field(groups, f"s{i}") for i in range(len(STEP_PATTERNS))),
            arrow_strings([""] * len(maybe)))
        digits = filled(pc.utf8_length(found), 0)
        ok = np.flatnonzero((digits > 0) & (digits <= 18))
        step_no[maybe[ok]] = to_numpy(pc.cast(found.take(from_numpy(ok)), pa.int64()))
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
