"""Helpers shared by the emulator benchmarks: run a plan, total event time by kind/name."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from hermes.hooks import StepInfo
from hermes.npu.emulate import plan
from hermes.npu.runtime import RunResult, Runtime
from hermes.npu.settings import Settings


class Totals:
    """A collector that keeps only sums: event time (ns) and counts per kind and per name."""

    def __init__(self, skip_steps: int = 1) -> None:
        self.skip = skip_steps
        self.kind_ns: dict[str, float] = defaultdict(float)
        self.name_ns: dict[str, float] = defaultdict(float)
        self.kind_n: dict[str, int] = defaultdict(int)
        self.steps: list[StepInfo] = []
        self.counted_steps: set[int] = set()

    def wants_detail(self, rank: int, step: int) -> bool:
        return rank == 0 and step >= self.skip

    def on_events(self, batch: Any) -> None:
        kind = np.asarray(batch["kind"].to_numpy(zero_copy_only=False)).astype(str)
        name = np.asarray(batch["name"].to_numpy(zero_copy_only=False)).astype(str)
        dur = np.asarray(batch["dur_ns"], dtype=np.float64)
        self.counted_steps.update(int(s) for s in np.unique(np.asarray(batch["step"])))
        for k in np.unique(kind):
            m = kind == k
            self.kind_ns[k] += float(dur[m].sum())
            self.kind_n[k] += int(m.sum())
        for n in np.unique(name):
            self.name_ns[n] += float(dur[name == n].sum())

    def on_step(self, info: StepInfo) -> None:
        self.steps.append(info)

    def close(self, meta_updates: Any = None) -> None:
        pass

    def per_step_ms(self, kind: str) -> float:
        return self.kind_ns.get(kind, 0.0) / max(len(self.counted_steps), 1) / 1e6

    def name_per_step_ms(self, name: str) -> float:
        return self.name_ns.get(name, 0.0) / max(len(self.counted_steps), 1) / 1e6


def run(workload: str, *, ranks: int = 1, inject: list[str] = (), opt: list[str] = (),
        steps: int = 8, base: Settings | None = None, seed: int = 0) -> tuple[RunResult, Totals]:
    p = plan(workload, ranks=ranks, inject_specs=list(inject), opt_specs=list(opt), base=base,
             seed=seed)
    tot = Totals()
    rt = Runtime(p.device, ranks=ranks, settings=p.settings, collector=tot, seed=seed)
    return rt.run(workload, steps), tot


def step_ms(r: RunResult) -> float:
    """Median step time after the first (warm-up) step, ms."""
    return float(np.median(r.step_ns[1:])) / 1e6


def busy_share(r: RunResult) -> float:
    """Device busy time / step time (rank 0, median over steps after the first)."""
    return float(np.median(r.device_busy_ns[1:, 0] / r.step_ns[1:, 0]))
