"""The step graph: one dependency graph of a rank's steps, shared by the critical path
(``critical_path`` runs its longest path on it) and the what-if replay (``hermes.whatif``
replays it with changed durations) -- one graph model, not two (DESIGN.md).

``build`` cuts every event at step borders and clips it to each step it overlaps; each event
gives a start and an end node; nodes of one (step, lane) form a chain in time order; cross edges
(``cpedges``) link lanes: host program order per thread, launch -> device task by correlation
id, stream order, traced and inferred cross-stream waits, awaited device task -> sync end,
awaited loader event -> data-wait end (docs/analysis/critical_path.md). ``cpgraph`` holds the
graph type and its longest-path solver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common import hostcalls, hta_compat, opinfo
from hermes.analyzers.common.names import name_matches
from hermes.analyzers.common.nesting import innermost_active, node_order
from hermes.analyzers.common.steps import split_by_windows, step_windows
from hermes.analyzers.critical_path import edges as cpedges
from hermes.analyzers.critical_path import graph as cpgraph
from hermes.analyzers.critical_path import lanes as cplanes
from hermes.analyzers.critical_path.stepkeep import name_key, same_events, same_inputs, same_values
from hermes.analyzers.engine.base import Keep
from hermes.trace.args import args_of, has_args
from hermes.trace.schema import (
    COMPUTE_KINDS,
    EVENT_KINDS,
    HOST_LANES,
    IO_KINDS,
    LANE_KINDS,
    NOT_WORK_KINDS,
)

COMPONENTS = ("computation", "communication", "host", "io", "other")
_KIND = {k: i for i, k in enumerate(EVENT_KINDS)}
_LANE = {k: i for i, k in enumerate(LANE_KINDS)}
KIND_NAMES = (*EVENT_KINDS, "unknown")


def _codes(col: pd.Series, vocab: dict[str, int]) -> np.ndarray:
    """Small-int codes of a string column in a fixed vocabulary (-1: unknown), computed once
    per distinct value: comparisons on millions of events are then integer operations."""
    cat = col.astype("category")
    table = np.array([vocab.get(str(c), -1) for c in cat.cat.categories.tolist()] + [-1],
                     np.int8 if len(vocab) < 127 else np.int64)
    return table[cat.cat.codes.to_numpy()]


def _numbers(col: pd.Series) -> np.ndarray:
    """A column as float64 numbers, NaN where missing or not a number (``pd.to_numeric``'s
    coercion, skipped for a column that is numeric already)."""
    if not pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_bool_dtype(col.dtype):
        col = pd.to_numeric(col, errors="coerce")
    return col.to_numpy(np.float64, na_value=np.nan)


def _in(codes: np.ndarray, vocab: dict[str, int], names: tuple[str, ...]) -> np.ndarray:
    """Membership of small-int codes (-1: unknown) in ``names``: one table lookup."""
    table = np.zeros(len(vocab) + 1, bool)  # (the last entry: code -1)
    table[[vocab[x] for x in names]] = True
    return table[codes]


def _inside_data(lane: np.ndarray, rs: np.ndarray, re_: np.ndarray, kind: np.ndarray,
                 span: int) -> np.ndarray:
    """Events that start inside a ``data_*`` event of their own lane and step: host work done
    while fetching a batch (a single-process DataLoader decodes in the training thread).
    ``rs``/``re_`` are times relative to the step start; one sorted key per (lane, time)."""
    data = _in(kind, _KIND, IO_KINDS)
    if not data.any():
        return np.zeros(kind.size, bool)
    key_s, key_e = lane * span + rs, lane * span + re_
    us, ue = hta_compat.iv.union(key_s[data], key_e[data])
    k = np.searchsorted(us, key_s, side="right") - 1
    return (k >= 0) & (key_s < ue[np.maximum(k, 0)])


def _component(kind: np.ndarray, lane_kind: np.ndarray, nccl: np.ndarray,
               in_data: np.ndarray) -> pd.Categorical:
    device = ~_in(lane_kind, _LANE, HOST_LANES)
    # a collective is communication on any lane (Gloo runs them on the host), as in overlap
    comm = (kind == _KIND["collective"]) | (device & ((lane_kind == _LANE["link"]) | nccl))
    comp = device & ~comm & _in(kind, _KIND, COMPUTE_KINDS)
    io = _in(kind, _KIND, IO_KINDS) | (lane_kind == _LANE["loader"]) | (in_data & ~device)
    # the first that holds of communication, computation, io; else host (np.select's rule)
    codes = np.full(kind.size, COMPONENTS.index("host"), np.int8)
    for mask, c in ((io, "io"), (comp, "computation"), (comm, "communication")):
        codes[mask] = COMPONENTS.index(c)
    # categoricals, not string arrays: no per-event string objects on big steps
    return pd.Categorical.from_codes(codes, categories=list(COMPONENTS))


class Events:
    """Per-event arrays of a rank's events, computed once (codes, not strings)."""

    def __init__(self, ev: pd.DataFrame) -> None:
        self.source = ev  # (the events these are of: a graph of all their steps is kept with them)
        self.ts = ev["ts_ns"].to_numpy(np.int64)
        self.te = self.ts + ev["dur_ns"].to_numpy(np.int64)
        self.kind = _codes(ev["kind"], _KIND).astype(np.int8, copy=False)
        self.lane_kind = _codes(ev["lane_kind"], _LANE).astype(np.int8, copy=False)
        self.nccl = hta_compat.match_names(ev["name"], hta_compat.NCCL_KERNEL_RE)
        lanes = ev["lane"].array
        lane_codes = np.asarray(lanes.codes if isinstance(lanes, pd.Categorical) else
                                ev["lane"].astype("category").cat.codes)
        self.lanes = int(lane_codes.max(initial=0)) + 1
        self.lane = lane_codes.astype(np.int32 if self.lanes < 2**31 else np.int64)
        self.ts = serial_starts(self.ts, self.te, self.lane,
                                ~_in(self.lane_kind, _LANE, HOST_LANES))
        self.corr = _numbers(ev["corr_id"]) if "corr_id" in ev.columns else None
        self.name = ev["name"].array
        self.helper = hostcalls.helper_lanes(ev)
        # host calls that block on the device (synchronous copies, .item(), synchronize by
        # name) are waits like 'sync' events: waiting is not work, the awaited task is
        host = self.lane_kind == _LANE["host"]
        self.blocking = host & (name_matches(ev["name"], hostcalls.SYNC_NAME)
                                | hostcalls.blocking_copy_calls(ev, host))
        # the events that can be on the path: not annotations, counters or unknown events
        # (a blocking host call counts as a sync), not on helper threads (blocked Python
        # threads, the profiler's)
        kind = np.where(self.blocking, _KIND["sync"], self.kind)
        self.work = ~_in(kind, _KIND, NOT_WORK_KINDS) & \
            (self.lane_kind != _LANE["counter"]) & ~self.helper
        del kind
        # user ranges (record_function, NVTX) on host threads: not on the path, but where one
        # opens the thread was running (edges.resumed_at: when a thread woke)
        self.mark = (self.kind == _KIND["marker"]) & host & ~self.helper
        # CUPTI 'Stream Wait Event' records (Kineto cuda_sync): the stream that waits, the
        # stream and the event record (the cudaEventRecord call's correlation id) it waits for;
        # with the device of each lane ('gpu 1 stream 7' -> 'gpu 1 '). Only kept when a trace
        # has such records (None otherwise: no per-event arrays on traces without them).
        self.waits: tuple[np.ndarray, ...] | None = None
        swe = (self.kind == _KIND["sync"]) & (ev["name"] == "Stream Wait Event").to_numpy(bool)
        if swe.any() and has_args(ev) and "stream" in ev.columns:
            a = args_of(ev, swe)
            w_s = opinfo.arg_numbers(a, "wait_on_stream").to_numpy()
            w_r = opinfo.arg_numbers(a, "wait_on_cuda_event_record_corr_id").to_numpy()
            ok = ~np.isnan(w_s) & ~np.isnan(w_r) & (w_r >= 0)
            if ok.any():
                idx = np.flatnonzero(swe)[ok]
                wait_stream = np.full(len(ev), -1, np.int64)
                wait_record = np.full(len(ev), -1, np.int64)
                wait_stream[idx] = w_s[ok].astype(np.int64)
                wait_record[idx] = w_r[ok].astype(np.int64)
                cats = ev["lane"].astype("category").cat.categories.astype(str)
                dev = pd.Index(cats.str.replace(r"stream -?\d+( sync)?$", "", regex=True))
                device = dev.factorize()[0].astype(np.int64)[lane_codes]
                stream = pd.to_numeric(ev["stream"], errors="coerce").to_numpy(
                    np.float64, na_value=np.nan)
                self.waits = (device, stream, wait_stream, wait_record)


#: a device lane runs one task at a time: a task starting at most this long before the one
#: before it on its lane ended started when that one ended (start and duration rounded apart,
#: e.g. a nanosecond trace converted from microseconds, or an emulator's float times), not a
#: task nested in it
TICK_NS = 2


def serial_starts(ts: np.ndarray, te: np.ndarray, lane: np.ndarray, device: np.ndarray
                  ) -> np.ndarray:
    """``ts`` with each device task (``device`` mask) that starts up to :data:`TICK_NS`
    before an earlier task on its lane ends moved to that end (not past its own end)."""
    idx = np.flatnonzero(device)
    if idx.size < 2:
        return ts
    ti, ei, li = ts[idx], te[idx], lane[idx].astype(np.int64)
    t0 = int(min(ti.min(), ei.min()))
    big = int(max(ei.max(), ti.max())) - t0 + 1
    if int(li.max() + 1) * big >= 2**62:
        return ts
    lmin = int(li.min())  # (-1: no lane)
    # = np.lexsort((ts[idx], lane[idx])): one int64 key sorted stably (its runs are sorted)
    k = np.argsort((li - lmin) * big + (ti - t0), kind="stable") \
        if (int(li.max()) - lmin + 1) * big < 2**62 else np.lexsort((ti, li))
    del ti
    o, lo = idx[k], li[k]
    key = lo * big + (ei[k] - t0)
    del k, ei, li
    prev = np.empty_like(key)  # the latest end before, per lane
    prev[0] = -1
    np.maximum.accumulate(key[:-1], out=prev[1:])
    same = (prev >= 0) & (prev // big == lo)
    prev_end = prev - lo * big + t0
    over = prev_end - ts[o]
    snap = same & (over > 0) & (over <= TICK_NS)
    if not snap.any():
        return ts
    out = ts.copy()
    out[o[snap]] = np.minimum(prev_end[snap], te[o[snap]])
    return out


def build(ev: pd.DataFrame, windows: pd.DataFrame, keep: Keep | None = None
          ) -> tuple[cpgraph.Graph, pd.DataFrame]:
    """One graph for all steps: every event is cut at step borders and clipped to each step it
    overlaps; chains are per (step, lane) and cross edges stay within a step, so the steps are
    disconnected parts of one graph. Returns the graph and the event copies (index = graph
    event id): name, kind, component, start, end, win (window index). ``keep``: the analysis
    run's store (:func:`build_sel`)."""
    return build_sel(Events(ev), np.arange(len(ev)), windows, keep=keep)


def build_sel(pre: Events, sel: np.ndarray, windows: pd.DataFrame,
              bounds: tuple[Any, ...] | None = None, keep: Keep | None = None
              ) -> tuple[cpgraph.Graph, pd.DataFrame]:
    """:func:`build` on the events ``sel`` (indices into ``pre``, ascending). ``bounds``:
    (lo, hi, a, ws, we) when ``windows`` are the windows ``a..`` of the sorted windows
    starting at ``ws`` and ending at ``we`` and each event of ``pre`` overlaps the windows
    ``lo..hi - 1`` of those (the cut then uses them). ``keep``: the analysis run's store: a
    graph of at most :data:`KEEP_MAX_EVENTS` events built of exactly the inputs of one kept
    there is taken from it, and one built here is kept there (read-only arrays); None: built,
    not kept."""
    # (dropped before the cut: the same pieces, fewer)
    msel = sel[pre.mark[sel]].astype(np.int64, copy=False)
    sel = sel[pre.work[sel]].astype(np.int64, copy=False)
    s, e, win, src = _cut(pre, sel, windows, bounds)
    # the user ranges of the selection, cut the same way: (graph lane, start, end)
    ms, me, mwin, msrc = _cut(pre, msel, windows, bounds)
    marks = (mwin * pre.lanes + pre.lane[msrc], ms, me)
    kind8 = np.where(pre.blocking[src], _KIND["sync"], pre.kind[src])  # (narrow: kept)
    kind = kind8.astype(np.int64)
    lane_kind8 = pre.lane_kind[src]
    lane_kind = lane_kind8.astype(np.int64)
    n_ev = s.size
    nccl = pre.nccl[src] & (kind == _KIND["kernel"])
    lane_code = pre.lane[src]
    lane = win * pre.lanes + lane_code  # chain per (step, lane)
    corr = pre.corr[src] if pre.corr is not None else np.full(n_ev, np.nan)
    waits = tuple(x[src] for x in pre.waits) if pre.waits is not None else None
    made_of = None
    if keep is not None and n_ev <= KEEP_MAX_EVENTS:
        # everything the graph is made of (the rest of this function reads nothing else),
        # as narrow as it was made (kept with the graph): kind and lane_kind are kind8's and
        # lane_kind8's, lane is win * lanes + lane_code
        made_of = (s, e, win, src, kind8, lane_kind8, nccl, lane_code, np.array(pre.lanes), corr,
                   windows["start_ns"].to_numpy(np.int64), windows["end_ns"].to_numpy(np.int64),
                   *marks, *name_key(pre.name, src), *(waits or ()))
        got = keep.find(lambda v: isinstance(v, KeptGraph) and same_inputs(v.made_of, made_of))
        if got is not None:
            return got.graph, got.info.copy(deep=False)  # (columns added to a copy stay there)
    g, info = _graph(pre, s, e, win, src, kind, lane_kind, nccl, lane, corr, waits, windows,
                     marks)
    if made_of is None or keep is None:
        return g, info
    for a in g.__dict__.values():
        a.flags.writeable = False  # shared with later users: no change in place
    keep.add(KeptGraph(g, info, made_of, _whole_steps(pre, windows, bounds)), n_ev)
    return g, info.copy(deep=False)


def _cut(pre: Events, sel: np.ndarray, windows: pd.DataFrame, bounds: tuple[Any, ...] | None
         ) -> tuple[np.ndarray, ...]:
    """The events ``sel`` of ``pre`` cut at the step borders: (start, end, window, event)."""
    if bounds is not None and bounds[0] is not None:  # (None: no windows)
        lo, hi, a, ws, we = bounds
        return split_sel(pre.ts, pre.te, sel, lo, hi, ws, we, a, a + len(windows))
    s, e, win, src = split_by_windows(pre.ts[sel], pre.te[sel], windows)
    return s, e, win, sel[src]


def _whole_steps(pre: Events, windows: pd.DataFrame, bounds: tuple[Any, ...] | None
                 ) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(events, their step windows) when a graph is of every step of the events ``pre`` is
    of: ``windows`` are all of them (``bounds``: the windows from the first, as many as there
    are) and are ``steps.step_windows`` of those events, in its order; else None."""
    if bounds is None or bounds[0] is None or bounds[2] != 0 or len(windows) != bounds[3].size:
        return None
    own = step_windows(pre.source)  # (cached for those events; the replay's windows)
    return (pre.source, own) if same_values(own, windows) else None


def kept_steps(ev: pd.DataFrame, keep: Keep | None
               ) -> tuple[cpgraph.Graph, pd.DataFrame, pd.DataFrame] | None:
    """The graph ``keep`` holds of every step of events equal to ``ev`` (:func:`same_events`),
    as ``build(ev, steps.step_windows(ev))`` gives it, with those windows as ``step_windows``
    gives them: (graph, event copies, windows); None when none is kept (the critical path
    built it, and the replay of the same events takes it without computing the events'
    arrays, their steps or their cut again)."""
    if keep is None:
        return None
    got = keep.find(lambda v: isinstance(v, KeptGraph) and v.whole is not None
                    and same_events(v.whole[0], ev))
    if got is None:
        return None
    return got.graph, got.info.copy(deep=False), got.whole[1].copy()


def split_sel(ts: np.ndarray, te: np.ndarray, sel: np.ndarray, lo: np.ndarray, hi: np.ndarray,
              ws: np.ndarray, we: np.ndarray, a: int, b: int) -> tuple[np.ndarray, ...]:
    """The cut of the events at step borders (its contract: the pieces of ``steps.split_by_windows`` of
    the events ``sel`` on the windows ``a..b - 1`` of the sorted windows, from each event's
    first and end window ``lo``/``hi``, already searched): (start, end, window - a, event).
    Where no event spans two windows (the usual case), one piece per event, no repeat."""
    first = lo[sel]
    n = hi[sel]
    if a > 0:  # (the windows of this group only)
        np.maximum(first, a, out=first)
    if b < ws.size:
        np.minimum(n, b, out=n)
    n -= first
    if n.size and int(n.max()) <= 1:
        k = np.flatnonzero(n > 0)
        src, win = sel[k], first[k].astype(np.int64)
    else:
        np.maximum(n, 0, out=n)
        k = np.repeat(np.arange(sel.size), n)
        src = sel[k]
        win = np.repeat(first.astype(np.int64), n) + (np.arange(k.size) - np.repeat(
            np.cumsum(n) - n, n))
    del first, n, k
    cs = ts[src]
    np.maximum(cs, ws[win], out=cs)
    ce = te[src]
    np.minimum(ce, we[win], out=ce)
    if a:
        win -= a
    keep = ce > cs
    if keep.all():  # (the usual case: no piece of zero length)
        return cs, ce, win, src
    return cs[keep], ce[keep], win[keep], src[keep]


#: A graph of at most this many events is kept after it is built, in the analysis run's
#: :class:`~hermes.analyzers.engine.base.Keep` (with everything it is made of: a build of
#: exactly the same arrays takes it): the what-if replay (``hermes.whatif``, the advisor's
#: replayed speedups) builds the graph of the same events and steps as the critical path did
#: and takes it from there. Bigger graphs are not kept (memory) -- the replay of a rank of over
#: a million events builds its median step alone.
KEEP_MAX_EVENTS = 500_000


@dataclass(frozen=True)
class KeptGraph:
    """A step graph kept in a :class:`Keep`: the graph, its event copies, what it is made of
    (:func:`build_sel`'s inputs) and, when it is of every step of its events, (those events,
    their step windows)."""

    graph: cpgraph.Graph
    info: pd.DataFrame
    made_of: tuple[Any, ...]
    whole: tuple[pd.DataFrame, pd.DataFrame] | None


def _graph(pre: Events, s: np.ndarray, e: np.ndarray, win: np.ndarray, src: np.ndarray,
           kind: np.ndarray, lane_kind: np.ndarray, nccl: np.ndarray, lane: np.ndarray,
           corr: np.ndarray, waits: tuple[np.ndarray, ...] | None, windows: pd.DataFrame,
           marks: tuple[np.ndarray, ...] | None = None) -> tuple[cpgraph.Graph, pd.DataFrame]:
    """The graph of the event copies (after :func:`build_sel`'s cut and selection); ``marks``:
    the user ranges' (graph lane, start, end) (:func:`edges.cross_edges`)."""
    n_ev = s.size
    ws = windows["start_ns"].to_numpy(np.int64)
    span = int((windows["end_ns"] - windows["start_ns"]).to_numpy(np.int64).max(initial=0)) + 1
    comp = _component(kind, lane_kind, nccl, _inside_data(lane, s - ws[win], e - ws[win], kind,
                                                          span))
    kind_cat = pd.Categorical.from_codes(np.where(kind < 0, len(KIND_NAMES) - 1, kind),
                                         categories=list(KIND_NAMES))
    host_ev = _in(lane_kind, _LANE, HOST_LANES)
    info = pd.DataFrame({"name": pre.name.take(src), "kind": kind_cat,
                         "component": comp, "start": s, "end": e, "win": win,
                         "loader": lane_kind == _LANE["loader"],
                         "host": host_ev, "src": src},
                        copy=False)  # (the arrays as the columns: no consolidated copy)
    if n_ev == 0:
        z = np.empty(0, np.int64)
        return cpgraph.Graph(z, z, z, z, z, z, z, z, z, z), info
    # nodes: start (is_start 1) and end (0) of every event, laid out [starts, ends]
    order = layout_order(s, e, lane)
    n_t = np.concatenate([s, e])
    t, ln, w, seg, start_node, end_node, first, prev_t = node_arrays(
        order, n_t, lane, kind, host_ev, win, ws)
    # sync matching sorts by (window, end): a single int64 key (end relative to its window)
    wkey = win * span + (e - ws[win])
    cu, cv, cw, ce = cpedges.cross_edges(corr, win, wkey, s, kind, lane_kind, lane, start_node,
                                         end_node, t, w, first, seg, prev_t, waits, marks)
    return cpgraph.Graph(t, ln, w, seg, cu, cv, cw, ce, start_node, end_node), info


def node_arrays(order: np.ndarray, n_t: np.ndarray, lane: np.ndarray, kind: np.ndarray,
           host_ev: np.ndarray, win: np.ndarray, ws: np.ndarray) -> tuple[np.ndarray, ...]:
    """The node arrays: t, lane, chain weight,
    attributed event, start and end node of each event, first-of-lane, previous time.
    Compiled (``_lanes.nodes``: one pass over the node order) where the module is; else numpy
    (:func:`~hermes.analyzers.common.nesting.innermost_active` for the attributed events)."""
    n_ev = order.size // 2
    kern = cplanes.compiled_pass()
    if kern is not None:
        n = order.size
        t, ln, w, seg, pos, prev_t = (np.empty(n, np.int64) for _ in range(6))
        first = np.empty(n, bool)
        i64 = [np.ascontiguousarray(a, np.int64) for a in (order, n_t, lane, win, ws)]
        kern.nodes(*i64[:3], np.ascontiguousarray(kind == _KIND["sync"]),
                   np.ascontiguousarray(host_ev, bool), *i64[3:], t, ln, w, seg, pos, first,
                   prev_t)
        return t, ln, w, seg, pos[:n_ev], pos[n_ev:], first, prev_t
    t = n_t[order]
    del n_t
    # a node's event and start/end follow from its place in the layout (no gathers)
    is_start = order < n_ev
    nev = order - n_ev
    np.add(nev, n_ev, out=nev, where=is_start)
    ln = lane[nev]
    n = t.size
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    del order
    start_node, end_node = pos[:n_ev], pos[n_ev:]
    first = np.ones(n, bool)
    np.not_equal(ln[1:], ln[:-1], out=first[1:])
    fi = np.flatnonzero(first)  # (one per (step, lane): few)
    seg = innermost_active(is_start, nev, ln)
    del is_start
    seg[1:] = seg[:-1].copy()  # the event active before each node
    seg[fi] = -1
    w = np.empty(n, np.int64)
    np.subtract(t[1:], t[:-1], out=w[1:])
    w[fi] = 0
    sync = np.zeros(n_ev + 1, bool)  # (the last entry: seg -1)
    np.equal(kind, _KIND["sync"], out=sync[:n_ev])
    w[sync[seg]] = 0  # waiting is not work
    del sync
    # a host thread with nothing recorded is waiting, not working (HTA: zero-weight dependency
    # between top-level CPU ops); a stream gap is a device-side delay unless it waited for a launch
    w[(seg < 0) & host_ev[nev]] = 0
    # time a node's lane was last busy before it (the step start for a lane's first node)
    prev_t = np.empty(n, np.int64)
    prev_t[1:] = t[:-1]
    prev_t[fi] = ws[win[nev[fi]]]
    return t, ln, w, seg, start_node, end_node, first, prev_t


def layout_order(s: np.ndarray, e: np.ndarray, lane: np.ndarray) -> np.ndarray:
    """The node order of events ``s``..``e`` on ``lane``, nodes laid out as [starts, ends]:
    by (lane, time), ends before starts at equal times, starts outer (longer) first, ends
    inner (shorter) first -- :func:`node_order` of that layout, its key built in place in the
    two halves (no layout-sized copies of the times, lanes and start flags)."""
    n = s.size
    if n == 0:
        return np.empty(0, np.int64)
    t0 = min(int(s.min()), int(e.min()))
    span = max(int(s.max()), int(e.max())) - t0 + 1
    tie = np.empty(2 * n, np.int64)  # (equal keys only) -duration for a start, + for an end
    np.subtract(s, e, out=tie[:n])
    np.subtract(e, s, out=tie[n:])
    if (int(lane.max()) + 1) * span * 2 >= 2**62 or int(lane.min()) < 0:
        is_start = np.zeros(2 * n, np.int64)
        is_start[:n] = 1
        return node_order(None, tie, is_start, np.concatenate([s, e]),
                          np.concatenate([lane, lane]))
    key = np.empty(2 * n, np.int64)  # ((lane * span + t - t0) * 2 + is_start)
    for half, t, start in ((key[:n], s, 1), (key[n:], e, 0)):
        np.multiply(lane, span, out=half)
        half += t
        half -= t0
        half *= 2
        half += start
    return cpgraph.sort_by_key(key, tie)
