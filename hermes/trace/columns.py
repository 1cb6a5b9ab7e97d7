"""Columns out of lists of Python objects: one field of every object, as a list or a numpy
array, and dictionary codes of a list of values.

The Kineto importer decodes events into msgspec structs, then reads each field of every event
into a column. In Python each such pass is a call through ``map`` and ``attrgetter`` per event
(``np.fromiter(map(attrgetter("ts"), events), np.float64, n)``): together they cost about as
much as decoding the JSON. The compiled module ``hermes.trace._columns`` (``_columns.c``,
built by ``pip install``; optional) does the same passes in C, reading a field from the slot
where the object's type keeps it.

Each function here returns exactly what the Python expression in its docstring returns, with
or without the compiled module: the C code takes only the plain cases (exact floats, exact
ints within int64, bytes-like items) and says so when a value is anything else, and the
Python expression then runs. ``HERMES_NO_EXTENSION=1`` (read at import) runs the Python
expressions always; ``NATIVE`` says which is in use.
"""

from __future__ import annotations

import os
from collections import defaultdict
from itertools import count
from operator import attrgetter

import numpy as np

try:
    if os.environ.get("HERMES_NO_EXTENSION", "") not in ("", "0"):
        raise ImportError("HERMES_NO_EXTENSION is set")
    from hermes.trace import _columns as _c
except ImportError:  # not compiled (no C compiler at install time), or switched off
    _c = None

#: whether the compiled passes are in use
NATIVE = _c is not None


def _listlike(items: object, method: str = "__iter__") -> bool:
    """Whether ``items`` is a list whose iteration (or indexing) is list's own: what the C
    passes read (a list subclass such as the importer's ``ArgsList`` qualifies)."""
    return isinstance(items, list) and getattr(type(items), method) is getattr(list, method)


def objects(items: list, name: str) -> list:
    """``list(map(attrgetter(name), items))``."""
    if _c is not None and _listlike(items):
        return _c.objects(items, name)  # type: ignore[no-any-return]
    return list(map(attrgetter(name), items))


def floats(items: list, name: str) -> np.ndarray:
    """``np.fromiter(map(attrgetter(name), items), np.float64, len(items))``."""
    n = len(items)
    if _c is not None and _listlike(items):
        out = np.empty(n, np.float64)
        if _c.floats(items, name, out):
            return out
    return np.fromiter(map(attrgetter(name), items), np.float64, n)


def ints(items: list, name: str | None = None) -> np.ndarray:
    """``np.fromiter(map(attrgetter(name), items), np.int64, len(items))``; with no name,
    ``np.fromiter(items, np.int64, len(items))`` (the same errors where a value does not fit)."""
    n = len(items)
    if _c is not None and _listlike(items):
        out = np.empty(n, np.int64)
        if _c.ints(items, name, out):
            return out
    values = items if name is None else map(attrgetter(name), items)
    return np.fromiter(values, np.int64, n)


def lengths(items: list) -> np.ndarray:
    """``np.fromiter(map(len, items), np.int64, len(items))``."""
    n = len(items)
    if _c is not None and _listlike(items):
        out = np.empty(n, np.int64)
        if _c.lengths(items, out):
            return out
    return np.fromiter(map(len, items), np.int64, n)


def codes(values: list, name: str | None = None) -> tuple[np.ndarray, list]:
    """Dictionary codes of hashable values: (int32 codes, the distinct values in order of first
    appearance); equal values share a code, as dict keys do (the first one met is kept). With
    ``name``: of ``objects(values, name)``, without making that list."""
    if name is not None:
        if _c is not None and _listlike(values):
            out = np.empty(len(values), np.int32)
            return out, _c.codes(values, out, name)
        values = objects(values, name)
    n = len(values)
    if n and values[-1] == values[0] == values[n >> 1] and values.count(values[0]) == n:
        return np.zeros(n, np.int32), [values[0]]  # one value (a chunk of metadata, say)
    if _c is not None and _listlike(values):
        out = np.empty(n, np.int32)
        return out, _c.codes(values, out)
    # one pass in C: a missing key gets the next number, in order of first appearance
    keys: defaultdict = defaultdict(count().__next__)
    return np.fromiter(map(keys.__getitem__, values), np.int32, n), list(keys)


def take(items: list, rows: np.ndarray) -> list:
    """``[items[i] for i in rows]``."""
    if _c is not None and _listlike(items, "__getitem__") and rows.dtype.kind == "i":
        return _c.take(items, np.ascontiguousarray(rows, np.int64))  # type: ignore
    return list(map(items.__getitem__, rows.tolist()))
