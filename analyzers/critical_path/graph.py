"""The dependency graph of one step and its longest path, in numpy (no per-event Python loop).

Graph (all times in ns): each event of the step (clipped to the step window, zero-length events
dropped) gives a *start* and an *end* node. Nodes of one lane form a **chain** in time order
(ends before starts at equal times; nested events outer-first): the chain edge into node ``k``
weighs ``t[k] - t[k-1]`` and is attributed to the innermost event active on that lane between
the two nodes (none: a lane gap). Waits weigh 0: chain segments inside a ``sync`` event (the host
or a stream waiting is not work). **Cross edges** link lanes: a launch's start -> its device
task's start (shared ``corr_id``, weight = the launch delay, clipped at 0), and the awaited device
task's end -> a sync's end (weight 0; the awaited task is the device task ending last within the
sync). Host-lane gaps (nothing recorded) weigh 0, as HTA's dependency edges between top-level
CPU ops. A launch edge weighs the launch delay only when the task waited for its launch (launch
start >= the stream's previous node, HTA's empty-queue rule); the stream gap before the task then
weighs 0. Otherwise the launch edge weighs 0 and the stream gap (kernel-kernel delay) counts.

Longest path: every edge goes forward in time and weighs at most its time span, so the *lost*
time of an edge, ``(t[v] - t[u]) - w >= 0``, is a non-negative weight and the longest path
ending at ``v`` is ``t[v] - D(v)``, where ``D(v) = min(t[v], min over in-edges (D(u) + lost))``
is a shortest-path distance from a virtual source linked to every node with weight ``t[v]``
(any node may start a path), solved by :mod:`.lanes` (one compiled pass in topological order;
numpy rounds where it is not compiled or the graph has a cycle). No per-event Python loop; cross edges
that go backwards in time (inconsistent clocks) are dropped. The backward pass (longest path
*from* each node) is the same on the reversed graph, giving each event's slack; the path itself
is read back from the predecessors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hermes.analyzers.common.nesting import sort_by_key


@dataclass(frozen=True)
class Graph:
    """Nodes laid out lane by lane in chain order.

    ``t``: node time (ns); ``lane``: lane index per node (non-decreasing); ``w``: weight of the
    chain edge into the node (0 for a lane's first node); ``seg_event``: event the chain edge into
    the node is attributed to (-1: lane gap or first node); ``cu``, ``cv``, ``cw``, ``ce``: cross
    edges (source node, target node, weight, attributed event); ``event_start``/``event_end``:
    the start and end node of each event."""

    t: np.ndarray
    lane: np.ndarray
    w: np.ndarray
    seg_event: np.ndarray
    cu: np.ndarray
    cv: np.ndarray
    cw: np.ndarray
    ce: np.ndarray
    event_start: np.ndarray
    event_end: np.ndarray

    @property
    def n(self) -> int:
        return int(self.t.size)

    def first_of_lane(self) -> np.ndarray:
        f = np.ones(self.n, bool)
        f[1:] = self.lane[1:] != self.lane[:-1]
        return f

    def forward_cross(self) -> np.ndarray:
        """Mask of the cross edges that go forward in time (the ones used)."""
        return self.t[self.cv] >= self.t[self.cu]


def edges(g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All edges (u, v, lost time), duplicates reduced to the least lost, sorted by (u, v).
    Compute once and pass to :func:`longest` and :func:`longest_from`."""
    k = np.flatnonzero(~g.first_of_lane())
    fwd = g.forward_cross()
    u = np.concatenate([k - 1, g.cu[fwd]]).astype(np.int64)
    v = np.concatenate([k, g.cv[fwd]]).astype(np.int64)
    w = np.concatenate([g.w[k], g.cw[fwd]]).astype(np.int64)
    lost = np.maximum((g.t[v] - g.t[u]) - w, 0)
    order = sort_by_key(u * g.n + v, lost)  # as np.lexsort((lost, v, u)): pairs < n**2
    u, v, lost = u[order], v[order], lost[order]
    keep = np.ones(u.size, bool)
    keep[1:] = (u[1:] != u[:-1]) | (v[1:] != v[:-1])
    return u[keep], v[keep], lost[keep]




def shortest(n: int, u: np.ndarray, v: np.ndarray, lost: np.ndarray, start: np.ndarray,
             preds: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Shortest distances (int64 ns) from a virtual source (node ``n``) with edges source -> i
    weighing ``start[i]``, over edges ``u -> v`` of non-negative ``lost``, and each node's
    predecessor (``n``: the source; None unless ``preds``) under the tie rule of
    :mod:`.lanes`. Any edge list is a lane graph (an edge ``k - 1 -> k`` is a chain edge):
    this is :func:`.lanes.shortest` on it. Weights are whole ns: fractional ones (the cluster
    replay's) are rounded to the nearest ns first. A source weight may be ``inf`` (no source
    edge); a node no path reaches gets the least int64 as its distance and -9999 as its
    predecessor. Raises ``OverflowError`` when the sums do not fit int64 (beyond 2**60 ns)."""
    from hermes.analyzers.critical_path import lanes

    start, big, lost = int_weights(np.asarray(start), np.asarray(lost))
    u, v = np.asarray(u, np.int64), np.asarray(v, np.int64)
    ch = v == u + 1
    chain = np.zeros(n, bool)
    chain[v[ch]] = True
    clost = np.full(n, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(clost, v[ch], lost[ch])  # (a repeated chain pair: its least lost)
    clost[~chain] = 0
    got = lanes.shortest(n, chain, clost, u[~ch], v[~ch], lost[~ch], start, preds=preds,
                         inf=big)
    if got is None:
        raise OverflowError("step graph distances do not fit int64 ns")
    d, pred = got
    if big is not None:
        out = d >= big
        if out.any():
            d = d.copy()
            d[out] = np.iinfo(np.int64).min
            if pred is not None:
                pred = pred.copy()
                pred[out] = -9999
    return d, pred


#: the stand-in for an infinite source weight in :func:`shortest` (distances, in ns, stay far
#: below it: 2**61 ns is 73 years)
UNREACHED = 2**61


def int_weights(start: np.ndarray, lost: np.ndarray) -> tuple[np.ndarray, int | None, np.ndarray]:
    """Source weights and lost times as int64 ns (fractional ones rounded to the nearest ns),
    and the stand-in used for an ``inf`` source weight -- or one of :data:`UNREACHED` ns or more
    -- (None: there is none). Raises ``ValueError`` on a NaN, a negative infinity or an
    infinite lost time."""
    if lost.dtype.kind == "f":
        if not np.isfinite(lost).all():
            raise ValueError("lost times must be finite")
        lost = np.rint(lost).astype(np.int64)
    else:
        lost = lost.astype(np.int64, copy=False)
    if start.dtype.kind != "f":
        return start.astype(np.int64, copy=False), None, lost
    if np.isnan(start).any() or (start == -np.inf).any():
        raise ValueError("source weights must be numbers or +inf")
    fin = start < UNREACHED  # (a weight beyond 73 years is no release at all, as +inf)
    if fin.all():
        return np.rint(start).astype(np.int64), None, lost
    out = np.full(start.size, UNREACHED, np.int64)
    out[fin] = np.rint(start[fin]).astype(np.int64)
    return out, UNREACHED, lost


def both(g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`longest` and :func:`longest_from` of ``g`` (dist, pred, bwd) in two lane passes
    (:mod:`.lanes`), the forward one on ``g`` and the backward one on the reversed graph, its
    nodes numbered backwards (so its chain edges stay ``k - 1 -> k``)."""
    if g.n == 0:
        z = np.empty(0, np.int64)
        return z, z, z
    got = lane_both(g)
    if got is None:
        raise OverflowError("step graph distances do not fit int64 ns")
    return got


def lane_both(g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`both` by two lane passes (:mod:`.lanes`), the forward one and the reversed
    graph's; compiled (``_lanes.graph_both``: one topological pass for the distances and the
    tie rule's predecessors, the same order backwards for the reversed graph, the lost times
    computed in the same call) where the module is and the graph is a DAG, else
    :func:`.lanes.shortest` twice. None when the sums could overflow int64."""
    from hermes.analyzers.critical_path import lanes as lanepass

    n = g.n
    kern = lanepass.compiled_pass()
    if kern is not None:  # (compiled: the lane graph's lost times in the same call)
        dist, pred, bwd = (np.empty(n, np.int64) for _ in range(3))
        if kern.graph_both(*(np.ascontiguousarray(a, np.int64) for a in (g.t, g.w)),
                           g.first_of_lane(), *(np.ascontiguousarray(a, np.int64)
                                                for a in (g.cu, g.cv, g.cw)), dist, pred, bwd):
            return dist, pred, bwd
    t0, t1 = int(g.t.min()), int(g.t.max())
    chain = ~g.first_of_lane()
    lost = np.zeros(n, np.int64)
    gap = np.subtract(g.t[1:], g.t[:-1])
    gap -= g.w[1:]
    np.maximum(gap, 0, out=lost[1:])
    del gap
    fwd = g.forward_cross()
    cu, cv = g.cu[fwd].astype(np.int64), g.cv[fwd].astype(np.int64)
    cl = np.maximum((g.t[cv] - g.t[cu]) - g.cw[fwd], 0)
    got = lanepass.shortest(n, chain, lost, cu, cv, cl, g.t - t0)
    if got is None:
        return None
    d, pred = got
    # the reversed graph, nodes numbered backwards: its chain edge into j is ours into n - j
    rchain = np.zeros(n, bool)
    rchain[1:] = chain[:0:-1]
    rlost = np.zeros(n, np.int64)
    rlost[1:] = lost[:0:-1]
    back = lanepass.shortest(n, rchain, rlost, (n - 1) - cv, (n - 1) - cu, cl,
                             (t1 - g.t)[::-1], preds=False)
    if back is None:
        return None
    dist = g.t - t0
    dist -= d
    del d
    bwd = t1 - g.t
    bwd -= back[0][::-1]
    return dist, pred, bwd


def lane_csr(g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges of :func:`edges` as CSR arrays of out-edges (indptr of n + 1, target, lost),
    built without sorting every edge: each node's chain edge first, then its forward cross
    edges in their order in ``g`` (only the cross edges are sorted, by source). Duplicate
    pairs are kept: they change no distance (a pair's predecessor is the same either way)."""
    n = g.n
    chain = np.zeros(n, bool)  # the node has a chain edge out (to node + 1)
    chain[:-1] = ~g.first_of_lane()[1:]
    fwd = g.forward_cross()
    cu, cv = g.cu[fwd].astype(np.int64), g.cv[fwd].astype(np.int64)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(chain + np.bincount(cu, minlength=n), out=indptr[1:])
    indices = np.empty(int(indptr[n]), np.int64)
    lost = np.empty(indices.size, np.int64)
    k = np.flatnonzero(chain)
    indices[indptr[k]] = k + 1
    lost[indptr[k]] = np.maximum((g.t[k + 1] - g.t[k]) - g.w[k + 1], 0)
    o = np.argsort(cu, kind="stable")
    cu, cv, cw = cu[o], cv[o], g.cw[fwd][o]
    at = indptr[cu] + chain[cu] + (np.arange(cu.size) - np.searchsorted(cu, cu))
    indices[at] = cv
    lost[at] = np.maximum((g.t[cv] - g.t[cu]) - cw, 0)
    return indptr, indices, lost


def longest(g: Graph, e: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """Forward longest-path length (ns) ending at each node, and each node's predecessor on
    it (-1 or the virtual source ``g.n``: the path starts there). ``e``: :func:`edges` of ``g``."""
    if g.n == 0:
        z = np.empty(0, np.int64)
        return z, z
    t0 = int(g.t.min())
    u, v, lost = edges(g) if e is None else e
    d, pred = shortest(g.n, u, v, lost, g.t - t0)
    return (g.t - t0) - d, pred


def longest_from(g: Graph, e: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                 ) -> np.ndarray:
    """Longest path (ns) starting at each node (the backward pass, on the reversed graph)."""
    if g.n == 0:
        return np.empty(0, np.int64)
    t1 = int(g.t.max())
    u, v, lost = edges(g) if e is None else e
    d, _ = shortest(g.n, v, u, lost, t1 - g.t, preds=False)
    return (t1 - g.t) - d


class CrossIndex:
    """Lookup of the forward cross edges by (source, target) node, built once per graph."""

    def __init__(self, g: Graph) -> None:
        fwd = g.forward_cross()
        self.n = g.n
        key = g.cu[fwd] * g.n + g.cv[fwd]
        o = np.argsort(key, kind="stable")
        self.key = key[o]
        self.ce = g.ce[fwd][o]
        self.cw = g.cw[fwd][o]

    def find(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(attributed event, weight) of the first cross edge a -> b (as ``np.argsort`` +
        ``searchsorted`` on the sorted keys, clipped to the last edge)."""
        i = np.clip(np.searchsorted(self.key, a * self.n + b), 0, max(self.key.size - 1, 0))
        return self.ce[i], self.cw[i]


def path_nodes(pred: np.ndarray, end: int, n: int, runs: np.ndarray | None = None
               ) -> np.ndarray:
    """Nodes of the path ending at ``end``, first to last, following the predecessors
    (a predecessor outside 0..n-1 ends the walk), run by run: where ``pred[k] == k - 1`` (a
    chain step) the walk goes down to the run's first node at once, a Python step per run,
    i.e. per lane change on the path (``runs``: :func:`chain_runs` of ``pred``, computed here
    when not given)."""
    pred = np.asarray(pred, np.int64)
    run0 = chain_runs(pred) if runs is None else runs
    parts = []
    j = int(end)
    for _ in range(n + 1):
        r = int(run0[j])
        parts.append(np.arange(j, r - 1, -1))
        q = int(pred[r])
        if q < 0 or q >= n:
            break
        j = q
    return np.concatenate(parts)[::-1]


def chain_runs(pred: np.ndarray) -> np.ndarray:
    """The first node of each node's run of chain steps (``pred[k] == k - 1``), for
    :func:`path_nodes` (one vectorized prefix max)."""
    k = np.arange(pred.size)
    k[1:][pred[1:] == k[:-1]] = 0
    return np.maximum.accumulate(k, out=k)


def backtrack(g: Graph, dist: np.ndarray, pred: np.ndarray, end: int | None = None,
              index: CrossIndex | None = None, runs: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Events on the longest path ending at node ``end`` (default: the longest of all) and the
    time each contributes: (event ids, ns); -1 for lane gaps. Walks the predecessors.
    ``index``: the graph's :class:`CrossIndex` (built here when not given)."""
    if g.n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    k = int(np.argmax(dist)) if end is None else int(end)
    nodes = path_nodes(pred, k, g.n, runs)
    a, b = nodes[:-1], nodes[1:]
    chain = (b == a + 1) & (g.lane[np.minimum(b, g.n - 1)] == g.lane[a])
    ev = np.where(chain, g.seg_event[b], -1)
    wt = np.where(chain, g.w[b], 0)
    if (~chain).any() and g.cu.size:
        index = CrossIndex(g) if index is None else index
        if index.key.size:
            ev[~chain], wt[~chain] = index.find(a[~chain], b[~chain])
    return ev.astype(np.int64), wt.astype(np.int64)
