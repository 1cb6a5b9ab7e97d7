"""Synthetic multi-rank traces for benchmarks: N events over M ranks, a realistic mix of kinds.

    python benchmarks/synth.py OUT --ranks 16 --steps 5 --ops 200 [--format parquet|kineto]
    python benchmarks/synth.py --smoke   # 2 ranks x 2 steps x 10 ops, both formats, in a
                                         # temporary folder, the Parquet read back

Each rank's step is a training loop's worth of work: ``--ops`` host operators each launching a
kernel (``host_op`` -> ``launch`` -> ``kernel``, shared ``corr_id``, one in-order compute stream),
an input copy (``memcpy_h2d``) at the start, a gradient all-reduce (``collective`` on a link
lane, same ``coll_seq`` on every rank, started when the slowest rank's compute is done, so
ranks wait for each other as in data parallelism), a ``sync``, a ``data_wait`` for the next batch,
an occasional ``gc`` pause, the ``step`` annotation and three queue counters. Ranks differ by
seeded jitter (rank 1 of every 8 is 10 % slower: a slow-rank pattern for the cluster analyzers).

Output: a directory of one file per rank, as ``hermes emulate --ranks`` writes it: Hermes
Parquet (``rank-00000.parquet``...) or Kineto JSON (``rank-00000.pt.trace.json``) that
``hermes import`` reads. Events per rank per step: ``3 * ops + 11``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from hermes.trace.meta import TraceMeta
from hermes.trace.writer import TraceWriter

KERNELS = ("gemm_kernel", "elementwise_kernel", "gelu_kernel", "ln_kernel", "softmax_kernel")
OPS = ("aten::linear", "aten::add", "aten::gelu", "aten::layer_norm", "aten::softmax")
COMM_LANE = "stream 20"
STEP_GAP_NS = 100_000


def _compute(t0: int, ops: int, slow: float, rng: np.random.Generator
             ) -> dict[str, np.ndarray]:
    """Host ops, their launches and the kernels on one in-order stream, from ``t0``."""
    host_dur = (rng.integers(4_000, 12_000, ops) * slow).astype(np.int64)
    host_ts = t0 + 20_000 + np.concatenate([[0], np.cumsum(host_dur[:-1] + 500)])
    k_dur = (rng.integers(2_000, 15_000, ops) * slow).astype(np.int64)
    ready = host_ts + 4_000
    # in-order stream: start_i = max(ready_i, end_{i-1}) = c_i + running max(ready_j - c_j)
    c = np.cumsum(k_dur) - k_dur
    starts = np.maximum.accumulate(ready - c) + c
    pick = rng.integers(0, len(KERNELS), ops)
    return {"host_ts": host_ts, "host_dur": host_dur, "k_ts": starts, "k_dur": k_dur,
            "pick": pick}


def rank_step(rank: int, step: int, t0: int, comm_start: int, ops: int,
              comp: dict[str, np.ndarray]) -> tuple[dict[str, object], int]:
    """One rank's step as trace columns (``TraceWriter.write``); returns (columns, step end)."""
    n = ops
    comm_dur = 200_000 + 1_000 * (rank % 3)
    comm_end = comm_start + comm_dur
    end = comm_end + 60_000
    corr = (step * (n + 2) + np.arange(n)).astype(np.int64)
    cp_corr = step * (n + 2) + n
    host_ts, host_dur = comp["host_ts"], comp["host_dur"]
    names = [OPS[i] for i in comp["pick"]]
    knames = [KERNELS[i] for i in comp["pick"]]
    extras = [  # kind, lane, lane_kind, name, ts, dur
        ("step", "thread 1", "host", f"ProfilerStep#{step}", t0, end - t0),
        ("data_wait", "thread 1", "host", "enumerate(DataLoader)#_next_data", t0, 12_000),
        ("launch", "thread 1", "host", "cudaMemcpyAsync", t0 + 13_000, 3_000),
        ("memcpy_h2d", "stream 7", "device", "Memcpy HtoD (Pinned -> Device)", t0 + 15_000, 4_000),
        ("launch", "thread 1", "host", "ncclAllReduce", comm_start - 5_000, 4_000),
        ("collective", COMM_LANE, "link", "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
         comm_start, comm_dur),
        ("sync", "thread 1", "host", "cudaStreamSynchronize", comm_start, comm_dur + 5_000),
        ("gc", "thread 1", "host", "gc", end - 40_000, 30_000 if step % 4 == 3 else 5_000),
    ]
    kinds = ["host_op"] * n + ["launch"] * n + ["kernel"] * n + [e[0] for e in extras]
    cols: dict[str, object] = {
        "kind": kinds + ["counter"] * 3,
        "lane": ["thread 1"] * (2 * n) + ["stream 7"] * n + [e[1] for e in extras]
        + ["counters"] * 3,
        "lane_kind": ["host"] * (2 * n) + ["device"] * n + [e[2] for e in extras]
        + ["counter"] * 3,
        "name": names + ["cudaLaunchKernel"] * n + knames + [e[3] for e in extras]
        + ["data_queue", "host_queue", "device_queue"],
        "ts_ns": np.concatenate([host_ts, host_ts + 1_000, comp["k_ts"],
                                 [e[4] for e in extras], [t0] * 3]).astype(np.int64),
        "dur_ns": np.concatenate([host_dur, np.full(n, 2_500), comp["k_dur"],
                                  [e[5] for e in extras], [0] * 3]).astype(np.int64),
    }
    m = len(kinds) + 3
    corr_col: list[int | None] = [None] * n + corr.tolist() + corr.tolist() + [None] * (m - 3 * n)
    corr_col[3 * n + 2] = corr_col[3 * n + 3] = cp_corr
    corr_col[3 * n + 4] = corr_col[3 * n + 5] = cp_corr + 1
    cols["corr_id"] = corr_col
    stream: list[int | None] = [None] * (2 * n) + [7] * n + [None] * (m - 3 * n)
    stream[3 * n + 3], stream[3 * n + 5] = 7, 20
    cols["stream"] = stream
    cols["coll_group"] = ["world" if k == "collective" else None for k in cols["kind"]]  # type: ignore[attr-defined]
    cols["coll_seq"] = [step if k == "collective" else None for k in cols["kind"]]  # type: ignore[attr-defined]
    cols["coll_bytes"] = [64 << 20 if k == "collective" else None for k in cols["kind"]]  # type: ignore[attr-defined]
    cols["value"] = [None] * (m - 3) + [2.0, 1.0, 1.0]
    cols["rank"] = np.full(m, rank, np.int32)
    cols["step"] = np.full(m, step, np.int32)
    return cols, end


def rank_steps(rank: int, steps: int, ops: int, seed: int = 0) -> list[dict[str, object]]:
    """Every step of one rank. The collective of step s starts when the slowest rank's compute
    of step s is done: each rank's compute is drawn from a per-(rank, step) seed, and the
    slowest one is bounded by the slow-rank factor, so no rank needs the others' draws."""
    out = []
    t = 0
    for s in range(steps):
        slow = 1.1 if rank % 8 == 1 else 1.0
        rng = np.random.default_rng([seed, rank, s])
        comp = _compute(t, ops, slow, rng)
        mine = int(max(comp["k_ts"][-1] + comp["k_dur"][-1], comp["host_ts"][-1]))
        # bound on any rank's compute end: ops x (max host op 12 us x 1.1 + 0.5 us gap) + start
        comm_start = max(mine, t + 20_000 + int(ops * (12_000 * 1.1 + 500)) + 20_000)
        cols, end = rank_step(rank, s, t, comm_start, ops, comp)
        out.append(cols)
        t = end + STEP_GAP_NS
    return out


_CAT = {"host_op": "cpu_op", "launch": "cuda_runtime", "sync": "cuda_runtime",
        "kernel": "kernel", "collective": "kernel", "memcpy_h2d": "gpu_memcpy",
        "data_wait": "user_annotation", "gc": "python_function", "step": "user_annotation"}


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def kineto_records(cols: dict[str, object]) -> list[str]:
    """One step's columns as Kineto trace-event JSON records (host pid 1, device pid 0)."""
    out = []
    rows = zip(cols["kind"], cols["name"], cols["ts_ns"], cols["dur_ns"],  # type: ignore[call-overload]
               cols["corr_id"], cols["stream"], cols["value"], strict=True)
    for kind, name, ts, dur, corr, stream, value in rows:
        q = json.dumps(str(name))
        if kind == "counter":
            out.append(f'{{"ph": "C", "cat": "counter", "name": {q}, "pid": 1, "tid": 1, '
                       f'"ts": {_us(int(ts))}, "args": {{"value": {value}}}}}')
            continue
        device = stream is not None
        args = {"correlation": corr} if corr is not None else {}
        if device:
            args.update({"device": 0, "stream": int(stream)})
        out.append(f'{{"ph": "X", "cat": "{_CAT[str(kind)]}", "name": {q}, '
                   f'"pid": {0 if device else 1}, "tid": {int(stream) if device else 1}, '
                   f'"ts": {_us(int(ts))}, "dur": {_us(int(dur))}, "args": {json.dumps(args)}}}')
    return out


def write_rank(out: Path, rank: int, world: int, steps: int, ops: int, fmt: str,
               seed: int = 0) -> int:
    """One rank's file under ``out``; returns its event count."""
    cols = rank_steps(rank, steps, ops, seed)
    n = sum(len(c["kind"]) for c in cols)  # type: ignore[arg-type]
    if fmt == "parquet":
        meta = TraceMeta(source="synthetic", device={"name": "h100"}, ranks=(rank,),
                         extra={"world_size": world})
        with TraceWriter(out / f"rank-{rank:05d}.parquet", meta) as w:
            for c in cols:
                w.write(c)
        return n
    with open(out / f"rank-{rank:05d}.pt.trace.json", "w") as f:
        f.write(f'{{"schemaVersion": 1, "distributedInfo": {{"rank": {rank}, '
                f'"world_size": {world}}}, "deviceProperties": [{{"id": 0, '
                f'"name": "NVIDIA H100 80GB HBM3"}}], "traceEvents": [\n')
        f.write(",\n".join(r for c in cols for r in kineto_records(c)))
        f.write("\n]}\n")
    return n


def write(out: Path, ranks: int, steps: int, ops: int, fmt: str = "parquet",
          seed: int = 0) -> int:
    """A directory of ``ranks`` per-rank files; returns the number of events written."""
    out.mkdir(parents=True, exist_ok=True)
    return sum(write_rank(out, r, ranks, steps, ops, fmt, seed) for r in range(ranks))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--ops", type=int, default=200, help="host op/launch/kernel triples a step")
    ap.add_argument("--events", type=int, default=0,
                    help="total events instead of --ops (split evenly over ranks and steps)")
    ap.add_argument("--format", choices=("parquet", "kineto"), default="parquet")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true",
                    help="2 ranks x 2 steps x 10 ops, both formats, into a temporary folder")
    a = ap.parse_args(argv)
    if a.smoke:
        return smoke()
    if a.out is None:
        ap.error("the following arguments are required: out")
    ops = max(1, (a.events // (a.ranks * a.steps) - 11) // 3) if a.events else a.ops
    t = time.perf_counter()
    n = write(a.out, a.ranks, a.steps, ops, a.format, a.seed)
    print(f"wrote {n:,} events ({a.ranks} ranks x {a.steps} steps x {3 * ops + 11}) to {a.out} "
          f"in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return 0


def smoke() -> int:
    """Both formats, tiny, into a temporary folder; the Parquet ranks read back with Hermes."""
    import tempfile

    import hermes

    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("parquet", "kineto"):
            n = write(Path(tmp) / fmt, 2, 2, 10, fmt)
            print(f"wrote {n:,} events (2 ranks x 2 steps x {3 * 10 + 11}) as {fmt}")
        tr = hermes.load(Path(tmp) / "parquet")
        print(f"read back: ranks {list(tr.ranks)}, {len(tr.events):,} events")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
