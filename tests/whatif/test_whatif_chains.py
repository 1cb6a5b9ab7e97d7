"""The replay's chain folding (hermes/whatif/chains.py): the distances of the whole graph."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.analyzers.critical_path import graph as cpgraph
from hermes.whatif import chains
from tests.analyzers.test_cpgraph import oracle_distances


def _graph(rows: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = sorted(rows)
    u, v, lost = (np.array(c, np.int64) for c in zip(*rows, strict=True))
    return u, v, lost


def test_hand_example_folds_the_plain_chain_nodes() -> None:
    # 0 -> 1 -> 2 -> 3 -> 4 a lane's chain (lost 2, 3, 1, 0); 0 -> 3 a cross edge (lost 10)
    u, v, lost = _graph([(0, 1, 2), (1, 2, 3), (2, 3, 1), (0, 3, 10), (3, 4, 0)])
    start = np.array([0.0, np.inf, np.inf, np.inf, np.inf])
    p = chains.plan(5, u, v, start)
    # 1, 2 and 4 have one in-edge, from the node before them, and no release: folded
    assert p.kept.tolist() == [True, False, False, True, False]
    # D = 0, 2, 2 + 3, min(5 + 1, 0 + 10), 6 + 0
    assert chains.solve(p, u, v, lost, start).tolist() == [0, 2, 5, 6, 6]
    # the cross edge becomes the shorter way in: 3 is reached from 0 directly
    lost2 = np.where((u == 0) & (v == 3), 4, lost)
    assert chains.solve(p, u, v, lost2, start).tolist() == [0, 2, 5, 4, 4]


def test_a_released_node_is_kept() -> None:
    u, v, lost = _graph([(0, 1, 5), (1, 2, 5)])
    start = np.array([0.0, 1.0, np.inf])  # 1 may start on its own, 1 ns after 0
    p = chains.plan(3, u, v, start)
    assert p.kept.tolist() == [True, True, False]
    assert chains.solve(p, u, v, lost, start).tolist() == [0, 1, 6]


def _random_dag(rng: np.random.Generator, n: int, cross: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    lane_start = np.sort(rng.choice(np.arange(1, n), size=n // 20, replace=False))
    first = np.zeros(n, bool)
    first[0] = True
    first[lane_start] = True
    k = np.flatnonzero(~first)
    cu = rng.integers(0, n - 1, cross)
    cv = cu + rng.integers(1, 50, cross)
    ok = cv < n
    u = np.concatenate([k - 1, cu[ok]])
    v = np.concatenate([k, cv[ok]])
    lost = rng.integers(0, 1000, u.size)
    o = cpgraph.sort_by_key(u * n + v, lost)
    u, v, lost = u[o], v[o], lost[o]
    one = np.r_[True, (u[1:] != u[:-1]) | (v[1:] != v[:-1])]
    start = np.full(n, np.inf)
    start[first] = rng.integers(0, 5000, int(first.sum()))
    return u[one], v[one], lost[one], start


def test_random_graphs_give_the_whole_graphs_distances() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        u, v, lost, start = _random_dag(rng, 3000, 400)
        whole = cpgraph.shortest(3000, u, v, lost, start)[0]
        p = chains.plan(3000, u, v, start)
        assert not p.kept.all()  # something was folded
        np.testing.assert_array_equal(chains.solve(p, u, v, lost, start), whole)
        # the same plan under other lost times (a change) and other finite releases
        lost2 = rng.integers(0, 1000, u.size)
        start2 = np.where(np.isinf(start), np.inf, start + rng.integers(0, 100, start.size))
        np.testing.assert_array_equal(chains.solve(p, u, v, lost2, start2),
                                      cpgraph.shortest(3000, u, v, lost2, start2)[0])


def test_an_unreached_node_reads_as_on_the_whole_graph() -> None:
    u, v, lost = _graph([(0, 1, 1), (2, 3, 1), (3, 4, 2)])
    start = np.array([0.0, np.inf, np.inf, np.inf, np.inf])  # 2, 3, 4: nothing reaches them
    with np.errstate(invalid="ignore"):
        whole = cpgraph.shortest(5, u, v, lost, start)[0]
        got = chains.shortest(5, u, v, lost, start)
    np.testing.assert_array_equal(got, whole)
    assert got[:2].tolist() == [0, 1]


@pytest.mark.parametrize("left_out", [0.02, 0.0])
def test_raw_edges_with_repeated_pairs_and_left_out_edges(left_out) -> None:
    # raw edges as a replay lists them: a pair may repeat (the least lost time counts) and
    # some edges are left out (``use`` False; or none: no index of the counted edges): the
    # distances of the counted pairs' graph, and the counted pairs themselves
    rng = np.random.default_rng(11)
    for _ in range(10):
        u, v, lost, start = _random_dag(rng, 2000, 300)
        rep = rng.choice(u.size, 400)  # repeated pairs, some with less lost time
        ru, rv = np.concatenate([u, u[rep]]), np.concatenate([v, v[rep]])
        use = rng.random(ru.size) >= left_out
        assert use.all() == (left_out == 0)
        rlost = rng.integers(0, 1000, ru.size)
        p = chains.raw_plan(2000, ru, rv, use, start)
        key = ru[use] * 2000 + rv[use]
        o = cpgraph.sort_by_key(key, rlost[use])
        one = np.r_[True, key[o][1:] != key[o][:-1]]
        pu, pv, pl = ru[use][o][one], rv[use][o][one], rlost[use][o][one]
        with np.errstate(invalid="ignore"):
            whole = cpgraph.shortest(2000, pu, pv, pl, start)[0]
            got = chains.raw_solve(p, ru, rlost, start)
        np.testing.assert_array_equal(got, whole)
        _, _, qu, qv = p.pairs()
        np.testing.assert_array_equal(qu * 2000 + qv, pu * 2000 + pv)
        np.testing.assert_array_equal(p.least(rlost), pl)
        at = rng.choice(2000, 300)  # the distances of some nodes alone (folded ones among them)
        assert not p.plan.kept[at].all()
        np.testing.assert_array_equal(chains.raw_solve(p, ru, rlost, start, at), whole[at])
        # another change's lost times, same plan
        rlost2 = rng.integers(0, 1000, ru.size)
        pl2 = rlost2[use][cpgraph.sort_by_key(key, rlost2[use])][one]
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(chains.raw_solve(p, ru, rlost2, start),
                                          cpgraph.shortest(2000, pu, pv, pl2, start)[0])


def oracle(u: np.ndarray, v: np.ndarray, lost: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The whole (unfolded) graph solved by scipy's Dijkstra (``test_cpgraph``'s oracle)."""
    d = oracle_distances(start.size, u, v, lost, start)
    return np.where(np.isfinite(d), d, np.iinfo(np.int64).min).astype(np.int64)


def test_the_folded_graph_gives_the_whole_graphs_distances() -> None:
    rng = np.random.default_rng(3)
    for _ in range(10):
        u, v, lost, start = _random_dag(rng, 3000, 400)
        p = chains.plan(3000, u, v, start)
        assert not p.whole
        np.testing.assert_array_equal(chains.solve(p, u, v, lost, start),
                                      oracle(u, v, lost, start))


def test_the_numpy_rounds_give_the_same_folded_distances(monkeypatch) -> None:
    from hermes.analyzers.critical_path import lanes as lanepass

    rng = np.random.default_rng(5)
    u, v, lost, start = _random_dag(rng, 3000, 400)
    p = chains.plan(3000, u, v, start)
    monkeypatch.setattr(lanepass, "_lanes", None)  # the numpy rounds (the compiled pass has none)
    np.testing.assert_array_equal(chains.solve(p, u, v, lost, start), oracle(u, v, lost, start))


def _steps_graph(rng: np.random.Generator, steps: int, per: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                            np.ndarray]:
    """A replay-shaped graph: ``steps`` random lane graphs of ``per`` nodes each, then one
    entry node per step (node ``steps * per + k``) with edges into its step's lane heads and
    from its step's lane ends into the next step's entry; only the first entry is released."""
    n = steps * per + steps
    us, vs, part = [], [], np.empty(n, np.int64)
    start = np.full(n, np.inf)
    for k in range(steps):
        u, v, _, st = _random_dag(rng, per, per // 8)
        heads = np.flatnonzero(np.isfinite(st))
        ends = np.r_[heads[1:] - 1, per - 1]
        base, entry = k * per, steps * per + k
        us += [u + base, np.full(heads.size, entry)]
        vs += [v + base, heads + base]
        if k + 1 < steps:
            us.append(ends + base)
            vs.append(np.full(ends.size, entry + 1))
        part[base:base + per] = k
        part[entry] = k
        # own clocks, most released too late to matter (the way in is the step entry)
        start[base + heads[::3]] = rng.integers(0, 10**8, heads[::3].size)
    start[steps * per] = 0.0
    u, v = np.concatenate(us), np.concatenate(vs)
    o = np.argsort(u * n + v, kind="stable")
    u, v = u[o], v[o]
    one = np.r_[True, (u[1:] != u[:-1]) | (v[1:] != v[:-1])]
    u, v = u[one], v[one]
    return u, v, rng.integers(0, 1000, u.size), start, part, steps * per + np.arange(steps)


def test_steps_in_sequence_are_solved_part_by_part() -> None:
    # many steps in a row: the numpy rounds on the whole would need two rounds per step; by
    # parts they take one step's rounds -- the same distances
    rng = np.random.default_rng(13)

    def by_parts(u, v, lost, start, part, cut):
        p = chains.plan(start.size, u, v, start, part, cut)
        assert p.parts is not None
        np.testing.assert_array_equal(chains.solve(p, u, v, lost, start),
                                      oracle(u, v, lost, start))
        return p

    for steps in (2, 5, 60):
        u, v, lost, start, part, cut = _steps_graph(rng, steps, 400)
        p = by_parts(u, v, lost, start, part, cut)
        lost2 = rng.integers(0, 1000, u.size)
        np.testing.assert_array_equal(chains.solve(p, u, v, lost2, start),
                                      oracle(u, v, lost2, start))
        # the first entry released alone (no own clocks: the releases-only pass is skipped)
        first = np.full(start.size, np.inf)
        first[cut[0]] = 0.0
        by_parts(u, v, lost, first, part, cut)


def test_an_edge_across_parts_solves_the_graph_whole() -> None:
    rng = np.random.default_rng(17)
    u, v, lost, start, part, cut = _steps_graph(rng, 3, 300)
    # an edge from step 0 into the middle of step 2 (not its entry): not parts in sequence
    u, v, lost = np.r_[u, 5], np.r_[v, 2 * 300 + 10], np.r_[lost, 1]
    o = np.argsort(u * start.size + v, kind="stable")
    u, v, lost = u[o], v[o], lost[o]
    p = chains.plan(start.size, u, v, start, part, cut)
    assert p.parts is None
    np.testing.assert_array_equal(chains.solve(p, u, v, lost, start),
                                  oracle(u, v, lost, start))
