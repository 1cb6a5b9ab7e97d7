"""``collector_overhead.py --torch``: Hermes's cost on real PyTorch CPU training loops.

For each loop of ``torch_loops`` (cnn, transformer, ddp) the variants none / monitor / fine /
auto run ``runs`` times each, interleaved and rotated round by round (drift of the shared
machine hits every variant alike); each run's first ``warmup`` steps are dropped. Figures per
variant: the pooled median step time, its ratio to ``none``'s, and the paired ratio (median
over rounds of run median / the same round's ``none`` run median), the one judged against the
targets. ``auto`` leaves out the steps its trigger captured in detail (``collector.requests``
in its trace): its target is the cost outside detail windows.
"""

from __future__ import annotations

import gc
import statistics
import tempfile
from pathlib import Path

import torch_loops
from torch_loops import VARIANTS

TARGETS = {"monitor": 1.01, "auto": 1.01, "fine": 1.05}


def _detailed(trace: Path) -> set[int]:
    """Steps an auto session captured in detail (its trigger's windows)."""
    import hermes

    meta = hermes.load(trace, columns=["rank"]).meta
    return {s for r in meta.collector.get("requests", [])
            for s in range(int(r["from_step"]), int(r["to_step"]) + 1)}


def _plan(runs: int) -> list[str]:
    order: list[str] = []
    for r in range(runs):
        k = r % len(VARIANTS)
        order += list(VARIANTS[k:] + VARIANTS[:k])
    return order


def _report(loop: str, per_run: list[tuple[str, list[int]]], smoke: bool) -> bool:
    pooled: dict[str, list[int]] = {v: [] for v in VARIANTS}
    medians: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for variant, times in per_run:
        pooled[variant] += times
        medians[variant].append(statistics.median(times))
    base = statistics.median(pooled["none"])
    print(f"\n{loop}: {len(medians['none'])} run(s)/variant, {len(pooled['none'])} steps of none")
    print(f"{'variant':<9} {'median step (ms)':>17} {'ratio':>8} {'paired':>8} {'target':>7}")
    ok = True
    for v in VARIANTS:
        med = statistics.median(pooled[v])
        paired = statistics.median(m / n for m, n in zip(medians[v], medians["none"],
                                                         strict=True))
        target = TARGETS.get(v)
        flag = "" if target is None or smoke else ("ok" if paired <= target else "MISSED")
        ok &= flag != "MISSED"
        print(f"{v:<9} {med / 1e6:>17.3f} {med / base:>8.4f} {paired:>8.4f} "
              f"{target or '':>7} {flag:>6}")
    print("run medians (ms): " + "; ".join(
        f"{v} " + " ".join(f"{m / 1e6:.2f}" for m in medians[v]) for v in VARIANTS))
    return ok


def main(runs: int, steps: int, warmup: int, smoke: bool) -> int:
    import os

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    if smoke:
        runs, steps, warmup = 1, 6, 2
    order = _plan(runs)
    ok = True
    with tempfile.TemporaryDirectory(prefix="hermes-torch-overhead-") as tmp:
        out = Path(tmp)
        for name, loop in torch_loops.LOOPS.items():
            loop("none", warmup + 2, out)  # imports, caches: not counted
            per_run = []
            for variant in order:
                gc.collect()
                times = loop(variant, steps, out)
                keep = [t for i, t in enumerate(times) if i >= warmup and not (
                    variant == "auto" and i in _detailed(out / f"{name}-auto.parquet"))]
                per_run.append((variant, keep))
            ok &= _report(name, per_run, smoke)
        plan = [(v, steps) for v in order]
        rounds = torch_loops.ddp_rounds([("none", warmup + 2), *plan], out)[1:]
        per_run = []
        for i, (variant, times) in enumerate(zip(order, rounds, strict=True)):
            skip = _detailed(out / f"ddp-{i + 1}-auto") if variant == "auto" else set()
            per_run.append((variant, [t for j, t in enumerate(times)
                                      if j >= warmup and j not in skip]))
        ok &= _report("ddp (2 ranks, gloo; rank 0's steps)", per_run, smoke)
    return 0 if ok or smoke else 1
