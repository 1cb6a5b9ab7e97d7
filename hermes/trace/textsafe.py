"""Text and numbers every Hermes output can hold: valid UTF-8, XML-safe, finite JSON.

What Hermes writes must read back with its own reader and with the usual ones (pyarrow, ``json``,
an XML parser). Inputs can hold what those refuse: invalid UTF-8 bytes in a profiler's args, a
lone UTF-16 surrogate in a file name decoded with ``surrogateescape``, control characters that
XML 1.0 forbids even escaped, ``NaN`` and infinities that JSON has no spelling for. Each is
replaced where it would be written, never refused:

* :func:`clean_text`: lone surrogates -> U+FFFD (the rest of the string unchanged);
* :func:`xml_text`: also the characters XML 1.0 cannot hold -> U+FFFD;
* :func:`finite`: a JSON-ready copy of a document, non-finite floats -> ``None`` and strings
  cleaned; :func:`dumps` dumps it with ``allow_nan=False`` (the proof that none is left);
* :func:`repair_utf8`: an Arrow string column with invalid UTF-8 bytes replaced by U+FFFD and
  how many values were changed (the writer notes the count in the trace's metadata).
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (imported where used: the CLI imports this module before numpy)
    import pyarrow as pa

_SURROGATE = re.compile("[\ud800-\udfff]")
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
REPLACEMENT = "\ufffd"


def clean_text(s: str) -> str:
    """``s`` encodable as UTF-8: each lone surrogate replaced by U+FFFD."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(REPLACEMENT, s)
    return s


def xml_text(s: str) -> str:
    """``s`` as XML 1.0 can hold it (escaping aside): forbidden characters -> U+FFFD."""
    return _NOT_XML.sub(REPLACEMENT, s)


def finite(x: Any) -> Any:
    """A copy of a JSON-like document with non-finite floats as None and clean strings."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, str):
        return clean_text(x)
    if isinstance(x, dict):
        return {clean_text(str(k)): finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalars
        return finite(x.item())
    return x


def dumps(obj: Any, **kw: Any) -> str:
    """``json.dumps`` of :func:`finite` ``(obj)``: valid JSON (no NaN/Infinity), UTF-8-safe."""
    kw.setdefault("ensure_ascii", False)
    return json.dumps(finite(obj), allow_nan=False, **kw)


def _decoded(values: list[bytes | None]) -> tuple[list[str | None], list[int]]:
    """Values decoded, invalid bytes replaced; the positions that needed it."""
    out: list[str | None] = []
    bad: list[int] = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(v.decode("utf-8"))
        except UnicodeDecodeError:
            out.append(v.decode("utf-8", "replace"))
            bad.append(i)
    return out, bad


def repair_utf8(arr: pa.Array) -> tuple[pa.Array, int]:
    """``arr`` (string, large string or dictionary of strings) with invalid UTF-8 replaced, and
    the number of values (rows) changed; 0: ``arr`` itself, checked in one C pass."""
    import pyarrow as pa
    import pyarrow.compute as pc

    target = arr.dictionary if pa.types.is_dictionary(arr.type) else arr
    if not (pa.types.is_string(target.type) or pa.types.is_large_string(target.type)):
        return arr, 0
    try:
        target.validate(full=True)
        return arr, 0
    except pa.ArrowInvalid:
        pass
    binary = pa.large_binary() if pa.types.is_large_string(target.type) else pa.binary()
    values, bad = _decoded(target.view(binary).to_pylist())
    fixed = pa.array(values, type=target.type)
    if not pa.types.is_dictionary(arr.type):
        return fixed, len(bad)
    rows = int(pc.sum(pc.is_in(arr.indices, value_set=pa.array(bad, arr.indices.type)))
               .as_py() or 0)
    # replaced values may now coincide: encode again through plain strings
    enc = fixed.take(arr.indices).dictionary_encode()
    return pa.DictionaryArray.from_arrays(enc.indices.cast(arr.type.index_type),
                                          enc.dictionary), rows
