"""Diagnosis accuracy against ground truth: every cause id injected into emulated runs.

    python benchmarks/diagnosis.py [--workloads resnet50,bert-large,gpt3-13b]
                                   [--seeds N | --seed S[,S...]] [--steps 8] [--causes ID,ID]
                                   [--out results.json]
    python benchmarks/diagnosis.py --smoke     # resnet50, seed 0: clean + the first cause

For each workload x seed x cause (plus a run with nothing injected), ``hermes emulate`` (its Python
API) writes a trace with the cause injected, ``hermes.analyze`` diagnoses it, and a run counts as
**top-1** when the injected cause is the top finding of its category *and* that category leads the
findings (issue 5's Done-when). A clean run passes when no finding other than ``computation.*``
reaches 0.05. Prints the confusion matrix (injected cause -> leading finding), per-cause accuracy
and the category-only accuracy (injected cause top within its category).

Seeds: ``--seeds N`` draws N random seeds (printed first, and beside every run, so a failure can
be replayed with ``--seed S``); ``--seed S[,S...]`` runs those seeds (default 0,1,2). Every
analysis is also self-checked (``hermes.check.selfcheck``): the runs breaking a check are
counted and listed. Exit 1 when a run is not top-1 or breaks a check (not with ``--smoke``,
which checks that the command runs: two runs of 8 steps, the same tables, exit 0).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import hermes
from hermes.check.selfcheck import self_check
from hermes.commands.emulate import trace_collector
from hermes.devices import get as get_device
from hermes.npu import inject
from hermes.npu.emulate import emulate, plan

DEFAULT_WORKLOADS = ("resnet50", "bert-large", "gpt3-13b")
CLEAN = "none"


def ranks_for(cause: str, device: str) -> int:
    """Fewest ranks an injection needs (inter-node causes need a second node)."""
    if cause == CLEAN:
        return 1
    c = inject.CAUSES.get(cause)
    per_node = int(get_device(device).fields.get("devices_per_node", 8))
    n = max(1, c.min_ranks)
    return max(n, per_node + 1) if c.needs_inter_node else n


def judge(cause: str, findings: list[Any]) -> dict[str, Any]:
    lead = findings[0].id if findings else "-"
    if cause == CLEAN:
        bad = [f.id for f in findings if f.time_share >= 0.05 and f.category != "computation"]
        return {"lead": lead, "top1": not bad, "in_category": not bad, "false": bad}
    cat = cause.split(".")[0]
    top_in_cat = next((f.id for f in findings if f.category == cat), None)
    in_cat = top_in_cat == cause
    return {"lead": lead, "top1": in_cat and bool(findings) and findings[0].category == cat,
            "in_category": in_cat, "top_in_category": top_in_cat}


def run_one(workload: str, cause: str, seed: int, steps: int, device: str,
            tmp: Path) -> dict[str, Any]:
    path = tmp / f"{workload}-{cause}-{seed}"
    t0 = time.perf_counter()
    p = plan(workload, ranks=ranks_for(cause, device), device=device,
             inject_specs=[] if cause == CLEAN else [cause], seed=seed)
    emulate(p, trace_collector(p, path), steps=steps)
    t1 = time.perf_counter()
    a = hermes.analyze(path)
    t2 = time.perf_counter()
    out = judge(cause, a.findings)
    out["selfcheck"] = [str(v) for v in self_check(a.to_dict())]
    out.update({"workload": workload, "cause": cause, "seed": seed, "bound": a.bound,
                "emulate_s": t1 - t0, "analyze_s": t2 - t1,
                "findings": [(f.id, round(f.time_share, 4)) for f in a.findings[:6]]})
    return out


def violation_key(text: str) -> str:
    """A self-check violation without its position and figures: ``check: finding [rule]``."""
    check, where = text.split(": ", 2)[:2]
    where = re.sub(r"^findings\[\d+\] ", "", where)
    return f"{check}: {where}"


def seeds_of(args: argparse.Namespace) -> list[int]:
    """``--seeds N``: N random seeds (31-bit, from the OS's entropy); else ``--seed``'s list."""
    if args.seeds is not None:
        if args.seeds < 1:
            raise SystemExit(f"--seeds {args.seeds}: give a number of seeds >= 1")
        rng = random.SystemRandom()
        return [rng.randrange(2**31) for _ in range(args.seeds)]
    try:
        return [int(x) for x in args.seed.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--seed {args.seed!r}: give integers separated by commas") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    ap.add_argument("--seeds", type=int, default=None, metavar="N",
                    help="run N random seeds (printed, to replay one with --seed)")
    ap.add_argument("--seed", default="0,1,2", metavar="S[,S...]",
                    help="the seeds to run (default 0,1,2); ignored with --seeds")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--device", default="ascend910b")
    ap.add_argument("--causes", default="", help="comma-separated cause ids (default: all)")
    ap.add_argument("--out", default="", help="also write every run as JSON here")
    ap.add_argument("--smoke", action="store_true",
                    help="resnet50, seed 0, clean + the first cause (seconds; exit 0)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.workloads, args.seeds, args.seed = "resnet50", None, "0"
        args.causes = args.causes or next(iter(inject.CAUSES))
    causes = [CLEAN, *(args.causes.split(",") if args.causes else list(inject.CAUSES))]
    seeds = seeds_of(args)
    seed_text = ",".join(map(str, seeds))
    print(f"seeds: {seed_text}  (replay one: --seed S)", flush=True)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for wl in args.workloads.split(","):
            for seed in seeds:
                for cause in causes:
                    try:
                        r = run_one(wl, cause, seed, args.steps, args.device, Path(tmp))
                    except hermes.HermesError as exc:
                        r = {"workload": wl, "cause": cause, "seed": seed, "error": str(exc),
                             "top1": False, "in_category": False, "lead": "error"}
                    runs.append(r)
                    mark = "ok " if r["top1"] else ("cat" if r["in_category"] else "BAD")
                    print(f"{mark} {wl:<16} seed {seed} {cause:<38} lead={r['lead']:<38} "
                          f"{r.get('findings', r.get('error'))}", file=sys.stderr, flush=True)
                    for v in r.get("selfcheck", []):
                        print(f"    self-check: {v}", file=sys.stderr, flush=True)
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    for r in runs:
        confusion[r["cause"]][r["lead"]] += 1
    print(f"\nConfusion (injected -> leading finding), {len(runs)} runs "
          f"({args.workloads}; seeds {seed_text}; {args.steps} steps):")
    for cause in causes:
        row = ", ".join(f"{k} x{v}" for k, v in confusion[cause].most_common())
        n = sum(confusion[cause].values())
        ok = sum(r["top1"] for r in runs if r["cause"] == cause)
        cat = sum(r["in_category"] for r in runs if r["cause"] == cause)
        print(f"  {cause:<38} top1 {ok}/{n}  in-category {cat}/{n}  -> {row}")
    n = len(runs)
    top1 = sum(r["top1"] for r in runs)
    in_cat = sum(r["in_category"] for r in runs)
    missed = [r for r in runs if not r["top1"]]
    broken = [r for r in runs if r.get("selfcheck")]
    print(f"\ntop-1 accuracy: {top1}/{n} = {100 * top1 / n:.1f} %   "
          f"in-category: {in_cat}/{n} = {100 * in_cat / n:.1f} %")
    print(f"self-check: {n - len(broken)}/{n} runs consistent")
    for r in missed:
        print(f"  missed: {r['workload']} {r['cause']} --seed {r['seed']} (lead {r['lead']})")
    # violations grouped by check and finding (the figures differ by run): how many runs, and
    # the first run to replay
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in broken:
        for v in dict.fromkeys(violation_key(v) for v in r["selfcheck"]):
            groups[v].append(r)
    for key, rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        r = rs[0]
        print(f"  {len(rs):>3} run(s): {key}  (e.g. {r['workload']} {r['cause']} "
              f"--seed {r['seed']})")
    if args.out:
        Path(args.out).write_text(json.dumps(runs, indent=1, default=str))
    if args.smoke:
        print("smoke run: accuracy not judged")
        return 0
    return 1 if missed or broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
