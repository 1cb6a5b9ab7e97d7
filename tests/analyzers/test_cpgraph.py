"""The compiled DAG pass (``dagpath``) against scipy's Dijkstra, on hand-computed tiny graphs and
random lane graphs (chains + cross edges forward in time, ties, zero weights, equal-time links)."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.analyzers.critical_path import dagpath
from hermes.analyzers.critical_path import graph as cpgraph


@pytest.fixture
def dag_always(monkeypatch):
    """Every graph, however small, goes through the DAG pass."""
    monkeypatch.setattr(cpgraph, "DAG_MIN_NODES", 0)


def _csr(n, u, v, lost):
    o = np.lexsort((v, u))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=indptr[1:])
    return indptr, v[o], lost[o]


def _dijkstra(n, u, v, lost, start):
    indptr, ind, dat = _csr(n, u, v, lost)
    return cpgraph._dijkstra_csr(n, indptr, ind, dat, start, True)


def _dag(n, u, v, lost, start):
    indptr, ind, dat = _csr(n, u, v, lost)
    topo = dagpath.order(n, indptr, ind)
    assert topo is not None
    return dagpath.forward(n, indptr, ind, dat, start, topo)


def test_tiny_graph_by_hand():
    # 0 -> 1 -> 2 (chain, lost 0, 5), 0 -> 2 (cross, lost 1), 3 alone; start = [0, 4, 9, 2]
    u, v, lost = np.array([0, 1, 0]), np.array([1, 2, 2]), np.array([0, 5, 1])
    start = np.array([0, 4, 9, 2])
    d, pred = _dag(4, u, v, lost, start)
    # D1 = min(4, 0 + 0) = 0 via 0; D2 = min(9, D1 + 5, D0 + 1) = 1 via 0; D3 = 2 (source)
    assert d.tolist() == [0, 0, 1, 2]
    assert pred.tolist() == [4, 0, 0, 4]
    b = dagpath.backward(4, *_csr(4, u, v, lost), np.array([3, 1, 0, 5]),
                         dagpath.order(4, _csr(4, u, v, lost)[0], _csr(4, u, v, lost)[1]))
    # reversed: B2 = 0; B1 = min(1, B2 + 5) = 1; B0 = min(3, B1 + 0, B2 + 1) = 1; B3 = 5
    assert b.tolist() == [1, 1, 0, 5]


def test_ties_go_to_the_source_then_to_the_least_distance():
    # node 2 reached at 3 by the source, by 0 (D0 = 0, lost 3) and by 1 (D1 = 2, lost 1)
    u, v, lost = np.array([0, 1]), np.array([2, 2]), np.array([3, 1])
    d, pred = _dag(3, u, v, lost, np.array([0, 2, 3]))
    assert d.tolist() == [0, 2, 3] and pred[2] == 3  # the source wins a tie (Dijkstra too)
    d, pred = _dag(3, u, v, lost, np.array([0, 2, 9]))
    assert d.tolist() == [0, 2, 3] and pred[2] == 0  # the lesser D(u) wins (Dijkstra too)
    assert _dijkstra(3, u, v, lost, np.array([0, 2, 9]))[1][2] == 0


def test_a_cycle_has_no_order_and_longest_falls_back_to_dijkstra(dag_always):
    # two lanes linked both ways at the same time (zero-lost equal-time cycle)
    t = np.array([0, 5, 5, 8])
    lane = np.array([0, 0, 1, 1])
    w = np.array([0, 5, 0, 3])
    g = cpgraph.Graph(t, lane, w, np.full(4, -1), np.array([1, 2]), np.array([2, 1]),
                      np.array([0, 0]), np.full(2, -1), np.arange(4), np.arange(4))
    u, v, _ = cpgraph.edges(g)
    indptr = np.zeros(5, np.int64)
    np.cumsum(np.bincount(u, minlength=4), out=indptr[1:])
    assert dagpath.order(4, indptr, v) is None
    dist, pred, bwd = cpgraph.both(g)
    assert dist.tolist() == [0, 5, 5, 8]  # 0 -> 1 -> 2 -> 3
    assert bwd.tolist() == [8, 3, 3, 0]
    assert cpgraph.backtrack(g, dist, pred)[1].sum() == 8


def _random_lane_graph(rng):
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


def _check_pred(n, u, v, lost, start, d, pred, ref_pred):
    """pred is a tree of tight edges, equal to Dijkstra's up to in-neighbours of equal D."""
    tight = {(a, b) for a, b, c in zip(u.tolist(), v.tolist(), lost.tolist(), strict=True)
             if d[a] + c == d[b]}
    for k in range(n):
        p, q = int(pred[k]), int(ref_pred[k])
        if p == q:
            continue
        assert p != n and q != n and d[p] == d[q], (k, p, q)
        assert (p, k) in tight and (q, k) in tight
    for k in range(n):  # no cycle: every walk reaches the source within n steps
        j, steps = k, 0
        while j != n:
            j, steps = int(pred[j]), steps + 1
            assert steps <= n


def dijkstra_case(rng: np.random.Generator) -> tuple:
    """A random lane graph with Dijkstra's answers: (g, n, u, v, lost, t0, t1, forward
    distances, forward predecessors, backward distances)."""
    g = _random_lane_graph(rng)
    n = g.n
    u, v, lost = cpgraph.edges(g)
    t0, t1 = int(g.t.min()), int(g.t.max())
    ref_d, ref_pred = _dijkstra(n, u, v, lost, g.t - t0)
    ref_b, _ = _dijkstra(n, v, u, lost, t1 - g.t)
    return g, n, u, v, lost, t0, t1, ref_d, ref_pred, ref_b


def test_random_lane_graphs_match_dijkstra(dag_always):
    rng = np.random.default_rng(15)
    cyclic = 0
    for _ in range(400):
        g, n, u, v, lost, t0, t1, ref_d, ref_pred, ref_b = dijkstra_case(rng)
        # lane_csr: the same edges, unsorted, duplicates kept (least lost per pair as edges())
        ip, ind, ls = cpgraph.lane_csr(g)
        best: dict = {}
        for a, b, c in zip(np.repeat(np.arange(n), np.diff(ip)).tolist(), ind.tolist(),
                           ls.tolist(), strict=True):
            best[a, b] = min(best.get((a, b), c), c)
        assert sorted(best.items()) == [((a, b), c) for a, b, c in
                                        zip(u.tolist(), v.tolist(), lost.tolist(), strict=True)]
        dist, pred, bwd = cpgraph.both(g)
        assert dist.tolist() == ((g.t - t0) - ref_d).tolist()
        assert bwd.tolist() == ((t1 - g.t) - ref_b).tolist()
        assert cpgraph.longest(g)[0].tolist() == dist.tolist()
        assert cpgraph.longest_from(g).tolist() == bwd.tolist()
        # _shortest (the replay's entry) with any start, on the DAG pass or Dijkstra's fallback
        start = rng.integers(0, 20, size=n)
        d, p = cpgraph._shortest(n, u, v, lost, start)
        rd, rp = _dijkstra(n, u, v, lost, start)
        assert d.tolist() == rd.tolist()
        _check_pred(n, u, v, lost, start, d, p, rp)
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(u, minlength=n), out=indptr[1:])
        if dagpath.order(n, indptr, v) is None:
            cyclic += 1
            assert pred.tolist() == ref_pred.tolist()  # the fallback is Dijkstra itself
        else:
            _check_pred(n, u, v, lost, g.t - t0, (g.t - t0) - dist, pred, ref_pred)
        # the compiled walk reads back the same path as the Python one
        end = int(np.argmax(dist))
        walked = cpgraph.path_nodes(pred, end, n)
        saved = cpgraph.DAG_MIN_NODES
        cpgraph.DAG_MIN_NODES = n + 1
        assert walked.tolist() == cpgraph.path_nodes(pred, end, n).tolist()
        cpgraph.DAG_MIN_NODES = saved
    assert 0 < cyclic < 400  # both paths exercised


def test_empty_and_edgeless_graphs(dag_always):
    z = np.empty(0, np.int64)
    d, pred = cpgraph._shortest(3, z, z, z, np.array([4, 0, 2]))
    assert d.tolist() == [4, 0, 2] and pred.tolist() == [3, 3, 3]
    g = cpgraph.Graph(z, z, z, z, z, z, z, z, z, z)
    assert [a.size for a in cpgraph.both(g)] == [0, 0, 0]
