"""Emulation speed on the virtual clock.

Run: python benchmarks/emulator_speed.py [--quick | --smoke]
1. device tasks emulated per second of wall time (target >= 200,000 on a 2-core machine):
   one rank of llama2-7b and 64 ranks of gpt3-13b, without a trace (monitor-only hooks) and
   with the fine-grained collector writing Parquet; median of 3 runs each;
2. 1,024 ranks x 10 steps of gpt3-13b (tp8 x pp4 x dp32) written as a per-rank directory
   trace, in a child process: wall time (target <= 120 s) and peak RSS (target <= 4 GB).
``--quick`` leaves out 2; ``--smoke`` runs both parts tiny, once each (2 steps of llama2-7b,
1 step of 8 ranks of gpt3-13b, a child writing 8 ranks x 1 step), printing the same lines.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import sys, time
from hermes.collectors.fine import FineCollector
from hermes.npu import Runtime
from hermes.npu.emulate import row_group_rows
ranks, steps, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
t = time.perf_counter()
rt = Runtime("ascend910b", ranks=ranks,
             collector=FineCollector(out, row_group_rows=row_group_rows(ranks)))
res = rt.run("gpt3-13b", steps)
rt.close(res)
print(res.device_tasks, time.perf_counter() - t, res.layout)
"""


def tasks_per_s(workload: str, ranks: int, steps: int, trace: bool,
                runs: int = 3) -> tuple[float, int]:
    from hermes.collectors.fine import FineCollector
    from hermes.hooks import NullCollector
    from hermes.npu import Runtime
    from hermes.npu.emulate import row_group_rows

    rates = []
    tasks = 0
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            col = FineCollector(Path(d) / "t", row_group_rows=row_group_rows(ranks)) \
                if trace else NullCollector()
            t = time.perf_counter()
            rt = Runtime("ascend910b", ranks=ranks, collector=col)
            res = rt.run(workload, steps)
            rt.close(res)
            rates.append(res.device_tasks / (time.perf_counter() - t))
            tasks = res.device_tasks
    return statistics.median(rates), tasks


def big(ranks: int, steps: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", CHILD, str(ranks), str(steps),
                              str(Path(d) / "trace")], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t
        rss_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
        size = sum(p.stat().st_size for p in (Path(d) / "trace").iterdir()) / 2**20
        tasks, inner, layout = out.stdout.split(" ", 2)
    print(f"{ranks} ranks x {steps} steps of gpt3-13b (layout {layout.strip()}): wall {wall:.1f} s "
          f"(emulation + trace {float(inner):.1f} s; target <= 120 s), peak RSS {rss_gb:.2f} GB "
          f"(target <= 4 GB), {int(tasks):,} device tasks, trace {size:.0f} MiB")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="leave out the 1,024-rank run")
    ap.add_argument("--smoke", action="store_true", help="both parts tiny, once (seconds)")
    args = ap.parse_args()
    runs = 1 if args.smoke else 3
    sizes = (("llama2-7b", 1, 2), ("gpt3-13b", 8, 1)) if args.smoke else \
        (("llama2-7b", 1, 50), ("gpt3-13b", 64, 5))
    for workload, ranks, steps in sizes:
        for trace in (False, True):
            rate, n = tasks_per_s(workload, ranks, steps, trace, runs)
            print(f"{workload} x {ranks} rank(s), {steps} steps, "
                  f"{'fine-grained trace' if trace else 'no trace (hooks only)'}: "
                  f"{rate:,.0f} device tasks/s (median of {runs}; {n:,} tasks; "
                  f"target >= 200,000)")
    if args.smoke:
        big(8, 1)
    elif not args.quick:
        big(1024, 10)
