"""Multi-component overlap: tiny traces, every part computed by hand beside the trace."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.engine.base import RankContext
from hermes.analyzers.engine.invariants import check_result
from hermes.analyzers.overlap import PARTS, analyze
from hermes.trace.meta import TraceMeta
from tests.tracegen import ev, events

US = 1000  # times below are in us (HTA's figures work on a us grid); expectations in ns * US


def run(*rows):
    df = pd.DataFrame(events(*rows)) if rows else pd.DataFrame(
        {c: [] for c in ("rank", "lane", "lane_kind", "kind", "name", "ts_ns", "dur_ns")})
    df["ts_ns"] = df["ts_ns"] * US
    df["dur_ns"] = df["dur_ns"] * US
    for c in ("corr_id", "stream"):
        if c not in df.columns:
            df[c] = pd.array([None] * len(df), dtype="Int64")
    return check_result(analyze(RankContext(rank=0, events=df, meta=TraceMeta())))


# time (us):    0    10   20   30   40   50   60   70   80   90   100 ... 150 ... 250 ... 300
# host op       [===============)                                   step 1 = [0, 100)
# launch c1          [=)  launch c2 at 16                           step 2 = [100, 300)
# host sync                                  [=========)
# kernel gemm             [==============)                          (computation C)
# nccl                              [==============)                (communication M)
# step 2: launch c3 [120, 125); kernel B [150, 250)
TRACE = (
    ev("step", "ProfilerStep#1", 0, 100), ev("step", "ProfilerStep#2", 100, 200),
    ev("host_op", "aten::mm", 0, 30),
    ev("launch", "cudaLaunchKernel", 10, 5, corr_id=1),
    ev("launch", "ncclLaunch", 16, 2, corr_id=2),
    ev("sync", "cudaStreamSynchronize", 60, 20),
    ev("kernel", "gemm", 20, 30, corr_id=1, stream=7),
    ev("collective", "ncclKernel_AllReduce", 40, 30, corr_id=2, stream=9, lane="stream 9"),
    ev("launch", "cudaLaunchKernel", 120, 5, corr_id=3),
    ev("kernel", "B", 150, 100, corr_id=3, stream=7),
)
# step 1: C=[20,50) M=[40,70) H=[0,30)+[60,80); busy=[20,70)
#   overlapped [40,50)=10, computation_only [20,40)=20, communication_only [50,70)=20,
#   host_bound [0,20)+[70,80)=30, free [80,100)=20
# step 2: computation_only [150,250)=100, host_bound [120,125)=5, free 95
EXPECTED_NS = pd.DataFrame({
    "step": [1, 2],
    "computation_only_ns": [20, 100], "communication_only_ns": [20, 0],
    "overlapped_ns": [10, 0], "host_bound_ns": [30, 5], "free_ns": [20, 95],
})


def test_per_step_parts_by_hand():
    res = run(*TRACE)
    got = res.tables["per_step"][EXPECTED_NS.columns].astype("int64")
    want = EXPECTED_NS.assign(**{c: EXPECTED_NS[c] * US for c in EXPECTED_NS.columns[1:]})
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    pct = res.tables["per_step"][[f"{p}_pct" for p in PARTS]]
    assert pct.sum(axis=1).tolist() == pytest.approx([100.0, 100.0])
    assert pct.iloc[0].tolist() == pytest.approx([20, 20, 10, 30, 20])


def test_rank_metrics_are_time_weighted_over_steps():
    m = run(*TRACE).metrics
    # totals over 300 ns: 120, 20, 10, 35, 115
    assert [m[f"{p}_pct"] for p in PARTS] == pytest.approx(
        [40.0, 20 / 3, 10 / 3, 35 / 3, 115 / 3])
    assert m["steps"] == 2 and m["step_source"] == "step_events"
    assert m["step_median_ms"] == pytest.approx(0.150)
    assert m["step_p90_ms"] == pytest.approx(0.190)


def test_hta_figures_drop_the_last_step():
    m = run(*TRACE).metrics
    # two ProfilerStep names: kernel B (launched at 120 >= last step start 100) is dropped.
    # GPU events gemm [20,50) + nccl [40,70): span 50, busy 50, compute 30, overlap 10 of 30
    assert m["hta_kernel_time_ns"] == 50 * US
    assert m["idle_pct"] == pytest.approx(0.0)
    assert m["compute_pct"] == pytest.approx(60.0)
    assert m["non_compute_pct"] == pytest.approx(40.0)
    assert m["comm_comp_overlap_pct"] == pytest.approx(100 / 3)
    ps = run(*TRACE).tables["per_step"]
    # per step, the HTA figures use the GPU events clipped to the step (B is in step 2)
    assert ps["compute_pct"].tolist() == pytest.approx([60.0, 100.0])
    assert math.isnan(ps["comm_comp_overlap_pct"].iloc[1])


def test_device_idle_gaps_split_at_step_borders():
    gaps = run(*TRACE).tables["device_idle"]
    want = {"start_ns": [0, 70, 100, 250], "end_ns": [20, 100, 150, 300],
            "dur_ns": [20, 30, 50, 50]}
    assert gaps.drop(columns="step").to_dict("list") == {
        k: [x * US for x in v] for k, v in want.items()}
    assert gaps["step"].tolist() == [1, 1, 2, 2]


def test_nccl_kernel_counts_as_communication_and_no_steps_gives_one_window():
    res = run(ev("kernel", "gemm", 0, 10, stream=7),
              ev("kernel", "ncclDevKernel_AllGather", 5, 10, stream=8, lane="stream 8"),
              ev("host_op", "x", 15, 5))
    m = res.metrics
    assert m["steps"] == 1 and m["step_source"] == "trace"
    # window [0,20): comp-only 5, overlapped 5, comm-only 5, host-bound 5, free 0
    assert [m[f"{p}_pct"] for p in PARTS] == pytest.approx([25, 25, 25, 25, 0])


@pytest.mark.parametrize("rows", [(), (ev("kernel", "k", 5, 10),), (ev("host_op", "h", 0, 0),)])
@pytest.mark.parametrize("scale", [1, 1 / US])
def test_empty_and_one_event_traces(rows, scale):
    # scale 1/US: a sub-us kernel, which HTA's us grid turns into a negative duration
    res = run(*[{**r, "ts_ns": r["ts_ns"] * scale, "dur_ns": r["dur_ns"] * scale} for r in rows])
    m = res.metrics
    assert sum(m[f"{p}_pct"] for p in PARTS) == pytest.approx(100.0)
    for t in res.tables.values():
        assert (t.filter(like="dur_ns") >= 0).all().all()


def test_parts_match_a_brute_force_timeline_on_random_traces():
    """Every unit of time classified one by one (a slow, obvious model) against the interval
    arithmetic, on random small traces with two steps."""
    rng = np.random.default_rng(3)
    kinds = [("kernel", "device", "stream 7"), ("collective", "link", "link 0"),
             ("kernel", "device", "stream 8"), ("host_op", "host", "thread 1"),
             ("marker", "host", "thread 1"), ("data_process", "loader", "loader 0")]
    for _ in range(30):
        rows = [ev("step", "ProfilerStep#1", 0, 40), ev("step", "ProfilerStep#2", 40, 50)]
        for _ in range(int(rng.integers(0, 12))):
            k, lk, lane = kinds[int(rng.integers(0, len(kinds)))]
            rows.append(ev(k, "x", int(rng.integers(-5, 95)), int(rng.integers(0, 20)),
                           lane=lane, lane_kind=lk))
        got = run(*rows).tables["per_step"]
        for i, (lo, hi) in enumerate([(0, 40), (40, 90)]):
            want = dict.fromkeys(PARTS, 0)
            for t in range(lo, hi):
                def on(pred, t=t, evs=rows[2:]):
                    return any(pred(r) and r["ts_ns"] <= t < r["ts_ns"] + r["dur_ns"]
                               for r in evs)
                c = on(lambda r: r["kind"] == "kernel")
                m = on(lambda r: r["kind"] == "collective")
                h = on(lambda r: r["lane_kind"] == "host" and r["kind"] == "host_op")
                part = ("overlapped" if c and m else "computation_only" if c else
                        "communication_only" if m else "host_bound" if h else "free")
                want[part] += 1
            assert {p: int(got[f"{p}_ns"].iloc[i]) // US for p in PARTS} == want
