"""Arrow arrays straight from numpy buffers and Python strings, without ``pa.array`` (the
importers and the in-memory writer build their tables with these).

``pa.array`` on anything but an Arrow array first asks whether the input is a pandas object,
which imports pandas (time and memory: docs/benchmarks.md) into the import process on first use. The import
path never needs pandas, so it builds its arrays from buffers: zero-copy for numpy columns,
one ``b"".join`` for strings.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from hermes.trace.columns import lengths

_TYPES = {np.dtype(np.int8): pa.int8(), np.dtype(np.int16): pa.int16(),
          np.dtype(np.int32): pa.int32(), np.dtype(np.int64): pa.int64(),
          np.dtype(np.uint8): pa.uint8(), np.dtype(np.float64): pa.float64(),
          np.dtype(np.float32): pa.float32()}


def from_numpy(values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """A primitive Arrow array over ``values`` (int/float/bool numpy); ``mask`` True = null.
    Booleans are packed into Arrow's bitmap (a copy: 1 bit a value)."""
    values = np.ascontiguousarray(values)
    if values.dtype == np.bool_:
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
        valid = None if mask is None or not np.any(mask) else \
            pa.py_buffer(np.packbits(~np.asarray(mask, bool), bitorder="little"))
        return pa.Array.from_buffers(pa.bool_(), len(values), [valid, data])
    typ = _TYPES[values.dtype]
    n = len(values)
    validity = None
    nulls = 0
    if mask is not None:
        nulls = int(np.count_nonzero(mask))
        if nulls:
            validity = pa.py_buffer(np.packbits(~np.asarray(mask, bool), bitorder="little"))
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(values)], null_count=nulls)


def strings(values: Sequence[str]) -> pa.StringArray:
    """A string array of Python ``str`` (no nulls)."""
    enc = [s.encode("utf-8", "surrogatepass") for s in values]
    return utf8_buffers(enc)


def utf8_buffers(texts: Sequence[bytes], joined: bytes | None = None) -> pa.Array:
    """A string array over UTF-8 byte strings (bytes or ``msgspec.Raw``), one join, no copies
    per row (``joined``: that join, when the caller has it). Uses 64-bit offsets (large_string,
    cast back) only past 2 GB of text."""
    n = len(texts)
    lens = lengths(texts)
    total = int(lens.sum())
    large = total >= 2 ** 31
    offsets = np.zeros(n + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(lens, out=offsets[1:])
    if joined is None or len(joined) != total:
        joined = b"".join(texts)
    data = pa.py_buffer(joined)
    if large:
        return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), data])
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), data])


def dictionary(codes: np.ndarray, values: Sequence[str] | pa.Array,
               mask: np.ndarray | None = None) -> pa.DictionaryArray:
    """A dictionary<int32, string> array: ``codes`` index ``values``; ``mask`` True = null."""
    dict_arr = values if isinstance(values, pa.Array) else strings(values)
    idx = from_numpy(np.asarray(codes, dtype=np.int32), mask)
    return pa.DictionaryArray.from_arrays(idx, dict_arr)


def full(n: int, value: int, dtype: type = np.int32) -> pa.Array:
    return from_numpy(np.full(n, value, dtype))


def to_numpy(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values of a primitive array without nulls as numpy, zero-copy (``Array.to_numpy``
    imports pandas on first use)."""
    if isinstance(arr, pa.ChunkedArray):
        parts = [to_numpy(c) for c in arr.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, arr.type.to_pandas_dtype())
    dtype = {v: k for k, v in _TYPES.items()}[arr.type]
    data = arr.buffers()[1]
    return np.frombuffer(data, dtype=dtype, count=arr.offset + len(arr))[arr.offset:]


def valid(arr: pa.Array) -> np.ndarray:
    """Per row, True where ``arr`` holds a value (not null), read from its validity bitmap
    (``is_valid().to_numpy`` imports pandas on first use)."""
    n = len(arr)
    bitmap = arr.buffers()[0]
    if arr.null_count == 0 or bitmap is None:
        return np.ones(n, bool)
    bits = np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little",
                         count=arr.offset + n)
    return bits[arr.offset:].astype(bool)


def filled(arr: pa.Array | pa.ChunkedArray, default: int) -> np.ndarray:
    """An integer array's values as numpy, ``default`` where null (``fill_null`` makes a
    scalar of ``default``, which imports pandas on first use)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    values = to_numpy(arr)
    return values if not arr.null_count else np.where(valid(arr), values, default)


def truths(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean array as numpy bools, nulls False."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    bits = np.unpackbits(np.frombuffer(arr.buffers()[1], np.uint8), bitorder="little",
                         count=arr.offset + len(arr))[arr.offset:].astype(bool)
    return bits & valid(arr) if arr.null_count else bits
