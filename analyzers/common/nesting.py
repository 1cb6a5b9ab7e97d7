"""Nesting of events on a lane: the order of their start/end nodes and the innermost event
active after each node (host call stacks, the step graph's segments)."""

from __future__ import annotations

import numpy as np


def node_order(ev_id: np.ndarray | None, tie: np.ndarray, is_start: np.ndarray, t: np.ndarray,
                lane: np.ndarray) -> np.ndarray:
    """``np.lexsort((ev_id, tie, is_start, t, lane))`` for nodes laid out as [starts, ends] of
    events 0..n-1 (so the input order is the ``ev_id`` order within equal other keys; None:
    that layout's ids, ``[0..n-1, 0..n-1]``): one int64 key (lane, t, is_start) sorted stably,
    ties by ``tie`` (:func:`sort_by_key`)."""
    if t.size == 0:
        return np.empty(0, np.int64)
    t0 = int(t.min())
    span = int(t.max()) - t0 + 1
    if (int(lane.max()) + 1) * span * 2 >= 2**62 or int(lane.min()) < 0:
        if ev_id is None:
            ev_id = np.tile(np.arange(t.size // 2), 2)
        return np.lexsort((ev_id, tie, is_start, t, lane))
    key = (lane * span + (t - t0)) * 2 + is_start
    return sort_by_key(key, tie)


def innermost_active(st: np.ndarray, nev: np.ndarray, ln: np.ndarray) -> np.ndarray:
    """Innermost event active after each node of nodes sorted by (lane, time) — ``st`` 1 for a
    start, 0 for an end, ``nev`` the node's event, ``ln`` its lane: after a start, that event;
    after an end, the event of the latest earlier start at the same nesting depth on the lane
    (the enclosing event); -1 where none. Vectorized: the starts sorted by (depth, position)
    (a radix sort of the depths), one search for every end."""
    n = st.size
    is_start = st == 1
    step = is_start.astype(np.int8)  # +1 at a start, -1 at an end
    step += step
    step -= 1
    depth = np.cumsum(step, dtype=np.int32 if n < 2**31 else np.int64)
    del step
    active = np.where(is_start, nev, -1)
    starts = np.flatnonzero(is_start)
    q = np.flatnonzero(~is_start & (depth > 0))
    if q.size == 0 or starts.size == 0:
        return active
    ds = depth[starts]
    o = np.argsort(ds.astype(np.int16) if ds.max() < 2**15 else ds, kind="stable")
    starts = starts[o]
    k = np.searchsorted(ds[o].astype(np.int64) * n + starts,
                        depth[q].astype(np.int64) * n + q) - 1
    j = starts[np.maximum(k, 0)]
    ok = (k >= 0) & (depth[j] == depth[q]) & (ln[j] == ln[q])
    active[q[ok]] = nev[j[ok]]
    return active


def sort_by_key(key: np.ndarray, tie: np.ndarray) -> np.ndarray:
    """The permutation of ``np.lexsort((tie, key))`` (stable: equal pairs keep their order),
    computed as one stable argsort of ``key`` -- a merge of the already sorted runs the graph's
    arrays consist of, far cheaper than lexsort's sorts of every key -- followed by a lexsort
    of only the runs of equal keys."""
    a = np.argsort(key, kind="stable")
    ks = key[a]
    eq = ks[1:] == ks[:-1]
    if eq.any():
        m = np.zeros(ks.size, bool)
        m[1:] |= eq
        m[:-1] |= eq
        p = np.flatnonzero(m)
        a[p] = a[p][np.lexsort((tie[a[p]], ks[p]))]
    return a


def event_nodes(ev, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                              np.ndarray]:
    """The start and end nodes of the events ``idx`` (rows of the frame ``ev``) in lane and
    time order -- at equal times ends before starts, starts outer (longer) first, ends inner
    first -- and the innermost event active after each: (t, lane, is_start, event position in
    ``idx``, active)."""
    n = idx.size
    s = ev["ts_ns"].to_numpy(np.int64)[idx]
    d = ev["dur_ns"].to_numpy(np.int64)[idx]
    lane = ev["lane"].astype("category").cat.codes.to_numpy().astype(np.int64)[idx]
    t = np.concatenate([s, s + d])
    ln = np.concatenate([lane, lane])
    st = np.concatenate([np.ones(n, np.int64), np.zeros(n, np.int64)])
    eid = np.concatenate([np.arange(n), np.arange(n)])
    order = node_order(eid, np.concatenate([-d, d]), st, t, ln)
    t, ln, st, eid = t[order], ln[order], st[order], eid[order]
    return t, ln, st, eid, innermost_active(st, eid, ln)
