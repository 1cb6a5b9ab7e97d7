"""Import speed and memory of ``hermes import`` against HolisticTraceAnalysis 0.5's trace load.

Runs the whole ``hermes import`` process (``python -m hermes.cli import SRC --out X``) several
times on the MTIA trace of ``shared/traces/hta`` and on a synthetic Kineto trace of
``--size-mb`` MB that it generates into ``benchmarks/.cache/`` (a realistic mix of cpu_op,
cuda_runtime, kernel, memcpy/memset, flows and ProfilerStep annotations, with args), and HTA's
``TraceAnalysis(trace_dir=...)`` on the same files in its own virtual environment. Prints the
medians: seconds, source events/s, MB/s of JSON text, peak RSS (``wait4`` of each child), and
the ratios Hermes/HTA.

    python benchmarks/import_speed.py                 # MTIA + 1 GB synthetic, 3 runs each
    python benchmarks/import_speed.py --size-mb 256 --runs 5 --hta-runs 3 --hta-runs-synthetic 1
    python benchmarks/import_speed.py --smoke     # one step of the synthetic trace (~3 MB, in
                                                  # a temporary folder), one run, HTA skipped

``--source FILE --before PYTHON`` instead times this tree against another checkout's
interpreter (its venv's ``python``) on one file, start-up included: ``hermes import FILE`` and
``hermes analyze FILE -o X``, the two interpreters alternated run by run, medians and the ratio
this/before of each (the figures of issue 15's 200k-event trace):

    python benchmarks/import_speed.py --source /tmp/s200/small.pt.trace.json.gz \
        --before /work/main/.venv/bin/python --runs 7

``--helpers FILE...`` times ``hermes import`` (``--analyze``: and ``hermes analyze``) of each
file read by one process against the default, a helper process reading a big file's second
half (``HERMES_IMPORT_HELPERS=0`` vs unset), alternated:

    python benchmarks/import_speed.py --helpers /tmp/small.pt.trace.json.gz --runs 7

``--native FILE...`` the same with the importer's column passes in Python
(``HERMES_NO_EXTENSION=1``) against compiled (``hermes.trace._columns``, the default):

    python benchmarks/import_speed.py --native /tmp/small.pt.trace.json.gz --runs 7 --analyze
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache"
SHARED = Path(os.environ.get("HERMES_SHARED", REPO.parent / "shared")) / "traces"
MTIA = SHARED / "hta" / "mtia_trace_single_rank" / "mtia_rank_0.json.gz"

sys.path.insert(0, str(HERE))
from hta_env import ensure_hta_venv  # noqa: E402

HTA_LOAD = """
import sys, logging
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1])
"""


def run_measured(cmd: list[str], cwd: Path | None = None) -> tuple[float, float, str]:
    """Run a command; (wall seconds, peak RSS MB of that child, stdout)."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:4])}... failed ({proc.returncode}): {err[-2000:]}")
        out.seek(0)
        return seconds, usage.ru_maxrss / 1024, out.read().decode()


# -- synthetic trace ----------------------------------------------------------------------
_KERNELS = ["void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>",
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"]
_OPS = ["aten::add", "aten::mm", "aten::sum", "record_param_comms"]


def _op_events(i: int, ts: float, rng: random.Random) -> tuple[list[str], float]:
    """One operator: cpu_op, launch, kernel and the ac2g flow pair (JSON text, pretty-ish)."""
    k = i % 4
    corr = 1_000_000 + i
    dims = [[rng.randint(1, 4096), rng.randint(1, 4096)], [rng.randint(1, 4096)]]
    op = (f'{{"ph": "X", "cat": "cpu_op", "name": "{_OPS[k]}", "pid": 100, "tid": 100, '
          f'"ts": {ts:.3f}, "dur": 21.517, "args": {{"External id": {i}, "Sequence number": {i}, '
          f'"Fwd thread id": 0, "Record function id": 0, "Input Dims": {json.dumps(dims)}, '
          f'"Input type": ["c10::BFloat16", "c10::BFloat16"], "Input Strides": [[4096, 1], [1]], '
          f'"Concrete Inputs": ["", ""], "Ev Idx": {i}}}}}')
    launch = (f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, '
              f'"tid": 100, "ts": {ts + 5.25:.3f}, "dur": 6.125, "args": {{"External id": {i}, '
              f'"cbid": 211, "correlation": {corr}}}}}')
    coll = (', "Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": '
            '1048576, "Group size": 8, "dtype": "BFloat16", "Process Group Name": "0", '
            '"Process Group Description": "default_pg"') if k == 3 else ""
    kernel = (f'{{"ph": "X", "cat": "kernel", "name": "{_KERNELS[k]}", "pid": 0, "tid": 7, '
              f'"ts": {ts + 30.5:.3f}, "dur": {rng.uniform(2, 200):.3f}, "args": {{'
              f'"External id": {i}, "queued": 0, "device": 0, "context": 1, "stream": 7, '
              f'"correlation": {corr}, "registers per thread": 128, "shared memory": 0, '
              f'"blocks per SM": 1.5, "warps per SM": 12.0, "grid": [264, 1, 1], '
              f'"block": [256, 1, 1], "est. achieved occupancy %": 75{coll}}}}}')
    flows = (f'{{"ph": "s", "id": {corr}, "pid": 100, "tid": 100, "ts": {ts + 5.25:.3f}, '
             f'"cat": "ac2g", "name": "ac2g"}}, {{"ph": "f", "id": {corr}, "pid": 0, "tid": 7, '
             f'"ts": {ts + 30.5:.3f}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}')
    return [op, launch, kernel, flows], ts + 25.0


def generate(path: Path, size_mb: int) -> Path:
    """Write a synthetic Kineto trace of about ``size_mb`` MB (cached between runs)."""
    if path.exists() and path.stat().st_size >= size_mb * 1e6 * 0.95:
        return path
    rng = random.Random(0)
    tmp = path.with_suffix(".tmp")
    target = size_mb * 1_000_000
    base = 1_700_000_000_000_000.0  # epoch-scale microseconds, as older PyTorch writes them
    with open(tmp, "w") as fh:
        fh.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": '
                 '"NVIDIA H100 80GB HBM3", "totalGlobalMem": 85017493504, "numSms": 132}],\n'
                 '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},\n'
                 '  "traceEvents": [\n')
        fh.write('  {"name": "thread_name", "ph": "M", "ts": 0, "pid": 100, "tid": 100, '
                 '"args": {"name": "thread 100 (python)"}},\n')
        written, i, step, ts = 0, 0, 0, base
        while written < target:
            parts = [f'  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", '
                     f'"pid": 100, "tid": 100, "ts": {ts:.3f}, "dur": {25.0 * 2000:.3f}, '
                     f'"args": {{"External id": {i}}}}}']
            for _ in range(2000):
                evs, ts = _op_events(i, ts, rng)
                parts.extend(evs)
                i += 1
            parts.append('{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> '
                         f'Device)", "pid": 0, "tid": 7, "ts": {ts:.3f}, "dur": 12.0, "args": '
                         '{"bytes": 1048576}}')
            text = ",\n  ".join(parts) + ",\n  "
            fh.write(text)
            written += len(text)
            step += 1
        fh.write('{"ph": "i", "name": "Record Window End", "s": "g", "pid": "", "tid": "", '
                 f'"ts": {ts:.3f}}}\n  ],\n  "traceName": "synthetic"\n}}\n')
    tmp.replace(path)
    return path


# -- measurement --------------------------------------------------------------------------
def json_megabytes(path: Path) -> float:
    if not path.name.endswith(".gz"):
        return path.stat().st_size / 1e6
    n = 0
    with gzip.open(path, "rb") as fh:
        while block := fh.read(1 << 24):
            n += len(block)
    return n / 1e6


def bench_hermes(src: Path, runs: int) -> dict[str, float]:
    times, rss, events = [], [], 0
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        for _ in range(runs):
            out = Path(tmp) / "out.parquet"
            s, m, stdout = run_measured([sys.executable, "-m", "hermes.cli", "import", str(src),
                                         "--out", str(out), "--json"])
            events = sum(json.loads(stdout)["by_source_category"].values())
            times.append(s)
            rss.append(m)
            out.unlink()
    return {"s": statistics.median(times), "rss": statistics.median(rss), "events": events,
            "runs": runs}


def bench_hta(src: Path, runs: int) -> dict[str, float]:
    py = ensure_hta_venv()
    times, rss = [], []
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        (Path(tmp) / src.name).symlink_to(src.resolve())
        for _ in range(runs):
            s, m, _ = run_measured([str(py), "-c", HTA_LOAD, tmp])
            times.append(s)
            rss.append(m)
    return {"s": statistics.median(times), "rss": statistics.median(rss), "runs": runs}


def _run_cpu(cmd: list[str], cwd: Path, env: dict[str, str] | None = None
             ) -> tuple[float, float, float]:
    """Run a command; (wall s, CPU s: user + system of the child, peak RSS MB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd,
                            env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd[:5])}... failed")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def bench_before_after(src: Path, before: str, runs: int) -> None:
    """``hermes import`` and ``hermes analyze`` of ``src`` by ``before`` and by this interpreter,
    alternated (so a change of machine load hits both alike); medians of wall s, CPU s (user +
    system: steadier than wall on a shared machine) and peak RSS."""
    cmds = {"import": ["import", str(src), "--out", "{tmp}/out.parquet"],
            "analyze": ["analyze", str(src), "-o", "{tmp}/report.txt"]}
    print(f"{src.name}: {runs} runs each, alternated; before = {before}")
    print(f"  {'command':8} {'wall before':>11} {'this':>6} {'ratio':>6} {'CPU before':>10} "
          f"{'this':>6} {'ratio':>6} {'RSS MB before':>13} {'this':>5}")
    for name, args in cmds.items():
        got: dict[str, list[tuple[float, float, float]]] = {"before": [], "this": []}
        with tempfile.TemporaryDirectory() as tmp:
            argv = [a.replace("{tmp}", tmp) for a in args]
            for _ in range(runs):
                for who, py in (("before", before), ("this", sys.executable)):
                    got[who].append(_run_cpu([py, "-m", "hermes.cli", *argv], Path(tmp)))
        b, t = ([statistics.median(v[i] for v in got[w]) for i in (0, 1, 2)]
                for w in ("before", "this"))
        print(f"  {name:8} {b[0]:>11.3f} {t[0]:>6.3f} {t[0] / b[0]:>6.3f} {b[1]:>10.3f} "
              f"{t[1]:>6.3f} {t[1] / b[1]:>6.3f} {b[2]:>13,.0f} {t[2]:>5,.0f}")


def bench_helpers(srcs: list[Path], runs: int, analyze: bool) -> None:
    """``hermes import`` (and ``hermes analyze``) of each file with the Kineto import's helper
    process turned off (``HERMES_IMPORT_HELPERS=0``: one process reads the file) and on (the
    default: a forked helper reads a big file's second half, ``kineto.halves``), alternated;
    medians of wall s, CPU s (user + system of the whole process tree) and the peak RSS of its
    largest process (``wait4``: the helper's own memory is not added to the reader's)."""
    print(f"one process vs a helper for the second half: {runs} runs each, alternated")
    _switched(srcs, runs, analyze, "HERMES_IMPORT_HELPERS", ("0", None), ("one", "helper"))


def bench_native(srcs: list[Path], runs: int, analyze: bool) -> None:
    """The same commands with the importer's column passes in Python
    (``HERMES_NO_EXTENSION=1``, the baseline) and compiled (``hermes.trace._columns``, the
    default), alternated; the same medians."""
    from hermes.trace import columns

    if not columns.NATIVE:
        raise SystemExit("hermes.trace._columns is not compiled here (pip install -e . with a "
                         "C compiler), or HERMES_NO_EXTENSION is set")
    print(f"column passes in Python vs compiled: {runs} runs each, alternated")
    _switched(srcs, runs, analyze, "HERMES_NO_EXTENSION", ("1", None), ("python", "native"))


def _switched(srcs: list[Path], runs: int, analyze: bool, var: str,
              values: tuple[str | None, str | None], labels: tuple[str, str]) -> None:
    """Each command run with ``var`` set to each of ``values`` (None: not set), alternated run
    by run; one row per file and command: medians and the ratio second/first."""
    a, b = labels
    print(f"  {'file':38} {'command':8} {'wall ' + a:>11} {b:>7} {'ratio':>6} "
          f"{'CPU ' + a:>10} {b:>7} {'RSS MB ' + a:>13} {b:>7}")
    for src in srcs:
        cmds = {"import": ["import", str(src), "--out", "{tmp}/out.parquet"]}
        if analyze:
            cmds["analyze"] = ["analyze", str(src), "-o", "{tmp}/report.txt"]
        for name, args in cmds.items():
            got: list[list[tuple[float, float, float]]] = [[], []]
            with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
                argv = [x.replace("{tmp}", tmp) for x in args]
                for i in range(runs):
                    for k in (0, 1) if i % 2 == 0 else (1, 0):
                        env = {n: v for n, v in os.environ.items() if n != var}
                        if values[k] is not None:
                            env[var] = values[k]  # type: ignore[assignment]
                        got[k].append(_run_cpu([sys.executable, "-m", "hermes.cli", *argv],
                                               Path(tmp), env))
            one, two = ([statistics.median(v[i] for v in got[k]) for i in (0, 1, 2)]
                        for k in (0, 1))
            print(f"  {src.name[:38]:38} {name:8} {one[0]:>11.3f} {two[0]:>7.3f} "
                  f"{two[0] / one[0]:>6.3f} {one[1]:>10.3f} {two[1]:>7.3f} {one[2]:>13,.0f} "
                  f"{two[2]:>7,.0f}")


def report(label: str, src: Path, h: dict, t: dict | None) -> None:
    mb = json_megabytes(src)
    print(f"\n{label}: {src.name}  ({mb:,.0f} MB of JSON, {h['events']:,} source events)")
    print(f"  {'':8} {'runs':>4} {'median s':>9} {'events/s':>12} {'MB/s':>8} {'peak RSS MB':>12}")
    rows = [("hermes", h)] + ([("HTA 0.5", t)] if t else [])
    for name, r in rows:
        print(f"  {name:8} {r['runs']:>4} {r['s']:>9.2f} {h['events'] / r['s']:>12,.0f} "
              f"{mb / r['s']:>8.1f} {r['rss']:>12,.0f}")
    if t:
        print(f"  ratio hermes/HTA: time {h['s'] / t['s']:.3f} (speed-up {t['s'] / h['s']:.1f}x), "
              f"peak RSS {h['rss'] / t['rss']:.3f}")
    target = "met" if h["events"] / h["s"] >= 500_000 else "NOT met"
    print(f"  target >= 500k events/s for the whole process: {target}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="synthetic trace size (MB)")
    ap.add_argument("--runs", type=int, default=3, help="hermes runs per file (median)")
    ap.add_argument("--hta-runs", type=int, default=3, help="HTA runs per file (median)")
    ap.add_argument("--hta-runs-synthetic", type=int, default=None,
                    help="HTA runs on the synthetic trace (default: --hta-runs; HTA needs "
                         "minutes and ~10x the file size in memory on a 1 GB trace)")
    ap.add_argument("--no-hta", action="store_true", help="skip HolisticTraceAnalysis")
    ap.add_argument("--skip-synthetic", action="store_true", help="only the MTIA trace")
    ap.add_argument("--source", type=Path, help="time this one file against --before instead")
    ap.add_argument("--before", help="the interpreter of the checkout to compare with "
                                     "(e.g. /work/main/.venv/bin/python); needs --source")
    ap.add_argument("--helpers", type=Path, nargs="+", metavar="FILE",
                    help="time these files' import (and, with --analyze, analysis) read by "
                         "one process against a helper process for the second half")
    ap.add_argument("--native", type=Path, nargs="+", metavar="FILE",
                    help="time these files' import (and, with --analyze, analysis) with the "
                         "column passes in Python (HERMES_NO_EXTENSION=1) against compiled")
    ap.add_argument("--analyze", action="store_true",
                    help="with --helpers or --native: hermes analyze too")
    ap.add_argument("--smoke", action="store_true",
                    help="one step of the synthetic trace, one Hermes run, HTA skipped")
    args = ap.parse_args()
    if args.smoke:
        print("smoke run: the MTIA trace and HTA skipped (HTA 0.5 runs in its own venv)")
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            syn = generate(Path(tmp) / "synthetic_kineto_1MB.json", 1)
            report("synthetic Kineto trace, one step", syn, bench_hermes(syn, 1), None)
        return
    if (args.source is None) != (args.before is None):
        ap.error("--source and --before go together")
    if args.source is not None:
        bench_before_after(args.source.resolve(), args.before, args.runs)
        return
    if args.helpers or args.native:
        CACHE.mkdir(parents=True, exist_ok=True)
        if args.helpers:
            bench_helpers([p.resolve() for p in args.helpers], args.runs, args.analyze)
        if args.native:
            bench_native([p.resolve() for p in args.native], args.runs, args.analyze)
        return
    CACHE.mkdir(parents=True, exist_ok=True)
    files: list[tuple[str, Path, int]] = []
    if MTIA.exists():
        files.append(("MTIA trace (shared/traces/hta)", MTIA, args.hta_runs))
    else:
        print(f"MTIA trace not found at {MTIA}; skipped")
    if not args.skip_synthetic:
        t0 = time.perf_counter()
        syn = generate(CACHE / f"synthetic_kineto_{args.size_mb}MB.json", args.size_mb)
        print(f"synthetic trace: {syn} ({time.perf_counter() - t0:.1f} s to prepare)")
        hta_runs = args.hta_runs if args.hta_runs_synthetic is None else args.hta_runs_synthetic
        files.append((f"synthetic {args.size_mb} MB Kineto trace", syn, hta_runs))
    for label, src, hta_runs in files:
        h = bench_hermes(src, args.runs)
        t = None if args.no_hta or hta_runs < 1 else bench_hta(src, hta_runs)
        report(label, src, h, t)


if __name__ == "__main__":
    main()
