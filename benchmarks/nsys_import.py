"""Import speed and peak memory of the Nsight Systems importer on a synthetic export in the
real schema (``hermes.collectors.importers.nsys.synthetic``: kernels with their
``cudaLaunchKernel`` calls, ``emit_nvtx`` operator ranges and ``ProfilerStep`` ranges).

    python benchmarks/nsys_import.py              # 1,000,000 kernels
    python benchmarks/nsys_import.py --smoke      # 20,000 kernels, a few seconds

Prints the export's size, the events imported, events/s of the import (``hermes import`` in a
child process, its start-up included) and the child's peak RSS (``ru_maxrss``).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--smoke", action="store_true", help="20,000 kernels")
    ap.add_argument("--keep", type=Path, help="write the export here (and keep it)")
    args = ap.parse_args(argv)
    kernels = 20_000 if args.smoke else args.kernels
    from hermes.collectors.importers.nsys import synthetic

    with tempfile.TemporaryDirectory(prefix="hermes-bench-nsys-") as tmp:
        src = args.keep or Path(tmp) / "synthetic.sqlite"
        t = time.perf_counter()
        synthetic.write(src, kernels, processes=1, steps=10)
        made = time.perf_counter() - t
        out = Path(tmp) / "t.parquet"
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "hermes.commands._launch", "import",
                               str(src), "--out", str(out), "--json"],
                              capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - t
        if done.returncode != 0:
            print(done.stderr.strip(), file=sys.stderr)
            return 1
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        summary = json.loads(done.stdout)
        events = summary["events"]
        print(f"export: {kernels:,} kernels, {src.stat().st_size / 2**20:,.0f} MiB "
              f"(made in {made:.1f} s)")
        print(f"import: {events:,} events in {wall:.2f} s = {events / wall:,.0f} events/s "
              f"(import alone {summary['seconds']:.2f} s = "
              f"{events / summary['seconds']:,.0f} events/s)")
        print(f"peak RSS: {rss / 2**20:,.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
