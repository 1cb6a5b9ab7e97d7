"""HTA parity: HolisticTraceAnalysis 0.5's temporal breakdown and comm/comp overlap beside ours.

    python benchmarks/hta_parity.py [TRACE.json.gz ...] [--tolerance 0.5]
    python benchmarks/hta_parity.py --smoke     # the smallest shared trace, Hermes side only

Without arguments it takes every Kineto trace under ``../shared/traces/hta`` and
``../shared/traces/kineto-h100``. Each file is analyzed alone by HTA 0.5 in its own virtual
environment (``benchmarks/hta_env.py``) and by Hermes (Kineto importer -> ``hta_compat``), and
the per-rank idle / compute / non-compute % and comm/comp overlap % are printed side by side
with the largest difference in percentage points. Exit code 1 when a figure differs by more
than the tolerance or HTA has a figure we lack (HTA rounds to 2 decimals, so 0.01 pp
differences are expected). Traces HTA or the importer cannot read are listed, not counted.
``--smoke`` (the test suite's check that the command runs): the smallest of the traces, the
HTA side skipped with a printed line (its venv is not installed there), ours printed, exit 0.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.hta_env import run_hta  # noqa: E402

SHARED = REPO.parent / "shared" / "traces"
FIGURES = ("idle_pct", "compute_pct", "non_compute_pct", "comm_comp_overlap_pct")

# Runs in HTA's venv: one TraceAnalysis per file (a directory holding just a link to it).
HTA_SNIPPET = r"""
import json, logging, os, shutil, sys, tempfile, time, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
out = {}
for f in sys.argv[1:]:
    d = tempfile.mkdtemp()
    os.symlink(os.path.abspath(f), os.path.join(d, os.path.basename(f)))
    t0 = time.perf_counter()
    try:
        ta = TraceAnalysis(trace_dir=d)
        tb = ta.get_temporal_breakdown(visualize=False)
        ov = ta.get_comm_comp_overlap(visualize=False)
        res = {"seconds": time.perf_counter() - t0, "ranks": {}}
        for r in tb.to_dict("records"):
            res["ranks"][str(r["rank"])] = {
                "idle_pct": r["idle_time_pctg"], "compute_pct": r["compute_time_pctg"],
                "non_compute_pct": r["non_compute_time_pctg"]}
        for r in ov.to_dict("records"):
            res["ranks"].setdefault(str(r["rank"]), {})["comm_comp_overlap_pct"] = \
                r["comp_comm_overlap_pctg"]
    except Exception as exc:
        res = {"error": type(exc).__name__ + ": " + str(exc)[:200]}
    shutil.rmtree(d)
    out[f] = res
print(json.dumps(out, default=lambda x: None if x != x else float(x)))
"""


def default_traces() -> list[Path]:
    return sorted(p for d in ("hta", "kineto-h100") for p in (SHARED / d).rglob("*.json*")
                  if p.name.endswith((".json", ".json.gz")) and p.name != "steps.json")


def hta_side(files: list[Path]) -> dict[str, dict]:
    return json.loads(run_hta(HTA_SNIPPET, *map(str, files)))


def hermes_side(f: Path, tmp: Path) -> dict:
    """Our figures per rank: import with the Kineto importer, then ``hta_compat``."""
    import hermes
    from hermes.analyzers.common.hta_compat import hta_figures
    from hermes.collectors import importers

    t0 = time.perf_counter()
    out = tmp / (f.name.split(".")[0] + ".parquet")
    try:
        importers.get("kineto").run([f], out, {})
        trace = hermes.load(out)
    except Exception as exc:  # report and go on: one unreadable file must not stop the table
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    ranks = {}
    for rank in trace.ranks:
        h = hta_figures(trace.rank(rank))
        ranks[str(rank)] = {k: getattr(h, k) for k in FIGURES}
    return {"seconds": time.perf_counter() - t0, "ranks": ranks}


def _num(x: float | None) -> bool:
    return x is not None and not math.isnan(x)


def _fmt(x: float | None) -> str:
    return "   -  " if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:6.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--tolerance", type=float, default=0.5, help="percentage points")
    ap.add_argument("--smoke", action="store_true",
                    help="the smallest trace, Hermes side only (HTA skipped), exit 0")
    args = ap.parse_args(argv)
    files = args.traces or default_traces()
    if args.smoke:
        files = sorted(files, key=lambda f: f.stat().st_size)[:1]
        print("smoke run: HTA side skipped (HTA 0.5 runs in its own venv, benchmarks/hta_env.py)")
    t0 = time.perf_counter()
    hta = {} if args.smoke else hta_side(files)
    hta_s = time.perf_counter() - t0
    worst, compared, skipped, unmatched = 0.0, 0, [], []
    print(f"{'trace':52s} rank  " + "  ".join(f"{k[:-4]:>21s}" for k in FIGURES)
          + "   max|d|")
    print(f"{'':52s}       " + "  ".join(f"{'hermes':>10s} {'hta':>10s}" for _ in FIGURES))
    with tempfile.TemporaryDirectory() as tmp:
        t1 = time.perf_counter()
        ours = {str(f): hermes_side(f, Path(tmp)) for f in files}
        ours_s = time.perf_counter() - t1
    for f in files:
        h, o = hta.get(str(f), {}), ours[str(f)]
        name = str(f.relative_to(SHARED)) if f.is_relative_to(SHARED) else str(f)
        if args.smoke and "error" not in o:  # ours alone, HTA's cells empty
            for rank, orr in o["ranks"].items():
                cells = "  ".join(f"{_fmt(orr.get(k)):>10s} {_fmt(None):>10s}" for k in FIGURES)
                print(f"{name[-52:]:52s} {rank:>4s}  {cells}      n/a")
            continue
        if "error" in h or "error" in o:
            skipped.append(f"{name}: hta {h.get('error', 'ok')}; hermes {o.get('error', 'ok')}")
            continue
        for rank, hr in h["ranks"].items():
            orr = o["ranks"].get(rank) or (next(iter(o["ranks"].values()))
                                           if len(o["ranks"]) == 1 else {})
            # NaN (HTA: no communication) on both sides agrees; a number against NaN does not
            diffs = [abs(orr[k] - hr[k]) for k in FIGURES if _num(hr.get(k)) and _num(orr.get(k))]
            missing = [k for k in FIGURES if _num(hr.get(k)) != _num(orr.get(k))]
            d = max(diffs, default=0.0)
            cells = "  ".join(f"{_fmt(orr.get(k)):>10s} {_fmt(hr.get(k)):>10s}" for k in FIGURES)
            if missing:  # e.g. no GPU event seen by us: no figure to compare
                unmatched.append(f"{name} rank {rank}: no Hermes figure for {', '.join(missing)}")
                print(f"{name[-52:]:52s} {rank:>4s}  {cells}      n/a  <-- missing")
                continue
            worst = max(worst, d)
            compared += 1
            flag = "" if d <= args.tolerance else "  <-- differs"
            print(f"{name[-52:]:52s} {rank:>4s}  {cells}   {d:6.2f}{flag}")
    for s in skipped:
        print(f"skipped: {s}")
    for s in unmatched:
        print(f"missing: {s}")
    print(f"\n{compared} rank(s) compared, {len(unmatched)} without our figures; "
          f"largest difference {worst:.2f} pp "
          f"(tolerance {args.tolerance}); HTA {hta_s:.1f} s (incl. its start-up), "
          f"Hermes import + figures {ours_s:.1f} s")
    if args.smoke:
        return 0 if not skipped else 1
    return 0 if worst <= args.tolerance and not unmatched else 1


if __name__ == "__main__":
    sys.exit(main())
