"""The critical path's compiled passes (``analyzers/critical_path/_lanes.c``: ``bounds``,
``members``, ``nodes``) give exactly what their numpy fallbacks give (the module is optional):
each run both ways on random inputs, and by hand."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.analyzers.critical_path import analysis as critical_path
from hermes.analyzers.critical_path import lanes, stepgraph

compiled = pytest.mark.skipif(not lanes.COMPILED,
                              reason="hermes.analyzers.critical_path._lanes not compiled")


@pytest.mark.parametrize("native", [True, False])
def test_members_by_hand_both_ways(monkeypatch, native):
    if not native:
        monkeypatch.setattr(lanes, "_lanes", None)
    elif not lanes.COMPILED:
        pytest.skip("not compiled")
    # windows 0..3 in groups [0, 0, 1, 2]; event 3 in every group (room made for its copies)
    lo = np.array([1, 1, 2, 0, 3], np.int32)
    hi = np.array([2, 3, 2, 4, 4], np.int32)
    ptr, ev_ = critical_path.group_members(lo, hi, np.array([0, 0, 1, 2]))
    assert ptr.tolist() == [0, 3, 5, 7] and ev_.dtype == np.int32
    assert [ev_[ptr[c]:ptr[c + 1]].tolist() for c in range(3)] == [[0, 1, 3], [1, 3], [3, 4]]


def _windows(rng):
    nw = int(rng.integers(1, 12))
    ws = np.sort(rng.integers(0, 200, size=nw))
    we = ws + rng.integers(1, 30, size=nw)
    o = np.argsort(ws, kind="stable")
    return ws[o], np.sort(we)  # (ends sorted apart, as analysis._solved's searches take them)


@compiled
def test_chunks_compiled_equal_numpy(monkeypatch):
    rng = np.random.default_rng(5)
    for _ in range(300):
        ws, we = _windows(rng)
        n = int(rng.integers(0, 60))
        ts = rng.integers(-10, 240, size=n)
        if rng.random() < 0.5:
            ts = np.sort(ts)  # (mostly sorted starts: the galloping search's usual case)
        te = ts + rng.integers(0, 80, size=n)
        pre = type("Pre", (), {"ts": ts.astype(np.int64), "te": te.astype(np.int64)})()
        size = int(rng.integers(1, 20))
        got = critical_path.step_groups(pre, ws, we, size)
        with monkeypatch.context() as m:
            m.setattr(lanes, "_lanes", None)
            ref = critical_path.step_groups(pre, ws, we, size)
        assert got[1][0].tolist() == np.searchsorted(we, ts, side="right").tolist()
        assert got[1][1].tolist() == np.searchsorted(ws, te, side="left").tolist()
        assert [x.dtype for x in got[1]] == [x.dtype for x in ref[1]]
        assert [(a, b, m_.dtype, m_.tolist()) for a, b, m_ in got[0]] == \
            [(a, b, m_.dtype, m_.tolist()) for a, b, m_ in ref[0]]
        # every group of each window directly (events spanning several groups included)
        lo, hi = got[1]
        chunk = np.sort(rng.integers(0, 4, size=ws.size))
        chunk = np.unique(chunk, return_inverse=True)[1].astype(np.int64)
        p1, e1 = critical_path.group_members(lo, hi, chunk)
        with monkeypatch.context() as m:
            m.setattr(lanes, "_lanes", None)
            p2, e2 = critical_path.group_members(lo, hi, chunk)
        assert p1.tolist() == p2.tolist() and e1.tolist() == e2.tolist()
        assert e1.dtype == e2.dtype


@compiled
def test_nodes_compiled_equal_numpy(monkeypatch):
    """stepgraph.node_arrays on random nested events of a few lanes and windows, equal times and
    syncs and host lanes among them: every array, dtype included."""
    rng = np.random.default_rng(11)
    for _ in range(300):
        n_ev = int(rng.integers(1, 40))
        s = rng.integers(0, 50, size=n_ev)
        e = s + rng.integers(1, 20, size=n_ev)
        lane = rng.integers(0, 4, size=n_ev).astype(np.int64)
        win = rng.integers(0, 3, size=n_ev).astype(np.int64)
        lane = win * 4 + lane
        kind = rng.integers(0, len(stepgraph.KIND_NAMES) - 1, size=n_ev)
        host_ev = rng.random(n_ev) < 0.5
        ws = np.array([-5, 0, 3], np.int64)
        order = stepgraph.layout_order(s, e, lane)
        n_t = np.concatenate([s, e])
        got = stepgraph.node_arrays(order, n_t, lane, kind, host_ev, win, ws)
        with monkeypatch.context() as m:
            m.setattr(lanes, "_lanes", None)
            ref = stepgraph.node_arrays(order, n_t, lane, kind, host_ev, win, ws)
        assert [(a.dtype, a.tolist()) for a in got] == [(a.dtype, a.tolist()) for a in ref]


@compiled
def test_nodes_by_hand():
    # one lane: A [0, 10) holding B [2, 5) (a sync); the chain 0 -A- 2 -B- 5 -A- 10
    s, e = np.array([0, 2]), np.array([10, 5])
    lane, win, ws = np.zeros(2, np.int64), np.zeros(2, np.int64), np.zeros(1, np.int64)
    kind = np.array([stepgraph.KIND_NAMES.index("kernel"), stepgraph.KIND_NAMES.index("sync")])
    order = stepgraph.layout_order(s, e, lane)
    t, ln, w, seg, sn, en, first, prev_t = stepgraph.node_arrays(
        order, np.concatenate([s, e]), lane, kind, np.zeros(2, bool), win, ws)
    assert t.tolist() == [0, 2, 5, 10] and seg.tolist() == [-1, 0, 1, 0]
    assert w.tolist() == [0, 2, 0, 5]  # (the sync's 3 ns are a wait)
    assert sn.tolist() == [0, 1] and en.tolist() == [3, 2]
    assert first.tolist() == [True, False, False, False] and prev_t.tolist() == [0, 0, 2, 5]


@compiled
def test_graph_both_equals_the_lane_passes_on_step_graphs(monkeypatch):
    """``_lanes.graph_both`` (graph.lane_both compiled) gives the numpy lane passes' distances,
    predecessors and backward distances on the step graphs of random traces (equal times, syncs,
    launches, events across step borders)."""
    from hermes.analyzers.common.steps import step_windows
    from hermes.analyzers.critical_path import graph as cpgraph
    from tests.analyzers.test_cp_chunks import random_trace

    rng = np.random.default_rng(17)
    for _ in range(30):
        frame_ = random_trace(rng, int(rng.integers(1, 5)))
        g, _ = stepgraph.build(frame_, step_windows(frame_))
        if g.n == 0:
            continue
        got = cpgraph.lane_both(g)
        with monkeypatch.context() as m:
            m.setattr(lanes, "_lanes", None)
            ref = cpgraph.lane_both(g)
        assert [a.tolist() for a in got] == [a.tolist() for a in ref]


@compiled
@pytest.mark.parametrize("big", [False, True])
def test_group_stats_are_pandas(big):
    """``_lanes.group_stats``: each key's exact sums and its median as pandas' groupby median
    (the mean of the two middle values, NaN for a key with no item), ties and even counts."""
    import pandas as pd

    rng = np.random.default_rng(9)
    n, nkeys = 20_000, 301
    key = rng.integers(0, nkeys - 1, n)  # (the last key: no item)
    hi = 2**61 if big else 1000
    slack = rng.integers(0, hi, n)
    slack[::5] = slack[1::5]
    dur = rng.integers(0, 2**40, n)
    ref = pd.DataFrame({"k": key, "s": slack, "d": dur}).groupby("k").agg(
        med=("s", "median"), s=("s", "sum"), d=("d", "sum"), least=("s", "min"))
    sums = [np.empty(nkeys, np.int64), np.empty(nkeys, np.int64)]
    med = np.empty(nkeys)
    least = np.empty(nkeys, np.int64)
    lanes.compiled_pass().group_stats(key.astype(np.int64), slack, [slack, dur], sums, med,
                                      least)
    assert np.isnan(med[-1]) and sums[0][-1] == 0 == sums[1][-1]
    assert least[-1] == np.iinfo(np.int64).max
    np.testing.assert_array_equal(least[:-1], ref["least"].to_numpy())
    assert (med[:-1] != np.round(med[:-1])).any() or big
    np.testing.assert_array_equal(med[:-1], ref["med"].to_numpy())
    np.testing.assert_array_equal(sums[0][:-1], ref["s"].to_numpy())
    np.testing.assert_array_equal(sums[1][:-1], ref["d"].to_numpy())
