"""Fluctuation analyzer: step-time spikes and the cause that co-occurs with them."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.analyzers.engine.base import RankContext
from hermes.analyzers.engine.invariants import check_result
from hermes.analyzers.fluctuation import fluctuation, robust_z
from hermes.trace.meta import TraceMeta
from tests.tracegen import ev, frame


def run(*rows):
    return check_result(fluctuation(RankContext(rank=0, events=frame(*rows), meta=TraceMeta())))


def steps(durs, extra=()):
    rows, t = [], 0
    for i, d in enumerate(durs):
        rows += [ev("step", f"ProfilerStep#{i}", t, d), ev("kernel", "k", t, 500, stream=7)]
        t += d
    return rows + list(extra)


def test_robust_z():
    z, med, mad = robust_z(np.array([10.0, 11, 9, 10, 30]))
    assert (med, mad) == (10.0, 1.0)
    assert z[-1] == pytest.approx(0.6745 * 20)


def test_gc_spike_is_attributed_to_gc():
    # seven steps of 1000 ns, step 3 lasts 1500: a GC pause of 450 ns in it (starts at 3300)
    durs = [1000, 1000, 1000, 1500, 1000, 1000, 1000]
    res = run(*steps(durs, [ev("gc", "gc", 3300, 450)]))
    assert res.metrics["spikes"] == 1
    (f,) = res.findings
    # excess 500, GC excess 450 >= 0.5 x 500 -> 450 ns of 7500 attributed
    assert (f.id, f.steps) == ("cpu.garbage_collection", (3,))
    assert f.time_share == pytest.approx(450 / 7500)
    assert res.tables["per_step"]["attributed_to"].tolist()[3] == "gc"


def test_unexplained_spike_is_still_a_finding():
    """A spike nothing recorded explains is a step_spike finding (a monitor must catch it):
    the step, how much slower, its cost (500 of 7500 ns), and no cause guessed."""
    res = run(*steps([1000, 1000, 1000, 1500, 1000, 1000, 1000]))
    assert res.metrics["spikes"] == 1 and res.metrics["unexplained_spikes"] == [3]
    (f,) = res.findings
    assert f.id == "computation.slow_node" and f.evidence["reason"] == "step_spike"
    assert f.steps == (3,) and f.evidence["slower_x"] == [1.5]
    assert f.time_share == pytest.approx(500 / 7500)
    assert "nothing recorded in it explains that" in f.summary
    assert "none was captured in detail" in f.summary


def test_steady_run_and_too_few_steps():
    res = run(*steps([1000, 1010, 990, 1000, 1005, 995]))
    assert res.metrics["spikes"] == 0 and res.metrics["cv"] < 0.01
    # four steps: no reliable median, no spikes whatever the variation
    res = run(*steps([1000, 3000, 1000, 1000], [ev("gc", "gc", 1100, 1500)]))
    assert res.metrics["spikes"] == 0 and res.findings == []


def test_data_wait_spike_goes_to_io():
    durs = [1000] * 6 + [2000]
    res = run(*steps(durs, [ev("data_wait", "next", 6000, 1000)]))
    (f,) = res.findings
    assert f.id == "io.slow_data_processing" and f.time_share == pytest.approx(1000 / 8000)


@pytest.mark.parametrize("rows", [(), (ev("kernel", "k", 0, 10, stream=7),)])
def test_empty_and_one_event(rows):
    assert run(*rows).findings == []


def test_slow_step_from_device_work_is_not_blamed_on_the_sync():
    # seven steps of 1000 ns: launch [t, t+10), kernel [t+10, t+510), the host then syncs
    # [t+10, t+510) on the busy device. Step 3 lasts 1600: its kernel runs 1100 (device work
    # grew by 600), its sync waits 1100 on the busy device -- a sync on a busy device costs
    # nothing (sync component 0 in every step), so the spike is device work: 600 >= 0.5 x 600.
    rows, t = [], 0
    for i, d in enumerate([1000, 1000, 1000, 1600, 1000, 1000, 1000]):
        k = 500 + (d - 1000)
        rows += [ev("step", f"ProfilerStep#{i}", t, d), ev("launch", "cudaLaunchKernel", t, 10),
                 ev("kernel", "k", t + 10, k, stream=7),
                 ev("sync", "cudaDeviceSynchronize", t + 10, k)]
        t += d
    res = run(*rows)
    (f,) = res.findings
    assert (f.id, f.steps, f.evidence["component"]) == ("computation.slow_node", (3,), "device")
    assert f.time_share == pytest.approx(600 / 7600)
    assert f.summary.startswith("step 3 took 0.0016 ms against a median of 0.001 ms: "
                                "device work grew by 0.0006 ms")
    assert res.tables["per_step"]["sync_ns"].tolist() == [0] * 7


def test_sync_on_an_idle_device_still_explains_a_spike():
    # the same, but step 3's host sits in the sync 600 ns longer after its kernel is done
    # (device idle): the sync's device-idle time grew by 600
    rows, t = [], 0
    for i, d in enumerate([1000, 1000, 1000, 1600, 1000, 1000, 1000]):
        rows += [ev("step", f"ProfilerStep#{i}", t, d), ev("launch", "cudaLaunchKernel", t, 10),
                 ev("kernel", "k", t + 10, 500, stream=7),
                 ev("sync", "cudaDeviceSynchronize", t + 10, 500 + (d - 1000))]
        t += d
    (f,) = run(*rows).findings
    assert (f.id, f.steps) == ("cpu.host_device_sync", (3,))


def test_monitored_spike_is_a_finding_from_the_monitor_counters():
    # a coarse-to-fine trace: 7 monitor steps of 1000 ns, steps 1 and 2 captured in detail
    # (kernels), the others monitored only; step 5 (monitored) lasts 2000 and the monitor's
    # gc_ms counter says 900 ns of GC in it (0.0009 ms); excess 1000, GC 900 >= 500.
    from hermes.analyzers.overlap import analyze as overlap

    rows, t = [], 0
    for i, d in enumerate([1000, 1000, 1000, 1000, 1000, 2000, 1000]):
        rows.append(ev("step", "step", t, d, lane="steps", step=i))
        rows.append(ev("counter", "gc_ms", t + d, 0, lane="monitor", lane_kind="counter",
                       step=i, value=0.0009 if i == 5 else 0.0))
        if i in (1, 2):
            rows.append(ev("kernel", "k", t, 600, stream=7, step=i))
        t += d
    meta = TraceMeta(collector={"mode": "auto", "detailed_steps": [1, 2]})
    ctx = RankContext(rank=0, events=frame(*rows), meta=meta)
    res = check_result(fluctuation(ctx))
    assert res.metrics["steps"] == 7  # step-time statistics: every step
    (f,) = res.findings
    assert (f.id, f.steps) == ("cpu.garbage_collection", (5,))
    assert f.time_share == pytest.approx(900 / 8000)
    # the breakdown uses the two detailed steps only: computation 1200 of 2000 ns, free 800;
    # the five monitored steps are not counted as free time
    ov = check_result(overlap(ctx))
    assert ov.metrics["steps"] == 2 and ov.metrics["monitored_only_steps"] == 5
    assert ov.metrics["computation_only_pct"] == pytest.approx(60.0)
    assert ov.metrics["free_pct"] == pytest.approx(40.0)


def test_unexplained_spike_is_listed_not_guessed():
    res = run(*steps([1000, 1000, 1000, 1500, 1000, 1000, 1000]))
    assert res.metrics["unexplained_spikes"] == [3]
    # its finding names no component: the reason says it was not explained
    assert [(f.evidence["reason"], f.evidence["component"]) for f in res.findings] == \
        [("step_spike", "")]
