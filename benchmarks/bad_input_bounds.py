"""Peak memory and time of ``hermes import`` on gzip bombs: members inflating to 10 GiB.

The bombs are generated streaming, never stored inflated: one gzip member of 64 MiB of filler
is compressed once and written 160 times (a gzip file may hold many members; readers inflate
them all), so each bomb is ~10 MB on disk and 10 GiB inflated. Two shapes: a run of
whitespace between two events, and one event whose name is 10 GiB long. Each import runs in
its own process; its peak RSS (``ru_maxrss`` of the child) and wall time are printed against
the limits, and the exit status is 1 if a bound is exceeded.

    python benchmarks/bad_input_bounds.py [--gib 10] [--keep DIR]
    python benchmarks/bad_input_bounds.py --smoke     # 128 MiB bombs (two members), seconds
"""

from __future__ import annotations

import argparse
import gzip
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The bounds asserted: a bomb is refused within these, whatever it inflates to.
MAX_RSS_MIB = 1024
MAX_SECONDS = 60.0
MEMBER_MIB = 64


def write_bomb(path: Path, head: bytes, filler: bytes, tail: bytes, gib: float) -> int:
    """A multi-member gzip of ``head``, ``gib`` GiB of ``filler`` and ``tail``; its size."""
    member = gzip.compress(filler * ((MEMBER_MIB << 20) // len(filler)), compresslevel=9)
    with open(path, "wb") as fh:
        fh.write(gzip.compress(head))
        for _ in range(max(1, int(gib * 1024 // MEMBER_MIB))):
            fh.write(member)
        fh.write(gzip.compress(tail))
    return path.stat().st_size


def run_import(src: Path, out: Path) -> tuple[int, float, float, str]:
    """(exit code, seconds, peak RSS MiB of the child, its stderr) of ``hermes import``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "hermes.cli", "import", str(src), "--out",
                          str(out)], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the max over all children so far: report the max seen
    return res.returncode, seconds, max(peak, before) / 1024, res.stderr.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=10, help="GiB each bomb inflates to")
    ap.add_argument("--keep", type=Path, default=None, help="write the bombs here")
    ap.add_argument("--smoke", action="store_true",
                    help="bombs of 128 MiB (two members, twice the per-event limit): seconds")
    args = ap.parse_args()
    if args.smoke:
        args.gib = 2 * MEMBER_MIB / 1024
    event = b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}'
    shapes = {
        "whitespace": (b'{"traceEvents": [' + event + b", ", b" ", b"]}"),
        "huge-name": (b'{"traceEvents": [{"ph": "X", "name": "', b"a",
                      b'", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}'),
    }
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        d = args.keep or Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        print(f"{'bomb':<12} {'on disk':>10} {'inflated':>9} {'exit':>5} {'time s':>8} "
              f"{'peak RSS MiB':>13}  limits: {MAX_SECONDS:.0f} s, {MAX_RSS_MIB} MiB")
        for name, (head, filler, tail) in shapes.items():
            src = d / f"{name}.pt.trace.json.gz"
            t0 = time.perf_counter()
            size = write_bomb(src, head, filler, tail, args.gib)
            gen = time.perf_counter() - t0
            code, seconds, rss, err = run_import(src, d / f"{name}.parquet")
            within = code == 2 and seconds <= MAX_SECONDS and rss <= MAX_RSS_MIB
            ok &= within
            print(f"{name:<12} {size / 1e6:>8.1f}MB {args.gib:>7g}GiB {code:>5} {seconds:>8.2f} "
                  f"{rss:>13.0f}  {'ok' if within else 'EXCEEDED'} (generated in {gen:.1f} s)")
            print(f"  {err.splitlines()[-1] if err else '(no message)'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
