"""Comparisons between ranks that cluster analyses share: how much slower a rank runs the
operators every rank runs (a slow device) against doing more work (load imbalance)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def same_op_slowdown(ctx: Any, slow: list[int]) -> dict[int, float]:
    """Per slow rank, the median over operators run on every rank of (its mean time per call /
    the other ranks' median): ~1 means it does more work (load imbalance), > 1 that the same
    operators run slower there (clock, thermal, a weaker device)."""
    per: dict[int, pd.Series] = {}
    for r, res in ctx.per_rank.items():
        t = res["computation"].tables.get("op_time") if "computation" in res else None
        if t is not None and len(t):
            per[int(r)] = (t["time_ns"] / t["count"]).set_axis(t["name"].astype(str))
    out: dict[int, float] = {}
    for r in slow:
        others = [v for k, v in per.items() if k not in slow]
        if r not in per or not others:
            continue
        ref = pd.concat(others, axis=1).median(axis=1)
        ratio = (per[r] / ref).dropna()
        ratio = ratio[np.isfinite(ratio)]
        if len(ratio):
            out[int(r)] = round(float(ratio.median()), 4)
    return out
