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
(any node may start a path). Every edge goes forward in time, so the graph is a DAG (unless
equal-time edges close a cycle): on graphs of ``DAG_MIN_NODES`` nodes or more that is one
compiled pass in topological order, O(V + E) (:mod:`dagpath`, numba, imported only then);
on smaller graphs, and on any graph with a cycle, one call of scipy's compiled Dijkstra,
O(E log V). Both give the same distances, and the same predecessors up to ties between
in-neighbours of equal distance (``dagpath``'s docstring). No per-event Python loop; cross edges
that go backwards in time (inconsistent clocks) are dropped. The backward pass (longest path
*from* each node) is the same on the reversed graph, giving each event's slack; the path itself
is read back from the predecessors.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from types import ModuleType

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


_edges = edges




def _shortest(n: int, u: np.ndarray, v: np.ndarray, lost: np.ndarray, start: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Shortest distances from a virtual source (node ``n``) with edges source -> i weighing
    start[i], and each node's predecessor (``n``: the source): Dijkstra's answer, computed by
    the DAG pass (:mod:`dagpath`, same distances; predecessors the same up to ties between
    in-neighbours of equal distance) on graphs of ``DAG_MIN_NODES`` nodes or more.

    The CSR arrays are built in canonical form (rows in order, columns sorted within a row, no
    duplicates: the pairs are unique), the form scipy would sort a COO input into, so Dijkstra
    sees the same graph; explicit zeros are edges in a csr matrix built this way.

    Smaller graphs go first to the numpy lane pass (:mod:`lanepass`; chain edges are the
    ``k - 1 -> k`` ones), Dijkstra only if it does not settle. A source weight may be ``inf``
    (no source edge): the passes then run with a finite stand-in, :data:`UNREACHED`, above
    every finite distance, and a node left at or above it is unreachable, as Dijkstra reports
    it (``inf`` cast to int64: the least int64; predecessor -9999)."""
    ok = _int_start(np.asarray(start), np.asarray(lost))
    if ok is None:  # fractional weights (the cluster replay's): Dijkstra, as given (the
        return _pass_shortest(n, u, v, lost, start, dag=False)  # compiled pass: integers)
    start, big, lost = ok
    got = _lane_shortest(n, u, v, lost, start, big) if n < DAG_MIN_NODES else None
    if got is None:
        got = _pass_shortest(n, u, v, lost, start)
    d, pred = got
    if big is not None:
        out = d >= big
        if out.any():
            d, pred = d.copy(), pred.copy()
            d[out], pred[out] = np.iinfo(np.int64).min, -9999
    return d, pred


#: the stand-in for an infinite source weight in :func:`_shortest` (distances, in ns, stay far
#: below it: 2**61 ns is 73 years)
UNREACHED = 2**61


def _int_start(start: np.ndarray, lost: np.ndarray
               ) -> tuple[np.ndarray, int | None, np.ndarray] | None:
    """Integer source weights (int64), the stand-in used for ``inf`` (None: none is) and the
    lost times as int64, when every lost time is a whole number and every source weight a
    whole number or ``inf`` (Dijkstra's float sums of such numbers are exact below 2**52);
    None otherwise (such weights are solved as given)."""
    if lost.dtype.kind == "f":
        if not (np.isfinite(lost).all() and (lost == np.floor(lost)).all()
                and (np.abs(lost) < 2**52).all()):
            return None
        lost = lost.astype(np.int64)
    elif lost.dtype.kind not in "iu":
        return None
    if start.dtype.kind in "iu":
        return start.astype(np.int64, copy=False), None, lost
    if start.dtype.kind != "f":
        return None
    fin = np.isfinite(start)
    f = start[fin]
    if not ((start[~fin] == np.inf).all() and (f == np.floor(f)).all()
            and (np.abs(f) < 2**52).all()):
        return None
    out = np.full(start.size, UNREACHED, np.int64)
    out[fin] = f.astype(np.int64)
    return out, (UNREACHED if not fin.all() else None), lost


def _lane_shortest(n: int, u: np.ndarray, v: np.ndarray, lost: np.ndarray, start: np.ndarray,
                   inf: int | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_shortest` by :mod:`lanepass` (None: not settled, or a loop of predecessors)."""
    from hermes.analyzers.critical_path import lanes as lanepass

    u, v, lost = (np.asarray(a, np.int64) for a in (u, v, lost))
    ch = v == u + 1
    chain = np.zeros(n, bool)
    chain[v[ch]] = True
    clost = np.zeros(n, np.int64)
    clost[v[ch]] = lost[ch]
    got = lanepass.shortest(n, chain, clost, u[~ch], v[~ch], lost[~ch], start, inf=inf)
    if got is None or lanepass.has_cycle(got[1], got[0]):
        return None
    return got[0], got[1]


def _pass_shortest(n: int, u: np.ndarray, v: np.ndarray, lost: np.ndarray, start: np.ndarray,
                   dag: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_shortest` by the DAG pass (``dag``: integer weights) or Dijkstra."""
    o = np.argsort(u.astype(np.int64) * n + v, kind="stable") \
        if u.size > 1 and not _sorted_pairs(u, v) else None  # pairs are unique: = lexsort
    if o is not None:
        u, v, lost = u[o], v[o], lost[o]
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=indptr[1:])
    topo = _dag_order(n, indptr, v) if dag else None
    if topo is not None:
        return dagpath().forward(n, indptr, v, lost, start, topo)
    d, pred = _dijkstra_csr(n, indptr, v, lost, start, True)
    assert pred is not None
    return d, pred


#: Graphs of at least this many nodes are solved by the compiled DAG pass (``dagpath``,
#: O(V + E)); smaller ones by scipy's Dijkstra, which is fast enough there and spares the
#: ~0.4 s import of numba (a 200k-event trace has ~400k nodes).
DAG_MIN_NODES = 500_000


def dagpath() -> ModuleType:
    """The :mod:`dagpath` module, imported on first use (importing numba takes ~0.4 s)."""
    from hermes.analyzers.critical_path import dagpath as mod
    return mod


def _dag_order(n: int, indptr: np.ndarray, indices: np.ndarray) -> np.ndarray | None:
    """Topological order of a graph of ``DAG_MIN_NODES`` nodes or more (CSR of out-edges); None
    for a smaller graph or one with a cycle (equal-time edges closing a loop): Dijkstra then."""
    if n < DAG_MIN_NODES:
        return None
    return dagpath().order(n, indptr, indices)


def _dijkstra_csr(n: int, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray,
                  start: np.ndarray, preds: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`_shortest` on edges already in canonical CSR form (``indptr`` of n + 1 rows)."""
    import scipy.sparse as sp  # imported on use (~0.2 s): only Dijkstra needs scipy
    from scipy.sparse.csgraph import dijkstra

    idx = np.int32 if n + 1 + indices.size < 2**31 - 1 else np.int64
    ip = np.empty(n + 2, idx)
    ip[:n + 1] = indptr
    ip[n + 1] = ip[n] + n
    ind = np.concatenate([indices.astype(idx, copy=False), np.arange(n, dtype=idx)])
    dat = np.concatenate([data.astype(np.float64, copy=False), start.astype(np.float64)])
    m = sp.csr_matrix((dat, ind, ip), shape=(n + 1, n + 1))
    m.has_sorted_indices = True
    m.has_canonical_format = True
    if preds:
        d, pred = dijkstra(m, directed=True, indices=n, return_predecessors=True)
        return _int_distances(d[:n]), pred[:n].astype(np.int64)
    d = dijkstra(m, directed=True, indices=n, return_predecessors=False)
    return _int_distances(d[:n]), None


def _int_distances(d: np.ndarray) -> np.ndarray:
    """Dijkstra's float distances as int64 ns; an unreachable node's ``inf`` as the least int64,
    what the other passes give it (a plain cast of ``inf`` is that on x86 only, with a warning;
    other CPUs saturate to the greatest)."""
    out = np.full(len(d), np.iinfo(np.int64).min, np.int64)
    fin = np.isfinite(d)
    out[fin] = np.rint(d[fin]).astype(np.int64)
    return out


def both(g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`longest` and :func:`longest_from` of ``g`` (dist, pred, bwd), the edges computed
    once. On graphs of ``DAG_MIN_NODES`` nodes or more: the DAG pass on :func:`lane_csr`
    (Dijkstra if the graph has a cycle). With Dijkstra, the reversed graph's CSR is the forward
    CSR's transpose (scipy's ``tocsc``: a counting sort, rows ascending within each column),
    i.e. the same canonical arrays :func:`_shortest` sorts the reversed pairs into, so Dijkstra
    sees the same graphs."""
    if g.n == 0:
        z = np.empty(0, np.int64)
        return z, z, z
    n = g.n
    t0, t1 = int(g.t.min()), int(g.t.max())
    if n < DAG_MIN_NODES:
        got = lane_both(g)
        if got is not None:
            return got
    if n >= DAG_MIN_NODES:
        indptr, v, lost = lane_csr(g)
        topo = _dag_order(n, indptr, v)
        if topo is not None:  # one topological order serves both passes, on the forward CSR
            dp = dagpath()
            d, pred = dp.forward(n, indptr, v, lost, g.t - t0, topo)
            b = dp.backward(n, indptr, v, lost, t1 - g.t, topo)
            return (g.t - t0) - d, pred, (t1 - g.t) - b
    import scipy.sparse as sp

    u, v, lost = edges(g)  # sorted by (u, v), unique: canonical CSR order
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=indptr[1:])
    del u
    fw = sp.csr_matrix((lost.astype(np.float64), v, indptr), shape=(n, n))
    fw.has_sorted_indices = True
    fw.has_canonical_format = True
    del v, lost
    d, pred = _dijkstra_csr(n, fw.indptr, fw.indices, fw.data, g.t - t0, True)
    rv = fw.tocsc()
    del fw
    b, _ = _dijkstra_csr(n, rv.indptr, rv.indices, rv.data, t1 - g.t, False)
    return (g.t - t0) - d, pred, (t1 - g.t) - b


def lane_both(g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`both` by the numpy lane pass (:mod:`lanepass`: chain scans, rounds over the cross
    edges); None when it does not settle (the caller then runs another pass)."""
    from hermes.analyzers.critical_path import lanes as lanepass

    n = g.n
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
    if lanepass.has_cycle(pred, d):
        return None  # (an equal-time cycle: Dijkstra's predecessors, as before)
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
    if n >= DAG_MIN_NODES:
        return dagpath().lane_csr(g.t, g.w, g.first_of_lane(), g.cu, g.cv, g.cw)
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


def _sorted_pairs(u: np.ndarray, v: np.ndarray) -> bool:
    """(u, v) pairs strictly increasing (lexicographically)."""
    du = np.diff(u)
    return bool(((du > 0) | ((du == 0) & (np.diff(v) > 0))).all())


def longest(g: Graph, e: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """Forward longest-path length (ns) ending at each node, and each node's predecessor on
    it (-1 or the virtual source ``g.n``: the path starts there). ``e``: :func:`edges` of ``g``."""
    if g.n == 0:
        z = np.empty(0, np.int64)
        return z, z
    t0 = int(g.t.min())
    u, v, lost = edges(g) if e is None else e
    d, pred = _shortest(g.n, u, v, lost, g.t - t0)
    return (g.t - t0) - d, pred


def longest_from(g: Graph, e: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                 ) -> np.ndarray:
    """Longest path (ns) starting at each node (the backward pass, on the reversed graph)."""
    if g.n == 0:
        return np.empty(0, np.int64)
    t1 = int(g.t.max())
    u, v, lost = edges(g) if e is None else e
    d, _ = _shortest(g.n, v, u, lost, t1 - g.t)
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
    """Nodes of the path ending at ``end``, first to last, following Dijkstra's predecessors
    (a predecessor outside 0..n-1 ends the walk). Compiled (``dagpath.walk``) on graphs of
    ``DAG_MIN_NODES`` nodes or more, else run by run (``runs``: :func:`chain_runs` of
    ``pred``, computed here when not given)."""
    if n >= DAG_MIN_NODES:
        return dagpath().walk(pred, end, n)
    return _walk_runs(pred, end, n, runs)


def chain_runs(pred: np.ndarray) -> np.ndarray:
    """The first node of each node's run of chain steps (``pred[k] == k - 1``), for
    :func:`path_nodes` (one vectorized prefix max)."""
    k = np.arange(pred.size)
    k[1:][pred[1:] == k[:-1]] = 0
    return np.maximum.accumulate(k, out=k)


def _walk_runs(pred: np.ndarray, end: int, n: int, runs: np.ndarray | None = None
               ) -> np.ndarray:
    """:func:`path_nodes` by runs: where ``pred[k] == k - 1`` (a chain step), the walk goes
    down to the run's first node at once; a Python step per run, i.e. per lane change on the
    path."""
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


def _walk_nodes(pred: np.ndarray, end: int, n: int) -> np.ndarray:
    """:func:`path_nodes` one node at a time (the reference for :func:`_walk_runs`)."""
    p = memoryview(np.ascontiguousarray(pred, np.int64))
    out = array("q", [end])
    k = end
    while True:
        q = p[k]
        if q < 0 or q >= n:
            break
        k = q
        out.append(k)
    return np.frombuffer(out, np.int64)[::-1]


def backtrack(g: Graph, dist: np.ndarray, pred: np.ndarray, end: int | None = None,
              index: CrossIndex | None = None, runs: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Events on the longest path ending at node ``end`` (default: the longest of all) and the
    time each contributes: (event ids, ns); -1 for lane gaps. Walks Dijkstra's predecessors.
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
