"""The step graph's one shortest-distance solver (``graph.shortest`` / ``graph.both`` over
``lanes.shortest``) on hand-computed tiny graphs, on a zero-lost cycle, and on random lane
graphs (chains + cross edges forward in time, ties, zero weights, equal-time links) against an
oracle written here: scipy's Dijkstra for the distances, the tie rule of ``lanes`` checked edge
by edge for the predecessors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from hermes.analyzers.critical_path import graph as cpgraph


def oracle_distances(n, u, v, lost, start):
    """Dijkstra from a virtual source n (edges n -> i of weight start[i]); inf: unreached."""
    rows = np.concatenate([u, np.full(n, n)])
    cols = np.concatenate([v, np.arange(n)])
    w = np.concatenate([np.asarray(lost, float), np.asarray(start, float)])
    keep = np.isfinite(w)
    # (scipy drops explicit zeros of a coo matrix; a tiny epsilon keeps a zero edge an edge)
    m = sp.csr_matrix((np.where(w[keep] == 0, 1e-9, w[keep]), (rows[keep], cols[keep])),
                      shape=(n + 1, n + 1))
    d = dijkstra(m, directed=True, indices=n)[:n]
    return np.where(np.isfinite(d), np.rint(d), np.inf)


def check_tie_rule(n, u, v, lost, start, d, pred):
    """pred follows the tie rule: the source on a tie with start, else a tight in-edge with the
    least D(u), the chain predecessor among equal D(u), then the least index; and every walk
    of predecessors reaches the source."""
    for k in range(n):
        ins = [(int(a), int(c)) for a, b, c in zip(u.tolist(), v.tolist(), lost.tolist(),
                                                   strict=True) if b == k and d[a] + c == d[k]]
        p = int(pred[k])
        if start[k] == d[k]:
            assert p == n, (k, p)
            continue
        assert (p, ) in {(a,) for a, _ in ins}, (k, p, ins)
        least = min(d[a] for a, _ in ins)
        best = [a for a, _ in ins if d[a] == least]
        if not has_zero_cycle(n, u, v, lost, d):
            want = k - 1 if k - 1 in best else min(best)
            assert p == want, (k, p, want)
    for k in range(n):
        j, steps = k, 0
        while j != n:
            j, steps = int(pred[j]), steps + 1
            assert steps <= n, "predecessors close a loop"


def has_zero_cycle(n, u, v, lost, d):
    tight = [(int(a), int(b)) for a, b, c in zip(u.tolist(), v.tolist(), lost.tolist(),
                                                 strict=True) if c == 0 and d[a] == d[b]]
    g = sp.csr_matrix((np.ones(len(tight)), ([a for a, _ in tight], [b for _, b in tight])),
                      shape=(n, n)) if tight else None
    if g is None:
        return False
    from scipy.sparse.csgraph import connected_components
    ncomp, _ = connected_components(g, directed=True, connection="strong")
    return ncomp < n


def test_tiny_graph_by_hand():
    # 0 -> 1 -> 2 (chain, lost 0, 5), 0 -> 2 (cross, lost 1), 3 alone; start = [0, 4, 9, 2]
    u, v, lost = np.array([0, 1, 0]), np.array([1, 2, 2]), np.array([0, 5, 1])
    d, pred = cpgraph.shortest(4, u, v, lost, np.array([0, 4, 9, 2]))
    # D1 = min(4, 0 + 0) = 0 via 0; D2 = min(9, D1 + 5, D0 + 1) = 1 via 0; D3 = 2 (source)
    assert d.tolist() == [0, 0, 1, 2]
    assert pred.tolist() == [4, 0, 0, 4]
    b, none = cpgraph.shortest(4, v, u, lost, np.array([3, 1, 0, 5]), preds=False)
    # reversed: B2 = 0; B1 = min(1, B2 + 5) = 1; B0 = min(3, B1 + 0, B2 + 1) = 1; B3 = 5
    assert b.tolist() == [1, 1, 0, 5] and none is None


def test_ties_go_to_the_source_then_to_the_least_distance():
    # node 2 reached at 3 by the source, by 0 (D0 = 0, lost 3) and by 1 (D1 = 2, lost 1)
    u, v, lost = np.array([0, 1]), np.array([2, 2]), np.array([3, 1])
    d, pred = cpgraph.shortest(3, u, v, lost, np.array([0, 2, 3]))
    assert d.tolist() == [0, 2, 3] and pred[2] == 3  # the source wins a tie
    d, pred = cpgraph.shortest(3, u, v, lost, np.array([0, 2, 9]))
    assert d.tolist() == [0, 2, 3] and pred[2] == 0  # the lesser D(u) wins


def test_equal_distances_go_to_the_chain_then_to_the_least_index():
    # 3 is reached at D = 0 through its chain edge 2 -> 3 and cross edges from 0 and 1
    u, v, lost = np.array([2, 1, 0]), np.array([3, 3, 3]), np.array([0, 0, 0])
    d, pred = cpgraph.shortest(4, u, v, lost, np.array([0, 0, 0, 9]))
    assert d.tolist() == [0, 0, 0, 0] and pred[3] == 2
    d, pred = cpgraph.shortest(4, u[1:], v[1:], lost[1:], np.array([0, 0, 0, 9]))
    assert pred[3] == 0


def test_fractional_and_infinite_weights():
    # 0 -> 1 (lost 1.4), 1 -> 2 (lost 0.4): rounded to whole ns; node 3 is never reached
    u, v, lost = np.array([0, 1]), np.array([1, 2]), np.array([1.4, 0.4])
    d, pred = cpgraph.shortest(4, u, v, lost, np.array([0.0, np.inf, np.inf, np.inf]))
    assert d[:3].tolist() == [0, 1, 1]
    assert d[3] == np.iinfo(np.int64).min and pred[3] == -9999


@pytest.mark.parametrize("compiled", [True, False])
def test_a_zero_lost_cycle_is_solved_and_its_predecessors_break_the_loop(monkeypatch,
                                                                         compiled):
    from hermes.analyzers.critical_path import lanes
    if not compiled:
        monkeypatch.setattr(lanes, "_lanes", None)
    # two lanes linked both ways at the same time (zero-lost equal-time cycle)
    t = np.array([0, 5, 5, 8])
    lane = np.array([0, 0, 1, 1])
    w = np.array([0, 5, 0, 3])
    g = cpgraph.Graph(t, lane, w, np.full(4, -1), np.array([1, 2]), np.array([2, 1]),
                      np.array([0, 0]), np.full(2, -1), np.arange(4), np.arange(4))
    dist, pred, bwd = cpgraph.both(g)
    assert dist.tolist() == [0, 5, 5, 8]  # 0 -> 1 -> 2 -> 3
    assert bwd.tolist() == [8, 3, 3, 0]
    assert cpgraph.backtrack(g, dist, pred)[1].sum() == 8
    # a three-node zero cycle 1 -> 2 -> 3 -> 1 fed from 0: no loop of predecessors
    u, v, lost = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 1]), np.zeros(4, np.int64)
    d, p = cpgraph.shortest(4, u, v, lost, np.array([0, 7, 7, 7]))
    assert d.tolist() == [0, 0, 0, 0]
    check_tie_rule(4, u, v, lost, np.array([0, 7, 7, 7]), d, p)


def random_lane_graph(rng):
    lanes = int(rng.integers(1, 5))
    sizes = rng.integers(1, 9, size=lanes)
    n = int(sizes.sum())
    lane = np.repeat(np.arange(lanes), sizes)
    t = np.concatenate([np.sort(rng.integers(0, 12, size=k)) for k in sizes])  # many ties
    first = np.ones(n, bool)
    first[1:] = lane[1:] != lane[:-1]
    w = np.where(first, 0, np.diff(t, prepend=0) * rng.integers(0, 2, size=n))
    a, b = rng.integers(0, n, size=(2, int(rng.integers(0, 3 * n))))
    ok = (t[a] <= t[b]) & (lane[a] != lane[b])  # forward in time, equal times included
    cu, cv = a[ok], b[ok]
    cw = np.minimum(rng.integers(0, 4, size=cu.size), t[cv] - t[cu])
    return cpgraph.Graph(t, lane, w, np.full(n, -1), cu, cv, cw, np.full(cu.size, -1),
                         np.arange(n), np.arange(n))


@pytest.mark.parametrize("compiled", [True, False])
def test_random_lane_graphs_match_the_oracle(monkeypatch, compiled):
    from hermes.analyzers.critical_path import lanes
    if not compiled:
        monkeypatch.setattr(lanes, "_lanes", None)
    rng = np.random.default_rng(7)
    for _ in range(150):
        g = random_lane_graph(rng)
        n = g.n
        u, v, lost = cpgraph.edges(g)
        t0, t1 = int(g.t.min()), int(g.t.max())
        dist, pred, bwd = cpgraph.both(g)
        d = (g.t - t0) - dist
        assert d.tolist() == oracle_distances(n, u, v, lost, g.t - t0).astype(int).tolist()
        b = (t1 - g.t) - bwd
        assert b.tolist() == oracle_distances(n, v, u, lost, t1 - g.t).astype(int).tolist()
        check_tie_rule(n, u, v, lost, g.t - t0, d, pred)
        d2, pred2 = cpgraph.shortest(n, u, v, lost, g.t - t0)
        assert d2.tolist() == d.tolist() and pred2.tolist() == pred.tolist()


def test_empty_and_edgeless_graphs():
    z = np.empty(0, np.int64)
    g = cpgraph.Graph(z, z, z, z, z, z, z, z, z, z)
    assert [a.size for a in cpgraph.both(g)] == [0, 0, 0]
    d, pred = cpgraph.shortest(3, z, z, z, np.array([4, 5, 6]))
    assert d.tolist() == [4, 5, 6] and pred.tolist() == [3, 3, 3]
