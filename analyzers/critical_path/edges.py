"""Cross-lane edges of the step graph (``stepgraph.build_sel`` calls
:func:`cross_edges`): launch -> device task by correlation id, traced ('Stream Wait Event') and
inferred cross-stream waits, awaited device task -> sync end, awaited loader event -> data-wait
end. Each function appends edges (from node, to node, weight, launching event or -1) to lists
and adjusts the chain weights ``w`` in place where a gap turns out to be a wait
(docs/analysis/critical_path.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hermes.trace.schema import (
    COMM_KINDS,
    COMPUTE_KINDS,
    EVENT_KINDS,
    HOST_LANES,
    LANE_KINDS,
    NOT_WORK_KINDS,
)

_KIND = {k: i for i, k in enumerate(EVENT_KINDS)}
_LANE = {k: i for i, k in enumerate(LANE_KINDS)}
#: a task starting at most this long after another stream's task ended, after an idle gap on its
#: own stream, is taken to have waited for it (cross-stream event waits are rarely traced)
LINE_UP_NS = 20_000
#: a host thread that resumes after an idle gap of at least HOST_WAIT_MIN_NS at most
#: HOST_WAKE_NS after another thread's event (or a collective) ended is taken to have waited for
#: it: a thread woken by another takes tens to hundreds of microseconds to run again
HOST_WAKE_NS = 500_000
HOST_WAIT_MIN_NS = 1_000_000


def _in(codes: np.ndarray, vocab: dict[str, int], names: tuple[str, ...]) -> np.ndarray:
    """Membership of small-int codes (-1: unknown) in ``names``: one table lookup."""
    table = np.zeros(len(vocab) + 1, bool)  # (the last entry: code -1)
    table[[vocab[x] for x in names]] = True
    return table[codes]


def _inferred_stream_waits(task: np.ndarray, wkey: np.ndarray, s: np.ndarray, win: np.ndarray,
                           start_node: np.ndarray, end_node: np.ndarray, t: np.ndarray,
                           w: np.ndarray, prev_t: np.ndarray, us: list, vs: list,
                           ws_: list, es: list, skip: np.ndarray,
                           awaited: np.ndarray | None = None, lane: np.ndarray | None = None,
                           line_up: int = LINE_UP_NS, min_gap: int = 0,
                           by_key: np.ndarray | None = None,
                           marks: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """Cross-stream dependencies inferred where a task on another stream ends just before a
    task starts after an idle gap on its own stream (events/waits between streams are often not
    in the trace): edge (that end -> this start), weight = the small delay; the gap on the
    waiting stream then weighs 0 (it was a wait). Appends to the edge lists; modifies ``w``;
    returns the mask of events whose start is explained this way (``skip``: tasks whose start
    is explained already, by a traced event wait). ``by_key``: every event's stable order by
    ``wkey`` (computed here when not given). ``marks``: user ranges (lane, start, end) of the
    waiting lanes: a task that no end lines up with is tried again with its lane's wake-up
    (:func:`resumed_at`: where a user range opens in its gap); the edge still carries the
    delay to the task."""
    explained = np.zeros(s.size, bool)
    awaited = task if awaited is None else awaited
    tasks = np.flatnonzero(task & ~skip)
    if tasks.size < 1 or np.count_nonzero(task | awaited) < 2 or not awaited.any():
        return explained
    k = start_node[tasks]
    gap = t[k] - prev_t[k] > min_gap
    tasks, k = tasks[gap], k[gap]
    o = _sorted_subset(awaited, wkey, by_key)

    def awaited_before(woke: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # the latest task end at or before the start (or wake-up), inside the idle gap (so on
        # another stream: this stream was idle), in the same step, at most LINE_UP_NS earlier
        start_key = wkey[tasks] - (t[end_node[tasks]] - woke)  # (step, wake) on wkey's scale
        j = np.searchsorted(wkey[o], start_key, side="right") - 1
        cand = o[np.maximum(j, 0)]
        end_t = t[end_node[cand]]
        ok = (j >= 0) & (win[cand] == win[tasks]) & (end_t > prev_t[k]) & (end_t <= woke) & \
            (woke - end_t <= line_up)
        if lane is not None:
            ok &= lane[cand] != lane[tasks]
        return cand, end_t, ok

    cand, end_t, ok = awaited_before(t[k])
    if marks is not None and not ok.all():
        # not lined up with the task's start: with the wake-up a user range shows, if earlier
        woke = resumed_at(marks, lane[tasks], prev_t[k], t[k])
        again = ~ok & (woke < t[k])
        if again.any():
            c2, e2, ok2 = awaited_before(woke)
            take = again & ok2
            cand, end_t, ok = np.where(take, c2, cand), np.where(take, e2, end_t), ok | take
    us.append(end_node[cand[ok]])
    vs.append(k[ok])
    ws_.append((t[k] - end_t)[ok])
    es.append(np.full(int(ok.sum()), -1, np.int64))
    w[k[ok]] = 0  # (a lane's first node has no chain edge: w is 0 there already)
    explained[tasks[ok]] = True
    return explained


def resumed_at(marks: tuple[np.ndarray, ...], lane: np.ndarray, idle_from: np.ndarray,
               start: np.ndarray) -> np.ndarray:
    """When each thread ran again after an idle gap, for tasks starting at ``start`` on
    ``lane`` after their lane was idle from ``idle_from``: the start of the first user range
    (``marks``: lane, start, end) that opens on the lane inside the gap and is still open at
    the task's start -- the thread was running from there (``Optimizer.step`` opens, its first
    operator follows hundreds of microseconds later) -- else the task's own start. A range
    that opens in the gap and closes before the task does not count (the thread ran and
    stopped again: nothing says when it woke for the task)."""
    m_lane, m_start, m_end = marks
    woke = start.copy()
    if not m_lane.size or not start.size:
        return woke
    o = np.lexsort((m_start, m_lane))  # (lane, start)
    ml, mst, men = m_lane[o], m_start[o], m_end[o]
    lo = np.searchsorted(ml, lane, side="left")
    hi = np.searchsorted(ml, lane, side="right")
    # first range of the lane starting after idle_from: a bisection within each lane's block
    a, b = lo.copy(), hi.copy()
    while True:
        open_ = a < b
        if not open_.any():
            break
        mid = (a + b) // 2
        mid_c = np.minimum(mid, ml.size - 1)
        right = open_ & (mst[mid_c] > idle_from)
        left = open_ & ~right
        b = np.where(right, mid, b)
        a = np.where(left, mid + 1, a)
    f = np.minimum(a, ml.size - 1)
    ok = (a < hi) & (mst[f] <= start) & (men[f] >= start)
    woke[ok] = mst[f[ok]]
    return woke


def _sorted_subset(mask: np.ndarray, wkey: np.ndarray, by_key: np.ndarray | None
                   ) -> np.ndarray:
    """The events of ``mask`` in stable ``wkey`` order: ``flatnonzero(mask)`` stably argsorted
    by ``wkey``, or equally (ties in index order either way) ``by_key``, every event's stable
    order by ``wkey``, filtered by the mask."""
    if by_key is None:
        o = np.flatnonzero(mask)
        return o[np.argsort(wkey[o], kind="stable")]
    return by_key[mask[by_key]]


def _event_waits(task: np.ndarray, corr: np.ndarray, win: np.ndarray, t: np.ndarray,
                 start_node: np.ndarray, end_node: np.ndarray, w: np.ndarray,
                 prev_t: np.ndarray, launch_s: np.ndarray,
                 waits: tuple[np.ndarray, ...] | None,
                 us: list, vs: list, ws_: list, es: list) -> np.ndarray:
    """Cross-stream dependencies traced by CUPTI 'Stream Wait Event' records (Kineto
    ``cuda_sync``, with ``wait_on_stream`` and the event record's correlation id): the last task
    of the recording stream launched before the record (correlation ids grow in API call order)
    -> the first task of the waiting stream launched after the wait call. Edge weight: the
    delay from that end to this start when the wait held the task back (the end fell in the
    task's idle gap, after its launch); the gap then weighs 0. Appends to the edge lists;
    modifies ``w``; returns the mask of tasks whose start is explained this way."""
    explained = np.zeros(t.size // 2, bool)
    if waits is None:
        return explained
    device, stream, wait_stream, wait_record = waits
    q = np.flatnonzero((wait_record >= 0) & ~np.isnan(corr) & ~np.isnan(stream))
    tk = np.flatnonzero(task & ~np.isnan(corr) & ~np.isnan(stream))
    if q.size == 0 or tk.size == 0:
        return explained
    # (window, device, stream) groups of the tasks and of both lookups of every wait
    groups = np.concatenate([
        np.stack([win[tk], device[tk], stream[tk].astype(np.int64)], 1),
        np.stack([win[q], device[q], wait_stream[q]], 1),
        np.stack([win[q], device[q], stream[q].astype(np.int64)], 1)])
    inv = np.unique(groups, axis=0, return_inverse=True)[1].reshape(-1)
    g_t, g_a, g_w = inv[:tk.size], inv[tk.size:tk.size + q.size], inv[tk.size + q.size:]
    c_t, c_q = corr[tk].astype(np.int64), corr[q].astype(np.int64)
    big = int(max(c_t.max(), c_q.max(), wait_record[q].max())) + 2
    key = g_t * big + c_t
    o = np.argsort(key, kind="stable")
    key, tk, g_t = key[o], tk[o], g_t[o]
    ja = np.searchsorted(key, g_a * big + wait_record[q], side="left") - 1
    jw = np.searchsorted(key, g_w * big + c_q, side="right")
    ja_c, jw_c = np.clip(ja, 0, key.size - 1), np.clip(jw, 0, key.size - 1)
    ok = (ja >= 0) & (jw < key.size) & (g_t[ja_c] == g_a) & (g_t[jw_c] == g_w)
    a, v = tk[ja_c[ok]], tk[jw_c[ok]]
    ta, kv = t[end_node[a]], start_node[v]
    fwd = ta <= t[kv]  # (an edge back in time: clocks disagree, dropped)
    a, v, ta, kv = a[fwd], v[fwd], ta[fwd], kv[fwd]
    bound = (ta > prev_t[kv]) & (ta >= launch_s[v])
    us.append(end_node[a])
    vs.append(kv)
    ws_.append(np.where(bound, t[kv] - ta, 0))
    es.append(np.full(a.size, -1, np.int64))
    w[kv[bound]] = 0
    explained[v[bound]] = True
    return explained


def launches(corr: np.ndarray, win: np.ndarray, host: np.ndarray, task: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """(launching host event, device task) pairs: each task (``task``) with a correlation id
    is launched by the first host event (``host``, in event order) with the same correlation id
    in the same step. Ordered by launch, then task (an inner join of the host events, first
    per (id, step), with the tasks)."""
    got = _launch_join(corr, win, np.flatnonzero(host & ~np.isnan(corr)),
                       np.flatnonzero(task & ~np.isnan(corr)))
    if got is not None:
        return got
    eid = np.arange(corr.size)
    h = pd.DataFrame({"corr": corr[host], "win": win[host], "h": eid[host]}).dropna()
    d = pd.DataFrame({"corr": corr[task], "win": win[task], "d": eid[task]}).dropna()
    m = h.drop_duplicates(["corr", "win"]).merge(d, on=["corr", "win"])
    return m["h"].to_numpy(np.int64), m["d"].to_numpy(np.int64)


def _launch_join(corr: np.ndarray, win: np.ndarray, h: np.ndarray, d: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`launches` as a join on one sorted int64 key (correlation id, step) when the ids
    are integers small enough for that key (None otherwise): the same pairs in the same order
    (by launch, then task)."""
    if h.size == 0 or d.size == 0:
        z = np.empty(0, np.int64)
        return z, z
    ch, cd = corr[h], corr[d]
    lo = min(float(ch.min()), float(cd.min()))
    hi = max(float(ch.max()), float(cd.max()))
    nw = int(win.max(initial=0)) + 1
    if (hi - lo + 1) * nw >= 2**62 or not ((ch == np.floor(ch)).all()
                                           and (cd == np.floor(cd)).all()):
        return None
    kh = (ch - lo).astype(np.int64) * nw + win[h]
    kd = (cd - lo).astype(np.int64) * nw + win[d]
    o = np.argsort(kh, kind="stable")
    ks = kh[o]
    first = np.ones(ks.size, bool)
    first[1:] = ks[1:] != ks[:-1]
    uk, uh = ks[first], h[o[first]]  # each key's first host event (in event order)
    del kh, ks, o, first
    pos = np.minimum(np.searchsorted(uk, kd), uk.size - 1)
    hit = uk[pos] == kd
    hi_, di = uh[pos[hit]], d[hit]
    o = np.argsort(hi_, kind="stable")  # (tasks ascending within a launch already)
    return hi_[o].astype(np.int64), di[o].astype(np.int64)


def cross_edges(corr: np.ndarray, win: np.ndarray, wkey: np.ndarray, s: np.ndarray,
                 kind: np.ndarray, lane_kind: np.ndarray, lane: np.ndarray,
                 start_node: np.ndarray, end_node: np.ndarray, t: np.ndarray, w: np.ndarray,
                 first: np.ndarray, seg: np.ndarray, prev_t: np.ndarray,
                 waits: tuple[np.ndarray, ...] | None,
                 marks: tuple[np.ndarray, ...] | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Launch -> task edges, awaited device task -> sync end and awaited loader event -> data
    wait end edges, within a step; zeroes stream gaps that were waits for a launch and the
    segments of data waits fed by a loader lane (``w`` is modified in place). ``wkey`` orders
    events by (step, end)."""
    host = _in(lane_kind, _LANE, HOST_LANES)
    task = ~host & _in(kind, _KIND, COMPUTE_KINDS + COMM_KINDS)
    us: list[np.ndarray] = []
    vs: list[np.ndarray] = []
    ws_: list[np.ndarray] = []
    es: list[np.ndarray] = []
    hi, di = launches(corr, win, host, task)
    launch_s = np.full(s.size, np.iinfo(np.int64).min)  # launch start of each task (min: none)
    launch_s[di] = s[hi]
    explained = _event_waits(task, corr, win, t, start_node, end_node, w, prev_t, launch_s,
                             waits, us, vs, ws_, es)
    by_key = np.argsort(wkey, kind="stable")  # (one sort for every search below)
    explained |= _inferred_stream_waits(task, wkey, s, win, start_node, end_node, t, w, prev_t,
                                        us, vs, ws_, es, explained, by_key=by_key)
    # a host thread resuming shortly after another thread's event or a collective ended, after
    # an idle gap of its own: it waited for it (a thread's wait on another -- DDP's wait on a
    # Gloo all-reduce, the main thread's on the autograd engine -- is not traced); the gap
    # weighs 0 and the edge carries the wake-up delay
    work = host & ~_in(kind, _KIND, NOT_WORK_KINDS)
    # (a user range such as Optimizer.step opens where the thread runs again: ``marks``)
    resumed = host & ~_in(kind, _KIND, ("step", "counter", "other"))
    _inferred_stream_waits(resumed, wkey, s, win, start_node, end_node, t, w, prev_t, us, vs,
                           ws_, es, np.zeros(s.size, bool), awaited=work | (
                               _in(kind, _KIND, COMM_KINDS)), lane=lane,
                           line_up=HOST_WAKE_NS, min_gap=HOST_WAIT_MIN_NS, by_key=by_key,
                           marks=marks)
    # a device-lane gap before an event whose launch is not in the trace (no corr_id, or no
    # host event with it in the step: sampled traces, MTIA DMA requests, CUPTI sync records)
    # weighs 0 like a host-lane gap: nothing shows the event was ready, so it is no delay
    unknown = ~host & (launch_s == np.iinfo(np.int64).min) & ~explained
    w[start_node[unknown]] = 0
    if hi.size:
        # the task waited for its launch when launched after its stream was last busy (HTA's
        # empty queue) and no other stream's task explains its start: then the launch delay
        # is on the path and the stream gap is not; otherwise the launch is a dependency only
        k = start_node[di]
        waited = (s[hi] >= prev_t[k]) & ~explained[di]
        w[k[waited & ~first[k]]] = 0
        us.append(start_node[hi])
        vs.append(k)
        ws_.append(np.where(waited, np.maximum(s[di] - s[hi], 0), 0))
        es.append(hi)
    loader = lane_kind == _LANE["loader"]
    data_wait = np.flatnonzero((kind == _KIND["data_wait"]) & host)
    for waits, awaited in ((np.flatnonzero(kind == _KIND["sync"]), task),
                           (data_wait, loader)):
        if not (waits.size and awaited.any()):
            continue
        o = _sorted_subset(awaited, wkey, by_key)
        k = np.searchsorted(wkey[o], wkey[waits], side="right") - 1
        cand = o[np.maximum(k, 0)]
        # the awaited event ending last within the wait, in the same step, on another lane
        ok = (k >= 0) & (win[cand] == win[waits]) & (lane[cand] != lane[waits]) & \
            (wkey[cand] >= wkey[waits] - (t[end_node[waits]] - s[waits]))
        us.append(end_node[cand[ok]])
        vs.append(end_node[waits[ok]])
        ws_.append(np.zeros(int(ok.sum()), np.int64))
        es.append(np.full(int(ok.sum()), -1, np.int64))
        if waits is data_wait:
            # a data wait fed by a loader lane is a wait (its time is the loader's, on its
            # lane); one with no loader lane in the trace keeps its time, as io
            matched = np.zeros(s.size, bool)
            matched[waits[ok]] = True
            w[(seg >= 0) & matched[np.maximum(seg, 0)]] = 0
    if not us:
        z = np.empty(0, np.int64)
        return z, z, z, z
    return (np.concatenate(us).astype(np.int64), np.concatenate(vs).astype(np.int64),
            np.concatenate(ws_).astype(np.int64), np.concatenate(es).astype(np.int64))
