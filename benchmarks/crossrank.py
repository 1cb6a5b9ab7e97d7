"""Wait vs transfer per collective across ranks, measured *without* Hermes (docs/real-traces.md).

Reads each rank's Kineto JSON directly (json/gzip + numpy) and matches the same collective
across ranks the simplest way a person would: the k-th collective range of one rank with the
k-th of every other (host ``gloo:*`` / ``nccl:*`` ranges, inside ``ProfilerStep#N``; ranks of
one machine share the clock). Per matched collective with arrivals A_i and ends E_i:

* wait of rank i = max_j A_j - A_i (time it spent inside the collective before the last rank
  arrived); the last rank *causes* the sum of the others' waits; a rank's wait *time* is the
  union of its [A_i, max_j A_j) intervals (collectives in flight together wait at once);
* transfer = min_i E_i - max_j A_j (what the collective took once everyone was there).

Prints per job: matched collectives, total wait per rank, how often each rank is last, the
wait each rank causes, and the median transfer. One command::

    python benchmarks/crossrank.py                 # the shared multi-rank jobs
    python benchmarks/crossrank.py A.json.gz B.json.gz --skip-steps 1
    python benchmarks/crossrank.py --smoke         # the first shared job only
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
JOBS = {
    "kineto-h100-dist straggler": [SHARED / f"kineto-h100-dist/ddp_gloo_straggler_rank{r}"
                                   ".pt.trace.json.gz" for r in (0, 1)],
    "kineto-h100-dist balanced": [SHARED / f"kineto-h100-dist/ddp_gloo_balanced_rank{r}"
                                  ".pt.trace.json.gz" for r in (0, 1)],
    "hta trace_filter (2 of 128 ranks)": [SHARED / f"hta/trace_filter/sampled_rank-{r}.json.gz"
                                          for r in (0, 1)],
}
COLL = re.compile(r"^(gloo|nccl):(all_reduce|allreduce|_?all_gather\w*|reduce_scatter\w*|"
                  r"broadcast|all_to_all\w*)$")
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _events(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        d = json.load(f)
    return d["traceEvents"] if isinstance(d, dict) else d


def collectives(path: Path, skip_steps: int) -> np.ndarray:
    """(name code, arrival us, end us) of the rank's collective ranges inside its steps (the
    first ``skip_steps`` steps left out), in arrival order."""
    ev = [e for e in _events(path) if e.get("ph") == "X"]
    steps = sorted((int(m.group(1)), float(e["ts"]), float(e["ts"]) + float(e["dur"]))
                   for e in ev if e.get("cat") == "user_annotation"
                   and (m := STEP.match(str(e.get("name")))))
    steps = steps[skip_steps:]
    lo = np.array([s[1] for s in steps]), np.array([s[2] for s in steps])
    out = []
    for e in ev:
        if e.get("cat") in ("cpu_op", "user_annotation") and COLL.match(str(e.get("name"))):
            a = float(e["ts"])
            if steps and not ((lo[0] <= a) & (a < lo[1])).any():
                continue
            out.append((e["name"], a, a + float(e["dur"])))
    out.sort(key=lambda x: x[1])
    return np.array(out, dtype=object).reshape(-1, 3)


def measure(paths: list[Path], skip_steps: int) -> dict:
    per = [collectives(p, skip_steps) for p in paths]
    n = min(len(c) for c in per)
    names = np.array([c[:n, 0] for c in per])
    same = (names == names[0]).all(axis=0)
    arrive = np.array([c[:n, 1] for c in per], dtype=np.float64)[:, same]
    end = np.array([c[:n, 2] for c in per], dtype=np.float64)[:, same]
    last = arrive.max(axis=0)
    wait = last - arrive                        # per rank, per collective (us)
    late = arrive.argmax(axis=0)
    caused = np.array([wait[:, late == r].sum() for r in range(len(paths))])
    transfer = np.clip(end.min(axis=0) - last, 0, None)
    union = []
    for r in range(len(paths)):  # merge the rank's wait intervals
        iv = sorted(zip(arrive[r], last, strict=True))
        total, reach = 0.0, -np.inf
        for s, e in iv:
            total += max(0.0, e - max(s, reach))
            reach = max(reach, e)
        union.append(round(total / 1e3, 1))
    return {"collectives_per_rank": [len(c) for c in per], "matched": int(same.sum()),
            "name_mismatch": int(n - same.sum()),
            "wait_ms_per_rank": np.round(wait.sum(axis=1) / 1e3, 1).tolist(),
            "wait_time_ms_per_rank": union,
            "times_last": np.bincount(late, minlength=len(paths)).tolist(),
            "wait_caused_ms": np.round(caused / 1e3, 1).tolist(),
            "transfer_median_ms": round(float(np.median(transfer)) / 1e3, 2) if n else None,
            "transfer_total_ms": round(float(transfer.sum()) / 1e3, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path, help="one Kineto JSON per rank (default: "
                    "the shared multi-rank jobs)")
    ap.add_argument("--skip-steps", type=int, default=0,
                    help="leave out the first N ProfilerSteps (a warm-up step Hermes left out: "
                    "its analysis JSON lists it under `warmup`)")
    ap.add_argument("--smoke", action="store_true", help="the first shared job only")
    a = ap.parse_args(argv)
    jobs = {"given": a.traces} if a.traces else JOBS
    if a.smoke and not a.traces:
        jobs = dict(list(JOBS.items())[:1])
    for name, paths in jobs.items():
        if not all(p.exists() for p in paths):
            print(f"{name}: missing {[str(p) for p in paths if not p.exists()]}")
            continue
        print(f"{name}: {json.dumps(measure(paths, a.skip_steps))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
