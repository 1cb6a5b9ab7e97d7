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
(any node may start a path). That is one call of scipy's compiled Dijkstra, O(E log V), with no
per-event Python loop; cross edges that go backwards in time (inconsistent clocks) are dropped.
The backward pass (longest path *from* each node) is the same on the reversed graph, giving each
event's slack; the path itself is read back from Dijkstra's predecessors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra


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


def _edges(g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All edges (u, v, lost time), duplicates reduced to the least lost."""
    k = np.flatnonzero(~g.first_of_lane())
    fwd = g.forward_cross()
    u = np.concatenate([k - 1, g.cu[fwd]]).astype(np.int64)
    v = np.concatenate([k, g.cv[fwd]]).astype(np.int64)
    w = np.concatenate([g.w[k], g.cw[fwd]]).astype(np.int64)
    lost = np.maximum((g.t[v] - g.t[u]) - w, 0)
    order = np.lexsort((lost, v, u))
    u, v, lost = u[order], v[order], lost[order]
    keep = np.ones(u.size, bool)
    keep[1:] = (u[1:] != u[:-1]) | (v[1:] != v[:-1])
    return u[keep], v[keep], lost[keep]


def _shortest(n: int, u: np.ndarray, v: np.ndarray, lost: np.ndarray, start: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Dijkstra from a virtual source (node ``n``) with edges source -> i weighing start[i]."""
    src = np.full(n, n, np.int64)
    rows = np.concatenate([u, src])
    cols = np.concatenate([v, np.arange(n)])
    data = np.concatenate([lost, start]).astype(np.float64)
    # explicit zeros are edges in a csr matrix built this way (pairs are unique)
    m = sp.csr_matrix((data, (rows, cols)), shape=(n + 1, n + 1))
    d, pred = dijkstra(m, directed=True, indices=n, return_predecessors=True)
    return np.rint(d[:n]).astype(np.int64), pred[:n].astype(np.int64)


def longest(g: Graph) -> tuple[np.ndarray, np.ndarray]:
    """Forward longest-path length (ns) ending at each node, and each node's predecessor on
    it (-1 or the virtual source ``g.n``: the path starts there)."""
    if g.n == 0:
        z = np.empty(0, np.int64)
        return z, z
    t0 = int(g.t.min())
    u, v, lost = _edges(g)
    d, pred = _shortest(g.n, u, v, lost, g.t - t0)
    return (g.t - t0) - d, pred


def longest_from(g: Graph) -> np.ndarray:
    """Longest path (ns) starting at each node (the backward pass, on the reversed graph)."""
    if g.n == 0:
        return np.empty(0, np.int64)
    t1 = int(g.t.max())
    u, v, lost = _edges(g)
    d, _ = _shortest(g.n, v, u, lost, t1 - g.t)
    return (t1 - g.t) - d


def backtrack(g: Graph, dist: np.ndarray, pred: np.ndarray, end: int | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Events on the longest path ending at node ``end`` (default: the longest of all) and the
    time each contributes: (event ids, ns); -1 for lane gaps. Walks Dijkstra's predecessors."""
    if g.n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    n = g.n
    p = pred
    k = int(np.argmax(dist)) if end is None else int(end)
    path = [k]
    while 0 <= p[k] < n:  # one step per node on the path
        k = int(p[k])
        path.append(k)
    nodes = np.array(path[::-1], np.int64)
    a, b = nodes[:-1], nodes[1:]
    chain = (b == a + 1) & (g.lane[np.minimum(b, g.n - 1)] == g.lane[a])
    ev = np.where(chain, g.seg_event[b], -1)
    wt = np.where(chain, g.w[b], 0)
    if (~chain).any() and g.cu.size:
        fwd = g.forward_cross()
        key = g.cu[fwd] * g.n + g.cv[fwd]
        o = np.argsort(key, kind="stable")
        q = a[~chain] * g.n + b[~chain]
        i = np.clip(np.searchsorted(key[o], q), 0, max(o.size - 1, 0))
        hit = o[i]
        ev[~chain] = g.ce[fwd][hit]
        wt[~chain] = g.cw[fwd][hit]
    return ev.astype(np.int64), wt.astype(np.int64)
