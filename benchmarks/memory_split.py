"""Where `hermes analyze FILE` reaches its peak memory, stage by stage (issue 15).

    python benchmarks/memory_split.py benchmarks/.cache/synthetic_kineto_1024MB.json
    python benchmarks/memory_split.py /tmp/cpfast_10m.parquet --baseline /work/main/.venv/bin/python
    python benchmarks/memory_split.py --smoke    # the repository's 30 KB big_matmul trace

One child process per run runs the real command (``hermes analyze FILE`` through the typer app,
report to /dev/null) with probes around its stages: the Kineto import's first pass (parse into
intermediate batches), its second pass, the in-memory trace built from the batches, the load of a
Parquet, each rank analyzer, the results packed, the cluster reduce, the advisor, the report. At
each probe the child reads ``VmHWM`` and ``VmRSS`` of ``/proc/self/status`` and resets the
high-water mark (``echo 5 > /proc/self/clear_refs``, Linux >= 4.0), so a stage's "peak" is the
highest RSS reached *during* that stage and "delta" the RSS it left behind. ``--baseline PY``
runs the same child with another interpreter (e.g. main's venv: its installed Hermes), the two
alternated ``--repeat`` times; medians per stage and the ratio of whole-run peaks are printed.
The probes wrap functions by module attribute; a stage whose function a version lacks is merged
into the next probe.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SMOKE_TRACE = Path(__file__).resolve().parents[1] / "tests" / "data" / "kineto" / \
    "big_matmul.pt.trace.json.gz"

CHILD = r'''
import functools, json, os, sys, time
rows = []
def _status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                out[k] = int(v.split()[0]) * 1024
    return out
_last = {"rss": _status()["VmRSS"], "t": time.perf_counter()}
def _reset():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
_reset()
TRIM = os.environ.get("HERMES_SPLIT_TRIM") == "1"
def _trim():
    import ctypes
    try:
        import pyarrow
        pyarrow.default_memory_pool().release_unused()
    except ImportError:
        pass
    ctypes.CDLL("libc.so.6").malloc_trim(0)
def mark(label):
    if TRIM:
        _trim()
    s = _status()
    t = time.perf_counter()
    rows.append({"stage": label, "peak": s["VmHWM"], "rss": s["VmRSS"],
                 "delta": s["VmRSS"] - _last["rss"], "s": t - _last["t"]})
    _last["rss"], _last["t"] = s["VmRSS"], t
    _reset()
def _probe(mod, name, label, first):
    """Wrap ``mod.name`` (where this version has it) with a probe before it runs (``first``)
    or after it returns (label may be a function of the call's args)."""
    import importlib
    try:
        m = importlib.import_module(mod)
        fn = getattr(m, name)
    except (ImportError, AttributeError):
        return
    @functools.wraps(fn)
    def wrapped(*a, **k):
        if first:
            mark(label)
        out = fn(*a, **k)
        if not first:
            mark(label(*a, **k) if callable(label) else label)
        return out
    setattr(m, name, wrapped)
def after(mod, name, label):
    _probe(mod, name, label, False)
def before(mod, name, label):
    _probe(mod, name, label, True)
import hermes.cli
try:  # the allocator the console command picks (hermes.cli.main), where this version has it
    from hermes.commands._util import use_system_allocator
    use_system_allocator()
except ImportError:
    pass
mark("start (imports)")
K = "hermes.collectors.importers.kineto.importer"
after(K, "_phase1", "import: pass 1 (parse)")
import hermes.trace.memory as _mem
_close = _mem.MemoryWriter.close
def _mclose(self, *a, **k):
    mark("import: pass 2 (finish)")
    out = _close(self, *a, **k)
    mark("import: frame built")
    return out
_mem.MemoryWriter.close = _mclose
import hermes.trace as _tr
_load = _tr.load
def _tload(*a, **k):
    out = _load(*a, **k)
    mark("load Parquet")
    return out
_tr.load = _tload
import hermes.analyzers.engine.run as run
run.load_analyzers()
from hermes.analyzers.engine.base import ANALYZERS
for a in list(ANALYZERS.values()):
    fn = a.fn
    def w(ctx, fn=fn, name=a.name, scope=a.scope):
        out = fn(ctx)
        mark(f"{scope}: {name}")
        return out
    object.__setattr__(a, "fn", w)
after("hermes.analyzers.engine.run", "drop_warmup", "drop_warmup")
after("hermes.analyzers.engine.run", "step_windows", "step windows")
after("hermes.analyzers.engine.run", "pack", "results packed")
after("hermes.analyzers.engine.run", "_reduce", "reduce (fold, verdict)")
after("hermes.pipeline", "advise", "advisor")
from hermes.cli import app
if os.environ.get("HERMES_SPLIT_VIA_PARQUET") == "1":  # import to a temporary Parquet first
    import hermes.commands.analyze as _an
    import hermes.commands._util as _ut
    _an.hermes_source = _ut.hermes_trace
sys.stdout.flush()
fd = os.dup(1)
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
try:
    app(["analyze", sys.argv[1]], standalone_mode=False)
finally:
    sys.stdout.flush()
    os.dup2(fd, 1)
mark("report rendered")
print(json.dumps({"rows": rows}))
'''

GIB = 2**30


def run_child(python: str, src: str) -> dict:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.run([python, "-c", CHILD, src], stdout=out, stderr=err, check=False)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{python} failed: {err.read().decode()[-2000:]}")
        return json.loads(out.read().decode().strip().splitlines()[-1])


def merge(runs: list[dict]) -> tuple[list[str], dict[str, dict[str, float]], float]:
    """Stages in first-seen order; per stage the median over runs of (peak, delta, seconds),
    summed within a run where a stage repeats (several ranks); median whole-run peak."""
    order: list[str] = []
    per: dict[str, dict[str, list[float]]] = {}
    for r in runs:
        acc: dict[str, dict[str, float]] = {}
        for row in r["rows"]:
            a = acc.setdefault(row["stage"], {"peak": 0.0, "delta": 0.0, "s": 0.0, "rss": 0.0})
            a["peak"] = max(a["peak"], row["peak"])
            a["delta"] += row["delta"]
            a["s"] += row["s"]
            a["rss"] = row["rss"]
            if row["stage"] not in order:
                order.append(row["stage"])
        for st, a in acc.items():
            d = per.setdefault(st, {"peak": [], "delta": [], "s": [], "rss": []})
            for k in d:
                d[k].append(a[k])
    med = {st: {k: statistics.median(v) for k, v in d.items()} for st, d in per.items()}
    # clear_refs resets ru_maxrss too: the whole run's peak is the highest stage peak
    return order, med, statistics.median(max(row["peak"] for row in r["rows"]) for r in runs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", nargs="?",
                    help="a Kineto JSON (imported in memory) or a Hermes Parquet")
    ap.add_argument("--baseline", default="",
                    help="another interpreter to compare with (e.g. /work/main/.venv/bin/python)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per interpreter (medians)")
    ap.add_argument("--trim", action="store_true",
                    help="return freed memory to the OS at each probe (malloc_trim, Arrow's "
                         "pool): the RSS left after a stage is then what it still holds")
    ap.add_argument("--via-parquet", action="store_true",
                    help="a profiler file imported to a temporary Parquet and analyzed from "
                         "the path (as with --workers), not imported in memory")
    ap.add_argument("--smoke", action="store_true",
                    help="one run on the repository's small Kineto trace (default source)")
    args = ap.parse_args(argv)
    if args.smoke and not args.source:
        args.source, args.repeat = str(SMOKE_TRACE), 1
    if not args.source:
        ap.error("the following arguments are required: source")
    if not os.path.exists("/proc/self/clear_refs"):
        print("needs Linux /proc/self/clear_refs", file=sys.stderr)
        return 2
    pythons = {"this": sys.executable}
    if args.baseline:
        pythons = {"baseline": args.baseline, "this": sys.executable}
    os.environ["HERMES_SPLIT_TRIM"] = "1" if args.trim else "0"
    os.environ["HERMES_SPLIT_VIA_PARQUET"] = "1" if args.via_parquet else "0"
    runs: dict[str, list[dict]] = {k: [] for k in pythons}
    for _ in range(max(1, args.repeat)):
        for k, py in pythons.items():  # alternated
            runs[k].append(run_child(py, args.source))
    merged = {k: merge(v) for k, v in runs.items()}
    order: list[str] = []
    for k in merged:
        order += [s for s in merged[k][0] if s not in order]
    print(f"{args.source}: per stage, RSS high-water during the stage / RSS change over it "
          f"(GiB), medians of {max(1, args.repeat)} run(s)")
    head = "".join(f" | {k + ' peak':>13} {'delta':>7} {'s':>6}" for k in merged)
    print(f"  {'stage':<34}{head}")
    for st in order:
        line = f"  {st:<34}"
        for k in merged:
            m = merged[k][1].get(st)
            line += (f" | {m['peak'] / GIB:>13.2f} {m['delta'] / GIB:>+7.2f} {m['s']:>6.1f}"
                     if m else f" | {'-':>13} {'-':>7} {'-':>6}")
        print(line)
    peaks = {k: m[2] / GIB for k, m in merged.items()}
    print("  whole-run peak RSS (highest stage peak): "
          + ", ".join(f"{k} {v:.2f} GiB" for k, v in peaks.items())
          + (f"; this/baseline {peaks['this'] / peaks['baseline']:.3f}" if args.baseline
             else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
