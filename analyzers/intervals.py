"""Vectorized interval arithmetic on half-open intervals [start, end) in integer ns.

A *union* is a pair of sorted, disjoint, non-touching arrays (starts, ends). All functions are
numpy-vectorized (no per-interval Python loops) so they scale to millions of events.
"""

from __future__ import annotations

import numpy as np

Union = tuple[np.ndarray, np.ndarray]
EMPTY: Union = (np.empty(0, np.int64), np.empty(0, np.int64))


def union(starts: np.ndarray, ends: np.ndarray) -> Union:
    """Merge intervals into a sorted disjoint union (zero-length intervals are dropped)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size == 0:
        return EMPTY
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    run_end = np.maximum.accumulate(e)
    # a new merged interval starts where the start lies beyond every earlier end
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    out_s = s[idx]
    out_e = np.maximum.reduceat(e, idx)
    return out_s, out_e


def total(u: Union) -> int:
    return int((u[1] - u[0]).sum())


def clip(u: Union, lo: int, hi: int) -> Union:
    """Restrict a union to [lo, hi)."""
    s = np.clip(u[0], lo, hi)
    e = np.clip(u[1], lo, hi)
    keep = e > s
    return s[keep], e[keep]


def intersect(a: Union, b: Union) -> Union:
    """Intersection of two unions."""
    if a[0].size == 0 or b[0].size == 0:
        return EMPTY
    # Sweep over all boundaries: coverage count of a and b at each elementary segment.
    pts = np.concatenate([a[0], a[1], b[0], b[1]])
    delta_a = np.concatenate([np.ones(a[0].size), -np.ones(a[1].size),
                              np.zeros(b[0].size * 2)]).astype(np.int64)
    delta_b = np.concatenate([np.zeros(a[0].size * 2), np.ones(b[0].size),
                              -np.ones(b[1].size)]).astype(np.int64)
    order = np.argsort(pts, kind="stable")
    pts, delta_a, delta_b = pts[order], delta_a[order], delta_b[order]
    ca = np.cumsum(delta_a)
    cb = np.cumsum(delta_b)
    seg_s, seg_e = pts[:-1], pts[1:]
    both = (ca[:-1] > 0) & (cb[:-1] > 0) & (seg_e > seg_s)
    return union(seg_s[both], seg_e[both])


def subtract(a: Union, b: Union) -> Union:
    """Parts of ``a`` not covered by ``b``."""
    if a[0].size == 0:
        return EMPTY
    if b[0].size == 0:
        return a
    pts = np.concatenate([a[0], a[1], b[0], b[1]])
    delta_a = np.concatenate([np.ones(a[0].size), -np.ones(a[1].size),
                              np.zeros(b[0].size * 2)]).astype(np.int64)
    delta_b = np.concatenate([np.zeros(a[0].size * 2), np.ones(b[0].size),
                              -np.ones(b[1].size)]).astype(np.int64)
    order = np.argsort(pts, kind="stable")
    pts, delta_a, delta_b = pts[order], delta_a[order], delta_b[order]
    ca = np.cumsum(delta_a)
    cb = np.cumsum(delta_b)
    seg_s, seg_e = pts[:-1], pts[1:]
    only_a = (ca[:-1] > 0) & (cb[:-1] <= 0) & (seg_e > seg_s)
    return union(seg_s[only_a], seg_e[only_a])


def overlap_per_interval(starts: np.ndarray, ends: np.ndarray, u: Union) -> np.ndarray:
    """For each interval [starts[i], ends[i]), the length covered by union ``u`` (vectorized
    with prefix sums over the union)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if u[0].size == 0 or s.size == 0:
        return np.zeros(s.size, dtype=np.int64)
    us, ue = u
    cum = np.concatenate([[0], np.cumsum(ue - us)])

    def covered_before(t: np.ndarray) -> np.ndarray:
        # total union length in (-inf, t)
        k = np.searchsorted(us, t, side="right")  # intervals starting at or before t
        full = cum[np.maximum(k - 1, 0)]
        last_s = us[np.maximum(k - 1, 0)]
        last_e = ue[np.maximum(k - 1, 0)]
        part = np.clip(np.minimum(t, last_e) - last_s, 0, None)
        return np.where(k > 0, full + part, 0)

    return covered_before(e) - covered_before(s)
