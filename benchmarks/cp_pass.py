"""The critical path's longest-path pass: the compiled DAG pass (``dagpath``) vs scipy's Dijkstra.

    python benchmarks/cp_pass.py [--events 2000000] [--keep PATH] [--repeat 3]

On the synthetic single-rank trace of ``analysis_speed.py`` (written once, or read from
``--keep``), builds the critical path's graphs as the analyzer does (chunks of
``critical_path.CHUNK_EVENTS`` events) and, in the same process, alternating the two:

1. ``cpgraph.both`` (forward distances + predecessors and the backward pass) with Dijkstra
   (``DAG_MIN_NODES`` above every graph) and with the DAG pass (``DAG_MIN_NODES = 0``): median
   seconds over ``--repeat`` runs and the ratio; the distances must be identical and every
   predecessor that differs must be an exact tie (two in-neighbours of equal distance);
2. the whole ``critical_path`` analyzer both ways: seconds and ratio, outputs compared;
3. in a fresh child process, the one-off cost of the DAG pass's first use (numba import and
   loading the cached compiled code) on a tiny graph.

    python benchmarks/cp_pass.py --analyzer TRACE.parquet [...] --before /work/main/.venv/bin/python

``--analyzer`` instead times the whole ``critical_path`` analyzer on each Hermes trace (e.g. the
10M-event Parquet of ``analysis_speed.py --keep``, or ``hermes import`` of a 200k-event Kineto
trace), before (``--before``: another tree's interpreter, e.g. main's venv) and after (this
interpreter), each run a fresh child process, alternated: CPU seconds of the analyzer's first
call (``time.process_time``; the graph cache of the what-if replay emptied), median of
``--repeat``, the ratio, and in one more child each the analyzer's peak memory increment
(``tracemalloc``: peak of traced allocations during the call, above what was held before).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from analysis_speed import write_synthetic  # noqa: E402

FIRST_USE = """
import time, numpy as np
t = time.perf_counter()
from hermes.analyzers import dagpath
z = np.zeros(3, np.int64)
o = dagpath.order(2, z, z[:0])
dagpath.forward(2, z, z[:0], z[:0], z[:2], o); dagpath.backward(2, z, z[:0], z[:0], z[:2], o)
print(time.perf_counter() - t)
"""


def _graphs(path: Path) -> tuple[list, pd.DataFrame, pd.DataFrame]:
    from hermes.analyzers.common.steps import drop_warmup, step_windows
    from hermes.analyzers.critical_path import analysis as cp
    from hermes.analyzers.engine.run import load_analyzers
    from hermes.trace import load

    load_analyzers()
    ev, _ = drop_warmup(load(path).events)
    windows = step_windows(ev)
    pre = cp._Events(ev)
    o = np.argsort(windows["start_ns"].to_numpy(np.int64), kind="stable")
    ws = windows.iloc[o]
    s, e = ws["start_ns"].to_numpy(np.int64), ws["end_ns"].to_numpy(np.int64)
    groups, (lo, hi) = cp._chunks(pre, s, e)
    return [cp._build(pre, sel, ws.iloc[a:b], bounds=(lo, hi, a, s, e))[0]
            for a, b, sel in groups], ev, windows


CHILD = """
import sys, time, tracemalloc
from hermes.analyzers.engine.base import RankContext, get
from hermes.analyzers.engine.run import load_analyzers
from hermes.analyzers.common.steps import drop_warmup
from hermes.trace import load
load_analyzers()
tr = load(sys.argv[1])
ev, _ = drop_warmup(tr.events)
ctx = RankContext(rank=0, events=ev, meta=tr.meta, results={})
fn = get("critical_path").fn
if sys.argv[2] == "mem":
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    fn(ctx)
    print(tracemalloc.get_traced_memory()[1] - base)
else:
    t = time.process_time()
    fn(ctx)
    print(time.process_time() - t)
"""


def _child(python: str, trace: str, what: str) -> float:
    r = subprocess.run([python, "-c", CHILD, trace, what], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{python}: {r.stderr.strip().splitlines()[-1]}")
    return float(r.stdout.split()[-1])


def analyzer(traces: list[str], before: str, repeat: int) -> None:
    """The critical_path analyzer, before vs after, per trace (module docstring)."""
    for trace in traces:
        old, new = [], []
        for _ in range(repeat):
            old.append(_child(before, trace, "cpu"))
            new.append(_child(sys.executable, trace, "cpu"))
        mo, mn = statistics.median(old), statistics.median(new)
        po, pn = _child(before, trace, "mem"), _child(sys.executable, trace, "mem")
        print(f"{trace}: critical_path CPU s, median of {repeat}: before {mo:.3f} "
              f"({', '.join(f'{x:.3f}' for x in old)}), after {mn:.3f} "
              f"({', '.join(f'{x:.3f}' for x in new)}), ratio {mn / mo:.3f}; peak memory "
              f"increment (tracemalloc): before {po / 2**20:,.0f} MiB, after "
              f"{pn / 2**20:,.0f} MiB, ratio {pn / po:.3f}")


def _timed(fn, dag: bool):
    from hermes.analyzers.critical_path import graph as cpgraph

    cpgraph.DAG_MIN_NODES = 0 if dag else 1 << 62
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--keep", default="", help="read the trace here (written if missing)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--analyzer", nargs="+", default=[], metavar="TRACE",
                    help="time the critical_path analyzer on these traces instead")
    ap.add_argument("--before", default="/work/main/.venv/bin/python",
                    help="interpreter of the tree to compare with (--analyzer)")
    args = ap.parse_args(argv)
    if args.analyzer:
        analyzer(args.analyzer, args.before, args.repeat)
        return 0
    from hermes.analyzers.critical_path import analysis as critical_path
    from hermes.analyzers.critical_path import graph as cpgraph

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "synthetic.parquet"
        if not path.exists():
            write_synthetic(path, args.events)
        graphs, ev, windows = _graphs(path)
    n = sum(g.n for g in graphs)
    _timed(lambda: cpgraph.both(graphs[0]), True)  # compile or load the cache, not timed
    dij, dag, ties = [], [], 0
    for _ in range(args.repeat):
        sd, ref = _timed(lambda: [cpgraph.both(g) for g in graphs], False)
        sg, new = _timed(lambda: [cpgraph.both(g) for g in graphs], True)
        dij.append(sd)
        dag.append(sg)
        ties = 0
        for (d0, p0, b0), (d1, p1, b1), g in zip(ref, new, graphs, strict=True):
            assert np.array_equal(d0, d1) and np.array_equal(b0, b1), "distances differ"
            diff = np.flatnonzero(p0 != p1)
            D = (g.t - g.t.min()) - d0  # shortest-path distance of each node
            assert (p0[diff] < g.n).all() and (p1[diff] < g.n).all(), "source tie differs"
            assert np.array_equal(D[p0[diff]], D[p1[diff]]), "a predecessor differs, no tie"
            ties += diff.size
    md, mg = statistics.median(dij), statistics.median(dag)
    print(f"{len(ev):,} events, {len(graphs)} graph(s), {n:,} nodes; cpgraph.both, median of "
          f"{args.repeat}: Dijkstra {md:.2f} s, DAG pass {mg:.2f} s, ratio {mg / md:.3f} "
          f"(distances identical; {ties:,} predecessors differ, all exact ties)")
    sd, (l0, g0, i0) = _timed(lambda: critical_path.paths(ev, windows), False)
    sg, (l1, g1, i1) = _timed(lambda: critical_path.paths(ev, windows), True)
    same = np.array_equal(l0, l1) and np.array_equal(g0, g1) and i0.equals(i1)
    print(f"critical_path.paths (graph + pass + backtrack): Dijkstra {sd:.2f} s, DAG pass "
          f"{sg:.2f} s, ratio {sg / sd:.3f}; outputs {'identical' if same else 'DIFFER'}")
    first = subprocess.run([sys.executable, "-c", FIRST_USE], capture_output=True, text=True)
    print(f"first use of the DAG pass in a fresh process (numba import + cached code): "
          f"{float(first.stdout):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
