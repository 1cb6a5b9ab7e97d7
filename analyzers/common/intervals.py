"""Vectorized interval arithmetic on half-open intervals [start, end) in integer ns.

A *union* is a pair of sorted, disjoint, non-touching arrays (starts, ends). All functions are
numpy-vectorized (no per-interval Python loops) so they scale to millions of events.
:func:`intersect` and :func:`subtract` of two unions pair each interval of one with the
intervals of the other it overlaps (two binary searches: no sort); pairs of arrays that are not
in that form (overlapping or unsorted intervals) are merged by a sweep over their boundaries.
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
    if s.size > 1 and not bool((s[1:] >= s[:-1]).all()):  # (sorted already: as is)
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


def _canonical(u: Union) -> bool:
    """Whether ``u`` is a union: sorted, disjoint, non-touching, no empty interval."""
    s, e = u
    return bool((e > s).all()) and bool((s[1:] > e[:-1]).all())


def _pieces(a: Union, b: Union) -> Union:
    """``a`` ∩ ``b`` of two unions: each interval of ``a`` cut by every interval of ``b`` it
    overlaps (found by binary search); the pieces come out sorted, disjoint and non-touching,
    as both inputs are."""
    (a_s, a_e), (b_s, b_e) = a, b
    lo = np.searchsorted(b_e, a_s, side="right")  # the first of b ending after a's start
    hi = np.searchsorted(b_s, a_e, side="left")  # past the last of b starting before a's end
    cnt = np.maximum(hi - lo, 0)
    n = int(cnt.sum())
    if n == 0:
        return EMPTY
    ai = np.repeat(np.arange(a_s.size), cnt)
    bj = lo[ai] + (np.arange(n) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    s = np.maximum(a_s[ai], b_s[bj])
    e = np.minimum(a_e[ai], b_e[bj])
    keep = e > s
    return s[keep], e[keep]


def _as_int(u: Union) -> Union:
    return np.asarray(u[0], dtype=np.int64), np.asarray(u[1], dtype=np.int64)


def intersect(a: Union, b: Union) -> Union:
    """Intersection of two unions."""
    if a[0].size == 0 or b[0].size == 0:
        return EMPTY
    a, b = _as_int(a), _as_int(b)
    if _canonical(a) and _canonical(b):
        return _pieces(a, b)
    return _sweep(a, b, keep_b=True)


def subtract(a: Union, b: Union) -> Union:
    """Parts of ``a`` not covered by ``b``."""
    if a[0].size == 0:
        return EMPTY
    if b[0].size == 0:
        return a
    a, b = _as_int(a), _as_int(b)
    if _canonical(a) and _canonical(b):
        # a ∩ (the gaps of b, from -inf to +inf): a union too
        lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
        gs, ge = np.r_[lo, b[1]], np.r_[b[0], hi]
        keep = ge > gs
        return _pieces(a, (gs[keep], ge[keep]))
    return _sweep(a, b, keep_b=False)


def _sweep(a: Union, b: Union, keep_b: bool) -> Union:
    """``a`` ∩ ``b`` (``keep_b``) or ``a`` minus ``b`` of any intervals: coverage counts of
    ``a`` and ``b`` over the elementary segments between all their boundaries."""
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
    in_b = cb[:-1] > 0 if keep_b else cb[:-1] <= 0
    sel = (ca[:-1] > 0) & in_b & (seg_e > seg_s)
    return union(seg_s[sel], seg_e[sel])


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
