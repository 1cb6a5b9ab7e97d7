"""What each performance trick of the analysis earns on real traces (issue 30, item 5).

    python benchmarks/tricks.py [--repeat 5] [--tricks beside,solver_threads,...] [FILE ...]
    python benchmarks/tricks.py --smoke       # one small trace, one run of each arm

A trick is kept only where it gains >= 5 % of end-to-end time (or of peak memory, for a memory
trick) on a real trace; docs/benchmarks.md lists the ones kept with these figures. Each trick is
measured as two arms of the same command -- ``hermes analyze FILE --format json`` (or ``hermes
import`` for the importer's), a fresh process per run -- with the trick on (as shipped) and off
(the plain way), runs interleaved (on, off, on, off, ...) so that the machine's load falls on both
alike; the figures are medians of ``--repeat`` runs per arm: wall seconds and peak RSS (the
child's ``ru_maxrss``), and the gain = off / on - 1.

Tricks (``TRICKS``):

* ``beside``: the critical path analyzer runs on a thread of its own beside the other rank
  analyzers (``engine.run.Beside``; off: ``run.BESIDE`` names no analyzer, all run in order);
* ``solver_threads``: the critical path builds and solves its next group of steps on a second
  thread while the previous one is reduced (off: ``critical_path.analysis.THREADS = 1``);
* ``packed_sort_key``: the step graph's node order sorts one bit-packed int64 key (lane, time,
  start flag) with a tie array (off: ``np.lexsort`` of the four arrays; the same order);
* ``release_memory``: freed heap handed back to the OS after each analyzer
  (``run.release_memory``: Arrow's pool and glibc's ``malloc_trim``) -- shipped for ranks of
  >= 1M events only; here forced on every rank (on) vs never (off), peak RSS is its figure;
* ``quick_exit``: ``hermes analyze`` leaves by ``os._exit`` after flushing, skipping the
  interpreter's teardown (off: ``os._exit`` made a ``sys.exit``, a normal exit);
* ``no_numpy_ma``: the Kineto import finds distinct values by hand, not with ``np.unique``,
  which imports ``numpy.ma`` (off: ``numpy.ma`` imported first, what ``np.unique`` would cost),
  measured on ``hermes import``;
* ``hold_gc``: the console script turns the cyclic garbage collector off while its modules load
  (``commands._util.hold_gc``; off: left on).
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
SHARED = ROOT.parent / "shared" / "traces"
#: the shared real Kineto traces of >= 100k events (issue 37's list)
FILES = ("kineto-h100/gpt_balanced.pt.trace.json.gz",
         "hta/df_index_resolver/df_index_resolver.json.gz",
         "hta/mtia_trace_single_rank/mtia_rank_0.json.gz",
         "public/tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz")
SMOKE = ROOT / "tests" / "data" / "kineto" / "big_matmul.pt.trace.json.gz"

_LEXSORT = '''
import numpy as np
from hermes.analyzers.critical_path import stepgraph
def layout_order(s, e, lane):
    n = s.size
    if n == 0:
        return np.empty(0, np.int64)
    tie = np.concatenate([s - e, e - s])
    start = np.concatenate([np.ones(n, np.int8), np.zeros(n, np.int8)])
    return np.lexsort((tie, start, np.concatenate([s, e]), np.concatenate([lane, lane])))
stepgraph.layout_order = layout_order
'''

_RUN = "import hermes.analyzers.engine.run as r"
_CP = "import hermes.analyzers.critical_path.analysis as c"
#: trick -> (command, the patch that turns it off, the patch that leaves it on). Both arms
#: import the same modules before the command starts (an import moved ahead of the forked
#: parse costs the same in both), so they differ by the trick alone.
TRICKS = {
    "beside": ("analyze", f"{_RUN}; r.BESIDE = 'none'", _RUN),
    "solver_threads": ("analyze", f"{_CP}; c.THREADS = 1", _CP),
    "packed_sort_key": ("analyze", _LEXSORT,
                        "from hermes.analyzers.critical_path import stepgraph"),
    "release_memory": ("analyze", f"{_RUN}; r.RELEASE_MIN_EVENTS = 2**62",
                       f"{_RUN}; r.RELEASE_MIN_EVENTS = 0"),
    "quick_exit": ("analyze", "import os; os._exit = lambda code: sys.exit(code)", ""),
    "no_numpy_ma": ("import", "import numpy.ma", ""),
    "hold_gc": ("analyze", "import hermes.commands._util as u; u.hold_gc = lambda: None",
                "import hermes.commands._util as u"),
}

RUNNER = '''
import sys
exec(sys.argv[1])
sys.argv = ["hermes", *sys.argv[2:]]
from hermes.commands._launch import main
main()
'''


def _run(patch: str, args: list[str]) -> tuple[float, float]:
    """One fresh process: (wall seconds, peak RSS GiB)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", RUNNER, patch, *args], stdout=out,
                                stderr=err, env={**os.environ, "HERMES_NO_PROGRESS": "1"})
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise RuntimeError(f"hermes {' '.join(args)} failed: {err.read().decode()[-1500:]}")
    return wall, usage.ru_maxrss / 2**20


def measure(trick: str, src: Path, repeat: int, tmp: Path) -> dict[str, object]:
    """Both arms of ``trick`` on ``src``, interleaved: medians and the gains."""
    cmd, off, on = TRICKS[trick]
    arms: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    for i in range(repeat):
        for arm in (("on", "off") if i % 2 == 0 else ("off", "on")):
            out = tmp / f"{trick}-{arm}-{i}.parquet"  # (an import writes a new file each run)
            args = ["analyze", str(src), "--format", "json"] if cmd == "analyze" else [
                "import", str(src), "--out", str(out)]
            arms[arm].append(_run(on if arm == "on" else off, args))
            out.unlink(missing_ok=True)
    med = {a: (statistics.median(w for w, _ in rs), statistics.median(m for _, m in rs))
           for a, rs in arms.items()}
    return {"trick": trick, "file": src.name, "on_s": med["on"][0], "off_s": med["off"][0],
            "on_GiB": med["on"][1], "off_GiB": med["off"][1],
            "time_gain_pct": 100.0 * (med["off"][0] / med["on"][0] - 1.0),
            "mem_gain_pct": 100.0 * (med["off"][1] / med["on"][1] - 1.0)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="traces (default: the shared real ones, FILES)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per arm (median)")
    ap.add_argument("--tricks", default=",".join(TRICKS))
    ap.add_argument("--json", default="", help="also write the rows here")
    ap.add_argument("--smoke", action="store_true", help="one small trace, one run per arm")
    args = ap.parse_args(argv)
    tricks = [t for t in args.tricks.split(",") if t]
    unknown = [t for t in tricks if t not in TRICKS]
    if unknown:
        ap.error(f"unknown trick(s) {', '.join(unknown)}; known: {', '.join(TRICKS)}")
    if args.smoke:
        files, repeat = [SMOKE], 1
    else:
        files = [Path(f) for f in args.files] or [SHARED / f for f in FILES
                                                  if (SHARED / f).exists()]
        repeat = args.repeat
    if not files:
        ap.error(f"no trace to measure (none given, none of FILES under {SHARED})")
    rows = []
    print(f"{'trick':16} {'file':44} {'on s':>7} {'off s':>7} {'gain':>7} "
          f"{'on GiB':>7} {'off GiB':>7} {'gain':>7}")
    with tempfile.TemporaryDirectory() as d:
        for trick in tricks:
            for f in files:
                r = measure(trick, f, repeat, Path(d))
                rows.append(r)
                print(f"{trick:16} {str(r['file'])[:44]:44} {r['on_s']:7.3f} {r['off_s']:7.3f} "
                      f"{r['time_gain_pct']:+6.1f}% {r['on_GiB']:7.3f} {r['off_GiB']:7.3f} "
                      f"{r['mem_gain_pct']:+6.1f}%", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
