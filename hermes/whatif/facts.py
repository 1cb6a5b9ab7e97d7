"""Per-event facts of a step graph the what-if transforms read (kind, numbers, text, duration)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from hermes.trace.args import args_of
from hermes.whatif.replay import StepGraph


def kinds(sg: StepGraph) -> np.ndarray:
    """Each graph event's kind as text (an object array; NaN where unknown), what
    ``astype(str)`` gives -- of a categorical column from its categories, one string per
    category, not one conversion per event."""
    k = sg.info["kind"]
    if isinstance(k.dtype, pd.CategoricalDtype):
        text = np.array([str(c) for c in k.cat.categories] + [np.nan], dtype=object)
        return text[k.cat.codes.to_numpy()]  # (code -1, missing: the last, NaN)
    return k.astype(str).to_numpy()


def number(sg: StepGraph, col: str) -> np.ndarray:
    """Column ``col`` of the graph's events as float (NaN where unknown or absent)."""
    if col not in sg.info.columns:
        return np.full(len(sg.info), np.nan)
    return np.asarray(pd.to_numeric(sg.info[col], errors="coerce"), np.float64)


def text(sg: StepGraph, col: str) -> np.ndarray:
    if col not in sg.info.columns:
        return np.full(len(sg.info), "", object)
    return sg.info[col].astype(object).where(sg.info[col].notna(), "").astype(str).to_numpy()


def args_at(sg: StepGraph, rows: np.ndarray) -> pd.Series | None:
    """The ``args`` text of graph events ``rows`` (index: ``rows``; None: the trace has no
    args): taken from the events for those rows only (no copy of every event's text; a trace
    loaded with ``lazy_args`` reads just those rows' from its file)."""
    if sg.args is None:
        return None
    src = sg.info["src"].to_numpy(np.int64)[rows]
    return pd.Series(args_of(sg.args, src).array, index=sg.info.index[rows], name="args")


def args_mention(sg: StepGraph, keys: tuple[str, ...]) -> bool:
    """False when no event's ``args`` text holds any of ``keys`` quoted (``"key"``, as a JSON
    key is written; the per-event lookups search the same text),
    so a transform need not take its events' args at all; True when one may (or when that is
    not known without reading them: args left in the file). One literal search over the
    args column's Arrow text, in place (no Python string per event); a match across two
    events' texts only reads True, which asks for the exact per-event look."""
    if sg.args is None:
        return False
    # (kept on the graph with the events it was found in: each transform of a set asks again)
    got = sg.memo.get(("args_mention", keys))
    if got is not None and got[0] is sg.args:
        return got[1]
    col = sg.args["args"] if "args" in sg.args.columns else None
    to_arrow = getattr(getattr(col, "array", None), "__arrow_array__", None)
    found = True if to_arrow is None else mentions(to_arrow(), keys)
    sg.memo[("args_mention", keys)] = (sg.args, found)
    return found


def mentions(arr: Any, keys: tuple[str, ...]) -> bool:
    """:func:`args_mention` of an Arrow (chunked) string array: False when no value holds any
    of ``keys`` quoted; True when one may (a type other than strings included)."""
    import pyarrow as pa

    chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
    pat = re.compile(b"|".join(re.escape(f'"{k}"'.encode()) for k in keys))
    for c in chunks:
        if not (pa.types.is_string(c.type) or pa.types.is_large_string(c.type)):
            return True
        if len(c) == c.null_count:
            continue
        offsets, data = c.buffers()[1], c.buffers()[2]
        if data is None:
            continue
        off = np.frombuffer(offsets, np.int64 if pa.types.is_large_string(c.type) else np.int32)
        lo, hi = int(off[c.offset]), int(off[c.offset + len(c)])
        if pat.search(memoryview(data)[lo:hi]):
            return True
    return False


def duration(sg: StepGraph) -> np.ndarray:
    return (sg.info["end"] - sg.info["start"]).to_numpy(np.float64)
