"""Advice fits the run (issue 11 item 12): wording per runtime and backend."""

from __future__ import annotations

from hermes.advisor import recommend
from hermes.findings import Finding
from hermes.trace.meta import TraceMeta

KINETO = TraceMeta(source="kineto")


def rules(f: Finding) -> list[str]:
    return [r.rule for r in recommend(f, KINETO)]


def test_gloo_on_gpus_gets_use_nccl_not_nccl_environment_advice():
    gloo = Finding("communication", "network_configuration", 0.3, "s",
                   evidence={"backend": "gloo"})
    assert rules(gloo) == ["communication.use_nccl"]
    assert 'init_process_group(backend="nccl")' in recommend(gloo, KINETO)[0].how
    nccl = Finding("communication", "network_configuration", 0.3, "s",
                   evidence={"backend": "nccl"})
    assert rules(nccl) == ["communication.network_env"]


def test_start_up_advice_names_the_runtime():
    cuda = Finding("cpu", "environment_configuration", 0.5, "s", evidence={
        "reason": "initialization", "initialization_share": 1.0, "runtime": "cuda"})
    hip = Finding("cpu", "environment_configuration", 0.5, "s", evidence={
        "reason": "initialization", "initialization_share": 1.0, "runtime": "hip"})
    assert rules(cuda) == ["cpu.env_warmup"]
    assert "CUDA context" in recommend(cuda, KINETO)[0].how
    assert rules(hip) == ["cpu.env_warmup_rocm"]
    assert "HIP context" in recommend(hip, KINETO)[0].how


def test_allocator_finding_gets_allocator_advice_only():
    f = Finding("cpu", "operator_dispatch", 0.5, "s", evidence={
        "reason": "memory_allocation", "runtime": "cuda", "calls_per_step": 40})
    assert rules(f) == ["cpu.alloc_caching"]
    assert "40 per step" in recommend(f, KINETO)[0].how


def test_framework_api_named_only_when_the_trace_says_which():
    ascend = TraceMeta(source="ascend")

    def sink(fw: str) -> str:
        f = Finding("cpu", "operator_dispatch", 0.3, "s", evidence={"framework": fw})
        return next(r.how for r in recommend(f, ascend) if r.rule == "cpu.dispatch_sink")

    assert "torchair" in sink("pytorch") and "MindSpore" not in sink("pytorch")
    assert "MindSpore" in sink("mindspore") and "torchair" not in sink("mindspore")
    assert "torchair" in sink("") and "MindSpore" in sink("")  # unknown: both
    # a GPU trace of unknown framework: no MindSpore API in the bucket advice
    g = Finding("communication", "small_packet", 0.3, "s")
    assert "MindSpore" not in recommend(g, KINETO)[0].how


def test_cpu_findings_name_the_framework_of_the_trace():
    from tests.analyzers.test_analysis_cpu import run
    from tests.tracegen import ev

    res = run(ev("step", "ProfilerStep#1", 0, 1000), ev("host_op", "aten::add", 0, 500),
              ev("kernel", "k", 500, 500, stream=7))
    assert res.findings[0].evidence["framework"] == "pytorch"
