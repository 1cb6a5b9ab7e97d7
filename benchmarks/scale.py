"""Many ranks through both executors: time, the driver's peak RSS, and the same findings.

    python benchmarks/scale.py [--ranks 4096] [--steps 5] [--workload pangu-1.3b | --synth]
                               [--ops 20] [--workers N] [--no-dask] [--dir PATH]
                               [--replicate N [--replicate-only]]
    python benchmarks/scale.py --smoke   # 2 synthetic ranks, 1 worker, both executors, replica

Writes ``--ranks`` emulated ranks (``hermes emulate WORKLOAD``: the emulated NPU, one Parquet
file per rank; default a GPT-style model, ``pangu-1.3b``: ~12,800 events and ~2,450 kernels a
rank in 5 steps) -- or, with ``--synth``, synthetic ones (``benchmarks/synth.py``: ``--steps``
steps of ``3 * ops + 11`` events) -- unless ``--dir`` already holds them, then analyzes the
directory in a fresh driver process per executor:

* embedded: ``LocalExecutor(workers)``, a spawn pool on this machine;
* dask: ``DaskExecutor`` on a ``LocalCluster`` of ``workers`` single-threaded worker processes
  (started inside the driver; its start-up is timed apart).

Per executor it prints the analysis time, the driver's peak RSS (``ru_maxrss`` of the driver
alone: pool and Dask workers are other processes; the target is <= 2 GB) and its RSS after the
imports, and whether the two ``hermes.analysis/1`` documents are identical (findings included).
When fewer than 4,096 ranks ran, it extrapolates linearly to 4,096: time from the time per rank,
RSS from the driver's growth per rank over its post-import RSS (what the driver keeps per rank is
that rank's results, so growth is linear in ranks; the reduce's fixed cost is counted as per-rank
growth too, so the estimate is high at small counts) -- an estimate, printed as one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_RANKS = 4096
TARGET_RSS_GB = 2.0

DRIVER = """
import json, resource, sys, time
def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
from hermes.analyzers.engine.executor import DaskExecutor, LocalExecutor
from hermes.analyzers.engine.run import analyze, load_analyzers
load_analyzers()
base = rss()
path, kind, workers, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
t = time.perf_counter()
ex = DaskExecutor(None, workers) if kind == "dask" else LocalExecutor(workers)
start = time.perf_counter() - t
t = time.perf_counter()
def progress(done, total):
    if done % 256 == 0 or done == total:
        print(f"  {kind}: {done}/{total} ranks, {time.perf_counter() - t:.0f} s, driver RSS "
              f"{rss() / 2**20:.2f} GiB", file=sys.stderr, flush=True)
a = analyze(path, executor=ex, progress=progress)
dt = time.perf_counter() - t
ex.close()
open(out, "w").write(a.to_json())
print(json.dumps({"s": dt, "start_s": start, "rss_kb": rss(), "base_kb": base,
                  "ranks": len(a.ranks), "missing": len(a.missing_ranks),
                  "findings": [f.id for f in a.findings[:3]]}))
"""


REPLICA = """
import functools, json, pickle, resource, sys, time
def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
from pathlib import Path
from hermes.analyzers.engine.executor import LocalExecutor
from hermes.analyzers.engine.run import _rank_results, _reduce, _trace_ranks, load_analyzers
load_analyzers()
base = rss()
path, workers, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ranks, meta = _trace_ranks(Path(path))[:2]  # (ranks, metadata, is a directory, unreadable)
ex = LocalExecutor(workers)
got = dict(ex.map(functools.partial(_rank_results, path, False, None), ranks))
blobs = [pickle.dumps(got[r], protocol=5) for r in ranks]
del got
t = time.perf_counter()
per_rank = {i: pickle.loads(blobs[i % len(blobs)]) for i in range(n)}
held = rss()
a = _reduce(per_rank, meta)
doc = a.to_json()
dt = time.perf_counter() - t
open(out, "w").write(doc)
print(json.dumps({"s": dt, "rss_kb": rss(), "held_kb": held, "base_kb": base, "ranks": n,
                  "real": len(ranks), "pickled_kb": sum(map(len, blobs)) / len(blobs) / 1024}))
"""


def run_replica(path: Path, workers: int, n: int, out: Path) -> None:
    """The driver's memory at ``n`` ranks without analyzing ``n``: the ranks in ``path`` are
    analyzed, then their results are unpickled ``n`` times in all (as a driver receives them)
    and go through the reduce and the JSON document."""
    r = subprocess.run([sys.executable, "-c", REPLICA, str(path), str(workers), str(n), str(out)],
                       stdout=subprocess.PIPE, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"replica driver failed (exit {r.returncode})")
    d = json.loads(r.stdout.strip().splitlines()[-1])
    gib = d["rss_kb"] / 2**20
    print(f"replica   {d['ranks']:,} ranks' results ({d['real']} analyzed, each result "
          f"{d['pickled_kb']:.0f} KiB pickled) held by the driver: RSS "
          f"{d['held_kb'] / 2**20:.2f} GiB (after imports {d['base_kb'] / 2**20:.2f}); reduce + "
          f"JSON document {d['s']:.1f} s; driver peak RSS {gib:.2f} GiB (target <= "
          f"{TARGET_RSS_GB:.0f} GB: {'met' if gib * 2**30 <= TARGET_RSS_GB * 1e9 else 'MISSED'})")


def run_driver(path: Path, kind: str, workers: int, out: Path) -> dict[str, float]:
    # the driver's progress lines (every 256 ranks) and errors go straight to stderr
    r = subprocess.run([sys.executable, "-c", DRIVER, str(path), kind, str(workers), str(out)],
                       stdout=subprocess.PIPE, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{kind} driver failed (exit {r.returncode})")
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def report(kind: str, r: dict[str, float], ranks: int) -> None:
    gib = r["rss_kb"] / 2**20
    print(f"{kind:<9} {r['ranks']:>6,} ranks analyzed ({r['missing']} missing) in {r['s']:.1f} s "
          f"({r['s'] / ranks * 1e3:.0f} ms/rank; executor start {r['start_s']:.1f} s), driver "
          f"peak RSS {gib:.2f} GiB (after imports {r['base_kb'] / 2**20:.2f} GiB; target <= "
          f"{TARGET_RSS_GB:.0f} GB: {'met' if gib * 2**30 <= TARGET_RSS_GB * 1e9 else 'MISSED'})"
          f"; top findings {r['findings']}")
    if ranks < TARGET_RANKS:
        f = TARGET_RANKS / ranks
        grow = (r["rss_kb"] - r["base_kb"]) / ranks
        est = (r["base_kb"] + grow * TARGET_RANKS) / 2**20
        print(f"{'':<9} extrapolated to {TARGET_RANKS:,} ranks (linear, x{f:.0f}): "
              f"~{r['s'] * f / 60:.0f} min, driver peak RSS <= ~{est:.2f} GiB")


def write_ranks(path: Path, a: argparse.Namespace) -> str:
    """The ranks to analyze, one Parquet file each: emulated (default) or synthetic."""
    if a.synth:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import synth

        return f"synthetic, {synth.write(path, a.ranks, a.steps, a.ops):,} events"
    cmd = [sys.executable, "-c", "import sys; from hermes.cli import main; sys.exit(main())",
           "emulate", a.workload, "--ranks", str(a.ranks), "--steps", str(a.steps),
           "--out", str(path)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"hermes emulate failed:\n{r.stderr[-3000:]}")
    return f"emulated {a.workload}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=TARGET_RANKS)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--workload", default="pangu-1.3b", help="emulated workload (hermes emulate)")
    ap.add_argument("--synth", action="store_true", help="synthetic ranks (synth.py) instead")
    ap.add_argument("--ops", type=int, default=20,
                    help="--synth: op/launch/kernel triples per step")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-dask", action="store_true", help="the embedded executor only")
    ap.add_argument("--replicate", type=int, default=0, metavar="N",
                    help="also: the driver's memory with N ranks' results (the analyzed ranks' "
                         "results repeated) through the reduce")
    ap.add_argument("--replicate-only", action="store_true",
                    help="with --replicate: skip the executor runs")
    ap.add_argument("--dir", type=Path, default=None, help="keep the ranks here (reused)")
    ap.add_argument("--smoke", action="store_true",
                    help="2 synthetic ranks x 3 steps of 20 ops, 1 worker, both executors and "
                         "a 4-rank replica (seconds)")
    a = ap.parse_args(argv)
    if a.smoke:
        a.ranks, a.steps, a.synth, a.ops, a.workers, a.replicate = 2, 3, True, 20, 1, 4
        a.dir, a.replicate_only = None, False
    with tempfile.TemporaryDirectory() as tmp:
        path = a.dir or Path(tmp) / "ranks"
        if not (path.is_dir() and any(path.glob("rank-*.parquet"))):
            t = time.perf_counter()
            what = write_ranks(path, a)
            print(f"wrote {a.ranks:,} ranks x {a.steps} steps ({what}) in "
                  f"{time.perf_counter() - t:.1f} s")
        ranks = len(list(path.glob("rank-*.parquet")))
        print(f"analyzing {ranks:,} ranks, {a.workers} worker process(es), "
              f"{os.cpu_count()} cores on this machine")
        if a.replicate:
            run_replica(path, a.workers, a.replicate, Path(tmp) / "replica.json")
            if a.replicate_only:
                return 0
        docs = {}
        for kind in ("embedded", *(() if a.no_dask else ("dask",))):
            out = Path(tmp) / f"{kind}.json"
            report(kind, run_driver(path, kind, a.workers, out), ranks)
            docs[kind] = out.read_text()
        if len(docs) == 2:
            same = docs["embedded"] == docs["dask"]
            f1, f2 = (json.loads(d)["findings"] for d in docs.values())
            print(f"embedded vs dask: analysis documents {'identical' if same else 'DIFFER'}; "
                  f"findings {'identical' if f1 == f2 else 'DIFFER'} ({len(f1)} findings)")
            return 0 if same else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
