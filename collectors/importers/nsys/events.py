"""Building a batch of Hermes events (Arrow columns of the trace schema) from numpy arrays:
kinds, lanes and names as dictionary codes, nullable integers with masks. Shared by every
table's mapping."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from hermes.trace.arrowbuf import dictionary, filled, from_numpy, strings, to_numpy, truths
from hermes.trace.schema import EVENT_KINDS, LANE_KINDS, UNITS

KINDS: tuple[str, ...] = tuple(EVENT_KINDS)
K = {k: i for i, k in enumerate(KINDS)}
LANE_KIND_NAMES: tuple[str, ...] = tuple(LANE_KINDS)
LK = {k: i for i, k in enumerate(LANE_KIND_NAMES)}
UNIT_NAMES: tuple[str, ...] = tuple(UNITS)
U = {k: i for i, k in enumerate(UNIT_NAMES)}


def col(table: pa.Table, name: str, default: int = -1) -> np.ndarray:
    """An int64 column of a chunk as numpy, nulls as ``default`` (a missing column: all)."""
    if name not in table.column_names:
        return np.full(table.num_rows, default, np.int64)
    return filled(table.column(name), default)


def bools(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow array as numpy (nulls False), without pandas."""
    return truths(arr)


def texts(table: pa.Table, name: str) -> pa.Array:
    arr = table.column(name)
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def dict_of(codes: np.ndarray, values: Sequence[str]) -> pa.DictionaryArray:
    """A dictionary array of the values ``codes`` use (compacted: only those)."""
    used, inverse = np.unique(codes, return_inverse=True)
    return dictionary(inverse.astype(np.int32), strings([values[i] for i in used.tolist()]))


def encode_strings(arr: pa.Array) -> pa.DictionaryArray:
    out = arr.dictionary_encode()
    return pa.DictionaryArray.from_arrays(out.indices.cast(pa.int32()), out.dictionary)


@dataclass
class Lanes:
    """Lane names of a batch: per row a code, and the names."""

    codes: np.ndarray
    names: list[str]

    @classmethod
    def of(cls, keys: np.ndarray, name_of: Any) -> Lanes:
        """``keys``: one int64 per row; ``name_of(key)`` names a distinct key."""
        uniq, inverse = np.unique(keys, return_inverse=True)
        return cls(inverse.astype(np.int32), [name_of(int(k)) for k in uniq.tolist()])


def batch(*, rank: np.ndarray, lanes: Lanes, lane_kind: np.ndarray, kind: np.ndarray,
          name: pa.Array, ts: np.ndarray, end: np.ndarray, step: np.ndarray,
          args: pa.Array, corr: np.ndarray | None = None, stream: np.ndarray | None = None,
          unit: np.ndarray | None = None, nbytes: np.ndarray | None = None,
          coll_group: tuple[np.ndarray, list[str]] | None = None,
          coll_seq: np.ndarray | None = None) -> dict[str, Any]:
    """The columns of a batch. ``corr``/``stream``/``nbytes``/``coll_seq``: -1 = null;
    ``unit``: a code of UNIT_NAMES or -1; durations are ``end - ts``, >= 0."""
    dur = np.maximum(end - ts, 0)
    cols: dict[str, Any] = {
        "rank": from_numpy(rank.astype(np.int32)),
        "lane": dictionary(lanes.codes, lanes.names),
        "lane_kind": dictionary(lane_kind.astype(np.int32), LANE_KIND_NAMES),
        "kind": dictionary(kind.astype(np.int32), KINDS),
        "name": name,
        "ts_ns": from_numpy(ts.astype(np.int64)),
        "dur_ns": from_numpy(dur.astype(np.int64)),
        "step": from_numpy(step.astype(np.int32), step < 0),
        "args": args,
    }
    if corr is not None:
        cols["corr_id"] = from_numpy(corr.astype(np.int64), corr < 0)
    if stream is not None:
        cols["stream"] = from_numpy(stream.astype(np.int32), stream < 0)
    if unit is not None:
        cols["unit"] = dictionary(np.maximum(unit, 0).astype(np.int32), UNIT_NAMES, unit < 0)
    if nbytes is not None:
        cols["bytes"] = from_numpy(nbytes.astype(np.int64), nbytes < 0)
    if coll_group is not None and coll_seq is not None:
        codes, names = coll_group
        cols["coll_group"] = dictionary(np.maximum(codes, 0).astype(np.int32), names,
                                        codes < 0)
        cols["coll_seq"] = from_numpy(coll_seq.astype(np.int64), coll_seq < 0)
    return cols


#: an integer column's null, in the arrays args are built from
NULL = np.iinfo(np.int64).min


@dataclass(frozen=True)
class ArgField:
    """One key of ``args``: its chunk columns (several: a JSON array, e.g. a grid), and
    whether they are text."""

    key: str
    columns: tuple[str, ...]
    array: bool
    is_text: bool


def arg_fields(export: Any, table: str, fields: Sequence[tuple[str, Any]]
               ) -> tuple[dict[str, str], list[ArgField]]:
    """The SQL expressions to read for ``args`` and their layout: ``fields`` are (key,
    column), (key, [columns]) for an array, or (key, sql.text(column)) for text; keys whose
    columns the table lacks are left out."""
    from hermes.collectors.importers.nsys.sql import is_text, sql_of

    exprs: dict[str, str] = {}
    layout: list[ArgField] = []
    for key, cols in fields:
        group = cols if isinstance(cols, list) else [cols]
        if export.missing(table, [sql_of(c) for c in group]):
            continue
        names = tuple(f"arg.{key}.{i}" for i in range(len(group)))
        exprs.update(zip(names, group, strict=True))
        layout.append(ArgField(key, names, isinstance(cols, list), is_text(group[0])))
    return exprs, layout


def distinct_rows(arrays: Sequence[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of int64 columns ``arrays`` (``n`` rows): (a first row of each, each
    row's distinct row). The columns are packed into one key, mixed-radix over each one's
    span (a column of few values but a wide span, such as NULL and a few ids, by its distinct
    values): no sort of whole rows; the key is compacted whenever the next column would
    overflow it, and grouped by a table where its span is small."""
    key = np.zeros(n, np.int64)
    card = 1
    for a in arrays:
        lo, hi = (int(a.min()), int(a.max())) if n else (0, 0)
        if lo == hi:
            continue
        span = hi - lo + 1
        if span > 4 * n:
            _, a = np.unique(a, return_inverse=True)
            lo, span = 0, int(a.max()) + 1
        if card * span >= 2 ** 62:
            _, key = np.unique(key, return_inverse=True)
            card = int(key.max()) + 1
        key = key * span + (a - lo)
        card *= span
    if card <= 4 * n + 1024:  # a table over the key's span
        at = np.full(card, n, np.int64)
        at[key[::-1]] = np.arange(n - 1, -1, -1)  # the last write is the first row
        seen = at < n
        return at[seen], (np.cumsum(seen) - 1)[key]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first, inverse


def args_json(chunk: pa.Table, layout: Sequence[ArgField],
              extra: Sequence[tuple[str, np.ndarray | list[np.ndarray]]] = ()) -> pa.Array:
    """Each row's ``args`` JSON object from its ``layout`` columns (and ``extra`` integer
    fields, a list of arrays for a JSON array; ``NULL`` = absent). Built once per distinct
    combination of values (kernels repeat a few configurations), then spread over the rows
    by index."""
    import json

    n = chunk.num_rows
    keys: list[tuple[str, int, bool, bool]] = []  # key, width, array, text
    arrays: list[np.ndarray] = []
    texts_: list[list[str]] = []
    for f in layout:
        for c in f.columns:
            if f.is_text:  # a null reads as '' (code -1: the last entry)
                enc = chunk.column(c).combine_chunks().dictionary_encode()
                arrays.append(filled(enc.indices.cast(pa.int64()), -1))
                texts_.append([*enc.dictionary.to_pylist(), ""])
            else:
                arrays.append(col(chunk, c, NULL))
        keys.append((f.key, len(f.columns), f.array, f.is_text))
    for key, values in extra:
        group = values if isinstance(values, list) else [values]
        arrays.extend(v.astype(np.int64) for v in group)
        keys.append((key, len(group), isinstance(values, list), False))
    if not arrays:
        return dictionary(np.zeros(n, np.int32), ["{}"]).cast(pa.string())
    first, inverse = distinct_rows(arrays, n)
    out = []
    for row in zip(*(a[first].tolist() for a in arrays), strict=True):
        parts, i, t = [], 0, 0
        for key, width, array, is_text in keys:
            vals = row[i:i + width]
            i += width
            if is_text:
                vals = [texts_[t + j][v] for j, v in enumerate(vals)]
                t += width
                if not any(vals):
                    continue
                body = ",".join(json.dumps(v) for v in vals)
            else:
                if all(v == NULL for v in vals):
                    continue
                body = ",".join("null" if v == NULL else str(v) for v in vals)
            parts.append(f'"{key}":' + (f"[{body}]" if array else body))
        out.append("{" + ",".join(parts) + "}")
    return dictionary(inverse.astype(np.int32), out).cast(pa.string())
