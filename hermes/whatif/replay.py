"""Replay of a rank's step graph (``hermes.analyzers.critical_path.stepgraph``) with changed durations.

Daydream (Zhu et al., ATC'20) and Lumos (Liang et al., MLSys'25) predict an optimization's gain by
rebuilding the step's dependency graph from a trace, changing the tasks it touches and
simulating the graph again. Here the graph is the critical path's (one graph model): each chain
segment of a lane weighs the time between two of its nodes, cross edges carry launch delays and
waits. A node's replayed time is the longest-start recurrence
``R(v) = max(release(v), max over in-edges (R(u) + w(u, v)))``.

**Vectorized.** Every edge goes forward in measured time and every transform only shrinks work
(``w' <= t[v] - t[u]``), so with the measured times as potentials the *lost* time
``(t[v] - t[u]) - w'`` is non-negative and ``R(v) = t[v] - D(v)``, ``D`` a shortest-path distance
from a virtual source (edge weight ``t[v] - release(v)``), solved on the graph with its plain
chain runs folded (:mod:`.chains`: the critical path's lane solver, step by step) --
the same trick as the critical path (``cpgraph``), no per-event Python loop.

**Weights for a replay.** The critical path zeroes gaps that are no work for *its* question
(host threads with nothing recorded, device gaps whose launch is not in the trace); a replay must
keep them, since unrecorded host time still takes time: a gap with no cross edge explaining it
keeps its measured length. Waits (sync segments, data waits fed by a loader) stay 0: their time
comes in through the awaited task's edge. With nothing changed every node replays at its measured
time except after waits (a sync ends when its awaited task does, not the few microseconds later
the trace shows): that is the replay's own error.

**Step time.** A step ends when its main host thread (the host lane active last) ends, plus the
unrecorded tail after its last event, or when any other non-loader lane ends, if later; the next
step starts then (steps in sequence: one virtual start node per step, see :func:`edges`).
Several ranks with their collectives matched are replayed together by ``hermes.whatif.cluster``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hermes.analyzers.common.steps import step_windows
from hermes.analyzers.critical_path import graph as cpgraph
from hermes.analyzers.critical_path import stepgraph
from hermes.analyzers.engine.base import Keep
from hermes.whatif import chains
from hermes.whatif.graphparts import collectives, fed_tasks


@dataclass
class StepGraph:
    """One rank's step graph with what a replay needs: ``g`` and ``info`` (from
    ``stepgraph.build``), ``windows`` (the steps), per-node event, and the replay weights."""

    g: cpgraph.Graph
    info: pd.DataFrame
    windows: pd.DataFrame
    rank: int = 0
    node_ev: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    span: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    w: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    has_in: np.ndarray = field(default_factory=lambda: np.empty(0, bool))
    cw: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    #: :attr:`coll` once set or computed (what it is computed of until then: ``_coll_of``)
    _coll: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    #: each step's last node of every non-loader lane, its step, and whether it is the step's
    #: main thread's (the host lane active last): where a step ends
    ends: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    ends_win: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    ends_main: np.ndarray = field(default_factory=lambda: np.empty(0, bool))
    #: the rank's events, whose ``args`` (graph event i's: row ``info["src"][i]``; their column
    #: or, loaded with ``lazy_args``, their file's; None: the trace has none) are read for the
    #: events a transform asks about (``facts.args_at``)
    args: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    #: what ``hermes.whatif.predict`` computes once per set of graphs (the unchanged replay)
    memo: dict = field(default_factory=dict, repr=False, compare=False)
    _coll_of: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def coll(self) -> pd.DataFrame:
        """The rank's collectives (``cluster`` matches them across ranks): graph event id
        ``ev``, ``group`` ('' unknown), ``seq`` (-1 unknown), ``name``, ``step`` (its window's
        number). Computed on first use (a replay of one rank never matches any)."""
        if self._coll is None:
            self._coll = collectives(*self._coll_of) if self._coll_of is not None else \
                pd.DataFrame()
            self._coll_of = None
        return self._coll

    @coll.setter
    def coll(self, value: pd.DataFrame) -> None:
        self._coll, self._coll_of = value, None


@dataclass
class Change:
    """A change to a step graph: ``scale`` per event (factor on its own chain segments, 0..1),
    ``drop`` per cross edge (True: the dependency is gone), ``full`` per event (its segments
    weigh their measured time before scaling, not the 0 of a wait: a data wait whose loader
    edge is dropped becomes the time it still costs)."""

    scale: np.ndarray
    drop: np.ndarray
    full: np.ndarray
    #: per event: when it starts its lane's chain in a step, it may start at the step start
    #: (what held it back, e.g. a batch not ready yet, is gone)
    early: np.ndarray
    #: factor on the time no event accounts for (host gaps, a lane's lead-in from the step
    #: start to its first event): a straggler's stalls shrink with its events
    gap: float = 1.0
    #: per event, factor on a matched collective's transmission in a joint replay of ranks
    #: (``cluster``: its time after the last arrival; None: kept as measured)
    tx: np.ndarray | None = None

    @classmethod
    def none(cls, sg: StepGraph) -> Change:
        n_ev = len(sg.info)
        return cls(np.ones(n_ev), np.zeros(sg.g.cu.size, bool), np.zeros(n_ev, bool),
                   np.zeros(n_ev, bool))


def build(ev: pd.DataFrame, windows: pd.DataFrame | None = None, rank: int = 0,
          keep: Keep | None = None) -> StepGraph:
    """The step graph of one rank's events (``windows``: the steps, default all of them).
    ``keep``: an analysis run's store (``Analysis.keep``): the graph the critical path built of
    the same events and steps is taken from it, not built again."""
    # (the graph of every step the critical path built of the same events, when kept: not
    # built again, nor its events' arrays and steps)
    got = stepgraph.kept_steps(ev, keep) if windows is None else None
    if got is not None:
        g, info, windows = got
    else:
        windows = step_windows(ev) if windows is None else windows.reset_index(drop=True)
        g, info = stepgraph.build(ev, windows, keep=keep)
    sg = StepGraph(g, info, windows, rank)
    n = g.n
    node_ev = np.empty(n, np.int64)
    ids = np.arange(g.event_start.size)
    node_ev[g.event_start] = ids
    node_ev[g.event_end] = ids
    first = g.first_of_lane()
    g = fed_tasks(g, info, node_ev, first)
    sg.g = g
    span = np.zeros(n, np.int64)
    span[1:] = np.where(first[1:], 0, g.t[1:] - g.t[:-1])
    has_in = np.zeros(n, bool)
    has_in[g.cv[g.forward_cross()]] = True
    w = g.w.copy()
    # (decided per category of the kind column, no string per event)
    kind = info["kind"]
    wait_ev = np.isin(kind.cat.categories.to_numpy(object), ("sync", "data_wait")
                      )[kind.cat.codes.to_numpy()]
    seg = g.seg_event
    waiting = np.append(wait_ev, False)[seg]  # (seg -1, no event: the last entry)
    # time nothing explains (no launch or wait edge into the node: a host gap, a device gap
    # whose launch is not in the trace, a task whose launch edge went back in time) is kept
    kept = ~first & ~has_in & ~waiting
    w[kept] = span[kept]
    # a wait (sync, data wait) that awaited nothing in the trace still took its time
    fed = np.zeros(n, bool)
    fed[g.event_end[wait_ev]] = has_in[g.event_end[wait_ev]]
    fed_ev = fed[g.event_end]
    unfed = waiting & ~np.append(fed_ev, True)[seg]
    w[unfed] = span[unfed]
    # the awaited task's end -> the wait's end: the measured return latency (the critical path
    # weighs it 0), so an unchanged replay ends the wait when it was measured to end
    into_wait = wait_ev[node_ev[g.cv]] & (g.event_end[node_ev[g.cv]] == g.cv)
    sg.cw = np.where(into_wait, np.maximum(g.t[g.cv] - g.t[g.cu], 0), g.cw)
    sg.node_ev, sg.span, sg.w, sg.has_in = node_ev, span, w, has_in
    sg._coll_of = (ev, info, windows)  # (:attr:`StepGraph.coll`, computed where it is read)
    sg.ends, sg.ends_win, sg.ends_main = _lane_ends(sg)
    return sg


def replay_nodes(sg: StepGraph, change: Change | None = None, w: np.ndarray | None = None
                 ) -> np.ndarray:
    """Replayed time (ns, absolute) of every node under ``change`` (None: as measured),
    followed by the replayed start of every step (:func:`edges`; ``w``: :func:`weights` of
    ``change``, when the caller has them)."""
    g = sg.g
    if g.n == 0:
        return np.empty(0, np.int64)
    if change is None or not (change.drop.any() or change.early.any()):
        # the edges and releases of the unchanged replay: its folding plan serves
        fr, lost, gone, start = _raw(sg, change, w=w)
        return fr.t - chains.raw_solve(_raw_plan(sg, fr, gone, start), fr.ru, lost, start)
    u, v, lost, start = edges(sg, change)
    return times(sg) - chains.shortest(size(sg), u, v, lost, start, *step_spans(sg))


def _raw_plan(sg: StepGraph, fr: _Frame, gone: np.ndarray, start: np.ndarray
              ) -> chains.RawPlan:
    """The folding plan of the unchanged replay's edges and releases (those of a change
    that drops no edge and makes no task early), kept in the graph's memo."""
    deps, plan = sg.memo.get("plan", ((), None))
    if plan is None or not all(a is b for a, b in zip(deps, (sg.g, fr), strict=True)):
        plan = chains.raw_plan(size(sg), fr.ru, fr.rv, ~gone, start, *step_spans(sg))
        sg.memo["plan"] = ((sg.g, fr), plan)
    return plan


def step_spans(sg: StepGraph) -> tuple[np.ndarray, np.ndarray]:
    """The replay's steps as ``chains`` parts in sequence: each node's step (a step's start
    node, :func:`edges`, in its own), and each step's start node (the part's entry)."""
    nw = len(sg.windows)
    # (the nodes are laid out step-major -- chains by (step, lane), ``stepgraph.layout_order``
    # -- and each event has its two nodes in its step's chain: a step's nodes are a run of
    # twice its events, no per-node gather of the events' step)
    cnt = np.bincount(sg.info["win"].to_numpy(np.int64), minlength=nw)
    part = np.repeat(np.arange(nw + 1), np.append(2 * cnt, nw))
    part[sg.g.n:] = np.arange(nw)
    return part, sg.g.n + np.arange(nw)


def size(sg: StepGraph) -> int:
    """Nodes of the replay's problem: the graph's, then one per step (its start)."""
    return sg.g.n + len(sg.windows)


def times(sg: StepGraph) -> np.ndarray:
    """Measured time of every node of the replay's problem (:func:`size`)."""
    return np.concatenate([sg.g.t, sg.windows["start_ns"].to_numpy(np.int64)])


def edges(sg: StepGraph, change: Change | None = None, wait: np.ndarray | None = None
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The replay's shortest-path problem under ``change``: edges (u, v, lost time; unique
    pairs, sorted) and each node's distance from the virtual source (``t - release``; inf:
    none). ``wait``: per node, True where the chain edge into it weighs 0 (inside a collective
    matched across ranks: its end comes in through the cluster's edges).

    Steps in sequence: node ``g.n + k`` is step k's start; the first one starts when
    measured, step k + 1 when step k ends (its main thread's end plus the unrecorded tail, or
    any other non-loader lane's end, plus the measured gap between the steps). A lane's first
    node in a step starts its measured lead after its step's start unless a launch or wait edge
    decides it; loader workers run on their own clock (measured, absolute).

    The edges a change may use and their order are the same for every change
    (:func:`_frame`, computed once per graph): a change only weighs them, and drops some (a
    dropped cross edge, an early loader's step-start edge); each pair keeps its least lost time
    among the edges it keeps."""
    fr, lost, gone, start = _raw(sg, change, wait)
    # (an edge the change leaves out never wins its pair's least lost time)
    lost[gone] = _GONE
    order, pairs, pu, pv = fr.pairs_of()
    least = np.minimum.reduceat(lost[order], pairs) if lost.size else lost
    keep = least < _GONE
    return pu[keep], pv[keep], least[keep], start


def _raw(sg: StepGraph, change: Change | None = None, wait: np.ndarray | None = None,
         w: np.ndarray | None = None
         ) -> tuple[_Frame, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`edges` before the pairs: the frame, every edge's lost time, the mask of the
    edges ``change`` leaves out, the releases (``w``: :func:`weights` of ``change`` and
    ``wait``, when the caller has them)."""
    g = sg.g
    fr = _frame(sg)
    w = weights(sg, change, wait) if w is None else w
    f = fr.firsts  # (what follows is of the lanes' first nodes alone)
    early = change.early[sg.node_ev[f]] if change is not None and change.early.any() else None
    pinned = fr.pinned if early is None else fr.pinned & ~early
    lead = fr.lead
    if change is not None and change.gap != 1.0:
        lead = np.rint(lead * change.gap).astype(np.int64)
    # a loader worker's first node: released when measured (or, made early, at the step start)
    own_clock = fr.own_clock if early is None else fr.own_clock & ~early
    nk, nc, nf = fr.k.size, fr.cross.size, f.size
    # lost = max(span - weight, 0), block by block (chain, cross, step-start, step-end edges;
    # a step-start edge spans its node's measured lead)
    lost = np.empty(fr.span.size, np.int64)
    np.subtract(fr.span[:nk], w[fr.k], out=lost[:nk])
    lost[nk:nk + nc] = fr.span_cw
    lost[nk + nc:nk + nc + nf] = fr.lead - np.where(pinned, lead, 0)
    lost[nk + nc + nf:] = fr.span_ew
    np.maximum(lost, 0, out=lost)
    gone = np.zeros(lost.size, bool)
    if change is not None:
        gone[nk:nk + nc] = change.drop[fr.cross]
    gone[nk + nc:nk + nc + nf] = own_clock
    start = np.full(size(sg), np.inf)
    start[g.n] = 0.0  # the first step starts when measured
    oc = np.flatnonzero(own_clock)
    start[f[oc]] = g.t[f[oc]] - np.where(pinned[oc], fr.ws[oc] + lead[oc], fr.ws[oc])
    return fr, lost, gone, start


#: the lost time of an edge a change leaves out (above any real one)
_GONE = np.iinfo(np.int64).max


@dataclass
class _Frame:
    """What :func:`edges` computes the same for every change: every edge a change may use
    (chain edges, forward cross edges ``cross``, each lane's step-start edge into ``firsts``,
    step ends -> next step's start), their measured spans (and those less the weights no
    change alters: ``span_cw`` of the cross edges, ``span_ew`` of the step ends), of each
    lane's first node ``firsts`` its step's start ``ws``, its ``lead`` after it and whether
    the unchanged replay pins it there (``pinned``) or runs it on its own clock
    (``own_clock``); the measured time of every node ``t`` (:func:`times`); and
    (:meth:`pairs_of`, on first use: only :func:`edges` needs them) their order by (u, v)
    with the start of each distinct pair (``pairs``; ``u``, ``v`` per pair)."""

    k: np.ndarray
    cross: np.ndarray
    firsts: np.ndarray
    ws: np.ndarray
    lead: np.ndarray
    pinned: np.ndarray
    own_clock: np.ndarray
    span: np.ndarray
    span_cw: np.ndarray
    span_ew: np.ndarray
    n: int
    ru: np.ndarray  # every edge's (before the pairs)
    rv: np.ndarray
    t: np.ndarray
    _pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def pairs_of(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(order, pairs, u, v)``: the edges' stable order by (u, v), the start of each
        distinct pair in it, and each pair's u and v."""
        if self._pairs is None:
            u, v = self.ru, self.rv
            key = u * self.n + v
            order = np.argsort(key, kind="stable")
            ks = key[order]
            starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]) if ks.size else \
                np.empty(0, np.int64)
            self._pairs = (order, starts, u[order][starts], v[order][starts])
        return self._pairs


def _frame(sg: StepGraph) -> _Frame:
    """:class:`_Frame` of ``sg``, kept in its memo for the objects it was computed from."""
    deps = (sg.g, sg.windows, sg.info, sg.node_ev, sg.ends, sg.ends_win, sg.ends_main,
            sg.has_in, sg.cw)
    got = sg.memo.get("frame")
    if got is not None and all(a is b for a, b in zip(got[0], deps, strict=True)):
        return got[1]
    g = sg.g
    nw = len(sg.windows)
    n = g.n + nw
    first = g.first_of_lane()
    k = np.flatnonzero(~first)
    cross = np.flatnonzero(g.forward_cross())
    ws_w = sg.windows["start_ns"].to_numpy(np.int64)
    we_w = sg.windows["end_ns"].to_numpy(np.int64)
    win_ev = sg.info["win"].to_numpy(np.int64)
    firsts = np.flatnonzero(first)
    fev = sg.node_ev[firsts]
    win_f = win_ev[fev]
    ws = ws_w[win_f]
    # step k's last node per non-loader lane -> step k + 1's start
    sel = sg.ends_win < nw - 1
    e, main = sg.ends[sel], sg.ends_main[sel]
    win_e = win_ev[sg.node_ev[e]]
    ew = np.maximum(ws_w[win_e + 1] - we_w[win_e], 0)  # the gap between the steps
    ew[main] = np.maximum(ws_w[win_e[main] + 1] - g.t[e[main]], 0)  # + the tail
    cu, cv = g.cu[cross].astype(np.int64, copy=False), g.cv[cross].astype(np.int64, copy=False)
    u = np.concatenate([k - 1, cu, g.n + win_f, e])
    v = np.concatenate([k, cv, firsts, g.n + win_e + 1])
    # each edge's measured span t[v] - t[u], block by block (a chain edge's: the node's span)
    lead = g.t[firsts] - ws
    span_ew = ws_w[win_e + 1] - g.t[e]
    span = np.concatenate([sg.span[k], g.t[cv] - g.t[cu], lead, span_ew])
    span_cw = np.maximum(span[k.size:k.size + cross.size] - sg.cw[cross], 0)
    fr = _Frame(k, cross, firsts, ws, lead, ~sg.has_in[firsts],
                sg.info["loader"].to_numpy(bool)[fev], span, span_cw,
                np.maximum(span_ew - ew, 0), n, u, v, times(sg))
    sg.memo["frame"] = (deps, fr)
    return fr


#: data-pipeline work (reading, decoding, pinning the next batches): it feeds later steps, so
#: a lane that ends a step with it does not end the step
FEED_KINDS = ("data_read", "data_process", "data_fetch")


def _lane_ends(sg: StepGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each step's last node of every non-loader lane, its step, and a mask of each step's
    main thread's: the host lane active last."""
    g = sg.g
    if g.n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, bool)
    last = np.ones(g.n, bool)
    last[:-1] = g.lane[1:] != g.lane[:-1]
    feed = sg.info["loader"].to_numpy(bool) | _kind_in(sg.info["kind"], FEED_KINDS)
    idx = np.flatnonzero(last & ~feed[sg.node_ev])
    ev = sg.node_ev[idx]
    win = sg.info["win"].to_numpy(np.int64)[ev]
    # per step, the last of its lane ends by (host, time), later ends winning ties
    o = np.lexsort((np.arange(idx.size), g.t[idx], sg.info["host"].to_numpy(bool)[ev], win))
    tail = np.ones(o.size, bool)
    tail[:-1] = win[o][1:] != win[o][:-1]
    main = np.zeros(idx.size, bool)
    main[o[tail]] = True
    return idx, win, main


def _kind_in(kind: pd.Series, values: tuple[str, ...]) -> np.ndarray:
    """Per event: its kind is one of ``values`` (decided per category, no string per event)."""
    if not isinstance(kind.dtype, pd.CategoricalDtype):
        return np.isin(kind.astype(str).to_numpy(), values)
    hit = np.append(np.isin(kind.cat.categories.astype(str).to_numpy(object), values), False)
    return hit[kind.cat.codes.to_numpy()]


def weights(sg: StepGraph, change: Change | None = None, wait: np.ndarray | None = None
            ) -> np.ndarray:
    """Chain-edge weight into every node under ``change``: an event's own segments scaled
    (``wait``: per node, True where the chain edge into it weighs 0)."""
    if change is None and wait is None:  # (every factor 1: the measured weights)
        return _measured_weights(sg)
    change = change or Change.none(sg)
    seg = sg.g.seg_event
    if wait is None and change.gap == 1.0 and not change.full.any():
        # only the segments of the events it scales differ from the measured weights
        w = _measured_weights(sg).copy()
        hit = np.flatnonzero(np.append(change.scale != 1.0, False)[seg])  # (seg -1: none)
        w[hit] = np.minimum(np.rint(sg.w[hit] * change.scale[seg[hit]]).astype(np.int64),
                            sg.span[hit])
        return w
    ev = np.maximum(seg, 0)
    base = np.where((seg >= 0) & change.full[ev], sg.span, sg.w)
    w = np.where(seg >= 0, np.rint(base * change.scale[ev]), np.rint(sg.w * change.gap)
                 ).astype(np.int64)
    if wait is not None:
        w[wait] = 0
    return np.minimum(w, sg.span)  # transforms only shrink work (the potentials stay valid)


def _measured_weights(sg: StepGraph) -> np.ndarray:
    """:func:`weights` with nothing changed (read-only), kept in the graph's memo."""
    deps, w = sg.memo.get("weights", ((), None))
    if w is None or not all(a is b for a, b in zip(deps, (sg.w, sg.span), strict=True)):
        w = np.minimum(sg.w, sg.span)
        w.flags.writeable = False
        sg.memo["weights"] = ((sg.w, sg.span), w)
    return w


def step_times(sg: StepGraph, r: np.ndarray) -> np.ndarray:
    """Replayed duration (ns) of every step from node times ``r``: from its replayed start
    (``r`` of :func:`replay_nodes`; else its measured start) to its main thread's end plus the
    unrecorded tail, or any other non-loader lane's end, if later."""
    g = sg.g
    nw = len(sg.windows)
    if g.n == 0 or sg.ends.size == 0:
        return np.zeros(nw, np.int64)
    start = r[g.n:g.n + nw] if r.size >= g.n + nw else None
    return _step_times(sg, r[sg.ends], start)


def _step_times(sg: StepGraph, r_ends: np.ndarray, start: np.ndarray | None) -> np.ndarray:
    """:func:`step_times` from the times ``r_ends`` of the lane ends ``sg.ends`` and the steps'
    replayed starts ``start`` (None: measured)."""
    g = sg.g
    nw = len(sg.windows)
    out = np.zeros(nw, np.int64)
    ws = sg.windows["start_ns"].to_numpy(np.int64)
    we = sg.windows["end_ns"].to_numpy(np.int64)
    end_any = np.full(nw, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(end_any, sg.ends_win, r_ends)
    main = sg.ends_main
    m, mw = sg.ends[main], sg.ends_win[main]
    end = np.maximum(end_any[mw], r_ends[main] + (we[mw] - g.t[m]))
    start = ws if start is None else start
    out[mw] = end - start[mw]
    return out


def measured(sg: StepGraph) -> np.ndarray:
    """Measured duration (ns) of every step."""
    return (sg.windows["end_ns"] - sg.windows["start_ns"]).to_numpy(np.int64)


def replay(sg: StepGraph, change: Change | None = None, w: np.ndarray | None = None
           ) -> np.ndarray:
    """Replayed duration (ns) of every step under ``change`` (``w``: its :func:`weights`,
    when the caller has them)."""
    g = sg.g
    if g.n == 0 or sg.ends.size == 0 or (
            change is not None and (change.drop.any() or change.early.any())):
        return step_times(sg, replay_nodes(sg, change, w))
    # (:func:`replay_nodes`' raw path, the times of the lane ends and step starts alone)
    at = np.concatenate([sg.ends, g.n + np.arange(len(sg.windows))])
    fr, lost, gone, start = _raw(sg, change, w=w)
    r = fr.t[at] - chains.raw_solve(_raw_plan(sg, fr, gone, start), fr.ru, lost, start, at)
    return _step_times(sg, r[:sg.ends.size], r[sg.ends.size:])
