"""Compiled passes of the critical path over groups of steps (numba, ``dagpath.compiled``:
cached; imported only on graphs of ``cpgraph.DAG_MIN_NODES`` nodes or more, where
numba is imported anyway): which events each group of steps holds (:func:`members`), their cut
at step borders (:func:`split`), the longest path of every step of a solved group read back
into path time per event (:func:`step_paths`), and the reduction of the analyzer's tables
group by group (:func:`accumulate`, :func:`medians`). Each gives exactly what the numpy code
it replaces gives (``tests/analyzers/test_cp_chunks.py``)."""

from __future__ import annotations

import numpy as np

from hermes.analyzers.critical_path.dagpath import compiled


def _i64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.int64)


@compiled
def _members(lo, hi, chunk, like):  # pragma: no cover - compiled
    nc = chunk[-1] + 1 if chunk.size else 0
    ptr = np.zeros(nc + 1, np.int64)
    for i in range(lo.size):
        if lo[i] < hi[i]:
            for c in range(chunk[lo[i]], chunk[hi[i] - 1] + 1):
                ptr[c + 1] += 1
    for c in range(nc):
        ptr[c + 1] += ptr[c]
    out = np.empty(ptr[nc], like.dtype)
    pos = ptr[:nc].copy()
    for i in range(lo.size):
        if lo[i] < hi[i]:
            for c in range(chunk[lo[i]], chunk[hi[i] - 1] + 1):
                out[pos[c]] = i
                pos[c] += 1
    return ptr, out


@compiled
def _split(ts, te, sel, lo, hi, ws, we, a, b):  # pragma: no cover - compiled
    m = 0
    for j in range(sel.size):
        i = sel[j]
        m += max(min(hi[i], b) - max(lo[i], a), 0)
    s = np.empty(m, np.int64)
    e = np.empty(m, np.int64)
    win = np.empty(m, np.int64)
    src = np.empty(m, np.int64)
    k = 0
    for j in range(sel.size):
        i = sel[j]
        for w in range(max(lo[i], a), min(hi[i], b)):
            cs = max(ts[i], ws[w])
            ce = min(te[i], we[w])
            if ce > cs:
                s[k] = cs
                e[k] = ce
                win[k] = w - a
                src[k] = i
                k += 1
    return s[:k].copy(), e[:k].copy(), win[:k].copy(), src[:k].copy()


@compiled
def _accumulate(key, win, comp, dur, cp, slack, count, dsum, csum, mn, by
                ):  # pragma: no cover - compiled
    for i in range(key.size):
        by[win[i], comp[i]] += cp[i]
        k = key[i]
        if k < 0:
            continue
        if count[k] == 0 or slack[i] < mn[k]:
            mn[k] = slack[i]
        count[k] += 1
        dsum[k] += dur[i]
        csum[k] += cp[i]


@compiled
def _medians(key, slack, count):  # pragma: no cover - compiled
    nk = count.size
    ptr = np.zeros(nk + 1, np.int64)
    for k in range(nk):
        ptr[k + 1] = ptr[k] + count[k]
    buf = np.empty(ptr[nk], np.float64)
    pos = ptr[:nk].copy()
    for i in range(key.size):
        k = key[i]
        if k >= 0:
            buf[pos[k]] = np.float64(slack[i])
            pos[k] += 1
    out = np.full(nk, np.nan)
    for k in range(nk):
        if count[k]:
            out[k] = np.median(buf[ptr[k]:ptr[k + 1]])
    return out


def accumulate(key: np.ndarray, win: np.ndarray, comp: np.ndarray, dur: np.ndarray,
               cp: np.ndarray, slack: np.ndarray, count: np.ndarray, dsum: np.ndarray,
               csum: np.ndarray, mn: np.ndarray, by: np.ndarray) -> None:
    """Adds one group of event copies to the running per-key tables (in place): ``count``,
    ``dsum`` (of ``dur``), ``csum`` (of ``cp``), ``mn`` (least ``slack``) per ``key`` (-1: in
    no key), and ``by[win, comp] += cp`` (``np.add.at``'s sums, exact int64)."""
    _accumulate(_i64(key), _i64(win), _i64(comp), _i64(dur), _i64(cp), _i64(slack), count,
                dsum, csum, mn, by)


def medians(key: np.ndarray, slack: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Median of ``slack`` per key (``count`` per key; NaN where 0), as pandas' groupby
    median: the values as float64, the mean of the two middle ones for an even count."""
    return _medians(np.ascontiguousarray(key), _i64(slack), _i64(count))


def members(lo: np.ndarray, hi: np.ndarray, chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Events of each group of windows: ``chunk`` is the group of each window (0, 1, ...,
    non-decreasing), event i overlaps windows ``lo[i]..hi[i] - 1``; returns (indptr, events):
    group c's events, ascending, are ``events[indptr[c]:indptr[c + 1]]`` (an event overlapping
    windows of several groups is in each)."""
    like = np.empty(0, np.int32 if lo.size < 2**31 - 1 else np.int64)  # (narrow: peak memory)
    return _members(np.ascontiguousarray(lo), np.ascontiguousarray(hi), _i64(chunk), like)


def split(ts: np.ndarray, te: np.ndarray, sel: np.ndarray, lo: np.ndarray, hi: np.ndarray,
          ws: np.ndarray, we: np.ndarray, a: int, b: int) -> tuple[np.ndarray, ...]:
    """``steps.split_by_windows`` of the events ``sel`` on the windows ``a..b - 1`` of the
    sorted windows (``ws``, ``we``), in one compiled pass: ``lo``/``hi`` are each event's first
    and end window in all windows (searchsorted already); returns (start, end, window - a,
    event), the same pieces in the same order."""
    return _split(_i64(ts), _i64(te), _i64(sel), np.ascontiguousarray(lo),
                  np.ascontiguousarray(hi), _i64(ws), _i64(we), int(a), int(b))




@compiled
def _step_paths(dist, pred, bounds, loader, lane, seg, w, key, ce, cw, n_ev
                ):  # pragma: no cover - compiled
    n = dist.size
    nw = bounds.size - 1
    length = np.zeros(nw, np.int64)
    gap = np.zeros(nw, np.int64)
    cpf = np.zeros(n_ev, np.float64)
    buf = np.empty(n + 1, np.int64)
    for i in range(nw):
        a, b = bounds[i], bounds[i + 1]
        if a == b:
            continue
        end = a
        best = -1 if loader[a] else dist[a]
        for k in range(a + 1, b):
            v = -1 if loader[k] else dist[k]
            if v > best:
                best = v
                end = k
        length[i] = dist[end]
        k, m = end, 1
        buf[0] = k
        while 0 <= pred[k] < n and m <= n:
            k = pred[k]
            buf[m] = k
            m += 1
        g = 0
        for j in range(m - 2, -1, -1):  # the path's edges, first to last
            u, v = buf[j + 1], buf[j]
            if v == u + 1 and lane[min(v, n - 1)] == lane[u]:
                e, wt = seg[v], w[v]
            else:
                e, wt = -1, 0
                if key.size:
                    x = np.searchsorted(key, u * n + v)
                    x = min(max(x, 0), key.size - 1)
                    e, wt = ce[x], cw[x]
            if e < 0:
                g += wt
            else:
                cpf[e] += wt
        gap[i] = g
    return length, gap, cpf


def step_paths(dist: np.ndarray, pred: np.ndarray, bounds: np.ndarray, loader: np.ndarray,
               lane: np.ndarray, seg: np.ndarray, w: np.ndarray, key: np.ndarray,
               ce: np.ndarray, cw: np.ndarray, n_ev: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The longest path of each step of one solved graph, read back as ``critical_path._solve``
    reads it (one step per slice ``bounds[i]:bounds[i + 1]`` of the nodes): the path ends at
    the step's farthest node that is not a loader's (``loader``; the first of equals), is
    walked back along ``pred``, and each edge's time goes to its event (a chain edge: the
    segment's event ``seg`` and weight ``w``; another edge: the first forward cross edge at or
    after its (u, v) key in the sorted ``key``, ``ce``/``cw``, as ``cpgraph.CrossIndex.find``)
    or, with no event, to the step's lane gaps. Returns (length, gap ns per step, path time
    per event as the float64 sums ``np.bincount`` makes in the same order)."""
    return _step_paths(_i64(dist), _i64(pred), _i64(bounds),
                       np.ascontiguousarray(loader, np.bool_), _i64(lane), _i64(seg), _i64(w),
                       _i64(key), _i64(ce), _i64(cw), int(n_ev))


@compiled
def _bounds(ts, te, ws, we, lo, hi):  # pragma: no cover - compiled
    nw = ws.size
    a = b = 0
    for i in range(ts.size):
        x, y = ts[i], te[i]
        # the answer for the event before holds again while times go up (one check), else a
        # binary search: the same indices as np.searchsorted
        if not ((a == 0 or we[a - 1] <= x) and (a == nw or we[a] > x)):
            a = np.searchsorted(we, x, side="right")
        if not ((b == 0 or ws[b - 1] < y) and (b == nw or ws[b] >= y)):
            b = np.searchsorted(ws, y, side="left")
        lo[i] = a
        hi[i] = b


def bounds(ts: np.ndarray, te: np.ndarray, ws: np.ndarray, we: np.ndarray, dtype: type
           ) -> tuple[np.ndarray, np.ndarray]:
    """Each event's first window and end window (``np.searchsorted(we, ts, 'right')``,
    ``np.searchsorted(ws, te, 'left')`` on sorted, non-overlapping windows) as ``dtype``, in
    one compiled pass that reuses the previous event's answer when it still holds (events in
    time order: one comparison each)."""
    lo, hi = np.empty(ts.size, dtype), np.empty(ts.size, dtype)
    _bounds(_i64(ts), _i64(te), _i64(ws), _i64(we), lo, hi)
    return lo, hi
