"""CPU analyzer: host-bound device idle time apportioned to causes, computed by hand."""

from __future__ import annotations

import pytest

from hermes.analyzers.cpu import cpu
from hermes.analyzers.engine.base import RankContext
from hermes.analyzers.engine.invariants import check_result
from hermes.analyzers.overlap import analyze as overlap
from hermes.trace.meta import TraceMeta
from tests.tracegen import ev, frame


def run(*rows):
    ctx = RankContext(rank=0, events=frame(*rows), meta=TraceMeta())
    ctx.results["overlap"] = check_result(overlap(ctx))
    return check_result(cpu(ctx))


def shares(res) -> dict[str, float]:
    # a cause filed under another id with a reason (allocator calls, start-up) by its reason
    return {f.evidence.get("reason") or f.cause: round(f.time_share, 9) for f in res.findings}


# time    0      50     150   200  250  300     400  450  500            800        1000
# host    [aten::linear ..........................)                            step [0, 1000)
#                [compile )    [sync)
#                                        [gc    )
#                                                 [dlog)
#                                                      [launch)
# kernel                                                                   [k1 .......)
# device idle = [0, 800); host busy [0, 500) -> host-bound 500, free 300
# claims: compile 100, sync 50, gc 100, logging 50, dispatch = 300-100-50 + 50 = 200
TRACE = (
    ev("step", "ProfilerStep#1", 0, 1000),
    ev("host_op", "aten::linear", 0, 300),
    ev("compile", "aclopCompileAndExecute", 50, 100),
    ev("sync", "cudaStreamSynchronize", 200, 50),
    ev("gc", "gc", 300, 100),
    ev("runtime", "dlog", 400, 50),
    ev("launch", "cudaLaunchKernel", 450, 50, corr_id=1),
    ev("kernel", "k1", 800, 200, corr_id=1, stream=7),
)


def test_claims_by_cause():
    res = run(*TRACE)
    assert shares(res) == {"operator_compilation": 0.1, "host_device_sync": 0.05,
                           "garbage_collection": 0.1, "environment_configuration": 0.05,
                           "operator_dispatch": 0.2}
    assert res.metrics["host_bound_ns"] == 500
    row = res.tables["per_step"].iloc[0]
    assert (row["host_bound_ns"], row["operator_dispatch_ns"], row["garbage_collection_ns"]) == \
        (500, 200, 100)
    comp = next(f for f in res.findings if f.cause == "operator_compilation")
    assert comp.evidence["top_ops"][0]["name"] == "aclopCompileAndExecute"
    disp = next(f for f in res.findings if f.cause == "operator_dispatch")
    names = {o["name"] for o in disp.evidence["top_ops"]}
    assert names == {"aten::linear", "cudaLaunchKernel"}  # not the sync/gc/log events


def test_host_work_hidden_behind_device_work_costs_nothing():
    res = run(ev("step", "s#1", 0, 1000), ev("gc", "gc", 100, 300),
              ev("kernel", "k", 0, 1000, stream=7))
    assert res.findings == [] and res.metrics["host_bound_ns"] == 0


def test_data_waits_are_left_to_io():
    res = run(ev("step", "s#1", 0, 1000), ev("data_wait", "next", 0, 500),
              ev("kernel", "k", 500, 500, stream=7))
    assert res.findings == [] and res.metrics["io_wait_ns"] == 500


def launches(durations, kernel_at=19_000):
    """Launches back to back from 0 in a 20 us step; one kernel at ``kernel_at``."""
    rows = [ev("step", "s#1", 0, 20_000), ev("kernel", "k", kernel_at, 1000, stream=7)]
    t = 0
    for d in durations:
        rows.append(ev("launch", "cudaLaunchKernel", t, d))
        t += d
    return rows


def test_inflated_calls_are_contention():
    # 20 launches: 13 of 100 ns, 7 of 1000 ns (> 2 x median 100), all in device idle [0, 19000);
    # excess 7 x 900 = 6300 of 8300 ns -> fraction 0.759 >= 0.2, spread (top 3 = 3/7 < 1/2);
    # host-bound 8300 ns: contention 8300 x 0.759 = 6300 (0.315 of the step), dispatch 2000
    res = run(*launches([100, 1000] * 7 + [100] * 6))
    assert shares(res) == {"resource_contention": 0.315, "operator_dispatch": 0.1}
    f = next(f for f in res.findings if f.cause == "resource_contention")
    assert f.evidence["inflated_ops"] == [{"name": "cudaLaunchKernel", "excess_ns": 6300}]


def test_a_few_huge_calls_are_setup_not_contention():
    # two 5000 ns launches among 18 of 100 ns: excess held by 2 calls (< 5, and top 3 = 100 %)
    res = run(*launches([5000, 5000] + [100] * 18))
    assert shares(res) == {"operator_dispatch": 0.59}


def test_slow_launches_while_the_device_is_busy_are_back_pressure():
    # the same 7 slow launches, but the device is busy over them: a full launch queue
    rows = launches([100, 1000] * 7 + [100] * 6, kernel_at=0)
    rows[1] = ev("kernel", "k", 0, 19_000, stream=7)
    assert "resource_contention" not in shares(run(*rows))


def test_uniform_cost_is_not_contention():
    rows = [ev("step", "s#1", 0, 10_000), ev("kernel", "k", 9000, 1000, stream=7)]
    rows += [ev("launch", "cudaLaunchKernel", 100 * i, 100) for i in range(10)]
    assert shares(run(*rows)) == {"operator_dispatch": 0.1}


def test_zero_evidence_gap_is_unattributed_not_gc():
    # step [0, 1000) ms: launch [0, 10), k [10, 100), k [400, 1000). Device idle [0, 10) and
    # [100, 400); the host works only in [0, 10). The 300 ms gap has no event: no GC (nor any)
    # finding is conjectured from it; it is unattributed time: 300 / 1000 = 0.3, one long gap.
    ms = 1_000_000
    rows = [ev("step", "s#1", 0, 1000 * ms), ev("launch", "cudaLaunchKernel", 0, 10 * ms),
            ev("kernel", "k", 10 * ms, 90 * ms, stream=7),
            ev("kernel", "k", 400 * ms, 600 * ms, stream=7)]
    res = run(*rows)
    assert shares(res) == {"operator_dispatch": 0.01}
    assert res.metrics["unattributed_share"] == pytest.approx(0.3)
    assert res.metrics["long_gaps"] == 1 and res.metrics["longest_gap_ms"] == 300.0
    assert res.tables["per_step"]["unattributed_ns"].tolist() == [300 * ms]
    # a recorded GC pause in the gap is evidence: GC 50 ms of the 1000 ms step
    res = run(*rows, ev("gc", "gc", 150 * ms, 50 * ms))
    assert shares(res) == {"operator_dispatch": 0.01, "garbage_collection": 0.05}
    assert res.metrics["unattributed_share"] == pytest.approx(0.25)


def test_cpu_only_trace_with_annotations_only_has_no_finding():
    # a CPU-only trace whose only events are a step and user annotations (kind marker): nothing
    # explains the time, so nothing is reported; all of it is unattributed
    res = run(ev("step", "ProfilerStep#1", 0, 1000), ev("marker", "## forward ##", 0, 400))
    assert res.findings == []
    assert res.metrics["unattributed_share"] == 1.0


@pytest.mark.parametrize("rows", [(), (ev("kernel", "k", 0, 10, stream=7),),
                                  (ev("host_op", "aten::add", 0, 10),)])
def test_empty_and_one_event(rows):
    res = run(*rows)
    assert all(0 <= f.time_share <= 1 for f in res.findings)


def test_profiler_span_is_not_host_work():
    # Kineto's "PyTorch Profiler (0)" ('Trace' category, kind other) covers the whole capture:
    # it must not turn the free time [500, 800) into dispatch time (overlap excludes it too)
    res = run(*TRACE, ev("other", "PyTorch Profiler (0)", 0, 1000))
    assert shares(res) == {"operator_compilation": 0.1, "host_device_sync": 0.05,
                           "garbage_collection": 0.1, "environment_configuration": 0.05,
                           "operator_dispatch": 0.2}
    assert res.metrics["host_bound_ns"] == 500


def test_one_off_start_up_is_initialization_with_its_own_rule():
    # step [0, 1000): cudaDeviceGetStreamPriorityRange [0, 600) creates the CUDA context
    # lazily, then aten::add [600, 700) launches k [750, 1000). Device idle [0, 750), host busy
    # [0, 700): start-up 600 -> initialization 0.6, dispatch 0.1.
    from hermes.advisor import recommend

    res = run(ev("step", "ProfilerStep#1", 0, 1000),
              ev("runtime", "cudaDeviceGetStreamPriorityRange", 0, 600),
              ev("host_op", "aten::add", 600, 100),
              ev("launch", "cudaLaunchKernel", 650, 20, corr_id=1),
              ev("kernel", "k", 750, 250, corr_id=1, stream=7))
    assert shares(res) == {"initialization": 0.6, "operator_dispatch": 0.1}
    init = next(f for f in res.findings if f.cause == "environment_configuration")
    assert init.evidence["initialization_ms"] == 0.001  # (600 ns, in ms to 3 decimals)
    assert init.evidence["runtime"] == "cuda"
    assert init.summary.startswith("one-off start-up")
    assert [o["name"] for o in init.evidence["top_ops"]] == ["cudaDeviceGetStreamPriorityRange"]
    assert [r.rule for r in recommend(init)] == ["cpu.env_warmup"]
    # a logging call is still logging: the log-level rule, not the warm-up one
    log = next(f for f in run(*TRACE).findings if f.cause == "environment_configuration")
    assert "cpu.env_log_level" in [r.rule for r in recommend(log)]


def test_first_launch_of_a_kernel_that_loads_its_module_is_start_up():
    # Launches (10 ns each, median 10) of kernels k1/k2. L1 launches k1 for the first time and
    # takes 2 ms: the runtime loaded k1's module (lazy loading) -> start-up. L3 takes 1.5 ms too
    # but launches k1 again: no loading, it stays dispatch. Device idle except the kernels.
    # initialization = L1 2,000,000 / 5,000,000 = 0.4; dispatch = L3 1,500,000 + 4 x 10
    ms = 1_000_000
    rows = [ev("step", "ProfilerStep#1", 0, 5 * ms)]
    launches = [(0, 2 * ms, "k1"), (2 * ms + 100, 10, "k2"), (2 * ms + 300, 1.5 * ms, "k1"),
                (3.5 * ms + 400, 10, "k2"), (3.5 * ms + 600, 10, "k1"), (3.5 * ms + 800, 10, "k2")]
    for i, (t, d, k) in enumerate(launches, start=1):
        rows.append(ev("launch", "cudaLaunchKernel", int(t), int(d), corr_id=i))
        rows.append(ev("kernel", k, int(t + d), 100, corr_id=i, stream=7))
    res = run(*rows)
    assert shares(res) == {"initialization": 0.4, "operator_dispatch": 0.300008}


def test_self_time_by_hand():
    # thread 1: A [0,100) holds B [10,40) (holding C [20,30)) and D [50,60); thread 2: E [0,50)
    # self: A 100 - 30 - 10 = 60, B 30 - 10 = 20, C 10, D 10, E 50 (E on its own lane)
    from hermes.analyzers.cpu import self_ns
    from tests.tracegen import frame

    df = frame(ev("host_op", "A", 0, 100), ev("host_op", "B", 10, 30),
               ev("runtime", "C", 20, 10), ev("host_op", "D", 50, 10),
               ev("host_op", "E", 0, 50, lane="thread 2"), ev("kernel", "k", 0, 5, stream=7))
    host = (df["lane_kind"] == "host").to_numpy()
    assert self_ns(df, host).tolist() == [60, 20, 10, 10, 50, 0]
    # the dispatch finding ranks operators by self time: A (60) before E (50), B (20)
    res = run(ev("step", "ProfilerStep#1", 0, 200), *[dict(r) for r in (
        ev("host_op", "A", 0, 100), ev("host_op", "B", 10, 30), ev("host_op", "D", 50, 10),
        ev("host_op", "E", 100, 50))], ev("kernel", "k", 190, 10, stream=7))
    disp = next(f for f in res.findings if f.cause == "operator_dispatch")
    assert [(o["name"], o["time_ns"]) for o in disp.evidence["top_ops"]] == [
        ("A", 60), ("E", 50), ("B", 30), ("D", 10)]


def test_torch_compile_phases_are_compilation_not_their_execution():
    # torch.compile's phases are record_function ranges "<phase> (dynamo_timed)"; running the
    # compiled graph ("Torch-Compiled Region", "CompiledFunction") is dispatch
    res = run(ev("step", "ProfilerStep#1", 0, 1000),
              ev("host_op", "compile_inner (dynamo_timed)", 0, 300),
              ev("host_op", "CachingAutotuner.benchmark_all_configs", 300, 100),
              ev("host_op", "Torch-Compiled Region: 0/0", 400, 100),
              ev("host_op", "CompiledFunction", 500, 100),
              ev("kernel", "k", 600, 400, stream=7))
    assert shares(res) == {"operator_compilation": 0.4, "operator_dispatch": 0.2}


def test_first_calls_are_start_up_not_contention():
    # 8 names x 6 calls of 10 ns, each name's first call 200 ns (lazy set-up inside the
    # runtime): 8 inflated calls, spread evenly (top 3 = 3/8 of the excess), would read as
    # contention (excess 1520 of 1680 ns of calls); first calls are not
    rows = [ev("step", "ProfilerStep#1", 0, 10_000)]
    t = 0
    for call in range(6):
        for n in range(8):
            d = 200 if call == 0 else 10
            rows.append(ev("runtime", f"cudaCall{n}", t, d))
            t += d + 5
    rows.append(ev("kernel", "k", 9_000, 1_000, stream=7))
    res = run(*rows)
    assert "resource_contention" not in shares(res)
    assert res.metrics["inflation_fraction"] == 0.0
