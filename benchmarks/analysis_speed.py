"""Speed and memory of the full analysis on a large synthetic single-rank trace.

    python benchmarks/analysis_speed.py [--events 10000000] [--repeat 3] [--keep PATH]

Writes a synthetic trace (default 10M events, one rank: steps of host ops, launches, kernels with
correlation ids, a collective, syncs, data waits, GC, queue counters), then runs
``hermes.analyze(path)`` in a fresh child process ``--repeat`` times and prints the median wall
time and the peak RSS (``ru_maxrss`` of the child) against the targets (<= 60 s, <= 4 GB on 2 cores).
HTA is not run on this trace (its JSON input would be ~2 GB and, at HTA's published ~6-7x JSON size
in memory, beyond this machine); its published parse rate is printed beside ours as a reference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hermes.trace.meta import TraceMeta
from hermes.trace.writer import TraceWriter

TARGET_S = 60.0
TARGET_RSS_GB = 4.0
OPS_PER_STEP = 20_000  # -> about 3 events per op


def synth_step(step: int, t0: int, rng: np.random.Generator) -> tuple[dict[str, object], int]:
    """One step's columns: OPS_PER_STEP (host op, launch, kernel) triples plus extras."""
    n = OPS_PER_STEP
    host_dur = rng.integers(4_000, 12_000, n)
    host_ts = t0 + 50_000 + np.concatenate([[0], np.cumsum(host_dur[:-1] + 500)])
    launch_ts = host_ts + 1_000
    launch_dur = np.full(n, 2_500)
    k_dur = rng.integers(2_000, 15_000, n)
    # one in-order stream: start_i = max(ready_i, end_{i-1}); with c_i = sum of earlier
    # durations, start_i = c_i + running max of (ready_j - c_j)
    ready = launch_ts + 3_000
    c = np.cumsum(k_dur) - k_dur
    starts = np.maximum.accumulate(ready - c) + c
    k_end = starts + k_dur
    end = int(max(k_end[-1], host_ts[-1] + host_dur[-1])) + 200_000
    corr = step * n + np.arange(n)
    names = np.array(["aten::linear", "aten::add", "aten::gelu", "aten::layer_norm",
                      "aten::mul", "aten::softmax"])[rng.integers(0, 6, n)]
    knames = np.array(["gemm_kernel", "elementwise_kernel", "gelu_kernel", "ln_kernel",
                       "mul_kernel", "softmax_kernel"])[rng.integers(0, 6, n)]
    extra_ts = np.array([t0, t0, t0 + 10_000, end - 150_000, end - 100_000, t0, t0, t0])
    extra_dur = np.array([end - t0, 45_000, 20_000, 100_000, 50_000, 0, 0, 0])
    cols = {
        "lane": ["thread 1"] * (2 * n) + ["stream 7"] * n + ["thread 1"] * 5
        + ["counters"] * 3,
        "lane_kind": ["host"] * (2 * n) + ["device"] * n + ["host"] * 5 + ["counter"] * 3,
        "kind": ["host_op"] * n + ["launch"] * n + ["kernel"] * n
        + ["step", "data_wait", "gc", "sync", "runtime", "counter", "counter", "counter"],
        "name": list(names) + ["cudaLaunchKernel"] * n + list(knames)
        + [f"ProfilerStep#{step}", "next(batch)", "gc", "cudaStreamSynchronize",
           "cudaMemcpyAsync", "data_queue", "host_queue", "device_queue"],
        "ts_ns": np.concatenate([host_ts, launch_ts, starts, extra_ts]).astype(np.int64),
        "dur_ns": np.concatenate([host_dur, launch_dur, k_dur, extra_dur]).astype(np.int64),
        "corr_id": np.concatenate([np.full(n, -1), corr, corr, np.full(8, -1)]),
        "stream": np.concatenate([np.full(2 * n, -1), np.full(n, 7), np.full(8, -1)]),
        "value": np.concatenate([np.full(3 * n + 5, np.nan), [2.0, 1.0, 1.0]]),
    }
    m = len(cols["kind"])
    cols["rank"] = np.zeros(m, np.int32)
    cols["step"] = np.full(m, step, np.int32)
    cols["corr_id"] = [None if v < 0 else int(v) for v in cols["corr_id"]]  # type: ignore[union-attr]
    cols["stream"] = [None if v < 0 else int(v) for v in cols["stream"]]  # type: ignore[union-attr]
    cols["value"] = [None if np.isnan(v) else float(v) for v in cols["value"]]  # type: ignore[union-attr]
    return cols, end


def write_synthetic(path: Path, events: int, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    steps = max(1, events // (3 * OPS_PER_STEP + 8))
    meta = TraceMeta(source="synthetic", device={"name": "h100"}, ranks=(0,))
    t, n = 0, 0
    with TraceWriter(path, meta) as w:
        for s in range(steps):
            cols, t = synth_step(s, t, rng)
            w.write(cols)
            n += len(cols["kind"])  # type: ignore[arg-type]
    return n


CHILD = """
import resource, sys, time, json
t = time.perf_counter()
import hermes
a = hermes.analyze(sys.argv[1])
dt = time.perf_counter() - t
print(json.dumps({"s": dt, "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "findings": [f.id for f in a.findings[:3]], "bound": a.bound}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", default="", help="write the trace here and keep it")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "synthetic.parquet"
        if not path.exists():
            t = time.perf_counter()
            n = write_synthetic(path, args.events)
            print(f"wrote {n:,} events to {path} in {time.perf_counter() - t:.1f} s "
                  f"({path.stat().st_size / 2**20:.0f} MiB)")
        else:
            import pyarrow.parquet as pq

            n = pq.ParquetFile(path).metadata.num_rows
        runs = []
        for i in range(args.repeat):
            out = subprocess.run([sys.executable, "-c", CHILD, str(path)], check=True,
                                 capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            runs.append(r)
            print(f"  run {i + 1}: {r['s']:.1f} s, peak RSS {r['rss_kb'] / 2**20:.2f} GiB, "
                  f"bound {r['bound']}, top {r['findings']}")
        med = statistics.median(r["s"] for r in runs)
        rss = max(r["rss_kb"] for r in runs) / 2**20
        print(f"hermes analyze, {n:,} events: median {med:.1f} s ({n / med / 1e6:.2f} M events/s; "
              f"target <= {TARGET_S:.0f} s: {med / TARGET_S:.2f}x of budget), peak RSS "
              f"{rss:.2f} GiB (target <= {TARGET_RSS_GB:.0f} GB: "
              f"{rss * 2**30 / (TARGET_RSS_GB * 1e9):.2f}x of budget)")
        print("HTA (HolisticTraceAnalysis 0.5) parses ~55k events/s (DOMAIN.md): "
              f"~{n / 55_000:.0f} s just to load {n:,} events, "
              f"{n / 55_000 / med:.1f}x our full analysis")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
