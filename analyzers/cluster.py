"""Cluster analyzer ``cluster``: slow ranks, load imbalance, pipeline bubbles, poor parallelism.

``cluster(ctx: ClusterContext) -> AnalyzerResult`` over the per-rank results of ``computation``,
``communication`` and (when present) ``overlap``, plus ``communication_cluster``'s waits.
Formulas (``docs/analysis/cluster.md``):

* imbalance of a per-rank figure x (median step time, median compute time per step):
  (max x - min x) / mean x; above SLOW_RANK_RATIO (5 %, msprof-analyze's slow-rank rule) the
  ranks with (x_i - min x) / mean x > 5 % are slow.
* ``computation.slow_node``: compute imbalance > 5 %; time_share = (max compute - median compute
  of the other ranks) / median step time: the step time the job gains once the slow node computes
  like the others (every rank waits for the slowest at the next collective).
* ``parallel.poor_parallelism``: per rank, hideable = pipeline bubbles + min(queued
  communication not overlapped - synchronization wait, computation not overlapped), where a
  collective is *queued* when it started the moment the previous one ended (it was ready and
  waited for the link; the first of a back-to-back run is dependency-bound) -- communication that
  could run under computation that runs alone; time_share = mean over ranks of hideable / step time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common.opinfo import top_ops
from hermes.analyzers.common.ranks import same_op_slowdown
from hermes.analyzers.common.stages import balance_gain, stage_table
from hermes.analyzers.engine.base import AnalyzerResult, ClusterContext, register
from hermes.findings import MIN_SHARE, Finding

SLOW_RANK_RATIO = 0.05
RANK_COLUMNS = ["rank", "steps", "step_median_ms", "compute_median_ms", "step_total_ns",
                "comm_only_ns", "comp_only_ns", "overlapped_ns", "bubble_ns", "wait_ns",
                "overlap_ratio", "hideable_ns", "hideable_share"]


def imbalance(x: pd.Series) -> float:
    """(max - min) / mean; 0 for fewer than two values or a zero mean."""
    x = x.dropna()
    if len(x) < 2 or x.mean() <= 0:
        return 0.0
    return float((x.max() - x.min()) / x.mean())


def slow_ranks(x: pd.Series) -> list[int]:
    """Ranks (index of ``x``) whose value exceeds the minimum by > 5 % of the mean."""
    x = x.dropna()
    if imbalance(x) <= SLOW_RANK_RATIO:
        return []
    return [int(r) for r in x.index[(x - x.min()) / x.mean() > SLOW_RANK_RATIO]]


def _metric(res: dict[str, Any], name: str, key: str, default: float = 0.0) -> float:
    r = res.get(name)
    return float(r.metrics.get(key, default)) if r is not None else default


def rank_table(ctx: ClusterContext) -> pd.DataFrame:
    """One row per rank with the figures the cluster rules use (times in ns / ms)."""
    sync = ctx.results.get("communication_cluster")
    waits = sync.metrics.get("wait_ns_per_rank", {}) if sync is not None else {}
    rows = []
    for rank, res in sorted(ctx.per_rank.items()):
        total = _metric(res, "computation", "step_total_ns") or \
            _metric(res, "communication", "step_total_ns")
        ov = res.get("overlap")
        if ov is not None and total:
            # engineer A's partition (percent of step wall time) when the overlap analyzer ran
            comm_only = ov.metrics.get("communication_only_pct", 0.0) / 100 * total
            comp_only = ov.metrics.get("computation_only_pct", 0.0) / 100 * total
            overlapped = ov.metrics.get("overlapped_pct", 0.0) / 100 * total
        else:
            comm_only = _metric(res, "communication", "comm_only_ns")
            comp_only = _metric(res, "communication", "comp_only_ns")
            overlapped = _metric(res, "communication", "overlapped_ns")
        wait = float(waits.get(rank, waits.get(str(rank), 0)) or
                     _metric(res, "communication", "wait_ns"))
        bubble = _metric(res, "communication", "bubble_ns")
        compute_ms = _metric(res, "computation", "compute_median_ms")
        if ov is not None and ov.metrics.get("from_summary"):
            # a rank analysed from its step summary has no kernels: its compute time per step
            # and its bubbles are the summary's (Computing, Bubble), not zero
            ps = ov.tables["per_step"]
            compute_ms = float((ps["computation_only_ns"] + ps["overlapped_ns"]).median() / 1e6)
            bubble = max(bubble, float(ov.metrics.get("bubble_pct", 0.0)) / 100 * total)
        # communication that could have run under computation: collectives queued behind other
        # communication while the device idled (a dependency-bound collective, one computation
        # waits for, cannot hide), bounded by the computation that runs alone; and bubbles
        queued = _metric(res, "communication", "queued_comm_only_ns")
        hide = bubble + max(0.0, min(queued - wait, comp_only))
        comm = comm_only + overlapped
        rows.append({"rank": int(rank), "steps": int(_metric(res, "computation", "steps")),
                     "step_median_ms": _metric(res, "computation", "step_median_ms"),
                     "compute_median_ms": compute_ms,
                     "step_total_ns": int(total), "comm_only_ns": int(comm_only),
                     "comp_only_ns": int(comp_only), "overlapped_ns": int(overlapped),
                     "bubble_ns": int(bubble), "wait_ns": int(wait),
                     "overlap_ratio": overlapped / comm if comm else np.nan,
                     "hideable_ns": int(hide),
                     "hideable_share": min(1.0, hide / total) if total else 0.0})
    return pd.DataFrame(rows, columns=RANK_COLUMNS)


def _slow_ops(ctx: ClusterContext, slow: list[int]) -> dict[str, Any]:
    """The slow ranks' operators with most device time (``computation``'s ``op_time``),
    ``{"top_ops": [...]}``; ranks without a kernel table (analysed from a step summary) have
    none, and the evidence says so."""
    rows = []
    for r in slow:
        res = ctx.per_rank.get(r, {})
        t = res["computation"].tables.get("op_time") if "computation" in res else None
        if t is not None and len(t):
            rows.append(t[["name", "time_ns", "count"]])
    if not rows:
        return {"top_ops": [], "no_events_reason": "the slow ranks record no kernels: their "
                "compute time is their step summary's (Ascend step_trace_time Computing)"}
    g = pd.concat(rows).groupby("name", sort=False)[["time_ns", "count"]].sum()
    g = g.sort_values("time_ns", ascending=False).head(5)
    return {"top_ops": [{"name": str(k), "time_ns": int(v["time_ns"]), "count": int(v["count"])}
                        for k, v in g.iterrows()]}


@register("cluster", scope="cluster", needs=("communication_cluster",))
def cluster(ctx: ClusterContext) -> AnalyzerResult:
    """Slow ranks, load imbalance, pipeline bubbles and poor parallelism across ranks."""
    t = rank_table(ctx)
    res = AnalyzerResult("cluster", tables={"ranks": t})
    if len(t) == 0:
        res.metrics.update({"ranks": 0, "step_imbalance": 0.0, "compute_imbalance": 0.0,
                            "slow_ranks": [], "load_imbalance": 0.0})
        return res
    ti = t.set_index("rank")
    step_imb, comp_imb = imbalance(ti["step_median_ms"]), imbalance(ti["compute_median_ms"])
    slow_c = slow_ranks(ti["compute_median_ms"])
    comp = ti["compute_median_ms"]
    res.metrics.update({
        "ranks": int(len(t)), "step_imbalance": step_imb, "compute_imbalance": comp_imb,
        "slow_ranks": slow_ranks(ti["step_median_ms"]), "slow_compute_ranks": slow_c,
        "load_imbalance": float(comp.max() / comp.mean()) if comp.mean() > 0 else 0.0,
        "bubble_pct_mean": float((ti["bubble_ns"] / ti["step_total_ns"].where(
            ti["step_total_ns"] > 0)).fillna(0).mean() * 100),
    })
    step_med = float(ti["step_median_ms"].median())
    if slow_c and step_med > 0:
        others = comp.drop(index=slow_c)
        typical = float(others.median()) if len(others) else float(comp.min())
        share = (float(comp.max()) - typical) / step_med
        if share >= MIN_SHARE:
            res.findings.append(Finding(
                "computation", "slow_node", min(1.0, share),
                f"rank(s) {', '.join(map(str, slow_c))} compute {100 * comp_imb:.1f}% longer "
                f"than the fastest ((max - min) / mean > 5%)",
                evidence={"compute_imbalance": round(comp_imb, 4),
                          "step_imbalance": round(step_imb, 4),
                          "same_op_slowdown": same_op_slowdown(ctx, slow_c),
                          "compute_median_ms": {int(r): round(float(v), 4)
                                                for r, v in comp.items()},
                          **_slow_ops(ctx, slow_c)},
                ranks=tuple(slow_c)))
    sync = ctx.results.get("communication_cluster")
    stages = stage_table(ctx.per_rank, t, sync.tables.get("sync") if sync is not None else None)
    res.tables["stages"] = stages
    slow_stage = _unequal_stages(stages, res)
    share = float(ti["hideable_share"].mean())
    if share >= MIN_SHARE:
        worst = ti["hideable_share"].idxmax()
        # pipeline bubbles (point-to-point time nothing overlaps) named only where there are
        bub = float(res.metrics["bubble_pct_mean"])
        what = "communication" + (f" and pipeline bubbles ({bub:.1f}% of step time)"
                                   if bub >= 0.05 else "")
        res.findings.append(Finding(
            "parallel", "poor_parallelism", min(1.0, share),
            f"{100 * share:.1f}% of step time is {what} that could overlap computation "
            f"(overlap ratio {float(ti['overlap_ratio'].mean()):.2f})"
            + (f"; {slow_stage['text']}" if slow_stage else ""),
            evidence={"hideable_share_per_rank": {int(r): round(float(v), 4) for r, v in
                                                  ti["hideable_share"].items()},
                      "bubble_pct_mean": round(res.metrics["bubble_pct_mean"], 3),
                      "overlap_ratio_mean": round(float(ti["overlap_ratio"].mean()), 4)
                      if ti["overlap_ratio"].notna().any() else None,
                      "worst_rank": int(worst), "top_ops": _comm_ops(ctx, int(worst)),
                      **({"stages": slow_stage["stages"]} if slow_stage else {})},
            ranks=tuple(int(r) for r in ti.index[ti["hideable_share"] >= MIN_SHARE])))
    return res


def _unequal_stages(stages: pd.DataFrame, res: AnalyzerResult) -> dict[str, Any] | None:
    """Pipelines whose stages do unequal work (imbalance of their work per step > 5 %):
    ``metrics.pipelines`` for each pipeline, a ``parallel.poor_parallelism`` finding (reason
    ``unequal_stages``) when balancing them saves >= ``MIN_SHARE`` of the step, and the slowest
    stage's sentence and figures for the bubbles finding (None: no unequal pipeline)."""
    out, worst = [], None
    for p, t in stages.groupby("pipeline", sort=True):
        w = t.set_index("rank")["work_ms"]
        slow = slow_ranks(w)
        g = balance_gain(t)
        row = {"ranks": [int(r) for r in w.index], "slow_ranks": slow,
               "work_ms": {int(r): round(float(v), 4) for r, v in w.items()},
               "imbalance": round(imbalance(w), 4), "step_ms": round(g["step_ms"], 4),
               "pipelined": round(g["pipelined"], 4), "gain_ms": round(g["gain_ms"], 4)}
        out.append(row)
        if slow and (worst is None or g["gain_ms"] / max(g["step_ms"], 1e-9) >
                     worst["gain_ms"] / max(worst["step_ms"], 1e-9)):
            worst = row
    res.metrics["pipelines"] = out
    if worst is None:
        return None
    w = worst["work_ms"]
    fast = min(w, key=lambda r: w[r])
    top = max(w, key=lambda r: w[r])
    like = sum(1 for row in out if row["slow_ranks"]) - 1
    text = (f"the slowest pipeline stage is rank {top} ({w[top]:.1f} ms of work per step "
            f"between its transfers, {w[top] / w[fast]:.2g}x rank {fast}'s {w[fast]:.1f} ms)"
            if w[fast] > 0 else f"the slowest pipeline stage is rank {top} ({w[top]:.1f} ms of "
            "work per step between its transfers)") + \
        (f" (and in {like} more pipeline(s) alike)" if like > 0 else "")
    share = worst["gain_ms"] / worst["step_ms"] if worst["step_ms"] > 0 else 0.0
    ranks = sorted({r for row in out for r in row["slow_ranks"]})
    if share >= MIN_SHARE:
        res.findings.append(Finding(
            "parallel", "poor_parallelism", min(1.0, share),
            f"pipeline stages do unequal work: {text}; the step overlaps the stages "
            f"{100 * worst['pipelined']:.0f}% of the way, so balanced stages would save "
            f"{worst['gain_ms']:.1f} ms of the {worst['step_ms']:.1f} ms step",
            evidence={"reason": "unequal_stages", "pipelines": out,
                      "slow_stage_ranks": ", ".join(map(str, ranks)),
                      "stage_ratio": round(w[top] / w[fast], 4) if w[fast] > 0 else 0.0,
                      "pipelined": worst["pipelined"], "gain_ms": worst["gain_ms"]},
            ranks=tuple(ranks)))
    return {"text": text, "stages": worst}


def _comm_ops(ctx: ClusterContext, rank: int) -> list[dict[str, Any]]:
    """The collectives of ``rank`` with most time: the communication that could overlap."""
    res = ctx.per_rank.get(rank, {}).get("communication")
    t = res.tables.get("collectives") if res is not None else None
    if t is None or len(t) == 0:
        return []
    return top_ops(t.rename(columns={"op": "name"}))
