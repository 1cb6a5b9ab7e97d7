"""Import speed and peak memory of the Nsight Systems importer on a synthetic export in the
real schema (``hermes.collectors.importers.nsys.synthetic``: kernels with their
``cudaLaunchKernel`` calls, ``emit_nvtx`` operator ranges and ``ProfilerStep`` ranges).

    python benchmarks/nsys_import.py              # 1,000,000 kernels, 3 runs
    python benchmarks/nsys_import.py --runs 5     # medians of 5
    python benchmarks/nsys_import.py --smoke      # 20,000 kernels, one run, a few seconds

Each run is a child process (start-up included): ``hermes import`` of the export, and, as the
baseline measured in the same run, the same rows read by the importer's own queries and
compiled reader with nothing mapped or written (``importer.read_rows``: the floor SQLite's
stepping sets). Prints the export's size, the events imported, events/s of the import (end to
end, and the import alone as it reports itself), the child's peak RSS (``ru_maxrss``), the
read-only baseline, and the import's time as a multiple of it (medians over the runs, import
and baseline alternated).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_READ = ("import sys; from pathlib import Path; "
         "from hermes.collectors.importers.nsys import importer; "
         "print(importer.read_rows(Path(sys.argv[1])))")


def _child(cmd: list[str]) -> tuple[float, int, str]:
    """(wall seconds, this child's own peak RSS in bytes, its stdout)."""
    with tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        proc.stdout.close()
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(cmd[:5])} ...: exit {proc.returncode}: "
                             f"{err.read().strip()}")
    return wall, usage.ru_maxrss * 1024, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3, help="runs of each (medians printed)")
    ap.add_argument("--smoke", action="store_true", help="20,000 kernels, one run")
    ap.add_argument("--keep", type=Path, help="write the export here (and keep it)")
    args = ap.parse_args(argv)
    kernels = 20_000 if args.smoke else args.kernels
    runs = 1 if args.smoke else max(1, args.runs)
    from hermes.collectors.importers.nsys import synthetic

    with tempfile.TemporaryDirectory(prefix="hermes-bench-nsys-") as tmp:
        src = args.keep if args.keep is not None and args.keep.exists() else \
            (args.keep or Path(tmp) / "synthetic.sqlite")
        made = 0.0
        if not src.exists():
            t = time.perf_counter()
            synthetic.write(src, kernels, processes=1, steps=10)
            made = time.perf_counter() - t
        out = Path(tmp) / "t.parquet"
        walls, alone, reads, rss, read_rss = [], [], [], 0, 0
        events = rows = 0
        for _ in range(runs):
            wall, peak, text = _child([sys.executable, "-m", "hermes.commands._launch",
                                       "import", str(src), "--out", str(out), "--json"])
            summary = json.loads(text)
            events, rss = summary["events"], max(rss, peak)
            walls.append(wall)
            alone.append(summary["seconds"])
            os.unlink(out)
            wall, peak, text = _child([sys.executable, "-c", _READ, str(src)])
            read_rss = max(read_rss, peak)
            rows = int(text)
            reads.append(wall)
        wall, sec, read = (statistics.median(v) for v in (walls, alone, reads))
        print(f"export: {kernels:,} kernels, {src.stat().st_size / 2**20:,.0f} MiB"
              + (f" (made in {made:.1f} s)" if made else ""))
        print(f"import: {events:,} events in {wall:.2f} s = {events / wall:,.0f} events/s "
              f"(import alone {sec:.2f} s = {events / sec:,.0f} events/s); "
              f"median of {runs}: " + ", ".join(f"{w:.2f}" for w in walls) + " s")
        print(f"peak RSS: {rss / 2**20:,.0f} MiB")
        print(f"baseline, the same rows read and dropped: {rows:,} rows in {read:.2f} s = "
              f"{rows / read:,.0f} rows/s, peak RSS {read_rss / 2**20:,.0f} MiB; "
              f"import / read-only: {wall / read:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
