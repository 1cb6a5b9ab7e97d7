"""Hand-made one-rank traces over a grid of (device family x matmul dtype x parallelism shown):
the events a rank analyzer sees (tests/tracegen.py) and its device task table, turned into the
analysis' device facts by the same code the computation analyzer runs
(``analyzers/common/precision.py``), then every rule of the table is run on them."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from hermes.advisor import machine_facts, recommend
from hermes.analyzers.common.precision import combine, facts
from hermes.analyzers.engine.base import AnalyzerResult, RankContext
from hermes.devices.identify import Identified
from hermes.findings import CAUSE_IDS, Finding
from hermes.rules import TABLE
from hermes.trace.meta import TraceMeta
from tests.tracegen import ev, frame

#: family -> (deviceProperties as the importer stores them, kernel name of a dtype token)
FAMILIES: dict[str, tuple[dict[str, Any], Any]] = {
    "volta": ({"name": "Tesla V100-SXM2-32GB"}, "volta_{n}gemm_128x64_nn"),
    "turing": ({"name": "Tesla T4"}, "turing_{n}_s1688gemm_128x128_nn"),
    "ampere": ({"name": "NVIDIA A100-SXM4-80GB"}, "sm80_xmma_gemm_{n}{n}_{n}f32_f32_tn_n"),
    "ada": ({"name": "NVIDIA L4"}, "sm89_xmma_gemm_{n}{n}_{n}f32_f32_tn_n"),
    "hopper": ({"name": "NVIDIA H100 80GB HBM3"}, "sm90_xmma_gemm_{n}{n}_{n}f32_f32_tn_n"),
    "blackwell": ({"name": "NVIDIA B200"}, "sm100_xmma_gemm_{n}{n}_{n}f32_f32_tn_n"),
    "cdna2": ({"name": "AMD Instinct MI210", "vendor": "amd"},
              "Cijk_Alik_Bljk_{t}_BH_MT128x128x32_ISA90a"),
    "cdna3": ({"name": "", "kineto": {"computeMajor": 9, "computeMinor": 4, "numSms": 304,
                                      "warpSize": 64}}, "Cijk_Alik_Bljk_{t}_BH_MT128x128x32"),
    "ascend": ({"name": "ascend910b", "vendor": "huawei", "kind": "npu"}, "MatMulV2_{n}"),
    # no device fields, kernel names that name no architecture
    "unknown": ({}, "gemm_kernel_{n}"),
    "cpu-only": ({}, None),
}
#: dtype -> (cuBLAS / CUTLASS token, Tensile type code, element size)
DTYPES = {"fp32": ("f32", "SB", 4.0), "tf32": ("tf32", "XS", 4.0), "fp16": ("f16", "HHS", 2.0),
          "bf16": ("bf16", "BBS", 2.0), "fp8": ("e4m3", "F8F8S", 1.0)}
PARALLEL = ("none", "data", "pipeline", "tensor", "loader")
SOURCE = {"cdna2": "kineto", "cdna3": "kineto", "ascend": "ascend"}


def rank_events(family: str, dtype: str, parallel: str) -> tuple[RankContext, pd.DataFrame]:
    device, fmt = FAMILIES[family]
    token, code, elem = DTYPES[dtype]
    rows = [ev("step", "ProfilerStep#1", 0, 10_000_000)]
    kernels = []
    if fmt is not None:
        name = fmt.format(n=token, t=code)
        for i in range(4):
            rows.append(ev("kernel", name, 1_000 + i * 2_000_000, 1_800_000))
            kernels.append((name, 1_800_000, "gemm", elem))
        rows.append(ev("kernel", "vectorized_elementwise_kernel", 9_000_000, 200_000))
        kernels.append(("vectorized_elementwise_kernel", 200_000, "elementwise", np.nan))
    comm = {"data": ("nccl:all_reduce", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "dp"),
            "pipeline": ("nccl:send", "ncclDevKernel_SendRecv", "pp_group"),
            "loader": ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", None, None),
            "tensor": ("nccl:all_gather", "ncclDevKernel_AllGather_RING_LL", "tp_group")}
    if parallel in comm:
        host, kernel, group = comm[parallel]
        rows.append(ev("runtime", host, 8_000_000, 10_000))
        if kernel:
            rows.append(ev("collective", kernel, 8_100_000, 500_000, coll_group=group))
    k = pd.DataFrame(kernels, columns=["name", "dur_ns", "family", "elem"])
    k["host_row"] = -1
    k["unit"] = "cube" if family == "ascend" else "sm"
    meta = TraceMeta(source=SOURCE.get(family, "kineto"), device=dict(device))
    return RankContext(0, frame(*rows), meta), k


def machine(family: str, dtype: str, parallel: str) -> dict[str, Any]:
    """``Analysis.machine`` of the hand-made rank."""
    ctx, k = rank_events(family, dtype, parallel)
    res = AnalyzerResult("computation", metrics={"precision": facts(ctx, k)})
    return combine({0: {"computation": res}})


#: numbers that open the rules' ``when`` conditions (bubbles, pageable copies, families, ...)
NUMBERS = {"bubble_pct_mean": 30.0, "h2d_pageable": 4, "small_kernels_pct": 50.0,
           "top_family": "gemm", "top_family_pct": 60.0, "initialization_share": 0.8,
           "trace_steps": 4, "compile_after_first_share": 0.0, "calls_per_step": 40,
           "top_function": "f", "top_ms_per_step": 3.0, "slower_x_max": 2.0, "backend": "gloo",
           # a CPU-only run's operator evidence (cpu.cpu_* rules)
           "cpu_op_threads": 1, "cpu_conv_share": 0.5, "cpu_matmul_share": 0.4,
           "cpu_eltwise_share": 0.3, "cpu_compiled": 0,
           "slow_stage_ranks": "1", "stage_ratio": 1.8}
#: the reasons rules of these causes tell apart
REASONS = {"cpu.operator_dispatch": ("", "memory_allocation", "python", "cpu_operators"),
           "computation.underutilization": ("", "frequency_drop", "shape_affinity", "ai_cpu",
                                            "private_format", "dynamic_shape"),
           "computation.slow_node": ("", "step_spike"),
           "parallel.poor_parallelism": ("", "unequal_stages"),
           "cpu.environment_configuration": ("",)}


def advice(family: str, dtype: str, parallel: str) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """(the facts, every (cause id, recommendation) every rule gives on them)."""
    m = machine(family, dtype, parallel)
    # the run kind the hand-made rank's events show (no kernel: a CPU-only run)
    kind = "cpu_only" if FAMILIES[family][1] is None else "accelerator"
    f = machine_facts(SimpleNamespace(machine=m, run_kind=kind))
    meta = TraceMeta(source=SOURCE.get(family, "kineto"), device=dict(FAMILIES[family][0]))
    runtime = {"cdna2": "hip", "cdna3": "hip", "ascend": "acl"}.get(family, "cuda")
    out = []
    for cid in CAUSE_IDS:
        cat, cause = cid.split(".", 1)
        for reason in REASONS.get(cid, ("",)):
            for evidence in ({"runtime": runtime}, {**NUMBERS, "reason": reason,
                                                    "runtime": runtime}):
                finding = Finding(cat, cause, 0.5, "hand-made", evidence=evidence, ranks=(0,))
                out += [(cid, r) for r in recommend(finding, meta, TABLE, f)]
    return f, out


#: words of a recommendation -> the capability or parallelism it needs
NEEDS = {
    "bf16": re.compile(r"dtype=torch\.bfloat16|bf16 activations|bf16/8-bit|bf16 autocast"),
    #: (an unknown device is told "bf16 (fp16 where the device has no bf16)": no need)
    "fp8": re.compile(r"fp8_autocast|float8|FP8 where|FP8 matrix"),
    "tf32": re.compile(r"allow_tf32"),
    "pipeline": re.compile(r"micro-batches|1F1B|virtual[- ]pipeline|pipeline bubbles|"
                           r"pipeline stage|split points",
                           re.IGNORECASE),
}
#: tool / API words -> the vendor whose stack they belong to
STACK_WORDS = {"nvidia": re.compile(r"nvidia-smi|CUDA graph"),
               "amd": re.compile(r"rocm-smi|HIP graph"),
               "huawei": re.compile(r"npu-smi|torch_npu|torch\.npu|CANN")}


def violations(f: dict[str, Any], recs: list[tuple[str, Any]]) -> list[str]:
    """Recommendations that need what the device lacks or the trace does not show."""
    ident = Identified.from_dict(f["device"])
    vendor = f["device"].get("vendor") or ""
    bad = []
    for cid, r in recs:
        conditional = r.how.startswith("Conditional:")
        for need, rx in NEEDS.items():
            if not rx.search(r.how):
                continue
            if need == "pipeline":
                ok = f["shown"]["pipeline"]
            else:
                has = ident.supports(need)
                ok = has is True or (has is None and conditional)
            if not ok:
                bad.append(f"{cid} {r.rule} needs {need}: {r.how[:120]}")
        for v, rx in STACK_WORDS.items():
            if rx.search(r.how) and vendor and v != vendor:
                bad.append(f"{cid} {r.rule} names {v}'s stack on {vendor}: {r.how[:120]}")
    return bad
