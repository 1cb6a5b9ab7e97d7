"""Replayed speedups for the advisor's recommendations (``advise(..., trace=...)``).

A recommendation whose rule id or emulator option has a what-if transform
(:mod:`hermes.whatif.transforms`) gets ``estimated_speedup`` = replayed step before / after
(``estimate = "replay"``); the others keep the formula. Only the 8 slowest ranks are replayed
(the run goes at their pace), a rank of over a million events on its median step alone
(``hermes.whatif.graphs``), so this stays cheap on big traces. Replaying every step, not only
the median one, matters where steps differ (a prefetch queue that drains over the first
steps: the median step is then a half-waiting one).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from hermes.findings import Recommendation
from hermes.whatif import graphs, predict
from hermes.whatif.transforms import lookup


def _key(rec: Recommendation) -> str | None:
    """The spec a transform is looked up by: the rule id, else the emulator option; the
    option when both name the same transform (it carries the value, e.g. workers)."""
    by_rule = lookup(rec.rule)
    by_opt = lookup(rec.emulator_opt) if rec.emulator_opt else None
    if by_opt is not None and (by_rule is None or by_rule[0] is by_opt[0]):
        return rec.emulator_opt
    return rec.rule if by_rule is not None else None


def _events(trace: Any) -> tuple[pd.DataFrame, Any]:
    if isinstance(trace, pd.DataFrame):
        return trace, None
    if isinstance(trace, (str, Path)):
        from hermes.trace.reader import load

        trace = load(trace)
    return trace.events, getattr(trace, "meta", None)


def with_replay(recs: dict[str, list[Recommendation]], trace: Any, meta: Any, cap: float
                ) -> dict[str, list[Recommendation]]:
    """``recs`` with replayed speedups where a transform exists, re-sorted per finding."""
    if not any(_key(r) for rs in recs.values() for r in rs):
        return recs
    events, trace_meta = _events(trace)
    gs = graphs(events, max_ranks=8)
    cache: dict[str, float] = {}
    out = {}
    for fid, rs in recs.items():
        new = []
        for r in rs:
            key = _key(r)
            if key is not None:
                if key not in cache:
                    cache[key] = predict(gs, [key], trace_meta or meta).speedup
                r = replace(r, estimated_speedup=round(min(max(cache[key], 1.0), cap), 2),
                            estimate="replay")
            new.append(r)
        new.sort(key=lambda x: -x.estimated_speedup)  # stable: table order among equals
        out[fid] = new
    return out
