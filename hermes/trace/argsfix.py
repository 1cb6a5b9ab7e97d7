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

import pyarrow as pa
import pyarrow.compute as pc

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


def _wrap_chunk(chunk: pa.Array) -> tuple[pa.Array, int]:
    if chunk.null_count == len(chunk):
        return chunk, 0
    bad = pc.invert(pc.fill_null(pc.starts_with(chunk, "{"), True))
    n = int(pc.sum(bad).as_py() or 0)
    if not n:
        return chunk, 0
    values = chunk.to_pylist()
    rows = pc.indices_nonzero(bad).to_pylist()
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
