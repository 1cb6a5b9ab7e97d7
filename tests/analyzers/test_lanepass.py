"""The lane solver (``lanes.shortest``: the compiled topological pass, the numpy rounds where it
is not compiled or the graph has a cycle) against an oracle (scipy's Dijkstra, in
``test_cpgraph``), the path walk, the step graph's node order and the nesting helpers:
hand-computed tiny graphs, random lane graphs with ties, zero weights and equal-time cycles,
tiny traces."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.common import nesting
from hermes.analyzers.critical_path import edges as cpedges
from hermes.analyzers.critical_path import graph as cpgraph
from hermes.analyzers.critical_path import lanes as lanepass
from hermes.analyzers.critical_path import stepgraph
from tests.analyzers.test_cpgraph import oracle_distances, random_lane_graph
from tests.tracegen import events


def compiled_distances(*args):
    from hermes.analyzers.critical_path import _lanes
    return _lanes.distances(*args)


def test_tiny_lane_graph_by_hand():
    # lane A = nodes 0 -> 1 -> 2 (chain lost 0, 5), lane B = node 3; cross 0 -> 2 (lost 1),
    # 3 -> 1 (lost 0); start = [0, 4, 9, 2]
    chain = np.array([False, True, True, False])
    lost = np.array([0, 0, 5, 0])
    d, pred = lanepass.shortest(4, chain, lost, np.array([0, 3]), np.array([2, 1]),
                                np.array([1, 0]), np.array([0, 4, 9, 2]))
    # D1 = min(4, D0 + 0, D3 + 0) = 0: via 0 (D0 = 0 < D3 = 2); D2 = min(9, D1 + 5, D0 + 1) = 1
    assert d.tolist() == [0, 0, 1, 2]
    assert pred.tolist() == [4, 0, 0, 4]


def test_a_path_across_lanes_needs_rounds(monkeypatch):
    # three lanes of two nodes; 1 -> 2 and 3 -> 4 cross edges of lost 0: D5 comes down only
    # after two rounds of relaxation (lane 0's end lowers lane 1, which lowers lane 2)
    chain = np.array([False, True, False, True, False, True])
    lost = np.array([0, 1, 0, 1, 0, 1])
    d, pred = lanepass.shortest(6, chain, lost, np.array([1, 3]), np.array([2, 4]),
                                np.array([0, 0]), np.array([0, 10, 10, 10, 10, 10]))
    assert d.tolist() == [0, 1, 1, 2, 2, 3]
    assert pred.tolist() == [6, 0, 1, 2, 3, 4]
    monkeypatch.setattr(lanepass, "_lanes", None)  # the numpy rounds (the compiled pass has none)
    d, pred = lanepass.shortest(6, chain, lost, np.array([1, 3]), np.array([2, 4]),
                                np.array([0, 0]), np.array([0, 10, 10, 10, 10, 10]))
    assert d.tolist() == [0, 1, 1, 2, 2, 3] and pred.tolist() == [6, 0, 1, 2, 3, 4]


def test_a_loop_of_predecessors_is_detected():
    # 0 <-> 1 at equal D (a zero-lost equal-time cycle): no tree
    assert lanepass.has_cycle(np.array([1, 0, 3]), np.array([5, 5, 0]))
    assert not lanepass.has_cycle(np.array([3, 0, 1]), np.array([5, 5, 5]))


def _frame(*rows):
    df = pd.DataFrame(events(*rows))
    for c in ("corr_id", "stream"):
        df[c] = pd.array(df[c] if c in df.columns else [None] * len(df), dtype="Int64")
    return df


def test_launch_join_equals_the_merge():
    rng = np.random.default_rng(7)
    for k in range(500):
        n = int(rng.integers(0, 30))
        corr = rng.integers(-2, 6, n).astype(float)
        corr[rng.random(n) < 0.2] = np.nan
        if k % 5 == 0:
            corr += 0.5 * (rng.random(n) < 0.2)  # not integers: the merge itself
        win = rng.integers(0, 3, n)
        host = rng.random(n) < 0.5
        task = ~host & (rng.random(n) < 0.8)
        eid = np.arange(n)
        h = pd.DataFrame({"corr": corr[host], "win": win[host], "h": eid[host]}).dropna()
        d = pd.DataFrame({"corr": corr[task], "win": win[task], "d": eid[task]}).dropna()
        m = h.drop_duplicates(["corr", "win"]).merge(d, on=["corr", "win"])
        hi, di = cpedges.launches(corr, win, host, task)
        assert hi.tolist() == m["h"].tolist() and di.tolist() == m["d"].tolist()


def _with_starts(rng: np.random.Generator, p_none: float) -> tuple:
    """A random lane graph (g, n, u, v, lost) and release times, ``inf`` (none) with
    probability ``p_none``."""
    g = random_lane_graph(rng)
    u, v, lost = cpgraph.edges(g)
    start = rng.integers(0, 20, size=g.n).astype(float)
    start[rng.random(g.n) < p_none] = np.inf
    return g, g.n, u, v, lost, start


def _lane_args(n: int, u: np.ndarray, v: np.ndarray, lost: np.ndarray, start: np.ndarray
               ) -> tuple[tuple, int | None]:
    """``lanepass.shortest``'s arguments for the graph of edges ``u -> v`` (chain and cross
    edges apart, integer source weights) and its ``inf``."""
    ch = v == u + 1
    chain = np.zeros(n, bool)
    chain[v[ch]] = True
    clost = np.zeros(n, np.int64)
    clost[v[ch]] = lost[ch]
    s, big, _ = cpgraph.int_weights(start, lost)
    return (n, chain, clost, u[~ch], v[~ch], lost[~ch], s), big


def test_shortest_with_unreachable_nodes_is_the_oracles():
    # the replay's problem: source weights inf (no source edge) leave nodes unreachable
    rng = np.random.default_rng(4)
    least = np.iinfo(np.int64).min
    for _ in range(300):
        g, n, u, v, lost, start = _with_starts(rng, 0.6)
        ref = oracle_distances(n, u, v, lost, start)
        d, p = cpgraph.shortest(n, u, v, lost, start)
        gone = ~np.isfinite(ref)
        assert d[~gone].tolist() == ref[~gone].astype(int).tolist()
        assert (d[gone] == least).all() and (p[gone] == -9999).all()
        # a reachable node's predecessor: the source (its own weight attains D) or an
        # in-neighbour over a tight edge
        tight = {(a, b): c for a, b, c in zip(u.tolist(), v.tolist(), lost.tolist(),
                                               strict=True)}
        for k in np.flatnonzero(~gone).tolist():
            q = int(p[k])
            assert (q == n and start[k] == d[k]) or d[q] + tight[q, k] == d[k]


def test_fractional_weights_are_rounded_to_whole_ns():
    # the cluster replay's transmissions: each weight rounded to the nearest ns, then exact
    rng = np.random.default_rng(8)
    for _ in range(200):
        g, n, u, v, lost, start = _with_starts(rng, 0.3)
        lf = lost + rng.random(lost.size) * 0.8 - 0.4
        got = cpgraph.shortest(n, u, v, np.maximum(lf, 0), start, preds=False)[0]
        assert got.tolist() == cpgraph.shortest(n, u, v, np.rint(np.maximum(lf, 0))
                                                .astype(np.int64), start,
                                                preds=False)[0].tolist()


def test_scans_by_slices_equal_scans_by_offsets(monkeypatch):
    # a few lanes are scanned slice by slice (lanepass.FEW_SEGMENTS), many in one pass with an
    # offset per lane: the same distances and predecessors, unreachable nodes included
    monkeypatch.setattr(lanepass, "_lanes", None)  # the numpy scans themselves
    rng = np.random.default_rng(9)
    slices = 0
    for _ in range(200):
        g, n, u, v, lost, start = _with_starts(rng, 0.3 * rng.random())
        args, big = _lane_args(n, u, v, lost, start)
        got = []
        for few in (1 << 30, 0):
            monkeypatch.setattr(lanepass, "FEW_SEGMENTS", few)
            got.append(lanepass.shortest(*args, inf=big))
        slices += 1
        assert [a.tolist() for a in got[0]] == [a.tolist() for a in got[1]]
        ref = oracle_distances(n, u, v, lost, start)
        reached = np.isfinite(ref)
        assert got[0][0][reached].tolist() == ref[reached].astype(int).tolist()
    assert slices > 150


def test_layout_order_is_node_order_of_the_layout():
    # stepgraph.layout_order builds node_order's key in place: the same permutation, equal
    # times, nested and zero-length events included, and on spans that need the lexsort
    rng = np.random.default_rng(5)
    for span in (50, 2**60):
        for _ in range(100):
            n = int(rng.integers(1, 40))
            s = rng.integers(0, 50, n) * (span // 50)
            e = s + rng.integers(0, 20, n) * (span // 50 if span > 50 else 1)
            e = np.minimum(e, 2**62)
            lane = rng.integers(0, 4, n)
            is_start = np.r_[np.ones(n, np.int64), np.zeros(n, np.int64)]
            ref = nesting.node_order(None, np.r_[s - e, e - s], is_start, np.r_[s, e],
                                       np.r_[lane, lane])
            assert stepgraph.layout_order(s, e, lane).tolist() == ref.tolist()


def test_has_cycle_is_a_walk_of_the_predecessors():
    # reference: from every node, follow zero-lost predecessors (equal D) n steps
    rng = np.random.default_rng(11)
    seen = set()
    for _ in range(400):
        n = int(rng.integers(1, 12))
        pred = np.where(rng.random(n) < 0.7, np.arange(n) - 1, rng.integers(0, n + 1, n))
        pred[(pred < 0) | (pred == np.arange(n))] = n  # (no self-loops: no edge k -> k)
        d = rng.integers(0, 3, n)
        loop = False
        for k in range(n):
            j = k
            for _ in range(n + 1):
                q = int(pred[j])
                if q >= n or d[q] != d[j]:
                    break
                j = q
            else:
                loop = True
        assert lanepass.has_cycle(pred, d) == loop
        seen.add(loop)
    assert seen == {True, False}


def innermost_reference(st, nev, ln):
    """The innermost active event after each node, by a stack per lane (the definition)."""
    out, stacks = [], {}
    for is_start, e, lane in zip(st.tolist(), nev.tolist(), ln.tolist(), strict=True):
        stack = stacks.setdefault(lane, [])
        if is_start:
            stack.append(e)
        elif stack:
            stack.pop()
        out.append(stack[-1] if stack else -1)
    return out


def test_innermost_active_is_the_stack_definition():
    # random nested events on a few lanes (node order of stepgraph.layout_order)
    rng = np.random.default_rng(13)
    for _ in range(60):
        n = int(rng.integers(1, 60))
        s = rng.integers(0, 30, n)
        e = s + rng.integers(1, 30, n)
        lane = rng.integers(0, 3, n)
        order = stepgraph.layout_order(s, e, lane)
        nev = np.where(order >= n, order - n, order)
        st = (order < n).astype(np.int64)
        ln = lane[nev]
        ref = innermost_reference(st, nev, ln)
        assert nesting.innermost_active(st, nev, ln).tolist() == ref
        assert nesting.innermost_active(st == 1, nev, ln).tolist() == ref


@pytest.mark.skipif(not lanepass.COMPILED, reason="hermes.analyzers.critical_path._lanes not compiled")
def test_compiled_pass_equals_the_numpy_rounds(monkeypatch):
    """The compiled topological pass (``_lanes.c``) gives the numpy rounds' distances and, by
    the same tie rule, predecessors, unreachable nodes included; on a graph with a cycle it
    declines and the rounds solve it (the optional module's fallback)."""
    rng = np.random.default_rng(28)
    declined = 0
    for k in range(600):
        args, big = _lane_args(*_with_starts(rng, 0.4 * rng.random())[1:])
        n, chain, clost, cu, cv, cl, s = args
        d = np.empty(n, np.int64)
        ok = compiled_distances(chain, np.where(chain, clost, 0),
                                       *(np.ascontiguousarray(a, np.int64)
                                         for a in (cu, cv, cl, s)), big, d)
        native = lanepass.shortest(*args, inf=big, preds=k % 2 == 0)
        with monkeypatch.context() as m:
            m.setattr(lanepass, "_lanes", None)
            rounds = lanepass.shortest(*args, inf=big, preds=k % 2 == 0)
        assert native is not None and rounds is not None
        assert native[0].tolist() == rounds[0].tolist()
        if k % 2 == 0:
            assert native[1].tolist() == rounds[1].tolist() or not ok  # (a cycle: loops broken)
        if ok:
            assert d.tolist() == native[0].tolist()
        else:
            declined += 1  # a cycle: the numpy rounds answered
    assert declined > 0
