"""Power of ``hermes check`` on the emulator: false failures on re-runs, regressions caught.

    python benchmarks/check_power.py [--pairs 20] [--steps 20] [--workload bert-large]
                                     [--slowdown 0.05] [--max-regression 0.05] [--alpha 0.01]
    python benchmarks/check_power.py --smoke     # one pair of 4 steps (seconds; no rates)

For each seed pair (base seed ``i``, new seed ``1000 + i``): the same workload emulated twice
(a re-run: ``check`` must pass), and the new run again with the device clock slowed (the
mechanism of ``computation.slow_node``, on every rank: ``Settings.slow_rank``/``slow_factor``),
whose size is set by ``--slowdown`` and *measured* on each pair (median step ratio - 1, printed).
The clock slows only device work, so the step-time regression comes out a little under the clock
slowdown (host and copies are not slowed): the default 5 % clock slowdown measured 4.83-5.05 %
(mean 4.97 %) over 20 pairs of bert-large, i.e. a regression of the allowed size itself, which
the gate's one-sided upper bound (not the point estimate) catches.
Prints the false-failure rate (re-runs that failed) and the catch rate (regressions that failed).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from hermes.check import check
from hermes.commands.emulate import trace_collector
from hermes.diff.runs import load_run
from hermes.npu.emulate import emulate, plan
from hermes.npu.settings import Settings


def emulate_run(workload: str, seed: int, steps: int, out: Path,
                base: Settings | None = None) -> Path:
    """Write one emulated run at ``out`` (the one call into the emulator)."""
    if out.exists():
        shutil.rmtree(out) if out.is_dir() else out.unlink()
    p = plan(workload, seed=seed, base=base)
    emulate(p, trace_collector(p, out), steps)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--workload", default="bert-large")
    ap.add_argument("--slowdown", type=float, default=0.05,
                    help="device clock slowdown of the regressed run (0.05: 5 %% slower)")
    ap.add_argument("--max-regression", type=float, default=0.05)
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--smoke", action="store_true", help="one seed pair of 4 steps (seconds)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.pairs, args.steps = 1, 4
    slow = Settings(slow_rank=0, slow_factor=1 / (1 + args.slowdown))
    false_fail, caught, sizes = 0, 0, []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="check-power-") as tmp:
        d = Path(tmp)
        for i in range(args.pairs):
            base = load_run(emulate_run(args.workload, i, args.steps, d / "base.parquet"), "base")
            rerun = load_run(emulate_run(args.workload, 1000 + i, args.steps,
                                         d / "rerun.parquet"), "rerun")
            slower = load_run(emulate_run(args.workload, 1000 + i, args.steps,
                                          d / "slow.parquet", slow), "slow")
            v_same = check(rerun, [base], args.max_regression, args.alpha)
            v_slow = check(slower, [base], args.max_regression, args.alpha)
            size = float(np.median(slower.step_times()) / np.median(base.step_times()) - 1)
            sizes.append(size)
            false_fail += v_same.exit_code
            caught += v_slow.exit_code
            g_same, g_slow = v_same.gates[0], v_slow.gates[0]
            print(f"pair {i:2d}: re-run {g_same.status} (ratio "
                  f"{g_same.details['ratio']:.4f}, p {g_same.details['p_value']:.2g})   "
                  f"regressed {100 * size:.2f} % {g_slow.status} (upper bound "
                  f"{g_slow.details['ci_hi']:.4f}, p {g_slow.details['p_value']:.2g})",
                  flush=True)
    n = args.pairs
    s = np.array(sizes)
    print(f"\n{args.workload}, {args.steps} steps per run, {n} seed pairs, max regression "
          f"{100 * args.max_regression:g} %, alpha {args.alpha:g} "
          f"({time.perf_counter() - t0:.0f} s)")
    print(f"measured regression: mean {100 * s.mean():.2f} %, min {100 * s.min():.2f} %, "
          f"max {100 * s.max():.2f} % (device clock {100 * args.slowdown:g} % slower)")
    print(f"false-failure rate (identical workloads, other seed): {false_fail}/{n} = "
          f"{100 * false_fail / n:.1f} %")
    print(f"catch rate (regressed run):                           {caught}/{n} = "
          f"{100 * caught / n:.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
