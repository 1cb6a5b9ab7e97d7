"""Shapes of real traces the hand-made analyzer tests do not cover (issue 11): idle helper
threads, traces without ProfilerStep, GPU-only traces. Numbers by hand."""

from __future__ import annotations

import pytest

import hermes
from hermes.trace.meta import TraceMeta
from hermes.trace.writer import write_trace
from tests.analyzers.test_analysis_critical_path import run as critical_path
from tests.tracegen import ev, events


def test_an_idle_thread_is_never_the_critical_path():
    # thread 1 (the loop) launches k [20, 70) at [10, 15), then syncs [15, 70) and runs opt
    # [70, 90); thread 2 is a Python helper thread blocked in threading's wait for the whole
    # step [0, 100) -- it launches nothing, syncs nothing: not host work, never on the path.
    # Path: launch 10..15 -> launch delay to 20 -> k 50 -> sync end 70 -> opt 20 (+ the
    # loop's first 10 ns, a gap before the launch: no work) = launch 5 + delay 5 + k 50 + opt 20
    res = critical_path(
        ev("step", "ProfilerStep#1", 0, 100),
        ev("launch", "cudaLaunchKernel", 10, 5, corr_id=1),
        ev("sync", "cudaStreamSynchronize", 15, 55),
        ev("host_op", "opt", 70, 20),
        ev("kernel", "k", 20, 50, corr_id=1, stream=7),
        ev("python", "threading.py(359): wait", 0, 100, lane="thread 2"))
    names = set(res.tables["top_ops"]["name"])
    assert "threading.py(359): wait" not in names
    assert names == {"k", "opt", "cudaLaunchKernel"}
    assert res.metrics["components_pct"]["computation"] == pytest.approx(100 * 50 / 80)


def test_a_blocking_copy_call_is_a_wait_on_the_critical_path():
    # hipMemcpyWithStream [15, 70) blocks until k [20, 60) is done and its copy [60, 70) too:
    # the path runs launch -> k -> (copy) -> the call's end, not through the call's own time
    res = critical_path(
        ev("step", "ProfilerStep#1", 0, 100),
        ev("launch", "hipLaunchKernel", 10, 5, corr_id=1),
        ev("runtime", "hipMemcpyWithStream", 15, 55, corr_id=2),
        ev("kernel", "k", 20, 40, corr_id=1, stream=7),
        ev("memcpy_d2h", "Memcpy DtoH (Device -> Pageable)", 60, 10, corr_id=2, stream=7),
        ev("host_op", "opt", 70, 20))
    t = dict(zip(res.tables["top_ops"]["name"], res.tables["top_ops"]["time_ns"], strict=True))
    assert t.get("hipMemcpyWithStream", 0) == 0
    assert t["k"] == 40 and t["Memcpy DtoH (Device -> Pageable)"] == 10


def _analyze(tmp_path, rows, meta=None):
    f = tmp_path / "t.parquet"
    write_trace(f, events(*rows), meta or TraceMeta(source="synthetic"))
    return hermes.analyze(f)


def test_trace_without_profiler_steps_is_one_window_and_says_so(tmp_path):
    # inference: no ProfilerStep. Window [0, 1000) from the first event to the last.
    # host aten::mm [0, 100) + launch [100, 110) -> k [110, 410); host sync [110, 410) waits
    # on the busy device (costs nothing); then aten::add [410, 1000) launches nothing the
    # device runs before 1000: host-bound 100 + 10 + 590 = 700 -> dispatch 0.7 of the window.
    a = _analyze(tmp_path, [
        ev("host_op", "aten::mm", 0, 100), ev("launch", "cudaLaunchKernel", 100, 10, corr_id=1),
        ev("kernel", "k", 110, 300, corr_id=1, stream=7),
        ev("sync", "cudaStreamSynchronize", 110, 300), ev("host_op", "aten::add", 410, 590)])
    doc = a.to_dict()
    assert doc["steps"]["count"] == 1 and doc["bound"] == "host"
    ov = a.results("overlap", rank=0).metrics
    assert ov["step_source"] == "trace" and "whole profiling window" in ov["windows"]
    assert ov["computation_only_pct"] == pytest.approx(30.0)
    (f,) = [f for f in a.findings if f.category == "cpu"]
    assert (f.cause, round(f.time_share, 6)) == ("operator_dispatch", 0.7)
    assert a.results("critical_path", rank=0).metrics["steps"] == 1


def test_gpu_only_trace_is_analysed_as_device_work(tmp_path):
    # no host event at all (a GPU-only capture): k1 [0, 400), k2 [500, 1000) on one stream.
    # Busy 900 of the window [0, 1000): device-bound, 10 % free, no host finding (no evidence)
    a = _analyze(tmp_path, [ev("kernel", "k1", 0, 400, stream=7),
                            ev("kernel", "k2", 500, 500, stream=7)])
    assert a.bound == "device"
    row = a.breakdown.iloc[0]
    assert row["computation_only_pct"] == pytest.approx(90.0)
    assert row["free_pct"] == pytest.approx(10.0)
    assert not [f for f in a.findings if f.category in ("cpu", "io")]
