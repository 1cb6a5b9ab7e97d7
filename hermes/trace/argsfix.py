"""The ``args`` rule of the trace format, kept by every writer: each value is a JSON object
(or null).

A profiler can write anything under ``args``: a string, a list, a number, ``null``. What a
writer is handed that is not an object is stored as an object that keeps it (see
docs/trace-format.md, "args"):

* JSON ``null`` or an empty/blank text -> null (no args);
* any other JSON value ``v`` -> ``{"value": v}``;
* text that is not JSON at all -> ``{"value": "<the text>"}``.

Rows already starting with ``{`` are left as they are (one vectorized test per batch); the
others are few and are fixed one by one. The writer counts them (``extra.repaired``).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from hermes.trace.textsafe import dumps


def wrapped(text: str) -> str | None:
    """The stored form of one ``args`` text that does not start with ``{``."""
    body = text.strip()
    if not body:
        return None
    if body.startswith("{"):
        return body
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return dumps({"value": text})
    if value is None:
        return None
    return dumps({"value": value})


def _not_objects(chunk: pa.Array) -> np.ndarray:
    """Rows of a string chunk that are not null and do not start with ``{``, read from the
    Arrow buffers with numpy (pyarrow.compute costs an import a Kineto import never needs)."""
    n = len(chunk)
    validity, offsets, data = chunk.buffers()
    width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
    off = np.frombuffer(offsets, width)[chunk.offset: chunk.offset + n + 1].astype(np.int64)
    raw = np.frombuffer(data, np.uint8) if data is not None and data.size else \
        np.zeros(1, np.uint8)
    first = raw[np.minimum(off[:-1], len(raw) - 1)]
    bad = (first != ord("{")) | (off[1:] == off[:-1])
    if validity is not None and chunk.null_count:
        bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")
        bad &= bits[chunk.offset: chunk.offset + n].astype(bool)
    return np.flatnonzero(bad)


def _wrap_chunk(chunk: pa.Array) -> tuple[pa.Array, int]:
    if chunk.null_count == len(chunk):
        return chunk, 0
    rows = _not_objects(chunk).tolist()
    if not rows:
        return chunk, 0
    values = chunk.to_pylist()
    changed = 0
    for i in rows:
        new = wrapped(values[i])
        if new != values[i]:
            values[i] = new
            changed += 1
    return pa.array(values, type=chunk.type), changed


def wrap_args(col: pa.ChunkedArray | pa.Array) -> tuple[pa.ChunkedArray, int]:
    """``col`` (the args column) with every value a JSON object or null, and how many rows
    were changed."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    out, changed = [], 0
    for chunk in chunks:
        fixed, n = _wrap_chunk(chunk)
        out.append(fixed)
        changed += n
    return pa.chunked_array(out, type=col.type), changed
