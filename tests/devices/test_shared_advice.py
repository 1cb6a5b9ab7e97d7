"""Every shared trace (kineto-h100, kineto-h100-dist, hta, public/tracelens, ascend): the device,
the matmul dtype mix and the parallelism each shows, read straight from the files
(tests/devices/kineto.py: not through Hermes' importers), then every rule run on those facts:
no advice needs a capability the device table says the device lacks, a parallelism the trace
does not show, or another vendor's tools than the trace's own runtime calls name.

What each file shows was checked by reading it (``EXPECT``): its ``deviceProperties`` name or
numbers, its runtime calls (cuda*/hip*/AscendCL), its ``distributedInfo`` world size, and its
communication. None shows pipeline stages: no host operator or annotation sends or receives
between stages (``nccl:send``/``recv``, ``c10d::send``, ``batch_isend_irecv``), no stage
annotation, no pipeline or tensor-parallel process group (``pg_config`` names only
``default_pg`` / ``undefined``); the 128-rank HTA job's ``ncclKernel_SendRecv`` kernels are its
``nccl:all_to_all``. The "pipeline" words some files do hold are Python frames
(``transformers/pipelines/...``, vLLM's and xDiT's ``get_pp_group()`` in world-size-1 jobs)
and kernel template names (CK's ``BlockGemmPipelineScheduler``): neither is a pipeline stage."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from hermes.advisor import machine_facts, recommend
from hermes.analyzers.common.precision import combine, facts
from hermes.analyzers.engine.base import AnalyzerResult, RankContext
from hermes.devices.dtypes import is_matmul
from hermes.findings import CAUSE_IDS, Finding
from hermes.rules import TABLE
from hermes.trace.meta import TraceMeta
from tests.conftest import SHARED_TRACES
from tests.devices.grid import NUMBERS, REASONS, STACK_WORDS, violations
from tests.devices.kineto import Trace, ascend_trace_view, trace

KINETO_DIRS = ("kineto-h100", "kineto-h100-dist", "hta", "public/tracelens")
#: .gz files there that are not Kineto traces (traces/README.md), and why they are left out
NOT_TRACES = {
    "memory_timeline.raw.gz": "PyTorch's memory-timeline export: [time, action, bytes, "
                              "category] rows, no events, no device",
    "benchmark_simple_add_et.json.gz": "a PyTorch Execution Trace: the host operator graph "
                                       "(nodes and their inputs), no timed events; its Kineto "
                                       "pair benchmark_simple_add_trace.json.gz is checked",
}
#: (the label files beside the traces are .json: steps.json, h100_calibration.json)

#: Communication the trace shows: device kernels of a collective library (NCCL / RCCL / HCCL
#: move data in kernels: their host annotations alone, as in a world-size-1 job, move none), or
#: the annotations of a host-side backend (Gloo, MPI: no kernel)
COMM_KERNEL = r"(?i)^(?:nccl|rccl|hccl)"
COMM_HOST = r"(?i)^(?:gloo|mpi):"
#: Stage-to-stage point-to-point operators and stage annotations (host operators / annotations)
STAGE_HOST = (r"(?i)^(?:nccl|gloo|hccl|c10d):+(?:i?send|i?recv|batch_isend_irecv)|"
              r"^(?:send|recv)_(?:forward|backward)|pp_stage|pipeline_stage")
#: Vendor of the runtime calls the host makes (cuda* / hip* / AscendCL@ / MTIA's)
RUNTIME = {"cuda": "nvidia", "hip": "amd", "AscendCL@": "huawei", "acl": "huawei"}

#: file -> (device profile or None, arch or None, the runtime's vendor or None, collectives
#: shown, distributedInfo world size or None), each read from the file (see module docstring)
H100, A100, V100, MI300X = ("h100", "hopper"), ("a100-sxm4-40gb", "ampere"), ("v100", "volta"), \
    ("mi300x", "cdna3")
SM80 = (None, "ampere or newer")
TL = "public/tracelens/"
EXPECT: dict[str, tuple[str | None, str | None, str | None, bool, int | None]] = {
    "kineto-h100/big_matmul.pt.trace.json.gz": (*H100, "nvidia", False, None),
    "kineto-h100/gpt_balanced.pt.trace.json.gz": (*H100, "nvidia", False, None),
    "kineto-h100/gpt_dataloader_starved.pt.trace.json.gz": (*H100, "nvidia", False, None),
    "kineto-h100/two_stream_prefetch.pt.trace.json.gz": (*H100, "nvidia", False, None),
    **{f"kineto-h100-dist/ddp_gloo_{k}_rank{r}.pt.trace.json.gz": (*H100, "nvidia", True, 2)
       for k in ("balanced", "straggler") for r in (0, 1)},
    # "AMD Radeon Graphics" with gfx90a's numbers: one MI250 GCD
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz": ("mi250", "cdna2", "amd", False,
                                                                 None),
    # a 300-rank Gloo job's CPU-only rank: no device, its gloo:all_reduce annotations
    "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz": (None, None, None, True, 300),
    # "NVIDIA A100-PG509-200": the A100 40 GB SXM4 board (108 SMs)
    "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz":
        (*A100, "nvidia", False, None),
    "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz": (*A100, "nvidia", False, None),
    "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz":
        (*A100, "nvidia", False, None),
    "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz":
        (*A100, "nvidia", False, None),
    # CUPTI profiler ranges, no kernel
    "hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz":
        (*A100, "nvidia", False, None),
    "hta/df_index_resolver/df_index_resolver.json.gz": (*V100, "nvidia", True, 2),
    "hta/execution_trace/benchmark_simple_add_trace.json.gz": (*A100, "nvidia", False, None),
    # MTIA ("ARTEMIS"): no profile in the table
    "hta/mtia_inference_trace/mtia_inference_rank_0.json.gz": (None, None, None, False, None),
    "hta/mtia_trace_single_rank/mtia_rank_0.json.gz": (None, None, None, True, 1),
    "hta/nccl_parser_config/nccl_data.json.gz": (*A100, "nvidia", True, 2),
    "hta/negative_queue_length_values_check/rank0.json.gz": ("a100-sxm4-80gb", "ampere",
                                                             "nvidia", True, 16),
    # world size 1: its nccl:all_reduce annotations launch no kernel
    "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz":
        (*V100, "nvidia", False, 1),
    # no deviceProperties: cutlass_80 / sm80 kernel names
    "hta/timeline_analysis/sampled_rank-0.json.gz": (*SM80, "nvidia", True, 128),
    "hta/trace_compare/base/base.json.gz": (None, None, "nvidia", False, None),
    "hta/trace_compare/test/test.json.gz": (None, None, "nvidia", False, None),
    "hta/trace_diff/control/control.json.gz": (*A100, "nvidia", True, 8),
    "hta/trace_diff/test/test.json.gz": (*V100, "nvidia", True, 2),
    "hta/trace_filter/sampled_rank-0.json.gz": (*SM80, "nvidia", True, 128),
    "hta/trace_filter/sampled_rank-1.json.gz": (*SM80, "nvidia", True, 128),
    "hta/triton_example/triton_example.json.gz": (*A100, "nvidia", False, None),
    f"{TL}h100/Falconsai_nsfw_image_detection__1016002.json.gz": (*H100, "nvidia", False, None),
    f"{TL}h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz":
        (*H100, "nvidia", False, None),
    f"{TL}inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz": (*MI300X, "amd", False, 1),
    f"{TL}inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz":
        (*MI300X, "amd", False, 1),
    # deviceProperties with an empty name: gfx942 numbers (304 CUs)
    f"{TL}inference/vllm_decode_full/capture_traces/"
    "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz": (*MI300X, "amd", False, 1),
    f"{TL}inference/vllm_decode_full/graph_execution.json.gz": (*MI300X, "amd", False, 1),
    f"{TL}inference/xdit_flux.1_aiter_sage/profile_trace_rank_0.json.gz": (*MI300X, "amd", False,
                                                                           1),
    f"{TL}inference/xdit_sd_3.5/profile_trace_rank_0.json.gz": (*MI300X, "amd", False, 1),
    f"{TL}mi210/gpu_only_trace/gpu_only_trace.json.gz": ("mi210", "cdna2", "amd", False, None),
    # "AMD Instinct MI300X VF" (a virtual function of one)
    f"{TL}mi300/Falconsai_nsfw_image_detection__1016002.json.gz": (*MI300X, "amd", False, None),
    f"{TL}perf_model/normalization/normalization_layer_test.json.gz": (*MI300X, "amd", False,
                                                                       None),
    f"{TL}torch_compile_triton/trace.json.gz": (*MI300X, "amd", False, None),
}


def _kineto(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for d in KINETO_DIRS for p in (root / d).rglob("*.gz")
                  if p.name not in NOT_TRACES)


def _vendor(host: pd.DataFrame) -> str | None:
    """The vendor whose runtime the host calls (its runtime / driver calls' names)."""
    rt = host.loc[host["kind"].eq("runtime").to_numpy(bool), "name"]
    got = {v for p, v in RUNTIME.items() if rt.str.startswith(p).any()}
    return got.pop() if len(got) == 1 else None


def _shows(t: Trace) -> dict[str, bool]:
    """What the file itself shows, by the patterns above (not Hermes' own)."""
    k, h = t.kernels["name"], t.host
    ops = h.loc[h["kind"].isin(("host_op", "marker")).to_numpy(bool), "name"]
    groups = [str(g.get(key) or "") for g in t.distributed.get("pg_config") or []
              for key in ("pg_name", "pg_desc")]
    comm = bool(k.str.contains(COMM_KERNEL).any() or ops.str.contains(COMM_HOST).any())
    return {"collectives": comm,
            "pipeline": bool(ops.str.contains(STAGE_HOST).any()) or
            any(re.search(r"(?i)pipe|(?:^|_)pp(?:_|$)", g) for g in groups),
            "tensor_parallel": any(re.search(r"(?i)(?:^|_)tp(?:_|$)|tensor", g) for g in groups)}


def _machine(t: Trace, source: str, units: pd.Series | None = None) -> dict[str, Any]:
    """``Analysis.machine`` of the file's facts: its device dict, its device tasks (one row per
    distinct name: the dtype mix weighs names by their time), its host names with their event
    kinds, and one collective row (its process groups' names) where it communicates."""
    k = t.kernels.assign(unit=units if units is not None else "sm")
    k = k.groupby(["name", "unit"], as_index=False, sort=False)["dur_us"].sum()
    mm = is_matmul(k["name"])
    tasks = pd.DataFrame({"name": k["name"].astype(object), "dur_ns": k["dur_us"] * 1e3,
                          "family": np.where(mm, "gemm", "other"), "elem": np.nan,
                          "host_row": -1, "unit": k["unit"]})
    shows = _shows(t)
    groups = [str(g.get("pg_desc") or g.get("pg_name") or "")
              for g in t.distributed.get("pg_config") or []] or [""]
    rows = pd.DataFrame({
        "name": [*tasks["name"], *t.host["name"], *(["collective"] * shows["collectives"])],
        "kind": ["kernel"] * len(tasks) + list(t.host["kind"]) + ["collective"] *
        shows["collectives"],
        "coll_group": [None] * (len(tasks) + len(t.host)) + groups[:1] * shows["collectives"]})
    meta = TraceMeta(source=source, device=t.device)
    res = AnalyzerResult("computation", metrics={"precision": facts(RankContext(0, rows, meta),
                                                                    tasks)})
    return combine({0: {"computation": res}})


def _advice(m: dict[str, Any], source: str, device: dict, runtime: str) -> tuple[dict, list]:
    kind = "accelerator" if m["shown"]["accelerator"] else "cpu_only"
    f = machine_facts(SimpleNamespace(machine=m, run_kind=kind))
    meta = TraceMeta(source=source, device=device)
    recs = []
    for cid in CAUSE_IDS:
        cat, cause = cid.split(".", 1)
        for reason in REASONS.get(cid, ("",)):
            for ev in ({"runtime": runtime}, {**NUMBERS, "reason": reason, "runtime": runtime}):
                finding = Finding(cat, cause, 0.5, "shared", evidence=ev, ranks=(0,))
                recs += [(cid, r) for r in recommend(finding, meta, TABLE, f)]
    return f, recs


def _bad(m: dict[str, Any], source: str, device: dict, vendor: str | None) -> list[str]:
    runtime = {"nvidia": "cuda", "amd": "hip", "huawei": "acl"}.get(vendor or "", "")
    f, recs = _advice(m, source, device, runtime)
    assert recs  # the facts leave advice to give
    bad = violations(f, recs)
    # no other vendor's tools than the one whose runtime the trace calls (device known or not)
    bad += [f"{cid} {r.rule} names {v}'s stack on a {vendor} runtime: {r.how[:100]}"
            for cid, r in recs for v, rx in STACK_WORDS.items()
            if vendor and v != vendor and rx.search(r.how)]
    return bad


@pytest.fixture(scope="module")
def kineto_facts() -> dict[str, tuple[Trace, dict[str, Any]]]:
    """Each shared Kineto trace read once: (what the file holds, the facts of it)."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"shared traces not found at {SHARED_TRACES}")
    return {rel: (t, _machine(t, "kineto")) for rel in _kineto(SHARED_TRACES)
            for t in (trace(SHARED_TRACES / rel),)}


def test_every_kineto_trace_is_checked(shared_traces, kineto_facts) -> None:
    # every .gz under the four folders but the two non-traces, and nothing else
    assert sorted(kineto_facts) == sorted(EXPECT) and len(EXPECT) == 42
    for name in NOT_TRACES:
        assert len(list(shared_traces.rglob(name))) == 1


@pytest.mark.parametrize("rel", sorted(EXPECT))
def test_kineto_trace_facts(kineto_facts, rel: str) -> None:
    t, m = kineto_facts[rel]
    profile, arch, vendor, comm, world = EXPECT[rel]
    dev = m["device"]
    assert (dev["profile"], dev["arch"]) == (profile, arch)
    assert _vendor(t.host) == vendor and t.distributed.get("world_size") == world
    if vendor and dev["vendor"]:
        assert dev["vendor"] == vendor
    # what the file shows (its own evidence) is what the facts say
    shows = _shows(t)
    assert shows == {"collectives": comm, "pipeline": False, "tensor_parallel": False}
    assert {k: m["shown"][k] for k in shows} == shows
    assert m["shown"]["accelerator"] == (len(t.kernels) > 0)


@pytest.mark.parametrize("rel", sorted(EXPECT))
def test_kineto_trace_advice(kineto_facts, rel: str) -> None:
    t, m = kineto_facts[rel]
    assert _bad(m, "kineto", t.device, EXPECT[rel][2]) == []


def _ascend_units(core: pd.Series) -> pd.Series:
    return core.map({"AI_VECTOR_CORE": "vector", "MIX_AIC": "mix", "MIX_AIV": "mix",
                     "AI_CORE": "cube", "AI_CPU": "ai_cpu"}).fillna("other")


@pytest.mark.parametrize("name", ["kernel_details_newer_cann.csv", "kernel_details_older_cann.csv"])
def test_ascend_kernel_details(shared_traces, name: str) -> None:
    t = pd.read_csv(shared_traces / "ascend" / name)
    tasks = pd.DataFrame({"name": t["Name"].astype(str), "dur_us": t["Duration(us)"].astype(float),
                          "cat": t["Accelerator Core"].astype(str)})
    # a task table: no host names
    tr = Trace({}, tasks, pd.DataFrame({c: pd.Series([], dtype=object)
                                        for c in ("name", "cat", "kind")}), {})
    m = _machine(tr, "ascend", _ascend_units(tasks["cat"]))
    # separate vector cores: Ascend 910B or 910C (dav-c220), both bf16, neither fp8
    assert m["device"]["arch"] == "dav-c220" and m["device"]["vendor"] == "huawei"
    assert not m["shown"]["pipeline"] and not m["shown"]["tensor_parallel"]
    assert _bad(m, "ascend", {}, "huawei") == []


def test_ascend_trace_view(shared_traces) -> None:
    t = ascend_trace_view(shared_traces / "ascend" / "trace_view.json")
    # the device lanes: 276 tasks, "Other" (AI Core operators) and 2 AI_CPU; no core types that
    # name the chip, no chip in the file
    assert len(t.kernels) == 276 and t.kernels["cat"].value_counts().to_dict() == \
        {"Other": 274, "AI_CPU": 2}
    assert t.kernels["name"].str.contains("MatMulV2").any() and _vendor(t.host) == "huawei"
    m = _machine(t, "ascend", _ascend_units(t.kernels["cat"]))
    assert (m["device"]["profile"], m["device"]["source"]) == (None, "unknown")
    # one process, no HCCL: no collectives, no stages; a single-process DataLoader
    # (enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__); its matmuls name no dtype
    assert t.host["name"].str.startswith("enumerate(DataLoader)#_SingleProcess").any()
    assert m["shown"] == {"accelerator": True, "collectives": False, "loader": True,
                          "pipeline": False, "tensor_parallel": False}
    assert m["matmul_mix"]["matmul_ms"] > 0 and m["matmul_mix"]["unknown_share"] == 1.0
    assert _bad(m, "ascend", {}, "huawei") == []
