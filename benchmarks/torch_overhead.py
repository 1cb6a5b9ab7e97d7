"""``collector_overhead.py --torch``: Hermes's cost on real PyTorch CPU training loops.

For each loop of ``torch_loops`` (cnn, transformer, ddp) the variants none / monitor / fine /
auto run ``runs`` times each, interleaved and rotated round by round (drift of the shared
machine hits every variant alike); each run's first ``warmup`` steps are dropped. Figures per
variant, of the step's wall time and of the process's CPU time in the step (every thread:
the collector's, the PyTorch profiler's): the pooled median and the paired ratio (median over
rounds of run median / the same round's ``none`` run median). The CPU paired ratio is judged
against the targets: on a shared machine the wall time moves with the other load far more than
any collector costs. ``auto`` leaves out the steps its trigger captured in detail
(``collector.requests`` in its trace): its target is the cost outside detail windows.

``hooks/step`` and ``hooks %``: the session's own time inside its step and event hooks per
step (``collector.collector_ns / steps`` in each run's trace: what the collector itself
measures, median over runs; every step of the run, so a save -- a few ms, the first one
second after the start -- is spread over them: use ``--steps`` of 100 or more; auto's on
its steps outside detail windows, ``collector.plain_ns / plain_steps``, the target being its
cost there) and that as a share of ``none``'s CPU per step. A machine's
noise moves the paired ratios by several percent between runs; this figure does not carry it,
and it bounds the collector's cost from below (the garbage-collection callbacks, the
DataLoader patch, the PyTorch profiler and the stack sampler's thread are outside it).
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


def _hook_ns(trace: Path, plain: bool = False) -> float | None:
    """The session's own time in its hooks per step, from the trace's metadata (``plain``:
    on the steps outside detail windows, ``collector.plain_ns / plain_steps``)."""
    import hermes

    c = hermes.load(trace, columns=["rank"]).meta.collector
    if plain and c.get("plain_steps"):
        return float(c["plain_ns"]) / int(c["plain_steps"])
    steps = int(c.get("steps") or 0)
    return float(c["collector_ns"]) / steps if steps and "collector_ns" in c else None


def _plan(runs: int) -> list[str]:
    order: list[str] = []
    for r in range(runs):
        k = r % len(VARIANTS)
        order += list(VARIANTS[k:] + VARIANTS[:k])
    return order


def _paired(per_run: list[tuple[str, list[int]]]) -> tuple[dict[str, float], dict[str, float],
                                                           dict[str, list[float]]]:
    """(pooled median, paired ratio, run medians) per variant of one measure."""
    pooled: dict[str, list[int]] = {v: [] for v in VARIANTS}
    medians: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for variant, times in per_run:
        pooled[variant] += times
        medians[variant].append(statistics.median(times))
    med = {v: statistics.median(pooled[v]) for v in VARIANTS}
    paired = {v: statistics.median(m / n for m, n in zip(medians[v], medians["none"],
                                                         strict=True)) for v in VARIANTS}
    return med, paired, medians


def _report(loop: str, per_run: list[tuple[str, list[int], list[int]]], smoke: bool,
            hooks: dict[str, list[float]]) -> bool:
    """Wall and CPU figures of one loop; the CPU paired ratio is judged (the wall time of a
    shared machine moves with its other load far more than the collector costs)."""
    wall, wpair, wruns = _paired([(v, w) for v, w, _ in per_run])
    cpu, cpair, _ = _paired([(v, c) for v, _, c in per_run])
    print(f"\n{loop}: {len(wruns['none'])} run(s)/variant")
    print(f"{'variant':<9} {'wall/step ms':>13} {'wall paired':>12} {'cpu/step ms':>12} "
          f"{'cpu paired':>11} {'hooks/step us':>14} {'hooks %':>8} {'target':>7}")
    ok = True
    for v in VARIANTS:
        target = TARGETS.get(v)
        flag = "" if target is None or smoke else ("ok" if cpair[v] <= target else "MISSED")
        ok &= flag != "MISSED"
        h = statistics.median(hooks[v]) if hooks.get(v) else None
        hook = ("", "") if h is None else (f"{h / 1e3:.0f}", f"{100 * h / cpu['none']:.2f}")
        print(f"{v:<9} {wall[v] / 1e6:>13.3f} {wpair[v]:>12.4f} {cpu[v] / 1e6:>12.3f} "
              f"{cpair[v]:>11.4f} {hook[0]:>14} {hook[1]:>8} {target or '':>7} {flag:>6}")
    print("hooks/step by run (us): " + "; ".join(
        f"{v} " + " ".join(f"{h / 1e3:.0f}" for h in hooks[v]) for v in VARIANTS if hooks.get(v)))
    print("wall run medians (ms): " + "; ".join(
        f"{v} " + " ".join(f"{m / 1e6:.2f}" for m in wruns[v]) for v in VARIANTS))
    return ok


def _hooks() -> dict[str, list[float]]:
    return {v: [] for v in VARIANTS}


def _note_hooks(hooks: dict[str, list[float]], variant: str, trace: Path) -> None:
    if variant != "none":
        h = _hook_ns(trace, plain=variant == "auto")
        if h is not None:
            hooks[variant].append(h)


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
            per_run, hooks = [], _hooks()
            for variant in order:
                gc.collect()
                walls, cpus = loop(variant, steps, out)
                trace = out / f"{name}-{variant}.parquet"
                skip = _detailed(trace) if variant == "auto" else set()
                _note_hooks(hooks, variant, trace)
                keep = [i for i in range(len(walls)) if i >= warmup and i not in skip]
                per_run.append((variant, [walls[i] for i in keep], [cpus[i] for i in keep]))
            ok &= _report(name, per_run, smoke, hooks)
        plan = [(v, steps) for v in order]
        rounds = torch_loops.ddp_rounds([("none", warmup + 2), *plan], out)[1:]
        per_run, hooks = [], _hooks()
        for i, (variant, (walls, cpus)) in enumerate(zip(order, rounds, strict=True)):
            trace = out / f"ddp-{i + 1}-{variant}" / "rank-00000.parquet"
            skip = _detailed(trace) if variant == "auto" else set()
            _note_hooks(hooks, variant, trace)
            keep = [j for j in range(len(walls)) if j >= warmup and j not in skip]
            per_run.append((variant, [walls[j] for j in keep], [cpus[j] for j in keep]))
        ok &= _report("ddp (2 ranks, gloo; rank 0's steps)", per_run, smoke, hooks)
    return 0 if ok or smoke else 1
