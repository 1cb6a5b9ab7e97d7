"""A longer campaign of the mutation fuzzer (tests/bad_inputs/fuzz.py) than the test suite's
fixed budget (tests/bad_inputs/test_fuzz_budget.py: 5 cases per family): cases per second
and defects per family, the defects' inputs saved under --out. Exit 1 if any defect.

    python benchmarks/fuzz_campaign.py --seeds 1 2 3 --iterations 200 --out /tmp/fuzz
    python benchmarks/fuzz_campaign.py --smoke
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.bad_inputs import fuzz  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--iterations", type=int, default=200, help="cases per family and seed")
    p.add_argument("--family", choices=sorted(fuzz.FAMILIES), action="append")
    p.add_argument("--out", type=Path, default=None, help="where defects are saved")
    p.add_argument("--limit", type=int, default=30, help="seconds per case")
    p.add_argument("--smoke", action="store_true", help="1 case per family, one seed")
    a = p.parse_args(argv)
    if a.smoke:
        a.seeds, a.iterations = a.seeds[:1], 1
    out = a.out or Path(tempfile.mkdtemp(prefix="hermes-fuzz-campaign-"))
    out.mkdir(parents=True, exist_ok=True)
    fuzz.ensure_stdlib_streams()
    defects = 0
    print(f"{'family':<12} {'seed':>5} {'cases':>6} {'ok':>5} {'clean':>6} {'DEFECT':>7} "
          f"{'cases/s':>8}")
    for family in a.family or sorted(fuzz.FAMILIES):
        for seed in a.seeds:
            t0 = time.perf_counter()
            counts = fuzz.campaign(family, seed, a.iterations, out, a.limit, minimize=False)
            rate = a.iterations / max(time.perf_counter() - t0, 1e-9)
            defects += counts["DEFECT"]
            print(f"{family:<12} {seed:>5} {a.iterations:>6} {counts['ok']:>5} "
                  f"{counts['clean']:>6} {counts['DEFECT']:>7} {rate:>8.1f}", flush=True)
    print(f"defects: {defects} (inputs under {out})")
    return 1 if defects else 0


if __name__ == "__main__":
    raise SystemExit(main())
