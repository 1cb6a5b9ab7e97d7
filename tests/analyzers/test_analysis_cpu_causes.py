"""CPU analyzer on real-trace shapes (issue 11 items 9-10, 12): loader ops, blocking copies,
syncs on a busy vs an idle device, allocator calls, runtime-specific advice. By hand."""

from __future__ import annotations

from hermes.advisor import recommend
from hermes.findings import Finding
from hermes.trace.meta import TraceMeta
from tests.analyzers.test_analysis_cpu import run, shares
from tests.tracegen import ev

KINETO = TraceMeta(source="kineto")  # a GPU trace (the rules' device kind "gpu")
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def test_ops_inside_the_data_loader_are_data_processing_not_dispatch():
    # step [0, 1000): the loader's __next__ [0, 600) runs aten::uniform_ [100, 400) and
    # aten::stack [400, 500) (dataset __getitem__ and collate, on the training thread); then
    # aten::mm [600, 700) launches k [700, 1000). Device idle [0, 700).
    # io claims [0, 600) (the cpu analyzer leaves it to io); dispatch = [600, 700) = 0.1, and
    # the ops inside the loader are not its evidence.
    res = run(ev("step", "ProfilerStep#1", 0, 1000),
              ev("data_wait", LOADER, 0, 600),
              ev("host_op", "aten::uniform_", 100, 300),
              ev("host_op", "aten::stack", 400, 100),
              ev("host_op", "aten::mm", 600, 100),
              ev("launch", "cudaLaunchKernel", 650, 20, corr_id=1),
              ev("kernel", "k", 700, 300, corr_id=1, stream=7))
    assert shares(res) == {"operator_dispatch": 0.1}
    assert res.metrics["io_wait_ns"] == 600
    disp = res.findings[0]
    assert {o["name"] for o in disp.evidence["top_ops"]} == {"aten::mm", "cudaLaunchKernel"}
    assert disp.evidence["events"] == 2


def test_blocking_device_to_host_copies_are_syncs():
    # step [0, 1000). k1 [0, 300). Then two blocking copies while the device is idle:
    # cudaMemcpyAsync [300, 500) issues "Memcpy DtoH (Device -> Pageable)" [480, 490) (corr 2):
    # into pageable memory the call returns when the copy is done -> sync 200 (minus the copy
    # itself, device busy [480, 490): 190); cudaMemcpy [500, 600) is synchronous -> sync 100
    # (its copy [590, 595) on the device: 95). aten::add [600, 700) launches k2 [700, 1000):
    # dispatch 100. A pinned async copy (corr 4) would not block: it is not in this trace.
    res = run(ev("step", "ProfilerStep#1", 0, 1000),
              ev("kernel", "k1", 0, 300, stream=7),
              ev("runtime", "cudaMemcpyAsync", 300, 200, corr_id=2),
              ev("memcpy_d2h", "Memcpy DtoH (Device -> Pageable)", 480, 10, corr_id=2,
                 stream=7),
              ev("runtime", "cudaMemcpy", 500, 100, corr_id=3),
              ev("memcpy_d2h", "Memcpy DtoH (Device -> Pageable)", 590, 5, corr_id=3, stream=7),
              ev("host_op", "aten::add", 600, 100),
              ev("launch", "cudaLaunchKernel", 650, 20, corr_id=5),
              ev("kernel", "k2", 700, 300, corr_id=5, stream=7))
    assert shares(res) == {"host_device_sync": 0.285, "operator_dispatch": 0.1}
    sync = next(f for f in res.findings if f.cause == "host_device_sync")
    assert {o["name"] for o in sync.evidence["top_ops"]} == {"cudaMemcpyAsync", "cudaMemcpy"}


def test_a_pinned_async_copy_is_not_a_sync():
    # the same call issuing a copy into pinned memory returns at once: dispatch, not sync
    res = run(ev("step", "ProfilerStep#1", 0, 1000),
              ev("runtime", "cudaMemcpyAsync", 0, 200, corr_id=2),
              ev("memcpy_d2h", "Memcpy DtoH (Device -> Pinned)", 500, 10, corr_id=2, stream=7),
              ev("kernel", "k", 510, 490, stream=7))
    assert shares(res) == {"operator_dispatch": 0.2}


def test_sync_is_charged_for_device_idle_time_only():
    # step [0, 1000): the host launches k [0, 10) -> k runs [10, 810); cudaStreamSynchronize
    # [10, 800) waits on the busy device: it costs nothing (the device is not idle). The
    # device is idle [0, 10) (launch: dispatch 0.01) and [810, 1000) with nothing on the host:
    # unattributed 0.19, no finding.
    busy = run(ev("step", "ProfilerStep#1", 0, 1000),
               ev("launch", "cudaLaunchKernel", 0, 10, corr_id=1),
               ev("kernel", "k", 10, 800, corr_id=1, stream=7),
               ev("sync", "cudaStreamSynchronize", 10, 790))
    assert shares(busy) == {"operator_dispatch": 0.01}
    assert busy.metrics["unattributed_share"] == 0.19
    # a sync that waits on an idle device (k already done at 210; the host sits in the sync
    # until 800, e.g. on another stream's event that never ran): 590 of device idle time
    idle = run(ev("step", "ProfilerStep#1", 0, 1000),
               ev("launch", "cudaLaunchKernel", 0, 10, corr_id=1),
               ev("kernel", "k", 10, 200, corr_id=1, stream=7),
               ev("sync", "cudaStreamSynchronize", 10, 790))
    assert shares(idle) == {"host_device_sync": 0.59, "operator_dispatch": 0.01}


def _alloc_rows(api: str) -> list[dict]:
    """A 1000 ns step of 3 ops at 0, 300, 600: {api}Malloc 150, {api}LaunchKernel 20,
    {api}Free 100 on the host, each op's kernel [t + 270, t + 300) on the device."""
    rows = [ev("step", "ProfilerStep#1", 0, 1000)]
    for i, t in enumerate((0, 300, 600), start=1):
        rows += [ev("runtime", f"{api}Malloc", t, 150),
                 ev("launch", f"{api}LaunchKernel", t + 150, 20, corr_id=i),
                 ev("runtime", f"{api}Free", t + 170, 100),
                 ev("kernel", f"k{i}", t + 270, 30, corr_id=i, stream=7)]
    return rows


def test_allocator_calls_dominating_the_host_are_memory_allocation():
    # step [0, 1000): per op cudaMalloc 150 + launch 20 + cudaFree 100 on the host, 3 ops at
    # 0, 300, 600; their kernels run [270, 300), [570, 600), [870, 900). Device idle 910 of
    # 1000; allocator time 3 x 250 = 750 -> 0.75, launches 3 x 20 = 60 -> 0.06.
    res = run(*_alloc_rows("cuda"))
    assert shares(res) == {"memory_allocation": 0.75, "operator_dispatch": 0.06}
    alloc = next(f for f in res.findings if f.evidence.get("reason") == "memory_allocation")
    assert alloc.evidence["calls_per_step"] == 6.0 and alloc.evidence["runtime"] == "cuda"
    how = recommend(alloc, KINETO)[0].how
    assert "PYTORCH_CUDA_ALLOC_CONF" in how and "empty_cache()" in how
    assert "PYTORCH_NO_CUDA_MEMORY_CACHING" in how


def test_rocm_runs_get_hip_wording():
    # the same shape with HIP calls: the runtime is named "hip" and the advice says so
    res = run(*_alloc_rows("hip"))
    alloc = next(f for f in res.findings if f.evidence.get("reason") == "memory_allocation")
    recs = recommend(alloc, KINETO)
    assert [r.rule for r in recs] == ["cpu.alloc_caching_rocm"]
    assert "PYTORCH_HIP_ALLOC_CONF" in recs[0].how
    disp = Finding("cpu", "operator_dispatch", 0.3, "s", evidence={"runtime": "hip"})
    rules = [r.rule for r in recommend(disp, KINETO)]
    assert "cpu.dispatch_sink_rocm" in rules and "cpu.dispatch_sink" not in rules
    assert "HIP graph" in recommend(disp, KINETO)[0].how


def test_hip_synchronous_copy_is_a_sync():
    # hipMemcpyWithStream (PyTorch's ROCm .item() / .cpu() path) blocks: sync, not dispatch
    res = run(ev("step", "ProfilerStep#1", 0, 1000),
              ev("runtime", "hipMemcpyWithStream", 0, 500),
              ev("kernel", "k", 500, 500, stream=7))
    assert shares(res) == {"host_device_sync": 0.5}


def test_contention_evidenced_by_other_processes_cpu_is_reported():
    # H100 profile: launch latency 10.5 us. Ten launches of 21 us each (median 21 us) with the
    # device idle meanwhile: launch excess 1 - 10.5 / 21 = 0.5 of the dispatch time. Counter
    # samples say other processes use 4000 % CPU: that half is contention, the rest dispatch.
    # Dispatch time 10 x 21 us = 210 us of a 1000 us step: contention 0.105, dispatch 0.105.
    # The evidence is the two counter samples (no call is inflated over its own median).
    from hermes.analyzers.cpu import cpu
    from hermes.analyzers.engine.base import RankContext
    from hermes.analyzers.engine.invariants import check_result
    from hermes.analyzers.overlap import analyze as overlap
    from tests.tracegen import frame

    us = 1000
    rows = [ev("step", "ProfilerStep#1", 0, 1000 * us)]
    rows += [ev("launch", "cudaLaunchKernel", i * 50 * us, 21 * us) for i in range(10)]
    rows += [ev("kernel", "k", 600 * us, 400 * us, stream=7)]
    rows += [ev("counter", "other_processes_cpu_pct", t, 0, lane="counters",
                lane_kind="counter", value=4000.0) for t in (0, 500 * us)]
    ctx = RankContext(rank=0, events=frame(*rows), meta=TraceMeta(device={"name": "h100"}))
    ctx.results["overlap"] = check_result(overlap(ctx))
    res = check_result(cpu(ctx))
    got = {f.cause: (round(f.time_share, 6), f.evidence["events"]) for f in res.findings}
    assert got == {"resource_contention": (0.105, 2), "operator_dispatch": (0.105, 10)}
    # a uniform slow-down names the calls it slows, each with its time x the contention
    # fraction (0.5): the ten launches, 210 us -> 105 us
    f = next(f for f in res.findings if f.cause == "resource_contention")
    assert f.evidence["inflated_ops"] == []
    assert f.evidence["top_ops"] == [{"name": "cudaLaunchKernel", "time_ns": 105 * us,
                                      "count": 10}]
