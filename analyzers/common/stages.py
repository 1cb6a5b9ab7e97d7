"""Pipeline stages from the point-to-point transfers matched across ranks, and the work each
stage does per step (docs/analysis/cluster.md, "Pipeline stages").

A **pipeline** is a set of ranks joined by matched point-to-point transfers (a connected
component of the ``p2p src->dst`` groups of ``communication_cluster``'s ``sync`` table); each of
its ranks is a **stage**. A stage's **work** per step is the step's wall time minus the time the
rank only communicates (waits at or transfers in a send, a receive or a collective with nothing
else running): what it computes, launches or runs unrecorded between its transfers. Per step,
median over steps (the overlap analyzer's per-step partition), else the rank's totals over its
steps.

With ``M`` micro-batches in flight and per-micro-batch stage times ``t_s``, a pipelined step takes
about ``sum(t_s) + (M - 1) * max(t_s)`` (fill and drain pass every stage once, the steady state
runs at the slowest stage). Per step, ``W_s = M * t_s`` and ``T = sum(W) / M + (M - 1) / M *
max(W)``, so ``(M - 1) / M = 1 - (T - max W) / (sum W - max W)`` is read from the measured step
(clamped to [0, 1]: 0 when the stages run one after the other, 1 when the step is the slowest
stage's work). Balanced stages (every ``W_s`` at the mean) gain ``(M - 1) / M * (max W - mean
W)`` per step: nothing for stages that take turns, the slow stage's excess when they overlap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

#: ``p2p src->dst`` (:data:`~hermes.analyzers.common.p2p.P2P_GROUP`)
_PAIR = re.compile(r"^p2p (\d+)->(\d+)$")
COLUMNS = ["pipeline", "rank", "work_ms", "step_ms", "steps"]


def pairs(sync: pd.DataFrame | None) -> list[tuple[int, int]]:
    """The (src, dst) rank pairs with a point-to-point transfer matched across ranks."""
    if sync is None or len(sync) == 0 or "group" not in sync.columns:
        return []
    out = set()
    for g in pd.unique(sync["group"].astype(str)):
        m = _PAIR.match(g)
        if m:
            out.add((int(m.group(1)), int(m.group(2))))
    return sorted(out)


def pipelines(links: list[tuple[int, int]]) -> list[list[int]]:
    """The connected components of the transfer pairs (a pair per edge, few per rank), each
    a sorted list of ranks, ordered by their lowest rank."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in links:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    comp: dict[int, list[int]] = {}
    for x in parent:
        comp.setdefault(root(x), []).append(x)
    return sorted((sorted(v) for v in comp.values()), key=lambda v: v[0])


def _work(res: Mapping[str, Any], row: pd.Series) -> tuple[float, float]:
    """(work, step) in ms per step of one rank: medians over its steps of the overlap
    analyzer's per-step wall time minus communication only, else its totals over its steps."""
    ov = res.get("overlap")
    ps = ov.tables.get("per_step") if ov is not None else None
    if ps is not None and len(ps) and {"dur_ns", "communication_only_ns"} <= set(ps.columns):
        dur = ps["dur_ns"].to_numpy(np.float64)
        work = dur - ps["communication_only_ns"].to_numpy(np.float64)
        return float(np.median(work)) / 1e6, float(np.median(dur)) / 1e6
    steps = max(1, int(row["steps"]))
    total = float(row["step_total_ns"])
    return (total - float(row["comm_only_ns"])) / steps / 1e6, total / steps / 1e6


def stage_table(per_rank: Mapping[int, Mapping[str, Any]], ranks: pd.DataFrame,
                sync: pd.DataFrame | None) -> pd.DataFrame:
    """One row per stage of every pipeline of two or more ranks (``ranks``: the cluster
    analyzer's rank table): pipeline number, rank, work and step time per step (ms)."""
    groups = pipelines(pairs(sync))
    by_rank = ranks.set_index("rank") if len(ranks) else ranks
    rows = []
    for i, members in enumerate(g for g in groups if len(g) >= 2):
        for r in members:
            if r not in by_rank.index:
                continue
            w, s = _work(per_rank.get(r, {}), by_rank.loc[r])
            rows.append({"pipeline": i, "rank": int(r), "work_ms": max(0.0, w), "step_ms": s,
                         "steps": int(by_rank.loc[r, "steps"])})
    return pd.DataFrame(rows, columns=COLUMNS)


def balance_gain(t: pd.DataFrame) -> dict[str, float]:
    """For one pipeline's stages (rows of :func:`stage_table`): the step time (median of its
    stages' steps), the pipelined fraction ``(M - 1) / M`` read from it and the step time
    balanced stages would save (ms), per the module doc."""
    w = t["work_ms"].to_numpy(np.float64)
    step = float(np.median(t["step_ms"].to_numpy(np.float64)))
    hi, tot = float(w.max()), float(w.sum())
    rest = tot - hi
    frac = float(np.clip(1.0 - (step - hi) / rest, 0.0, 1.0)) if rest > 0 else 0.0
    return {"step_ms": step, "pipelined": frac, "gain_ms": frac * (hi - float(w.mean()))}
