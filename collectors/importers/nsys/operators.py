"""The innermost ``emit_nvtx`` operator range holding a time on a thread: how a runtime call
(and through its correlation id, the device task it launched) gets its operator's id as
``external_id``, the link Kineto writes as "External id".

Push/pop ranges nest, so a thread's ranges fall into depth levels within which they do not
overlap: a range's depth is the number of ranges open when it starts (those started before
it minus those ended by then, two sorted searches). A time's innermost range is found with
one ``searchsorted`` per level, deepest match winning: numpy over all the calls of a thread
at once, no loop over events.
"""

from __future__ import annotations

import numpy as np


class OpIndex:
    def __init__(self) -> None:
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        #: thread -> [(starts, ends, op ids)] per depth level
        self._levels: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}

    def add(self, tid: np.ndarray, start: np.ndarray, end: np.ndarray, op: np.ndarray) -> None:
        keep = op >= 0
        if keep.any():
            self._parts.append((tid[keep], start[keep], end[keep], op[keep]))

    def seal(self) -> None:
        if not self._parts:
            return
        tid, start, end, op = (np.concatenate([p[i] for p in self._parts]) for i in range(4))
        self._parts = []
        order = np.lexsort((-end, start, tid))  # by thread, start, the enclosing one first
        tid, start, end, op = tid[order], start[order], end[order], op[order]
        bounds = np.flatnonzero(np.diff(tid)) + 1
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(tid)], strict=True):
            s, e, o = start[lo:hi], end[lo:hi], op[lo:hi]
            depth = np.arange(len(s)) - np.searchsorted(np.sort(e), s, side="right")
            self._levels[int(tid[lo])] = [
                (s[depth == d], e[depth == d], o[depth == d])
                for d in range(int(depth.max()) + 1) if (depth == d).any()]

    def at(self, tid: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Per (thread, time): the op id of the innermost range holding it; -1 where none."""
        out = np.full(len(ts), -1, np.int64)
        if not self._levels or not len(ts):
            return out
        for t in np.unique(tid).tolist():
            levels = self._levels.get(t)
            if not levels:
                continue
            rows = np.flatnonzero(tid == t)
            when = ts[rows]
            for s, e, o in levels:  # outermost first: a deeper hit overwrites
                i = np.searchsorted(s, when, side="right") - 1
                ok = (i >= 0) & (when <= e[np.maximum(i, 0)])
                out[rows[ok]] = o[i[ok]]
        return out
