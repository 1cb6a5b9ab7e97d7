"""Monitor figures, slow-step detection and the coarse-to-fine trigger, on hand-made steps."""

from __future__ import annotations

import gc
import os
import signal

import numpy as np
import pandas as pd
import pytest

import hermes
from hermes.collectors.auto import AutoTrigger
from hermes.collectors.monitor import Monitor, robust_z, slowest_ranks
from hermes.hooks import StepInfo
from hermes.trace.validate import check_events
from hermes.trace.writer import to_table

MS = 1_000_000


def _rows_of(monitor_batches: list[dict]) -> pd.DataFrame:
    return pd.concat([pd.DataFrame(b) for b in monitor_batches], ignore_index=True)


def test_monitor_figures_by_hand() -> None:
    got: list[dict] = []
    m = Monitor(got.append, peak_flops=1e15, host_stats=False, flush_steps=1)
    # 200 ms step, 150 ms device busy, 64 samples, 4096 tokens, 5e13 FLOP, 1 GB in 50 ms.
    m.on_step(StepInfo(0, 7, 1_000 * MS, 1_200 * MS, device_busy_ns=150 * MS, samples=64,
                       tokens=4096, flops=5e13, comm_bytes=10**9, comm_ns=50 * MS,
                       queue_depths={"device": 2}, extra={"gc_ns": 3 * MS, "gc_count": 4}))
    df = _rows_of(got)
    step = df[df.kind == "step"].iloc[0]
    assert (step.ts_ns, step.dur_ns, step.step, step.flops) == (1_000 * MS, 200 * MS, 7, 5e13)
    c = df[df.kind == "counter"].set_index("name")["value"]
    assert c["device_busy_pct"] == pytest.approx(75.0)
    assert c["samples_per_s"] == pytest.approx(320.0)
    assert c["tokens_per_s"] == pytest.approx(20480.0)
    assert c["tflops"] == pytest.approx(250.0)  # 5e13 FLOP / 0.2 s
    assert c["mfu_pct"] == pytest.approx(25.0)  # 2.5e14 / 1e15
    assert c["comm_bw_GBps"] == pytest.approx(20.0)  # 1e9 B / 0.05 s
    assert c["gc_ms"] == pytest.approx(3.0)
    assert c["gc_collections"] == 4.0  # collections in the step, a count
    assert c["queue.device"] == 2.0
    assert (df[df.kind == "counter"].ts_ns == 1_200 * MS).all()
    assert check_events(to_table(df).to_pandas()) == []


def test_robust_z_by_hand() -> None:
    hist = np.array([10.0, 11.0, 9.0, 10.0, 12.0, 8.0, 10.0])
    # median 10, |dev| = 0,1,1,0,2,2,0 -> MAD 1; z(20) = 0.6745 * 10 / 1
    z, ratio = robust_z(hist, 20.0)
    assert z == pytest.approx(6.745)
    assert ratio == pytest.approx(2.0)


def test_history_stage_flags_only_the_outlier() -> None:
    got: list[dict] = []
    m = Monitor(got.append, host_stats=False)
    durs = [100 + (i % 3) for i in range(20)]
    durs[14] = 300
    t = 0
    for i, d in enumerate(durs):
        m.on_step(StepInfo(0, i, t * MS, (t + d) * MS))
        t += d
    m.close()
    assert [(s.step, round(s.ratio, 2)) for s in m.slow_steps] == [(14, 2.97)]
    df = _rows_of(got)
    assert df[df.name == "hermes.slow_step"].step.tolist() == [14]


def test_domain_stage_names_the_slowest_rank() -> None:
    steps = pd.DataFrame({"rank": [0, 1, 2, 3, 0, 1, 2, 3],
                          "step": [0, 0, 0, 0, 1, 1, 1, 1],
                          "dur_ns": [100, 100, 150, 100, 100, 101, 100, 100]})
    out = slowest_ranks(steps, {0: "a", 1: "a", 2: "b", 3: "b"})
    rows = out[["domain", "step", "rank", "ratio", "suspect"]].values.tolist()
    # domain b step 0: rank 2 at 150 vs median 125 -> 1.2; domain a step 1: 101/100.5
    assert rows[0][:3] == ["a", 0, 0] and not rows[0][4]
    assert rows[2][:3] == ["b", 0, 2] and rows[2][3] == pytest.approx(1.2) and rows[2][4]
    assert rows[1][:3] == ["a", 1, 1] and not rows[1][4]


def _drive(session: hermes.collectors.api.Recording, durs: list[int]) -> None:
    """A producer: asks wants_detail per step, emits a kernel only when told to."""
    t = 0
    for i, d in enumerate(durs):
        if session.wants_detail(0, i):
            session.on_events({"rank": [0], "lane": ["stream 1"], "lane_kind": ["device"],
                               "kind": ["kernel"], "name": ["matmul"], "ts_ns": [t * MS],
                               "dur_ns": [d * MS], "step": [i]})
        session.on_step(StepInfo(0, i, t * MS, (t + d) * MS, device_busy_ns=d * MS))
        t += d


def test_auto_captures_exactly_the_window_after_a_slow_step(tmp_path) -> None:
    durs = [50] * 30
    durs[10] = 400
    with hermes.profile(out=tmp_path / "run.parquet", mode="auto", window=4,
                        handle_signals=False, trigger_signal=None) as s:
        _drive(s, durs)
    trace = hermes.load(tmp_path / "run.parquet")
    ev = trace.events
    assert sorted(ev[ev.kind == "kernel"].step.unique().tolist()) == [11, 12, 13, 14]
    assert trace.meta.collector["detailed_steps"] == [11, 12, 13, 14]
    assert trace.meta.collector["mode"] == "auto"
    assert [x["step"] for x in trace.meta.collector["slow_steps"]] == [10]
    assert ev[ev.kind == "step"].step.tolist() == list(range(30))


def test_monitor_mode_records_no_detail(tmp_path) -> None:
    durs = [50] * 20
    durs[10] = 400
    with hermes.profile(out=tmp_path / "m.parquet", mode="monitor", handle_signals=False) as s:
        _drive(s, durs)
    trace = hermes.load(tmp_path / "m.parquet")
    assert (trace.events.kind == "kernel").sum() == 0
    assert trace.meta.collector["detailed_steps"] == []
    assert (trace.events.kind == "step").sum() == 20


def test_trigger_file_and_signal_request_the_next_steps(tmp_path) -> None:
    flag = tmp_path / "capture"
    trig = AutoTrigger(2, trigger_file=flag, signum=signal.SIGUSR1, poll_s=0.0)
    try:
        on = [s for s in range(0, 3) if trig.wants_detail(0, s)]
        flag.write_text("3")  # K=3 for this request
        on += [s for s in range(3, 9) if trig.wants_detail(0, s)]
        assert not flag.exists()
        os.kill(os.getpid(), signal.SIGUSR1)  # during step 8
        trig.step_ended(8)
        on += [s for s in range(9, 14) if trig.wants_detail(0, s)]
    finally:
        trig.close()
    assert on == [3, 4, 5, 9, 10]
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL


def test_regions_gc_and_fine_mode(tmp_path) -> None:
    @hermes.region("work")
    def work() -> None:
        gc.collect()

    with hermes.profile(out=tmp_path / "f.parquet", mode="fine", handle_signals=False):
        for _ in range(3):
            with hermes.region("outer"):
                work()
            hermes.step(samples=4)
    ev = hermes.load(tmp_path / "f.parquet").events
    markers = ev[ev.kind == "marker"]
    assert markers[markers.name == "work"].step.tolist() == [0, 1, 2]
    outer = markers[markers.name == "outer"].reset_index(drop=True)
    inner = markers[markers.name == "work"].reset_index(drop=True)
    assert ((inner.ts_ns >= outer.ts_ns) &
            (inner.ts_ns + inner.dur_ns <= outer.ts_ns + outer.dur_ns)).all()
    assert (ev.kind == "gc").sum() >= 3
    assert hermes.step() == -1  # no session: a no-op


def test_fine_collector_measures_its_overhead(tmp_path) -> None:
    from hermes.collectors.fine import FineCollector

    fc = FineCollector(tmp_path / "o.parquet", measure_overhead=True)
    fc.on_events({"rank": [0, 0], "lane": ["t", "t"], "lane_kind": ["host", "host"],
                  "kind": ["marker", "marker"], "name": ["a", "b"], "ts_ns": [0, 5],
                  "dur_ns": [1, 1]})
    fc.close()
    col = hermes.load(tmp_path / "o.parquet").meta.collector
    assert col["events"] == 2 and col["mode"] == "fine"
    assert 0.0 < col["overhead_pct"] <= 100.0
    assert 0 < fc.busy_ns


def test_detailed_steps_are_not_judged() -> None:
    """Capture slows a step down; judging it would let capture trigger more capture."""
    m = Monitor(lambda batch: None, host_stats=False)
    t = 0
    for i in range(20):
        d = 1000 if i in (12, 13) else 100
        m.on_step(StepInfo(0, i, t * MS, (t + d) * MS, extra={"detailed": i == 12}))
        t += d
    assert [s.step for s in m.slow_steps] == [13]


def test_producer_step_rows_are_dropped_own_rows_kept(tmp_path) -> None:
    from hermes.collectors.fine import FineCollector

    fc = FineCollector(tmp_path / "d.parquet", drop_kinds=("step",))
    row = {"rank": [0, 0], "lane": ["t", "t"], "lane_kind": ["host", "host"],
           "kind": ["launch", "step"], "name": ["mm", "ProfilerStep"], "ts_ns": [0, 0],
           "dur_ns": [1, 9]}
    fc.on_events(row)  # a producer's batch: its step row goes
    fc.record(row)  # the session's own rows: kept
    fc.close()
    ev = hermes.load(tmp_path / "d.parquet").events
    assert ev.kind.astype(str).tolist().count("step") == 1
    assert (ev.kind == "launch").sum() == 2 and fc.events_written == 3


def test_stage_two_in_one_process_names_the_slow_rank() -> None:
    m = Monitor(lambda batch: None, host_stats=False, domains={0: "dp0", 1: "dp0", 2: "dp1",
                                                               3: "dp1"})
    for step in range(3):
        for rank in range(4):
            d = 130 if (rank == 3 and step == 1) else 100
            m.on_step(StepInfo(rank, step, 0, d * MS))
    assert m.summary()["slow_ranks"] == [{"domain": "dp1", "step": 1, "rank": 3,
                                          "ratio": round(130 / 115, 3)}]


def test_host_counters_are_this_process_cpu_and_rss() -> None:
    """host_cpu_pct: the process's CPU time over the wall time since the last sample (a busy
    loop reads ~100, a sleep ~0); host_rss_bytes: its resident set, as psutil reads it."""
    import time

    import psutil

    from hermes.collectors.monitor import HostSampler

    h = HostSampler(interval_s=0.0)
    t = time.perf_counter_ns() + 100 * MS
    while time.perf_counter_ns() < t:
        pass
    busy, rss = h.sample(time.perf_counter_ns())
    time.sleep(0.1)
    idle, _ = h.sample(time.perf_counter_ns())
    assert busy > 80 and idle < 20, (busy, idle)
    assert rss == pytest.approx(psutil.Process().memory_info().rss, rel=0.1)
    h.close()
    h = HostSampler(interval_s=1000.0)
    assert h.sample(time.perf_counter_ns())[1] == pytest.approx(rss, rel=0.1)
    assert h.sample(time.perf_counter_ns()) == (None, None)  # until the next interval
    h.close()


def test_the_detector_median_and_scale_are_numpys() -> None:
    from hermes.collectors.monitor import median_scale, median_scale_of

    rng = np.random.default_rng(36)
    for n in (1, 2, 7, 8, 100):
        for _ in range(50):
            hist = rng.integers(1, 10**9, n).tolist()
            assert median_scale_of(hist) == median_scale(np.array(hist, dtype=np.float64))
    assert median_scale_of([5, 5, 5, 5]) == (5.0, 1.0)  # MAD 0: floored at 1
