"""Critical path: tiny traces with the longest path worked out by hand beside them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.critical_path import graph as cpgraph
from hermes.analyzers.critical_path.analysis import analyze
from hermes.analyzers.engine.base import RankContext
from hermes.analyzers.engine.invariants import check_result
from hermes.trace.meta import TraceMeta
from tests.tracegen import ev, events


def run(*rows, keep=None):
    df = pd.DataFrame(events(*rows)) if rows else pd.DataFrame(
        {c: [] for c in ("rank", "lane", "lane_kind", "kind", "name", "ts_ns", "dur_ns")})
    for c in ("corr_id", "stream"):
        df[c] = pd.array(df[c] if c in df.columns else [None] * len(df), dtype="Int64")
    return check_result(analyze(RankContext(rank=0, events=df, meta=TraceMeta(), keep=keep)))


def top(res):
    t = res.tables["top_ops"]
    return dict(zip(t["name"], t["time_ns"], strict=True)), dict(
        zip(t["name"], t["slack_ns"], strict=True))


# time     0    10   20   30   40   50   60   70   80   90  100
# aten::mm [=============)                                         host
# launch        [==)  c1
# sync                          [=======================)          host waits for gemm
# opt                                                  [====)
# gemm               [==============================)              stream 7
# path: mm [0,10) 10 -> launch delay 10..20 (10) -> gemm 60 -> sync end 85 (0) -> opt 10 = 90
SYNC = (ev("step", "ProfilerStep#1", 0, 100), ev("host_op", "aten::mm", 0, 30),
        ev("launch", "cudaLaunchKernel", 10, 5, corr_id=1),
        ev("sync", "cudaStreamSynchronize", 40, 45), ev("host_op", "opt", 85, 10),
        ev("kernel", "gemm", 20, 60, corr_id=1, stream=7))


def test_sync_waits_for_the_device_by_hand():
    res = run(*SYNC)
    times, slack = top(res)
    assert times == {"gemm": 60, "aten::mm": 10, "cudaLaunchKernel": 10, "opt": 10}
    assert set(slack.values()) == {0.0}
    c = res.metrics["components_pct"]
    assert c == pytest.approx({"computation": 600 / 9, "host": 300 / 9, "communication": 0,
                               "io": 0, "other": 0})
    assert res.metrics["length_pct"] == pytest.approx(90.0)
    ops = res.tables["ops"].set_index("name")
    # the sync is a zero-weight wait: on the path, no time
    assert ops.loc["cudaStreamSynchronize", "cp_time_ns"] == 0


# device-bound: launches c1..c3 at 0, 2, 4; k1 [10,30) k2 [30,50) queued; k3 [55,70) queued
# (launched at 4 < 50) so the 5 ns gap is a kernel-kernel delay ("other").
# path: launch delay c1 0->10 (host 10), k1 20, k2 20, gap 5, k3 15 = 70
DEVICE = (ev("step", "ProfilerStep#1", 0, 70),
          ev("launch", "l1", 0, 2, corr_id=1), ev("launch", "l2", 2, 2, corr_id=2),
          ev("launch", "l3", 4, 2, corr_id=3),
          ev("kernel", "k1", 10, 20, corr_id=1), ev("kernel", "k2", 30, 20, corr_id=2),
          ev("kernel", "k3", 55, 15, corr_id=3))


def test_device_bound_stream_order_by_hand():
    res = run(*DEVICE)
    times, slack = top(res)
    assert times == {"k1": 20, "k2": 20, "k3": 15, "l1": 10}
    c = res.metrics["components_pct"]
    assert [c["computation"], c["host"], c["other"]] == pytest.approx(
        [100 * 55 / 70, 100 * 10 / 70, 100 * 5 / 70])
    ops = res.tables["ops"].set_index("name")
    # l2's start node (t=2): fwd = l1 2; bwd = launch edge to k2 (weight 0, queued) + k2 20
    # + gap 5 + k3 15 = 40 -> through 42 -> slack 70 - 42 = 28
    assert ops.loc["l2", "min_slack_ns"] == 28


# host-bound: A [0,20) holds launch c1 [15,20); k1 [22,25); B [25,45) holds launch c2 [40,45);
# k2 [47,50). Path: A 15 + c1 5 + (gap 20..25 weighs 0) + B 15 + c2 start -> k2 start 7 + k2 3
HOST = (ev("step", "ProfilerStep#1", 0, 50),
        ev("host_op", "A", 0, 20), ev("launch", "c1", 15, 5, corr_id=1),
        ev("host_op", "B", 25, 20), ev("launch", "c2", 40, 5, corr_id=2),
        ev("kernel", "k1", 22, 3, corr_id=1), ev("kernel", "k2", 47, 3, corr_id=2))


def test_host_bound_by_hand():
    res = run(*HOST)
    times, _ = top(res)
    assert times == {"A": 15, "B": 15, "c2": 7, "c1": 5, "k2": 3}
    assert res.metrics["length_pct"] == pytest.approx(90.0)
    assert res.metrics["components_pct"]["host"] == pytest.approx(100 * 42 / 45)
    assert res.tables["ops"].set_index("name").loc["k1", "min_slack_ns"] > 0


def test_two_steps_and_io_component():
    res = run(ev("step", "ProfilerStep#1", 0, 10), ev("step", "ProfilerStep#2", 10, 10),
              ev("data_wait", "next(loader)", 0, 8), ev("host_op", "x", 10, 10))
    assert res.metrics["steps"] == 2
    assert res.tables["per_step"]["length_ns"].tolist() == [8, 10]
    assert res.metrics["components_pct"]["io"] == pytest.approx(100 * 8 / 18)


@pytest.mark.parametrize("rows", [(), (ev("kernel", "k", 5, 10),), (ev("host_op", "h", 0, 0),)])
def test_empty_and_one_event(rows):
    res = run(*rows)
    assert res.metrics["length_pct"] <= 100.0
    assert (res.tables["top_ops"]["time_ns"] >= 0).all()


def test_longest_path_matches_a_plain_dp_on_random_graphs():
    rng = np.random.default_rng(7)
    for _ in range(200):
        lanes = rng.integers(1, 4)
        sizes = rng.integers(1, 6, size=lanes)
        n = int(sizes.sum())
        lane = np.repeat(np.arange(lanes), sizes)
        t = np.concatenate([np.sort(rng.integers(0, 50, size=k)) for k in sizes])
        first = np.ones(n, bool)
        first[1:] = lane[1:] != lane[:-1]
        w = np.where(first, 0, np.diff(t, prepend=0) * rng.integers(0, 2, size=n))
        # cross edges forward in time only (a DAG)
        cu, cv = [], []
        for _ in range(int(rng.integers(0, 6))):
            a, b = rng.integers(0, n, size=2)
            if t[a] < t[b] and lane[a] != lane[b]:
                cu.append(a)
                cv.append(b)
        cu, cv = np.array(cu, np.int64), np.array(cv, np.int64)
        # an edge weighs at most its time span (a wait or a delay, never more)
        cw = np.minimum(rng.integers(0, 5, size=cu.size), t[cv] - t[cu]) if cu.size else cu
        g = cpgraph.Graph(t, lane, w, np.full(n, -1), cu, cv, cw, np.full(cu.size, -1),
                          np.arange(n), np.arange(n))
        dist, _ = cpgraph.longest(g)
        # plain DP over nodes sorted by time (chains and cross edges go forward in time)
        ref = np.zeros(n, np.int64)
        edges = [(k - 1, k, w[k]) for k in range(n) if not first[k]] + list(zip(cu, cv, cw,
                                                                              strict=True))
        for _ in range(n + 1):
            for u, v, ww in edges:
                ref[v] = max(ref[v], ref[u] + ww)
        assert dist.tolist() == ref.tolist()
        # backward pass: longest path from each node, by the same plain DP on reversed edges
        back = np.zeros(n, np.int64)
        for _ in range(n + 1):
            for u, v, ww in edges:
                back[u] = max(back[u], back[v] + ww)
        assert cpgraph.longest_from(g).tolist() == back.tolist()


def test_host_work_inside_a_data_wait_counts_as_io():
    # a single-process loader decodes in the training thread: decode [10,40) inside the wait
    res = run(ev("step", "ProfilerStep#1", 0, 60), ev("data_wait", "next(loader)", 0, 50),
              ev("host_op", "decode", 10, 30), ev("host_op", "forward", 50, 10))
    times, _ = top(res)
    assert times == {"decode": 30, "next(loader)": 20, "forward": 10}
    assert res.metrics["components_pct"]["io"] == pytest.approx(100 * 50 / 60)
    assert res.metrics["components_pct"]["host"] == pytest.approx(100 * 10 / 60)


def test_loader_lane_is_on_the_path_only_through_the_data_wait_it_feeds():
    # loader 0: process batch [0,40), then prefetches the next one [45,100) in parallel.
    # main thread: waits for data [10,45) (a wait: weight 0), forward [45,55).
    # path: process 40 -> data wait end (0) -> forward 10 = 50; the prefetch (55) is not on it
    res = run(ev("step", "ProfilerStep#1", 0, 100),
              ev("data_process", "process batch", 0, 40, lane="loader 0", lane_kind="loader"),
              ev("data_process", "process batch", 45, 55, lane="loader 0", lane_kind="loader"),
              ev("data_wait", "next(loader)", 10, 35), ev("host_op", "forward", 45, 10))
    assert res.tables["per_step"]["length_ns"].tolist() == [50]
    times, _ = top(res)
    assert times == {"process batch": 40, "forward": 10}
    assert res.metrics["components_pct"]["io"] == pytest.approx(80.0)


def test_cross_stream_wait_inferred_where_an_end_lines_up_with_a_start():
    # stream 7: A [0,30), then waits on an event [30,62) for the allreduce, then B [62,80).
    # link lane: allreduce [30,60), launched long before (at 1): it starts when A ends (the
    # gradient is ready), not when launched. Path: A 30 -> allreduce 30 -> wait end (0) -> B 18
    res = run(ev("step", "ProfilerStep#1", 0, 80),
              ev("launch", "l1", 0, 1, corr_id=1), ev("launch", "l2", 1, 1, corr_id=2),
              ev("launch", "l3", 2, 1, corr_id=3),
              ev("kernel", "A", 0, 30, corr_id=1),
              ev("collective", "allreduce", 30, 30, corr_id=2, lane="link dp", lane_kind="link"),
              ev("sync", "wait event", 30, 32, lane="stream 7", lane_kind="device"),
              ev("kernel", "B", 62, 18, corr_id=3))
    times, _ = top(res)
    assert times == {"A": 30, "allreduce": 30, "B": 18}
    c = res.metrics["components_pct"]
    assert [c["computation"], c["communication"]] == pytest.approx([100 * 48 / 78, 100 * 30 / 78])


def test_stream_gap_before_a_task_with_no_launch_in_the_trace_is_not_a_delay():
    # H [0,40) on the host; stream 7: K1 [0,10), K2 [90,100), neither with a launch in the
    # trace (sampled traces, MTIA DMA requests): nothing shows K2 was ready at 10, so the 80 ns
    # gap is no device-side delay. Longest path: H 40 (not K1 10 + gap 80 + K2 10 = 100).
    res = run(ev("step", "ProfilerStep#1", 0, 100), ev("host_op", "H", 0, 40),
              ev("kernel", "K1", 0, 10, stream=7), ev("kernel", "K2", 90, 10, stream=7))
    times, _ = top(res)
    assert times == {"H": 40}
    assert res.metrics["components_pct"]["other"] == 0
    assert res.metrics["length_pct"] == pytest.approx(40.0)


def test_cross_stream_wait_inferred_up_to_line_up_ns():
    # stream 7: A [0,30us); stream 9: B [42us,62us), launched at 2 ns (queued long before): it
    # waited 12 us (< LINE_UP_NS = 20 us) for A, not for its launch. Path: A 30 us -> 12 us
    # wait (a gap: other) -> B 20 us; without the inferred edge it would be the launch delay
    # l2 -> B, 42 us of host time.
    us = 1000
    res = run(ev("step", "ProfilerStep#1", 0, 62 * us),
              ev("launch", "l1", 0, 1, corr_id=1), ev("launch", "l2", 2, 1, corr_id=2),
              ev("kernel", "A", 0, 30 * us, corr_id=1, stream=7),
              ev("kernel", "B", 42 * us, 20 * us, corr_id=2, stream=9, lane="stream 9"))
    times, _ = top(res)
    assert times == {"A": 30 * us, "B": 20 * us}
    c = res.metrics["components_pct"]
    assert [c["computation"], c["other"], c["host"]] == pytest.approx(
        [100 * 50 / 62, 100 * 12 / 62, 0])


def test_a_host_thread_resuming_after_a_collective_waited_for_it():
    # thread 1: A [0,1ms), idle, B [10.1ms,12ms); thread 2 (Gloo's runloop): all-reduce
    # [1ms,10ms). B starts 100 us after the all-reduce ends (< HOST_WAKE_NS) after a 9.1 ms
    # idle gap (> HOST_WAIT_MIN_NS): the thread waited for it (DDP's wait on the Gloo work is
    # not traced). Path: the all-reduce's lead 1 ms (nothing links A to it) -> all-reduce
    # 9 ms -> 0.1 ms wake-up -> B 1.9 ms, not A + 9.1 ms of nothing + B
    ms = 1_000_000
    res = run(ev("step", "ProfilerStep#1", 0, 12 * ms),
              ev("host_op", "A", 0, 1 * ms),
              ev("collective", "gloo:all_reduce", 1 * ms, 9 * ms, lane="thread 2"),
              ev("host_op", "B", 10_100_000, 1_900_000))
    times, _ = top(res)
    assert times == {"gloo:all_reduce": 9 * ms, "B": 1_900_000}
    c = res.metrics["components_pct"]
    assert c["communication"] == pytest.approx(100 * 9 / 11)  # of the 11 ms path
    # resuming 1 ms after (> HOST_WAKE_NS) is no wait: nothing links the all-reduce to B (the
    # longest path is the all-reduce's lane alone, 9 ms > A + B)
    res = run(ev("step", "ProfilerStep#1", 0, 13 * ms),
              ev("host_op", "A", 0, 1 * ms),
              ev("collective", "gloo:all_reduce", 1 * ms, 9 * ms, lane="thread 2"),
              ev("host_op", "B", 11 * ms, 2 * ms))
    assert top(res)[0] == {"gloo:all_reduce": 9 * ms}


def test_a_user_range_opening_in_the_gap_shows_when_the_thread_woke():
    # as the second case above (B starts 1 ms after the all-reduce ends), but the thread opens
    # a user range (Optimizer.step) 200 us after it (< HOST_WAKE_NS) that still holds B: the
    # thread woke there, so it waited for the all-reduce; the edge carries the 1 ms to B.
    # Path: all-reduce 9 ms -> 1 ms -> B 2 ms
    ms = 1_000_000
    base = (ev("step", "ProfilerStep#1", 0, 13 * ms),
            ev("host_op", "A", 0, 1 * ms),
            ev("collective", "gloo:all_reduce", 1 * ms, 9 * ms, lane="thread 2"),
            ev("host_op", "B", 11 * ms, 2 * ms))
    res = run(*base, ev("marker", "Optimizer.step#SGD.step", 10_200_000, 2_800_000))
    times, _ = top(res)
    assert times == {"gloo:all_reduce": 9 * ms, "B": 2 * ms}
    assert res.metrics["length_ms_median"] == pytest.approx(12.0)
    # a range that opens in the gap but closes before B says nothing of when the thread woke
    # for B; one that opens before the gap (the step's own range) neither
    for mark in (ev("marker", "log", 10_200_000, 100_000), ev("marker", "outer", 0, 13 * ms)):
        assert top(run(*base, mark))[0] == {"gloo:all_reduce": 9 * ms}


def test_traced_stream_wait_event_links_the_recording_stream_to_the_waiting_one():
    # CUPTI 'Stream Wait Event' (Kineto cuda_sync): stream 9 waits for the event recorded on
    # stream 7 by cudaEventRecord (corr 2) after A. B (launched at 4 ns, long before) starts
    # 50 us after A ends: too late for an inferred line-up, but the traced wait links them.
    # Path: A 30 us -> the wait 50 us (other) -> B 20 us = the step.
    us = 1000
    wait_args = '{"wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": 2, "stream": 9}'
    rows = (ev("step", "ProfilerStep#1", 0, 100 * us),
            ev("launch", "cudaLaunchKernel", 0, 1, corr_id=1),
            ev("runtime", "cudaEventRecord", 2, 1, corr_id=2),
            ev("launch", "cudaStreamWaitEvent", 3, 1, corr_id=3),
            ev("launch", "cudaLaunchKernel", 4, 1, corr_id=4),
            ev("kernel", "A", 0, 30 * us, corr_id=1, stream=7),
            ev("sync", "Stream Wait Event", 3, 1, corr_id=3, stream=9, lane="stream 9 sync",
               lane_kind="device", args=wait_args),
            ev("kernel", "B", 80 * us, 20 * us, corr_id=4, stream=9, lane="stream 9"))
    res = run(*rows)
    times, _ = top(res)
    assert times == {"A": 30 * us, "B": 20 * us}
    c = res.metrics["components_pct"]
    assert [c["computation"], c["other"], c["host"]] == pytest.approx([50, 50, 0])
    # without the record (no args), B waited for nothing traced: its launch delay is the path
    res = run(*rows[:6], dict(rows[6], args="{}"), rows[7])
    assert res.metrics["components_pct"]["host"] == pytest.approx(80.0, abs=0.01)


def _sync_frame(**change):
    df = pd.DataFrame(events(*SYNC))
    for c in ("corr_id", "stream"):
        df[c] = pd.array(df[c], dtype="Int64")
    for c, v in change.items():
        df[c] = v
    return df


def _same_graph(a, b):
    (g1, i1), (g2, i2) = a, b
    for f in g1.__dict__:
        np.testing.assert_array_equal(getattr(g1, f), getattr(g2, f))
    pd.testing.assert_frame_equal(i1, i2)


def test_replay_takes_the_graph_the_critical_path_built():
    from hermes.analyzers.common.steps import step_windows
    from hermes.analyzers.critical_path import stepgraph
    from hermes.analyzers.engine.base import Keep
    from hermes.whatif import replay

    keep = Keep()
    df = _sync_frame()
    run(*SYNC, keep=keep)  # the critical path builds the graph and keeps it in the run's store
    (kept,) = keep.values()
    sg = replay.build(df.copy(), step_windows(df), keep=keep)
    # the very arrays (nothing built again), and the same as a fresh build
    assert sg.g.t is kept.graph.t and sg.info["start"].to_numpy().tolist() == [0, 10, 40, 85, 20]
    assert replay.build(df.copy(), step_windows(df)).g.t is not kept.graph.t  # no store: built
    _same_graph(stepgraph.build(df, step_windows(df)), (kept.graph, kept.info))
    # a kept graph is read-only: a user changing it in place would change the next one's
    with pytest.raises(ValueError):
        kept.graph.w[0] = 1
    # columns a user adds to its info stay in its copy
    sg.info["extra"] = 1
    assert "extra" not in kept.info.columns


@pytest.mark.parametrize("col, value", [("corr_id", pd.array([None] * 6, dtype="Int64")),
                                        ("name", ["a", "b", "c", "d", "e", "f"]),
                                        ("dur_ns", [100, 30, 5, 45, 10, 59])])
def test_a_kept_graph_is_not_taken_for_other_events(col, value):
    from hermes.analyzers.common.steps import step_windows
    from hermes.analyzers.critical_path import stepgraph
    from hermes.analyzers.engine.base import Keep

    keep = Keep()
    df = _sync_frame()
    stepgraph.build(df, step_windows(df), keep=keep)
    other = _sync_frame(**{col: value})
    g, info = stepgraph.build(other, step_windows(other), keep=keep)
    assert len(keep) == 2  # built, not taken
    _same_graph((g, info), stepgraph.build(other, step_windows(other)))


def test_kept_graphs_are_matched_on_exactly_the_same_inputs():
    from hermes.analyzers.critical_path.stepkeep import same_inputs as _same

    a = (np.array([1, 2]), np.array([np.nan, 1.0]), pd.Index(["x", "y"]))
    assert _same(a, (np.array([1, 2]), np.array([np.nan, 1.0]), pd.Index(["x", "y"])))
    assert not _same(a, (np.array([1, 2], np.int32), *a[1:]))  # same values, other dtype
    assert not _same(a, (np.array([1, 3]), *a[1:]))
    assert not _same(a, (a[0], np.array([0.0, 1.0]), a[2]))  # NaN is not 0
    assert not _same(a, (*a[:2], pd.Index(["x", "z"])))  # another category
    assert not _same(a, (*a[:2], np.array([0, 1])))  # codes are not categories
    assert not _same(a, a[:2])
