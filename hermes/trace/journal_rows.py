"""How a journal entry's rows are encoded (``hermes.trace.journal``): the session's own rows
of the trace columns (:data:`ROW_COLUMNS`) in a binary row format, the rest as JSON.

The binary part, little-endian: ``HJR1`` | new strings u32 | rows u32 | JSON length u32, the
new strings (each u32 length + UTF-8), then one fixed-size row each (:data:`_ROW`: rank,
lane, lane kind, kind and name by string number, ts, dur, step, flops, bytes, value, args by
number or ``0xFFFFFFFF`` for none, null bits of flops/bytes/value), then the JSON part. A
string is numbered by the first entry of a segment that uses it (numbers follow on from
the segment's earlier entries, which a reader reads first). JSON: an object column ->
values, or a list of such objects and row-major parts ``[[column, ...], [value, ...], ...]``.
``json.dumps`` of a few rows cost a training step ~25 us cold; the binary rows a few.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

#: the columns of rows journaled in the binary row format (a session's own rows)
ROW_COLUMNS = ("rank", "lane", "lane_kind", "kind", "name", "ts_ns", "dur_ns", "step", "flops",
               "bytes", "value", "args")
_ROW = struct.Struct("<qIIIIqqqdqdIB")  # ROW_COLUMNS, strings by number, then null bits
_RECS = struct.Struct("<4sIII")  # magic, new strings, rows, JSON length
_R, _NONE, _LEN = b"HJR1", 0xFFFFFFFF, struct.Struct("<I")


def body_of(rows: dict[str, list[Any]] | None,
          records: tuple[Sequence[str], list[tuple[Any, ...]]] | None,
          strings: dict[str, int]) -> tuple[bytes, dict[str, int] | None]:
    """An entry's rows: ``records`` of :data:`ROW_COLUMNS` in the binary row format (JSON
    would cost a step ~25 us more), ``rows`` and other records as JSON; and the strings the
    entry numbers (their numbers follow ``strings``')."""
    text = json.dumps(rows, separators=(",", ":")).encode() if rows else b""
    if not records or not records[1]:
        return (b"[%s]" % text if text else b""), None
    columns, recs = records
    if tuple(columns) == ROW_COLUMNS:
        g, pack = strings.get, _ROW.pack
        try:  # every string numbered already (a None number: struct.error)
            out = [pack(rank, g(lane), g(lk), g(kind), g(name), ts, dur, st,
                        0.0 if fl is None else fl, 0 if nb is None else nb,
                        0.0 if v is None else v, _NONE if args is None else g(args),
                        (fl is None) | (nb is None) << 1 | (v is None) << 2)
                   for rank, lane, lk, kind, name, ts, dur, st, fl, nb, v, args in recs]
            return b"".join([_RECS.pack(_R, 0, len(out), len(text)), *out, text]), None
        except (TypeError, ValueError, OverflowError, struct.error):
            pass  # a string to number first, or a value the format does not hold
        fresh: dict[str, int] = {}
        base = len(strings)

        def sid(s: Any) -> int:
            i = strings.get(s)
            if i is None:
                i = fresh.get(s)
                if i is None:
                    if s is None:
                        return _NONE
                    if type(s) is not str:
                        raise TypeError("not a string")
                    i = fresh[s] = base + len(fresh)
            return i
        try:
            pack = _ROW.pack
            out = [pack(rank, sid(lane), sid(lk), sid(kind), sid(name), ts, dur, st,
                        0.0 if fl is None else fl, 0 if nb is None else nb,
                        0.0 if v is None else v, sid(args),
                        (fl is None) | (nb is None) << 1 | (v is None) << 2)
                   for rank, lane, lk, kind, name, ts, dur, st, fl, nb, v, args in recs]
        except (TypeError, ValueError, OverflowError, struct.error):
            pass  # a value the format does not hold: JSON
        else:
            new = [s.encode() for s in fresh]
            return b"".join([_RECS.pack(_R, len(new), len(out), len(text)),
                             *(_LEN.pack(len(b)) + b for b in new), *out, text]), fresh
    part = json.dumps([list(columns), *recs]).encode()
    return (b"[%s,%s]" % (text, part) if text else b"[%s]" % part), None


def rows_of(body: bytes, strings: list[str]) -> tuple[list[dict[str, list[Any]]],
                                                          list[str]]:
    """An entry's rows as parts column -> values, and the strings it numbers after
    ``strings``: binary rows (:func:`body_of`) then JSON, or JSON alone."""
    if not body.startswith(_R):
        return _row_parts(json.loads(body) if body else None), []
    _, ns, nr, nj = _RECS.unpack_from(body, 0)
    at, new = _RECS.size, []
    for _ in range(ns):
        (n,) = _LEN.unpack_from(body, at)
        new.append(body[at + _LEN.size: at + _LEN.size + n].decode())
        at += _LEN.size + n
    stop = at + nr * _ROW.size
    if stop + nj != len(body):
        raise ValueError("an entry's rows of another length than it says")
    table = [*strings, *new]
    cols: list[list[Any]] = [[] for _ in ROW_COLUMNS]
    (rank, lane, lk, kind, name, ts, dur, step, flops, nbytes, value, args) = cols
    for r in _ROW.iter_unpack(body[at:stop]):
        rank.append(r[0])
        lane.append(table[r[1]])
        lk.append(table[r[2]])
        kind.append(table[r[3]])
        name.append(table[r[4]])
        ts.append(r[5])
        dur.append(r[6])
        step.append(r[7])
        flops.append(None if r[12] & 1 else r[8])
        nbytes.append(None if r[12] & 2 else r[9])
        value.append(None if r[12] & 4 else r[10])
        args.append(None if r[11] == _NONE else table[r[11]])
    parts = [dict(zip(ROW_COLUMNS, cols, strict=True))] if nr else []
    return parts + (_row_parts(json.loads(body[stop:])) if nj else []), new


def _row_parts(body: Any) -> list[dict[str, list[Any]]]:
    """Rows as column -> values: one such object, or a list of them and of row-major parts
    ``[columns, row, row, ...]``."""
    if body is None:
        return []
    out = []
    for part in [body] if isinstance(body, dict) else body:
        if isinstance(part, dict):
            out.append(part)
            continue
        columns, rows = part[0], part[1:]
        if not all(isinstance(r, list) and len(r) == len(columns) for r in rows):
            raise ValueError("a row of another length than its columns")
        out.append({str(c): [r[i] for r in rows] for i, c in enumerate(columns)})
    return out
