"""The critical path's grouping of steps (``critical_path.CHUNK_EVENTS``) and its cut at step
borders (``critical_path.group_members``, ``stepgraph.split_sel``): by hand, and the whole
analysis in groups of a few events equal to the analysis in one group, on random traces whose
events cross step borders."""

from __future__ import annotations

import os
import threading

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.common.steps import split_by_windows
from hermes.analyzers.critical_path import analysis as critical_path
from hermes.analyzers.critical_path import stepgraph
from hermes.analyzers.engine.base import RankContext
from hermes.trace.meta import TraceMeta
from tests.tracegen import ev, frame


def test_members_by_hand():
    # windows 0..3 in groups [0, 0, 1, 2]; event 0 in window 1, event 1 in windows 1..2,
    # event 2 in none, event 3 in windows 0..3 (every group), event 4 in window 3
    lo = np.array([1, 1, 2, 0, 3], np.int32)
    hi = np.array([2, 3, 2, 4, 4], np.int32)
    ptr, ev_ = critical_path.group_members(lo, hi, np.array([0, 0, 1, 2]))
    groups = [ev_[ptr[c]:ptr[c + 1]].tolist() for c in range(3)]
    assert groups == [[0, 1, 3], [1, 3], [3, 4]]


def test_split_by_hand_is_split_by_windows():
    # windows [0,10) [10,20) [25,30); events [5,12) (cut in two), [12,27) (three pieces, the gap
    # 20..25 dropped), [20,24) (in the gap: none), [28,40) (clipped to 30)
    ws, we = np.array([0, 10, 25]), np.array([10, 20, 30])
    ts, te = np.array([5, 12, 20, 28]), np.array([12, 27, 24, 40])
    lo = np.searchsorted(we, ts, side="right").astype(np.int32)
    hi = np.searchsorted(ws, te, side="left").astype(np.int32)
    s, e, win, src = stepgraph.split_sel(ts, te, np.arange(4), lo, hi, ws, we, 0, 3)
    assert list(zip(s.tolist(), e.tolist(), win.tolist(), src.tolist(), strict=True)) == [
        (5, 10, 0, 0), (10, 12, 1, 0), (12, 20, 1, 1), (25, 27, 2, 1), (28, 30, 2, 3)]
    # only windows 1..2 (a group): window indices relative to the group's first
    s, e, win, src = stepgraph.split_sel(ts, te, np.array([0, 1, 3]), lo, hi, ws, we, 1, 3)
    assert win.tolist() == [0, 0, 1, 1] and src.tolist() == [0, 1, 1, 3]
    rng = np.random.default_rng(3)
    for _ in range(50):
        ts = rng.integers(0, 40, size=30)
        te = ts + rng.integers(0, 15, size=30)
        sel = np.flatnonzero(rng.random(30) < 0.7)
        lo = np.searchsorted(we, ts, side="right").astype(np.int32)
        hi = np.searchsorted(ws, te, side="left").astype(np.int32)
        got = stepgraph.split_sel(ts, te, sel, lo, hi, ws, we, 0, 3)
        w = pd.DataFrame({"start_ns": ws, "end_ns": we})
        ref = split_by_windows(ts[sel], te[sel], w)
        ref = (*ref[:3], sel[ref[3]])
        assert [a.tolist() for a in got] == [a.tolist() for a in ref]
        # the same dtypes (the kept graphs' digest reads them), on all windows and on 1..2
        for a, b in ((0, 3), (1, 3)):
            np_ = stepgraph.split_sel(ts, te, sel, lo, hi, ws, we, a, b)
            ref = split_by_windows(ts[sel], te[sel], w.iloc[a:b])
            ref = (*ref[:3], sel[ref[3]])
            assert [(x.dtype, x.tolist()) for x in np_] == [(x.dtype, x.tolist()) for x in ref]
    # one piece per event (no event spans two windows): the path without a repeat
    ts, te = np.array([1, 12, 26, 40]), np.array([9, 18, 29, 45])
    lo = np.searchsorted(we, ts, side="right").astype(np.int32)
    hi = np.searchsorted(ws, te, side="left").astype(np.int32)
    s, e, win, src = stepgraph.split_sel(ts, te, np.arange(4), lo, hi, ws, we, 0, 3)
    assert list(zip(s.tolist(), e.tolist(), win.tolist(), src.tolist(), strict=True)) == [
        (1, 9, 0, 0), (12, 18, 1, 1), (26, 29, 2, 2)]


def random_trace(rng: np.random.Generator, steps: int) -> pd.DataFrame:
    """Steps of 100 ns; host ops, launches and their kernels on two streams, syncs; some
    events reach across step borders."""
    rows = [ev("step", f"ProfilerStep#{i}", 100 * i, 100) for i in range(steps)]
    corr = 0
    for i in range(steps):
        t = 100 * i
        for _ in range(int(rng.integers(2, 6))):
            d = int(rng.integers(1, 60))
            rows.append(ev("host_op", f"op{rng.integers(0, 4)}", t + int(rng.integers(0, 90)),
                           d))
        for _ in range(int(rng.integers(1, 4))):
            corr += 1
            at = t + int(rng.integers(0, 80))
            rows.append(ev("launch", "cudaLaunchKernel", at, 3, corr_id=corr))
            stream = int(rng.choice([7, 8]))
            rows.append(ev("kernel", f"k{rng.integers(0, 3)}", at + int(rng.integers(2, 30)),
                           int(rng.integers(1, 70)), corr_id=corr, stream=stream,
                           lane=f"stream {stream}"))
        if rng.random() < 0.5:
            rows.append(ev("sync", "cudaDeviceSynchronize", t + 60, 30))
        if rng.random() < 0.5:  # a loader worker (prefetching, often the longest lane) fed
            a = int(rng.integers(0, 40))  # the training thread's data wait
            rows.append(ev("data_process", "process batch", t + a, int(rng.integers(20, 90)),
                           lane="loader 0", lane_kind="loader"))
            rows.append(ev("data_wait", "next(loader)", t + a + 5, int(rng.integers(5, 40))))
    df = frame(*rows)
    for c in ("corr_id", "stream"):
        df[c] = pd.array(df[c], dtype="Int64")
    return df


def _analyze(df: pd.DataFrame):
    return critical_path.analyze(RankContext(rank=0, events=df, meta=TraceMeta()))


@pytest.mark.parametrize("seed", range(6))
def test_groups_of_steps_give_the_one_graph_answer(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    df = random_trace(rng, int(rng.integers(3, 9)))
    # names as a loaded trace has them (categorical, with a category no event has, in no
    # sorted order)
    names = sorted(set(df["name"])) + ["unused"]
    df["name"] = pd.Categorical(df["name"], categories=names[::-1])
    one = _analyze(df)  # one group
    assert one.tables["ops"]["median_slack_ns"].to_numpy().round().tolist() != \
        one.tables["ops"]["median_slack_ns"].to_numpy().tolist() or seed != 0  # (even counts)
    monkeypatch.setattr(critical_path, "CHUNK_EVENTS", int(rng.integers(1, 12)))
    monkeypatch.setattr(critical_path, "THREADS", 1)
    many = _analyze(df)
    # groups built and solved on two threads, results taken in order: the same answer
    monkeypatch.setattr(critical_path, "THREADS", 2)
    ran, build = set(), stepgraph.build_sel

    def on_thread(*a, **k):
        ran.add(threading.current_thread().name.split("_")[0])
        return build(*a, **k)

    monkeypatch.setattr(stepgraph, "build_sel", on_thread)
    threaded = _analyze(df)
    assert ran == {"hermes-cp"}
    assert one.metrics == many.metrics == threaded.metrics
    assert one.metrics["length_pct"] > 0
    for t in ("top_ops", "ops", "per_step"):
        pd.testing.assert_frame_equal(one.tables[t], many.tables[t], check_exact=True)
        pd.testing.assert_frame_equal(one.tables[t], threaded.tables[t], check_exact=True)


def test_solver_threads_only_in_a_process_of_its_own(monkeypatch):
    monkeypatch.setattr(critical_path, "THREADS", None)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3},
                        raising=False)
    assert critical_path.solver_threads() == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert critical_path.solver_threads() == 1
    import multiprocessing

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())  # a pool worker
    assert critical_path.solver_threads() == 1


def _serial_starts_reference(ts, te, lane, device):
    """``stepgraph.serial_starts`` as it was written first (a lexsort), the oracle."""
    idx = np.flatnonzero(device)
    if idx.size < 2:
        return ts
    o = idx[np.lexsort((ts[idx], lane[idx]))]
    t0 = int(min(ts[o].min(), te[o].min()))
    big = int(max(te[o].max(), ts[o].max())) - t0 + 1
    lo = lane[o].astype(np.int64)
    key = lo * big + (te[o] - t0)
    prev = np.r_[-1, np.maximum.accumulate(key)[:-1]]
    same = (prev >= 0) & (prev // big == lo)
    prev_end = prev - lo * big + t0
    over = prev_end - ts[o]
    snap = same & (over > 0) & (over <= stepgraph.TICK_NS)
    out = ts.copy()
    out[o[snap]] = np.minimum(prev_end[snap], te[o[snap]])
    return out


def test_serial_starts_is_the_lexsort_rule_on_random_lanes():
    # by hand: lane 0 tasks [0,10) [9,20) (1 ns of overlap: moved to 10), [15,30) nested (5 ns:
    # kept); a host event (not device) never moves
    ts, te = np.array([0, 9, 15, 3]), np.array([10, 20, 30, 8])
    out = stepgraph.serial_starts(ts, te, np.zeros(4, np.int64),
                                  np.array([True, True, True, False]))
    assert out.tolist() == [0, 10, 15, 3]
    rng = np.random.default_rng(5)
    moved = 0
    for _ in range(300):
        n = int(rng.integers(2, 40))
        ts = rng.integers(-50, 200, size=n)
        te = ts + rng.integers(0, 30, size=n)
        lane = rng.integers(-1, 4, size=n).astype(np.int32)  # (-1: an event with no lane)
        device = rng.random(n) < 0.8
        got = stepgraph.serial_starts(ts, te, lane, device)
        ref = _serial_starts_reference(ts, te, lane, device)
        assert got.tolist() == ref.tolist()
        moved += int((got != ts).sum())
    assert moved > 0
