"""Speed and memory of Hermes end to end against HolisticTraceAnalysis 0.5 (issue 15).

    python benchmarks/analysis_speed.py                     # items 1-3
    python benchmarks/analysis_speed.py --items 1 --repeat 1 --hta-repeat 1   # the ~1 GB trace
    python benchmarks/analysis_speed.py --items 2,3 --small-events 50000 --events 2000000
    python benchmarks/analysis_speed.py --items 4,5 --repeat 5 --hta-repeat 3  # real traces
    python benchmarks/analysis_speed.py --smoke     # items 1-5 tiny, one run each, no HTA

Every figure is a child process measured from the parent: wall seconds around it (interpreter
start-up and imports included) and its own peak RSS (``ru_maxrss`` from ``wait4`` under a small
launcher, ``childproc.py``: a child started straight from this process would count this
process's memory too), the same way
for Hermes and for HTA (in its own venv, ``benchmarks/hta_env.py``); medians over ``--repeat``
(Hermes) and ``--hta-repeat`` (HTA) runs. HTA is timed on load + temporal breakdown + comm/comp
overlap (its critical-path analysis does not finish on these sizes); Hermes on one
``hermes analyze FILE`` process: the import in-process, every analyzer (critical path
included), advice and the text report. The package is byte-compiled first, as an installed
wheel is.

1. a ~``--big-mb`` MB Kineto JSON (``import_speed.generate``, cached in benchmarks/.cache):
   targets Hermes >= 10x faster and <= 1/5 of HTA's peak RSS;
2. a ~``--small-events`` Kineto ``.json.gz`` (``synth.py``, one rank, 10 steps): targets
   <= 1 s and >= 5x faster than HTA;
3. ``hermes.analyze`` of a ``--events`` single-rank Parquet trace (steps of host ops, launches,
   kernels with correlation ids, a sync, a data wait, GC, queue counters; targets <= 30 s,
   <= 3 GB); ``--per-analyzer`` adds one in-process run timed analyzer by analyzer.

4. every shared Kineto trace of >= 100k events (``real_speed.py``): ``hermes analyze FILE``
   against HTA on each; targets >= 8x faster and <= 0.5 of HTA's peak RSS on every file;
5. a ~``--big-mb`` MB trace of repeated real steps (``real_speed.repeat_steps``): targets
   >= 15x faster, <= 0.2 of HTA's peak RSS, <= 12 s.

``--hta-sizes`` adds the older comparison at smaller sizes: ``hermes import`` + ``hermes.analyze``
(two processes) against HTA on the same synthetic Kineto JSON.

``--smoke`` (the test suite's check that the command runs): items 1-5 on tiny inputs (one step
of the item-1 generator, ~2,000 events, 4 steps of 500 operators, the smallest shared Kineto
trace, 2 MB of repeated real steps), one run each, HTA skipped
with a printed line; the same lines, no target judged.
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

TARGET_S = 30.0
TARGET_RSS_GB = 3.0
OPS_PER_STEP = 20_000  # -> about 3 events per op


def synth_step(step: int, t0: int, rng: np.random.Generator, ops: int = OPS_PER_STEP
               ) -> tuple[dict[str, object], int]:
    """One step's columns: ``ops`` (host op, launch, kernel) triples plus extras."""
    n = ops
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


def write_synthetic(path: Path, events: int, seed: int = 0, ops: int = OPS_PER_STEP) -> int:
    """Steps of ``ops`` triples (``synth_step``), as many whole steps as ``events`` allows (at
    least one), written with ``TraceWriter``; the number of events."""
    rng = np.random.default_rng(seed)
    steps = max(1, events // (3 * ops + 8))
    meta = TraceMeta(source="synthetic", device={"name": "h100"}, ranks=(0,))
    t, n = 0, 0
    with TraceWriter(path, meta) as w:
        for s in range(steps):
            cols, t = synth_step(s, t, rng, ops)
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

# HTA 0.5 in its venv: load + temporal breakdown + comm/comp overlap of one Kineto file.
HTA_CHILD = """
import json, logging, os, sys, tempfile, time, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
d = tempfile.mkdtemp()
os.symlink(os.path.abspath(sys.argv[1]), os.path.join(d, os.path.basename(sys.argv[1])))
ta = TraceAnalysis(trace_dir=d)
t_load = time.perf_counter() - t
tb = ta.get_temporal_breakdown(visualize=False)
ov = ta.get_comm_comp_overlap(visualize=False)
r = tb.to_dict("records")[0]
print(json.dumps({"s": time.perf_counter() - t, "load_s": t_load,
                  "idle_pct": float(r["idle_time_pctg"]),
                  "compute_pct": float(r["compute_time_pctg"]),
                  "overlap_pct": float(ov.to_dict("records")[0]["comp_comm_overlap_pctg"])}))
"""

HERMES_ANALYZE_CHILD = """
import json, sys, time
t = time.perf_counter()
import hermes
a = hermes.analyze(sys.argv[1])
o = a.breakdown.iloc[0]
print(json.dumps({"s": time.perf_counter() - t, "idle_pct": float(o["idle_pct"]),
                  "compute_pct": float(o["compute_pct"]),
                  "overlap_pct": float(o["comm_comp_overlap_pct"])}))
"""


def run_measured(cmd: list[str], env: dict[str, str] | None = None
                 ) -> tuple[dict[str, float], float]:
    """Run a child (``env``: added to this environment); (its last stdout line as JSON -- or
    ``{"s": wall seconds}`` when it prints none --, its own peak RSS in GiB: see
    ``childproc``, the parent's size is not counted)."""
    from childproc import run_child

    c = run_child(cmd, env)
    if c.code != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed: {c.stderr[-2000:]}")
    lines = c.stdout.strip().splitlines()
    rec = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {"s": c.wall_s}
    return rec, c.rss_gib


# -- Kineto JSON of the same synthetic trace ------------------------------------------------
_CAT = {"host_op": "cpu_op", "launch": "cuda_runtime", "kernel": "kernel",
        "step": "user_annotation", "data_wait": "user_annotation", "gc": "cpu_op",
        "sync": "cuda_runtime", "runtime": "cuda_runtime"}


def _us(ns: int) -> str:
    """Exact microseconds text of integer nanoseconds (Kineto's ts/dur unit)."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def kineto_events(cols: dict[str, object]) -> list[str]:
    """One step's columns (``synth_step``) as Kineto trace-event JSON records."""
    out = []
    for kind, name, ts, dur, corr, stream, value in zip(
            cols["kind"], cols["name"], cols["ts_ns"], cols["dur_ns"],
            cols["corr_id"], cols["stream"], cols["value"], strict=True):
        name = json.dumps(str(name))
        if kind == "counter":
            out.append(f'{{"ph": "C", "cat": "counter", "name": {name}, "pid": 1, "tid": 1, '
                       f'"ts": {_us(int(ts))}, "args": {{"value": {value}}}}}')
            continue
        if kind == "kernel":
            pid, tid = 0, int(stream)
            args = f'{{"device": 0, "stream": {int(stream)}, "correlation": {corr}}}'
        else:
            pid, tid = 1, 1
            args = f'{{"correlation": {corr}}}' if corr is not None else "{}"
        out.append(f'{{"ph": "X", "cat": "{_CAT[str(kind)]}", "name": {name}, "pid": {pid}, '
                   f'"tid": {tid}, "ts": {_us(int(ts))}, "dur": {_us(int(dur))}, '
                   f'"args": {args}}}')
    return out


def write_kineto(path: Path, events: int, seed: int = 0) -> int:
    """The synthetic trace of ``write_synthetic(events, seed)`` as one rank's Kineto JSON."""
    rng = np.random.default_rng(seed)
    steps = max(1, events // (3 * OPS_PER_STEP + 8))
    n, t = 0, 0
    with open(path, "w") as f:
        f.write('{"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1}, '
                '"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], '
                '"traceEvents": [\n')
        for s in range(steps):
            cols, t = synth_step(s, t, rng)
            recs = kineto_events(cols)
            f.write(("" if s == 0 else ",\n") + ",\n".join(recs))
            n += len(recs)
        f.write("\n]}\n")
    return n


def compare_hta(sizes: list[int], repeat: int, tmp: Path) -> None:
    """HTA and Hermes on the same Kineto JSON at each size (see the module docstring)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from hta_env import ensure_hta_venv

    hta_py = str(ensure_hta_venv())
    print(f"\nHTA 0.5 beside Hermes on the same Kineto JSON (smaller sizes than the 10M run; "
          f"{repeat} run(s) each, medians):")
    print(f"  {'events':>10} {'JSON MB':>8} | {'HTA s':>7} {'HTA GiB':>8} | {'import s':>8} "
          f"{'GiB':>5} {'analyze s':>9} {'GiB':>5} {'total s':>7} | {'time ratio':>10} "
          f"{'RSS ratio':>9} | idle% HTA/ours")
    for size in sizes:
        js = tmp / f"synthetic_{size}.json"
        n = write_kineto(js, size)
        pq_path = tmp / f"synthetic_{size}.parquet"
        hta, imp, ana = [], [], []
        for _ in range(repeat):
            hta.append(run_measured([hta_py, "-c", HTA_CHILD, str(js)]))
            # the whole `hermes import` process (wall time, interpreter start included)
            imp.append(run_measured([sys.executable, "-m", "hermes.cli", "import", str(js),
                                     "--out", str(pq_path)]))
            ana.append(run_measured([sys.executable, "-c", HERMES_ANALYZE_CHILD, str(pq_path)]))

        def med(rs: list[tuple[dict[str, float], float]]) -> tuple[float, float]:
            return statistics.median(r[0]["s"] for r in rs), statistics.median(r[1] for r in rs)

        (hs, hm), (is_, im), (as_, am) = med(hta), med(imp), med(ana)
        ours_s, ours_m = is_ + as_, max(im, am)
        print(f"  {n:>10,} {js.stat().st_size / 1e6:>8.0f} | {hs:>7.1f} {hm:>8.2f} | {is_:>8.1f} "
              f"{im:>5.2f} {as_:>9.1f} {am:>5.2f} {ours_s:>7.1f} | {ours_s / hs:>10.3f} "
              f"{ours_m / hm:>9.3f} | {hta[0][0]['idle_pct']:.2f}/{ana[0][0]['idle_pct']:.2f}")
        js.unlink()
    print("  (ratios are Hermes / HTA: Hermes = import + the full analysis, every analyzer and "
          "the critical path;\n   HTA = load + temporal breakdown + comm/comp overlap only; peak "
          "RSS of each child process)")


# -- end to end against HTA (issue 15): one `hermes analyze FILE` process per run -------------
BIG_SPEEDUP, BIG_RSS_SHARE = 10.0, 0.2  # item 1: >= 10x faster, <= 1/5 of HTA's peak RSS
SMALL_S, SMALL_SPEEDUP = 1.0, 5.0  # item 2: <= 1 s end to end, >= 5x faster than HTA


def _hermes_exe() -> list[str]:
    exe = Path(sys.executable).with_name("hermes")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "hermes.commands._launch"]


def _wall(cmd: list[str], repeat: int) -> tuple[float, float, list[float]]:
    """(median wall seconds of the whole child process, interpreter start-up included, median
    peak RSS GiB from ``wait4``, every run's seconds)."""
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        _, rss = run_measured(cmd)
        runs.append((time.perf_counter() - t, rss))
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
            [r[0] for r in runs])


def end_to_end(label: str, src: Path, events: int, repeat: int, hta_repeat: int,
               targets: str, hermes: tuple[float, float, list[float]] | None = None
               ) -> tuple[float, float, float]:
    """`hermes analyze SRC` (one process: the import in-process, every analyzer, the report)
    against HTA's load + temporal breakdown + comm/comp overlap on the same file; prints both
    and returns (Hermes median seconds, speed-up HTA/Hermes, Hermes/HTA peak RSS). ``hermes``:
    Hermes' (median s, median GiB, runs) measured already."""
    hs, hm, hruns = hermes or _wall([*_hermes_exe(), "analyze", str(src)], repeat)
    mb = src.stat().st_size / 1e6
    print(f"\n{label}: {src.name} ({mb:,.0f} MB on disk, {events:,} events)")
    print(f"  hermes analyze  {len(hruns)} run(s): median {hs:7.2f} s  peak RSS {hm:6.2f} GiB  "
          f"runs {' '.join(f'{s:.2f}' for s in hruns)}")
    if hta_repeat <= 0:  # --no-hta: Hermes alone
        return hs, float("nan"), float("nan")
    from hta_env import ensure_hta_venv

    ts, tm, truns = _wall([str(ensure_hta_venv()), "-c", HTA_CHILD, str(src)], hta_repeat)
    print(f"  HTA 0.5         {len(truns)} run(s): median {ts:7.2f} s  peak RSS {tm:6.2f} GiB  "
          f"runs {' '.join(f'{s:.2f}' for s in truns)}")
    print(f"  speed-up HTA/Hermes {ts / hs:.1f}x, peak RSS Hermes/HTA {hm / tm:.3f}  "
          f"(targets: {targets})")
    return hs, ts / hs, hm / tm


def big_trace(mb: int, repeat: int, hta_repeat: int) -> None:
    """Item 1: a ~``mb`` MB Kineto JSON (``import_speed.generate``: ops with full args, flows,
    launches, kernels, NCCL kernels, memcpys; cached under benchmarks/.cache)."""
    from import_speed import CACHE, generate

    CACHE.mkdir(parents=True, exist_ok=True)
    src = generate(CACHE / f"synthetic_kineto_{mb}MB.json", mb)
    with open(src, "rb") as fh:  # every event of this generator writes '"ph": ' once
        events = sum(block.count(b'"ph": ') for block in iter(lambda: fh.read(1 << 24), b""))
    _, speed, rss = end_to_end(f"1. ~{mb} MB Kineto trace, end to end", src, events, repeat,
                            hta_repeat, f">= {BIG_SPEEDUP:.0f}x, <= {BIG_RSS_SHARE}")
    if hta_repeat > 0:
        print(f"  item 1: speed {'met' if speed >= BIG_SPEEDUP else 'NOT met'}, memory "
              f"{'met' if rss <= BIG_RSS_SHARE else 'NOT met'}")


def small_trace(events: int, repeat: int, hta_repeat: int, tmp: Path) -> None:
    """Item 2: ``synth.py``'s one-rank Kineto trace of about ``events`` events (10 steps of
    host op / launch / kernel triples, an input copy, an all-reduce, sync, data wait, GC,
    counters), gzipped."""
    import gzip
    import shutil

    from synth import write

    ops = max(1, (events // 10 - 11) // 3)
    n = write(tmp, 1, 10, ops, fmt="kineto")
    raw = tmp / "rank-00000.pt.trace.json"
    src = tmp / "small.pt.trace.json.gz"
    with open(raw, "rb") as fi, gzip.open(src, "wb", compresslevel=6) as fo:
        shutil.copyfileobj(fi, fo)
    raw.unlink()
    # the command with and without the forked import, alternated (the machine's speed drifts)
    cmd = [*_hermes_exe(), "analyze", str(src)]
    both: list[list[tuple[float, float]]] = [[], []]
    for _ in range(repeat):
        for runs, env in zip(both, (None, {"HERMES_FORKED_IMPORT": "0"}), strict=True):
            t = time.perf_counter()
            _, rss = run_measured(cmd, env)
            runs.append((time.perf_counter() - t, rss))
    (forked, one) = ((statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
                      [r[0] for r in runs]) for runs in both)
    hs, speed, _ = end_to_end("2. small Kineto trace, end to end", src, n, repeat, hta_repeat,
                              f"<= {SMALL_S:.0f} s, >= {SMALL_SPEEDUP:.0f}x", hermes=forked)
    speed_met = "not measured (--no-hta)" if hta_repeat <= 0 else \
        "met" if speed >= SMALL_SPEEDUP else "NOT met"
    print(f"  item 2: time {'met' if hs <= SMALL_S else 'NOT met'}, speed-up {speed_met}")
    print(f"  without the forked import (HERMES_FORKED_IMPORT=0, alternated with the runs "
          f"above): median {one[0]:.2f} s  runs {' '.join(f'{s:.2f}' for s in one[2])}  "
          f"(forked / not {hs / one[0]:.3f})")
    floor, _, _ = _wall([*_hermes_exe(), "--version"], repeat)
    pd_s, _, _ = _wall([sys.executable, "-c", "import pandas, pyarrow.parquet"], repeat)
    print(f"  floors in this run: a `hermes --version` process {floor:.2f} s, a Python process "
          f"importing pandas + pyarrow.parquet {pd_s:.2f} s")


def per_analyzer(path: Path) -> None:
    """One in-process run, timed stage by stage: the load, each rank analyzer (in the executor's
    order, as ``run.run_rank`` calls them) and the cluster reduce; seconds and share of the
    total, largest first."""
    from hermes.analyzers.common.steps import drop_warmup, step_windows
    from hermes.analyzers.engine.base import AnalyzerResult, RankContext, ordered
    from hermes.analyzers.engine.run import _reduce, load_analyzers, load_rank
    from hermes.trace.reader import read_ranks

    load_analyzers()
    times: dict[str, float] = {}
    t = time.perf_counter()
    tr = load_rank(path, (read_ranks(path) or (0,))[0])  # (as the executor loads a rank)
    events, _ = drop_warmup(tr.events)
    times["load"] = time.perf_counter() - t
    results: dict[str, AnalyzerResult] = {}
    for a in ordered("rank"):
        t = time.perf_counter()
        results[a.name] = a.fn(RankContext(rank=0, events=events, meta=tr.meta, results=results))
        times[a.name] = time.perf_counter() - t
    t = time.perf_counter()
    results["steps"] = AnalyzerResult("steps", tables={"windows": step_windows(events)})
    _reduce({0: results}, tr.meta)
    times["steps + cluster reduce"] = time.perf_counter() - t
    total = sum(times.values())
    print(f"per analyzer, {len(events):,} events, one in-process run ({total:.1f} s in all):")
    for name, s in sorted(times.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<24} {s:7.2f} s  {100 * s / total:5.1f} %")


def large(args: argparse.Namespace, tmp: Path) -> None:
    """Item 3: ``hermes.analyze`` of the ``--events`` single-rank Parquet trace, in a child."""
    path = Path(args.keep) if args.keep else tmp / "synthetic.parquet"
    if not path.exists():
        t = time.perf_counter()
        n = write_synthetic(path, args.events, ops=args.ops)
        print(f"wrote {n:,} events to {path} in {time.perf_counter() - t:.1f} s "
              f"({path.stat().st_size / 2**20:.0f} MiB)")
    else:
        import pyarrow.parquet as pq

        n = pq.ParquetFile(path).metadata.num_rows
    print(f"\n3. {n:,} events, one rank, hermes.analyze in a child process:")
    runs = []
    for i in range(args.repeat):
        r, _ = run_measured([sys.executable, "-c", CHILD, str(path)])
        runs.append(r)
        print(f"  run {i + 1}: {r['s']:.1f} s, peak RSS {r['rss_kb'] / 2**20:.2f} GiB, "
              f"bound {r['bound']}, top {r['findings']}")
    if runs:
        med = statistics.median(r["s"] for r in runs)
        rss = statistics.median(r["rss_kb"] for r in runs) / 2**20
        print(f"hermes analyze, {n:,} events: median {med:.1f} s ({n / med / 1e6:.2f} M "
              f"events/s; target <= {TARGET_S:.0f} s: {med / TARGET_S:.2f}x of budget), "
              f"median peak RSS {rss:.2f} GiB (target <= {TARGET_RSS_GB:.0f} GB: "
              f"{rss * 2**30 / (TARGET_RSS_GB * 1e9):.2f}x of budget)")
    if args.per_analyzer:
        per_analyzer(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", default="1,2,3,4,5",
                    help="which items to run: 1 (~1 GB synthetic Kineto end to end vs HTA), 2 "
                         "(small synthetic Kineto .json.gz vs HTA), 3 (10M events), 4 (every "
                         "shared real Kineto trace of >= 100k events vs HTA), 5 (~--big-mb MB "
                         "of repeated real steps vs HTA)")
    ap.add_argument("--big-mb", type=int, default=1024, help="item 1: Kineto JSON size (MB)")
    ap.add_argument("--small-events", type=int, default=200_000,
                    help="item 2: events of the small trace")
    ap.add_argument("--events", type=int, default=10_000_000, help="item 3: events")
    ap.add_argument("--repeat", type=int, default=3, help="Hermes runs per item (median)")
    ap.add_argument("--keep", default="", help="item 3: write the trace here and keep it")
    ap.add_argument("--hta-sizes", default="",
                    help="also the older comparison at these event counts (comma-separated): "
                         "`hermes import` + hermes.analyze vs HTA (~25 s and ~1.3 GiB per "
                         "million events)")
    ap.add_argument("--hta-repeat", type=int, default=3,
                    help="HTA runs per file (median); 1 for the ~1 GB trace, which takes minutes")
    ap.add_argument("--no-hta", action="store_true",
                    help="skip every HTA comparison (item 1 then times Hermes alone)")
    ap.add_argument("--per-analyzer", action="store_true",
                    help="item 3: also time the load and each analyzer in one in-process run")
    ap.add_argument("--smoke", action="store_true",
                    help="items 1-3 on tiny inputs, one run each, HTA skipped (seconds)")
    args = ap.parse_args(argv)
    args.ops = OPS_PER_STEP
    if args.smoke:
        args.items, args.big_mb, args.small_events, args.repeat = "1,2,3,4,5", 1, 2_000, 1
        args.events, args.ops, args.hta_sizes, args.per_analyzer = 4 * 1508, 500, "", False
        args.no_hta = True
        print("smoke run: HTA skipped (HTA 0.5 runs in its own venv, benchmarks/hta_env.py); "
              "targets not judged")
    items = {x.strip() for x in args.items.split(",")}
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    hta_repeat = max(1, args.hta_repeat)
    # byte-compile the package as an installed wheel has it (PYTHONDONTWRITEBYTECODE would
    # otherwise make every Hermes process compile its modules again; HTA's venv has its .pyc)
    repo = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    *(str(repo / d) for d in ("hermes", "collectors", "analyzers", "rules"))],
                   check=True, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as tmp:
        if "1" in items:  # with --no-hta: Hermes alone (its time and peak RSS)
            big_trace(args.big_mb, max(1, args.repeat), 0 if args.no_hta else hta_repeat)
        if "2" in items:  # with --no-hta: Hermes alone
            small_trace(args.small_events, max(1, args.repeat), 0 if args.no_hta else hta_repeat,
                        Path(tmp))
        if "3" in items:
            large(args, Path(tmp))
        if "4" in items or "5" in items:
            import real_speed

            h = 0 if args.no_hta else hta_repeat
            if "4" in items:
                real_speed.real_files(max(1, args.repeat), h, smoke=args.smoke)
            if "5" in items:
                real_speed.big_real(2 if args.smoke else args.big_mb, max(1, args.repeat), h,
                                    smoke=args.smoke)
        if args.hta_sizes and not args.no_hta:
            sizes = [int(x) for x in args.hta_sizes.split(",") if x.strip()]
            compare_hta(sizes, hta_repeat, Path(tmp))
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
