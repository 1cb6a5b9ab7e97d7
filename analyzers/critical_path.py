"""Critical path of each step (rank analyzer): composition by component, operators, slack.

``build`` makes one dependency graph of all steps' events (each cut at step borders): host
thread order, stream order, launch -> device task by ``corr_id``, awaited device task -> sync end,
loader event -> data-wait end, and cross-stream waits inferred where one task's end lines up with
another's start; ``cpgraph`` finds each step's longest path (docs/analysis/critical_path.md).
Outputs (times in ns, shares in percent):

* metric ``components_pct``: the path's time per component {computation, communication, host,
  io, other} / path length, summed over steps. computation = device kernels, copies, memsets;
  communication = collectives (kind, ``link`` lanes or NCCL kernel names); io = ``data_*`` events
  and loader lanes; host = other host events and launch delays; other = lane gaps (a stream or
  thread with nothing recorded while on the path);
* metrics ``length_ms_median`` and ``length_pct`` (path length / step wall time, over all steps;
  <= 100 because every event is clipped to its step);
* table ``top_ops`` (name, kind, time_ns, share_pct, slack_ns): operators by time on the path;
  ``slack_ns`` is the median slack of the operator's instances;
* table ``ops``: every operator (name, kind): count, dur_ns, cp_time_ns, min_slack_ns,
  median_slack_ns. Slack of an event = path length - the longest path through its start or
  its end node (``max over those nodes of fwd(node) + bwd(node)``): how much its boundary could
  move later without lengthening the path; 0 for events on the path.

It emits no findings: the cause analyzers use the path's composition as evidence.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hermes.analyzers import cpedges, cpgraph, hostcalls, hta_compat, opinfo
from hermes.analyzers.base import AnalyzerResult, RankContext, register
from hermes.analyzers.io import name_matches
from hermes.analyzers.steps import split_by_windows, step_windows
from hermes.trace.schema import (
    COMPUTE_KINDS,
    EVENT_KINDS,
    HOST_LANES,
    IO_KINDS,
    LANE_KINDS,
    NOT_WORK_KINDS,
)

COMPONENTS = ("computation", "communication", "host", "io", "other")
# annotations, counters and unknown events (Kineto's whole-capture "Trace" span) are no work
TOP_N = 20
LINE_UP_NS = cpedges.LINE_UP_NS  # (cross-stream waits are inferred in cpedges)


_KIND = {k: i for i, k in enumerate(EVENT_KINDS)}
_LANE = {k: i for i, k in enumerate(LANE_KINDS)}
_KIND_NAMES = (*EVENT_KINDS, "unknown")


def _codes(col: pd.Series, vocab: dict[str, int]) -> np.ndarray:
    """Small-int codes of a string column in a fixed vocabulary (-1: unknown), computed once
    per distinct value: comparisons on millions of events are then integer operations."""
    cat = col.astype("category")
    table = np.array([vocab.get(str(c), -1) for c in cat.cat.categories] + [-1], np.int64)
    return table[cat.cat.codes.to_numpy()]


def _in(codes: np.ndarray, vocab: dict[str, int], names: tuple[str, ...]) -> np.ndarray:
    return np.isin(codes, [vocab[x] for x in names])


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
    codes = np.select([comm, comp, io], [COMPONENTS.index(c) for c in
                                         ("communication", "computation", "io")],
                      COMPONENTS.index("host"))
    # categoricals, not string arrays: no per-event string objects on big steps
    return pd.Categorical.from_codes(codes, categories=list(COMPONENTS))


#: Steps are analyzed in groups of about this many events (clipped pieces): each group is one
#: graph and one Dijkstra, so memory stays bounded on traces of tens of millions of events (steps
#: share no edge, so grouping does not change any path).
CHUNK_EVENTS = 2_000_000


class _Events:
    """Per-event arrays of a rank's events, computed once (codes, not strings)."""

    def __init__(self, ev: pd.DataFrame) -> None:
        self.ts = ev["ts_ns"].to_numpy(np.int64)
        self.te = self.ts + ev["dur_ns"].to_numpy(np.int64)
        self.kind = _codes(ev["kind"], _KIND).astype(np.int8)
        self.lane_kind = _codes(ev["lane_kind"], _LANE).astype(np.int8)
        self.nccl = hta_compat._match(ev["name"], hta_compat.NCCL_KERNEL_RE)
        lane_codes = ev["lane"].astype("category").cat.codes.to_numpy()
        self.lanes = int(lane_codes.max(initial=0)) + 1
        self.lane = lane_codes.astype(np.int64)
        self.corr = (pd.to_numeric(ev["corr_id"], errors="coerce").to_numpy(
            np.float64, na_value=np.nan) if "corr_id" in ev.columns else None)
        self.name = ev["name"].array
        self.helper = hostcalls.helper_lanes(ev)
        # host calls that block on the device (synchronous copies, .item(), synchronize by
        # name) are waits like 'sync' events: waiting is not work, the awaited task is
        host = self.lane_kind == _LANE["host"]
        self.blocking = host & (name_matches(ev["name"], hostcalls.SYNC_NAME)
                                | hostcalls.blocking_copy_calls(ev, host))
        # CUPTI 'Stream Wait Event' records (Kineto cuda_sync): the stream that waits, the
        # stream and the event record (the cudaEventRecord call's correlation id) it waits for;
        # with the device of each lane ('gpu 1 stream 7' -> 'gpu 1 '). Only kept when a trace
        # has such records (None otherwise: no per-event arrays on traces without them).
        self.waits: tuple[np.ndarray, ...] | None = None
        swe = (self.kind == _KIND["sync"]) & (ev["name"] == "Stream Wait Event").to_numpy(bool)
        if swe.any() and "args" in ev.columns and "stream" in ev.columns:
            a = ev["args"][swe]
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


def build(ev: pd.DataFrame, windows: pd.DataFrame) -> tuple[cpgraph.Graph, pd.DataFrame]:
    """One graph for all steps: every event is cut at step borders and clipped to each step it
    overlaps; chains are per (step, lane) and cross edges stay within a step, so the steps are
    disconnected parts of one graph. Returns the graph and the event copies (index = graph
    event id): name, kind, component, start, end, win (window index)."""
    return _build(_Events(ev), np.arange(len(ev)), windows)


def _build(pre: _Events, sel: np.ndarray, windows: pd.DataFrame
           ) -> tuple[cpgraph.Graph, pd.DataFrame]:
    """:func:`build` on the events ``sel`` (indices into ``pre``, ascending)."""
    s, e, win, src = split_by_windows(pre.ts[sel], pre.te[sel], windows)
    src = sel[src]
    kind = np.where(pre.blocking[src], _KIND["sync"], pre.kind[src]).astype(np.int64)
    lane_kind = pre.lane_kind[src].astype(np.int64)
    # helper threads (blocked Python threads, the profiler's) are never on the path
    keep = ~_in(kind, _KIND, NOT_WORK_KINDS) & (lane_kind != _LANE["counter"]) & \
        ~pre.helper[src]
    s, e, win, src, kind, lane_kind = (x[keep] for x in (s, e, win, src, kind, lane_kind))
    n_ev = s.size
    nccl = pre.nccl[src] & (kind == _KIND["kernel"])
    lane = win * pre.lanes + pre.lane[src]  # chain per (step, lane)
    ws = windows["start_ns"].to_numpy(np.int64)
    span = int((windows["end_ns"] - windows["start_ns"]).to_numpy(np.int64).max(initial=0)) + 1
    comp = _component(kind, lane_kind, nccl, _inside_data(lane, s - ws[win], e - ws[win], kind,
                                                          span))
    kind_cat = pd.Categorical.from_codes(np.where(kind < 0, len(_KIND_NAMES) - 1, kind),
                                         categories=list(_KIND_NAMES))
    info = pd.DataFrame({"name": pre.name.take(src), "kind": kind_cat,
                         "component": comp, "start": s, "end": e, "win": win,
                         "loader": lane_kind == _LANE["loader"]})
    if n_ev == 0:
        z = np.empty(0, np.int64)
        return cpgraph.Graph(z, z, z, z, z, z, z, z, z, z), info
    dur = e - s
    eid = np.arange(n_ev)
    # nodes: start (is_start 1) and end (0) of every event
    n_t = np.concatenate([s, e])
    n_lane = np.concatenate([lane, lane])
    n_ev_id = np.concatenate([eid, eid])
    n_is_start = np.concatenate([np.ones(n_ev, np.int64), np.zeros(n_ev, np.int64)])
    # equal times: ends before starts; starts outer (longer) first; ends inner (shorter) first
    tie = np.concatenate([-dur, dur])
    order = node_order(n_ev_id, tie, n_is_start, n_t, n_lane)
    t, ln, nev, st = n_t[order], n_lane[order], n_ev_id[order], n_is_start[order]
    del n_t, n_lane, n_ev_id, n_is_start, tie  # (peak memory: free node-sized temporaries early)
    n = t.size
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    del order
    start_node, end_node = pos[:n_ev], pos[n_ev:]
    first = np.ones(n, bool)
    first[1:] = ln[1:] != ln[:-1]
    active = innermost_active(st, nev, ln)
    del st
    seg = np.full(n, -1, np.int64)
    seg[1:] = np.where(first[1:], -1, active[:-1])
    del active
    w = np.zeros(n, np.int64)
    w[1:] = np.where(first[1:], 0, t[1:] - t[:-1])
    w[(seg >= 0) & (kind[np.maximum(seg, 0)] == _KIND["sync"])] = 0  # waiting is not work
    # a host thread with nothing recorded is waiting, not working (HTA: zero-weight dependency
    # between top-level CPU ops); a stream gap is a device-side delay unless it waited for a launch
    w[(seg < 0) & _in(lane_kind[nev], _LANE, HOST_LANES)] = 0
    corr = pre.corr[src] if pre.corr is not None else np.full(n_ev, np.nan)
    # sync matching sorts by (window, end): a single int64 key (end relative to its window)
    wkey = win * span + (e - ws[win])
    # time a node's lane was last busy before it (the step start for a lane's first node)
    prev_t = np.where(first, ws[win[nev]], np.roll(t, 1))
    waits = tuple(x[src] for x in pre.waits) if pre.waits is not None else None
    cu, cv, cw, ce = cpedges.cross_edges(corr, win, wkey, s, kind, lane_kind, lane, start_node,
                                         end_node, t, w, first, seg, prev_t, waits)
    return cpgraph.Graph(t, ln, w, seg, cu, cv, cw, ce, start_node, end_node), info


def node_order(ev_id: np.ndarray, tie: np.ndarray, is_start: np.ndarray, t: np.ndarray,
                lane: np.ndarray) -> np.ndarray:
    """``np.lexsort((ev_id, tie, is_start, t, lane))`` for nodes laid out as [starts, ends] of
    events 0..n-1 (so the input order is the ``ev_id`` order within equal other keys): one
    int64 key (lane, t, is_start) sorted stably, ties by ``tie`` (``cpgraph.sort_by_key``)."""
    if t.size == 0:
        return np.empty(0, np.int64)
    t0 = int(t.min())
    span = int(t.max()) - t0 + 1
    if (int(lane.max()) + 1) * span * 2 >= 2**62 or int(lane.min()) < 0:
        return np.lexsort((ev_id, tie, is_start, t, lane))
    key = (lane * span + (t - t0)) * 2 + is_start
    return cpgraph.sort_by_key(key, tie)


def innermost_active(st: np.ndarray, nev: np.ndarray, ln: np.ndarray) -> np.ndarray:
    """Innermost event active after each node of nodes sorted by (lane, time) — ``st`` 1 for a
    start, 0 for an end, ``nev`` the node's event, ``ln`` its lane: after a start, that event;
    after an end, the event of the latest earlier start at the same nesting depth on the lane
    (the enclosing event); -1 where none. Vectorized per nesting depth."""
    depth = np.cumsum(np.where(st == 1, 1, -1))
    active = np.where(st == 1, nev, -1)
    starts = np.flatnonzero(st == 1)
    for d in np.unique(depth[st == 0]):
        if d <= 0:
            continue
        q = np.flatnonzero((st == 0) & (depth == d))
        cand = starts[depth[starts] == d]
        k = np.searchsorted(cand, q) - 1
        j = cand[np.maximum(k, 0)]
        ok = (k >= 0) & (ln[j] == ln[q])
        active[q[ok]] = nev[j[ok]]
    return active


def _chunks(pre: _Events, ws: np.ndarray, we: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """Groups of consecutive windows (sorted by start) of about ``CHUNK_EVENTS`` events each:
    (first window, end window, indices of the events overlapping them)."""
    nw = ws.size
    lo = np.searchsorted(we, pre.ts, side="right")  # first window ending after the start
    hi = np.searchsorted(ws, pre.te, side="left")   # windows starting before the end
    inside = lo < hi
    if nw <= 1 or int(inside.sum()) <= CHUNK_EVENTS:
        return [(0, nw, np.flatnonzero(inside))]
    cnt = np.bincount(lo[inside], minlength=nw)
    group = (np.cumsum(cnt) - 1) // CHUNK_EVENTS
    cuts = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), nw]
    lo, hi = lo.astype(np.int32), hi.astype(np.int32)
    return [(a, b, np.flatnonzero(inside & (lo < b) & (hi > a)))
            for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]


def paths(ev: pd.DataFrame, windows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray,
                                                             pd.DataFrame]:
    """Longest path of every step: (length ns per window, lane-gap ns on it per window,
    per-event-copy table with cp_ns and slack_ns). Steps are independent: they are solved in
    groups of consecutive steps (``CHUNK_EVENTS``), one graph each. The table has one row per
    event copy: name, kind, component, dur_ns (clipped), win, cp_ns, slack_ns."""
    nw = len(windows)
    length = np.zeros(nw, np.int64)
    gap_ns = np.zeros(nw, np.int64)
    pre = _Events(ev)
    o = np.argsort(windows["start_ns"].to_numpy(np.int64), kind="stable")
    wsorted = windows.iloc[o]
    ws = wsorted["start_ns"].to_numpy(np.int64)
    we = wsorted["end_ns"].to_numpy(np.int64)
    infos = []
    for a, b, sel in _chunks(pre, ws, we) if nw else [(0, 0, np.empty(0, np.int64))]:
        g, info = _build(pre, sel, wsorted.iloc[a:b])
        cp, slack = _solve(g, info, b - a, length[a:b], gap_ns[a:b])
        del g
        # only what the tables need is kept across chunks (peak memory)
        infos.append(pd.DataFrame({
            "name": info["name"], "kind": info["kind"], "component": info["component"],
            "dur_ns": info["end"].to_numpy(np.int64) - info["start"].to_numpy(np.int64),
            "win": o[a + info["win"].to_numpy(np.int64)], "cp_ns": cp, "slack_ns": slack}))
        del info
    # back from sorted order to the windows' order
    out_len, out_gap = np.empty_like(length), np.empty_like(gap_ns)
    out_len[o], out_gap[o] = length, gap_ns
    info = infos[0] if len(infos) == 1 else pd.concat(infos, ignore_index=True)
    return out_len, out_gap, info


def _solve(g: cpgraph.Graph, info: pd.DataFrame, nw: int, length: np.ndarray,
           gap_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longest path of each of the ``nw`` windows of one graph: fills ``length`` and ``gap_ns``
    (views), returns (cp_ns, slack_ns) per event of the graph."""
    if g.n == 0:
        return np.zeros(len(info), np.int64), np.zeros(len(info), np.int64)
    dist, pred, bwd = cpgraph.both(g)
    node_ev = _node_events(g)
    win = info["win"].to_numpy(np.int64)
    node_win = win[node_ev]
    loader_node = info["loader"].to_numpy(bool)[node_ev]
    del node_ev
    # nodes are laid out step-major (chains keyed by (step, lane)): one slice per step
    bounds = np.searchsorted(node_win, np.arange(nw + 1))
    index = cpgraph.CrossIndex(g)
    evs, wts = [], []
    for i in range(nw):
        a, b = int(bounds[i]), int(bounds[i + 1])
        if a == b:
            continue
        # the step ends on the training side: a loader worker prefetching in parallel is on
        # the path only through a data wait it feeds
        d = np.where(loader_node[a:b], -1, dist[a:b])
        end = a + int(np.argmax(d))
        length[i] = int(dist[end])
        on_ev, on_w = cpgraph.backtrack(g, dist, pred, end, index)
        gap = on_ev < 0
        evs.append(on_ev[~gap])
        wts.append(on_w[~gap])
        gap_ns[i] = int(on_w[gap].sum())
    cp = np.zeros(len(info), np.int64)
    if evs:
        cp = np.bincount(np.concatenate(evs), weights=np.concatenate(wts),
                         minlength=len(info)).astype(np.int64)
    # longest path through a node = fwd + bwd; an event's slack uses the better of its two nodes
    through_node = dist + bwd
    through = np.maximum(through_node[g.event_start], through_node[g.event_end])
    return cp, np.maximum(length[win] - through, 0)


def _node_events(g: cpgraph.Graph) -> np.ndarray:
    """Event of each node (from the start/end node maps)."""
    ev = np.empty(g.n, np.int64)
    ids = np.arange(g.event_start.size)
    ev[g.event_start] = ids
    ev[g.event_end] = ids
    return ev


def _empty_ops() -> pd.DataFrame:
    return pd.DataFrame({"name": pd.Series(dtype=str), "kind": pd.Series(dtype=str),
                         "count": pd.Series(dtype=np.int64), "dur_ns": pd.Series(dtype=np.int64),
                         "cp_time_ns": pd.Series(dtype=np.int64),
                         "min_slack_ns": pd.Series(dtype=np.int64),
                         "median_slack_ns": pd.Series(dtype=np.float64)})


@register("critical_path", scope="rank")
def analyze(ctx: RankContext) -> AnalyzerResult:
    """Critical path per step: composition by component, operators on it, slack."""
    ev = ctx.events
    windows = step_windows(ev)
    length, gap_ns, info = paths(ev, windows)
    nw = len(windows)
    # path time per (step, component); lane gaps on the path count as "other"
    by = np.zeros((nw, len(COMPONENTS)), np.int64)
    if len(info):
        np.add.at(by, (info["win"].to_numpy(np.int64), info["component"].cat.codes.to_numpy()),
                  info["cp_ns"].to_numpy(np.int64))
    by[:, COMPONENTS.index("other")] += gap_ns
    per_step = pd.DataFrame({"step": windows["step"].to_numpy(np.int64),
                             "dur_ns": windows["dur_ns"].to_numpy(np.int64),
                             "length_ns": length,
                             **{f"{c}_ns": by[:, i] for i, c in enumerate(COMPONENTS)}})
    comp_ns = {c: int(by[:, i].sum()) for i, c in enumerate(COMPONENTS)}
    total_len = int(per_step["length_ns"].sum()) if len(per_step) else 0
    total_dur = int(per_step["dur_ns"].sum()) if len(per_step) else 0
    if len(info):
        ops = info.groupby(["name", "kind"], as_index=False, observed=True).agg(
            count=("cp_ns", "size"), dur_ns=("dur_ns", "sum"), cp_time_ns=("cp_ns", "sum"),
            min_slack_ns=("slack_ns", "min"), median_slack_ns=("slack_ns", "median"))
        ops = ops.sort_values(["cp_time_ns", "dur_ns"], ascending=False, kind="stable")
        ops = ops.reset_index(drop=True)
    else:
        ops = _empty_ops()
    on = ops[ops["cp_time_ns"] > 0].head(TOP_N)
    top = pd.DataFrame({
        "name": on["name"].to_numpy(), "kind": on["kind"].to_numpy(),
        "time_ns": on["cp_time_ns"].to_numpy(np.int64),
        "share_pct": 100.0 * on["cp_time_ns"].to_numpy(np.float64) / total_len if total_len
        else np.zeros(len(on)),
        "slack_ns": on["median_slack_ns"].to_numpy(np.float64)})
    metrics = {
        "components_pct": {c: (100.0 * comp_ns[c] / total_len if total_len else 0.0)
                           for c in COMPONENTS},
        "length_ms_median": float(per_step["length_ns"].median() / 1e6) if len(per_step) else 0.0,
        "length_pct": 100.0 * total_len / total_dur if total_dur else 0.0,
        "steps": int(len(per_step)),
    }
    return AnalyzerResult(name="critical_path",
                          tables={"top_ops": top, "ops": ops, "per_step": per_step},
                          metrics=metrics)
