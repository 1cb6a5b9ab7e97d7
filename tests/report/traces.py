"""Traces the report tests render: a small Kineto JSON with memory samples and an operator whose
name is markup, and an emulated multi-rank run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EVIL = "<script>alert(1)</script>"


def _x(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1,
       **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def _mem(ts: float, alloc: int, resv: int) -> dict[str, Any]:
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
            "tid": 1, "ts": ts, "args": {"Total Allocated": alloc, "Total Reserved": resv,
                                         "Bytes": 1, "Device Id": 0, "Device Type": 1}}


def kineto_with_memory(path: Path, steps: int = 4) -> Path:
    """Steps of 1 ms: an operator (named ``EVIL`` in odd steps) launching two kernels, and
    allocator samples that rise and fall each step."""
    ev: list[dict[str, Any]] = []
    corr = 0
    for s in range(steps):
        t0 = 1000.0 * s
        ev.append(_x("user_annotation", f"ProfilerStep#{s}", t0, 1000))
        op = EVIL if s % 2 else "aten::mm"
        ev.append(_x("cpu_op", op, t0 + 10, 200, **{"External id": 100 + s}))
        for k in range(2):
            corr += 1
            ev.append(_x("cuda_runtime", "cudaLaunchKernel", t0 + 20 + 50 * k, 10,
                         correlation=corr, **{"External id": 100 + s}))
            ev.append(_x("kernel", f"{op}_kernel{k}" if k else "ampere_sgemm_128x64_nn",
                         t0 + 40 + 300 * k, 250, pid=0, tid=7, correlation=corr,
                         stream=7, **{"External id": 100 + s}))
        ev += [_mem(t0 + 15, 1_000_000 * (s + 1), 4_000_000), _mem(t0 + 600, 500_000, 4_000_000)]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    return path


def emulated(out: Path, ranks: int = 8, steps: int = 4) -> Path:
    """An emulated ``ranks``-rank run (data-parallel GPT-ish workload) written as a trace."""
    from hermes.commands.emulate import trace_collector
    from hermes.npu.emulate import emulate, plan

    p = plan("resnet50", ranks=ranks, seed=0)
    emulate(p, trace_collector(p, out), steps)
    return out
