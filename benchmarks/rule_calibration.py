"""Estimated vs measured speedup of every rule with an emulator spelling.

    python benchmarks/rule_calibration.py [--causes ID,ID] [--steps 8] [--seed 0] [--json OUT]
    python benchmarks/rule_calibration.py --smoke   # io.slow_data_reading only; exit 1 on an
                                                    # error row

For each cause id: emulate a workload with the cause injected (``CASES``: the workload and ranks
that show it clearly), analyze the trace, and for every recommendation of that cause's finding
that carries an ``emulator_opt``, emulate the same run with the option applied. Prints, per rule,
the finding's share, the estimated speedup (step before / after) and the measured one (median
step time before / after), and their ratio. The figures behind the table's
"emulator-measured" fractions come from here.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

#: cause id -> (workload, ranks); causes without an emulator spelling in the table are skipped.
CASES: dict[str, tuple[str, int]] = {
    "parallel.poor_parallelism": ("vgg16", 2),
    "io.slow_data_reading": ("resnet50", 1),
    "io.slow_data_processing": ("resnet50", 1),
    "io.slow_data_fetching": ("resnet50", 1),
    "cpu.operator_compilation": ("mobilenetv1-ssd", 1),
    "cpu.operator_dispatch": ("mobilenetv1-ssd", 1),
    "cpu.host_device_sync": ("resnet50", 1),
    "cpu.garbage_collection": ("resnet50", 1),
    "cpu.resource_contention": ("mobilenetv1-ssd", 1),
    "cpu.environment_configuration": ("resnet50", 1),
    "computation.compute_bound": ("bert-large", 1),
    "computation.memory_bound": ("resnet50", 1),
    "computation.underutilization": ("resnet50", 1),
    "computation.slow_node": ("vgg16", 2),
    "communication.synchronization_wait": ("vgg16", 2),
    "communication.bandwidth_contention": ("moe", 4),
    "communication.small_packet": ("vgg16", 2),
    "communication.byte_alignment": ("resnet50", 2),
    "communication.network_configuration": ("resnet50", 2),
}


def run(workload: str, ranks: int, cause: str, opts: list[str], steps: int, seed: int,
        out: Path) -> float:
    """Median step time (ms) of one emulated run; writes its trace to ``out``."""
    from hermes.commands.emulate import trace_collector
    from hermes.npu.emulate import emulate, plan

    p = plan(workload, ranks=ranks, inject_specs=[cause], opt_specs=opts, seed=seed)
    return float(emulate(p, trace_collector(p, out), steps).median_step_ms)


def calibrate(cause: str, steps: int = 8, seed: int = 0) -> list[dict[str, Any]]:
    import hermes

    workload, ranks = CASES[cause]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        before = run(workload, ranks, cause, [], steps, seed, Path(tmp) / "before")
        found = [f for f in hermes.analyze(Path(tmp) / "before").findings if f.id == cause]
        if not found:
            return [{"cause": cause, "rule": "-", "note": "cause not diagnosed"}]
        done: dict[str, float] = {}
        for f in found:  # one finding per evidence.reason (underutilization)
            for rec in f.recommendations:
                if not rec.emulator_opt:
                    continue
                if rec.emulator_opt not in done:
                    done[rec.emulator_opt] = run(workload, ranks, cause, [rec.emulator_opt],
                                                 steps, seed, Path(tmp) / f"after{len(done)}")
                after = done[rec.emulator_opt]
                measured = before / after if after > 0 else float("inf")
                rows.append({"cause": cause, "rule": rec.rule, "opt": rec.emulator_opt,
                             "reason": str(f.evidence.get("reason", "")),
                             "share": round(f.time_share, 4), "before_ms": round(before, 3),
                             "after_ms": round(after, 3), "estimated": rec.estimated_speedup,
                             "measured": round(measured, 3),
                             "ratio": round(rec.estimated_speedup / measured, 3)})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--causes", default="", help="comma-separated cause ids (default: all)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default="", help="also write the rows as JSON here")
    ap.add_argument("--smoke", action="store_true",
                    help="one cause (io.slow_data_reading, resnet50); a case's error fails")
    a = ap.parse_args(argv)
    causes = [c for c in a.causes.split(",") if c] or list(CASES)
    if a.smoke and not a.causes:
        causes = ["io.slow_data_reading"]
    rows: list[dict[str, Any]] = []
    print(f"{'rule':<34} {'opt':<20} {'share':>6} {'before':>9} {'after':>9} {'est':>6} "
          f"{'meas':>6} {'est/meas':>8}")
    for c in causes:
        try:
            got = calibrate(c, a.steps, a.seed)
        except Exception as exc:  # one broken case must not hide the others' figures
            got = [{"cause": c, "rule": "-", "note": f"error: {type(exc).__name__}: {exc}"}]
        for r in got:
            rows.append(r)
            if "note" in r:
                print(f"{c:<34} {r['note']}")
                continue
            print(f"{r['rule']:<34} {r['opt']:<20} {r['share']:>6.3f} {r['before_ms']:>9.2f} "
                  f"{r['after_ms']:>9.2f} {r['estimated']:>6.2f} {r['measured']:>6.2f} "
                  f"{r['ratio']:>8.2f}")
            sys.stdout.flush()
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    if a.smoke:  # the command must run: a case that raised is a broken benchmark
        return 1 if any(str(r.get("note", "")).startswith("error:") for r in rows) else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
