"""Host calls back at their pace (``hermes.whatif.hostpace``): stopping competing processes
(every host CPU call x expected / observed launch time) and quieting host logging (the launch
excess off every dispatch call), on a tiny host-only step worked out by hand."""

from __future__ import annotations

import pytest

from hermes.trace.meta import TraceMeta
from hermes.whatif import graphs, predict
from tests.tracegen import ev
from tests.tracegen import frame

# one host lane, nothing on the device: the step is the host's chain of calls
# time  0      60      100     160     200   240    260
#       infer  launch  infer   launch  gc    sync
HOST = (ev("step", "ProfilerStep#1", 0, 260),
        ev("infer_shape", "infer", 0, 60),
        ev("launch", "launch", 60, 40),
        ev("infer_shape", "infer", 100, 60),
        ev("launch", "launch", 160, 40),
        ev("gc", "gc", 200, 40),
        ev("sync", "sync", 240, 20))
#: a launch takes 10 ns on this device: the trace's launches (median 40 ns) run 4x slower
DEVICE = {"launch_latency_s": 10e-9}


def run(spec: str, device: dict | None = DEVICE, rows: tuple = HOST):
    return predict(graphs(frame(*rows)), [spec], TraceMeta(device=device or {}))


def test_stop_competing_scales_host_cpu_work_by_the_launch_slowdown():
    # x 10 / 40: infers 15, launches 10, gc 10; the sync waits, it keeps its 20 ns:
    # 15 + 10 + 15 + 10 + 10 + 20 = 80
    p = run("stop_competing")
    assert p.applied == ["stop_competing"]
    assert (p.replay_ms * 1e6, p.predicted_ms * 1e6) == pytest.approx((260, 80))
    # 180 of the step's 260 ns saved
    assert p.saved_share == pytest.approx(180 / 260)


def test_quiet_logging_takes_the_launch_excess_off_every_dispatch_call():
    # 40 - 10 = 30 ns off each dispatch call: infers 30, launches 10; gc and sync keep theirs:
    # 30 + 10 + 30 + 10 + 40 + 20 = 140
    p = run("log_level=error")
    assert p.applied == ["log_level=error"]
    assert p.predicted_ms * 1e6 == pytest.approx(140)


def test_a_dispatch_call_shorter_than_the_excess_takes_no_time():
    # a 20 ns infer less the 30 ns excess: 0 (not negative); the rest as above
    rows = (ev("step", "ProfilerStep#1", 0, 220), ev("infer_shape", "infer", 0, 20),
            *(dict(r, ts_ns=r["ts_ns"] - 40) for r in HOST[2:]))
    p = run("log_level=error", rows=rows)
    assert p.replay_ms * 1e6 == pytest.approx(220)
    assert p.predicted_ms * 1e6 == pytest.approx(110)


@pytest.mark.parametrize("device, why", [
    ({}, "the device profile gives no launch latency"),
    ({"launch_latency_s": 40e-9}, "host launches already run at the device profile's launch "
                                  "latency"),
])
def test_without_a_slowdown_to_undo_the_formula_stands(device, why):
    for spec in ("stop_competing", "log_level=error"):
        p = run(spec, device)
        assert not p.applied and p.reasons == {spec: why}


def test_the_device_profile_named_in_the_trace_gives_the_latency():
    # no latency in the trace's device record: the profile its name matches (910B: 6 us)
    from hermes import devices

    lat = devices.match("ascend910b").fields["launch_latency_s"]
    rows = tuple(dict(r, ts_ns=r["ts_ns"] * 1000, dur_ns=r["dur_ns"] * 1000) for r in HOST[1:3])
    rows = (ev("step", "ProfilerStep#1", 0, 100_000),) + rows
    p = run("stop_competing", {"name": "ascend910b"}, rows)
    # infer 60 us and launch 40 us x 6 / 40
    assert p.predicted_ms * 1e6 == pytest.approx(100_000 * lat * 1e9 / 40_000, rel=1e-6)
