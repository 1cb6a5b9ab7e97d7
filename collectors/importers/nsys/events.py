"""Building a batch of Hermes events (Arrow columns of the trace schema) from numpy arrays:
kinds, lanes and names as dictionary codes, nullable integers with masks. Shared by every
table's mapping."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from hermes.trace.arrowbuf import dictionary, from_numpy, strings, to_numpy
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
    arr = table.column(name).combine_chunks()
    if arr.null_count:
        arr = arr.fill_null(default)
    return to_numpy(arr)


def bools(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow array as numpy (nulls False), without pandas."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:
        arr = arr.fill_null(False)
    bits = np.unpackbits(np.frombuffer(arr.buffers()[1], np.uint8), bitorder="little",
                         count=arr.offset + len(arr))
    return bits[arr.offset:].astype(bool)


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
