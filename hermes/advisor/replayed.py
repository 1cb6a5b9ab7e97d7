"""Replayed speedups for the advisor's recommendations (``advise(..., trace=...)``).

A recommendation whose rule id or emulator option has a what-if transform
(:mod:`hermes.whatif.transforms`) gets ``estimated_speedup`` = replayed step before / after
(``estimate = "replay"``), bounded by the shares of the findings its transform removes
(:func:`replay_bound`; the replayed figure, where it is more, in ``replayed_speedup``); the
others keep the formula. Only the 8
slowest ranks are replayed (the run goes at their pace), a rank of over a million events on its
median step alone (``hermes.whatif.graphs``), so this stays cheap on big traces. Replaying every step, not only
the median one, matters where steps differ (a prefetch queue that drains over the first
steps: the median step is then a half-waiting one).
"""

from __future__ import annotations

import math
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


#: ranks replayed: the slowest ones by median step (the run goes at their pace)
MAX_RANKS = 8


def slowest_ranks(analysis: Any, n: int = MAX_RANKS) -> list[int] | None:
    """The ``n`` slowest ranks by median step in ``analysis`` (None: not known)."""
    med = {}
    for r, rr in (getattr(analysis, "per_rank", None) or {}).items():
        if "steps" in rr and len(rr["steps"].tables.get("windows", ())):
            med[r] = float(rr["steps"].tables["windows"]["dur_ns"].median())
    if not med:
        return None
    return sorted(sorted(med, key=lambda r: -med[r])[:n])


def _events(trace: Any, ranks: list[int] | None, skip: list[str] | None = None
            ) -> tuple[pd.DataFrame, Any]:
    """The events of ``ranks`` (a path is read for those ranks only: big traces stay out of
    memory, as the analysis keeps them; ``skip``: its files the analysis could not read)."""
    if isinstance(trace, (str, Path)):
        from hermes.trace.reader import load

        trace = load(trace, ranks=ranks, lazy_args=True, skip=skip or ())  # args where needed
        return trace.events, trace.meta
    ev = trace if isinstance(trace, pd.DataFrame) else trace.events
    if ranks is not None and "rank" in ev.columns and len(ev):
        keep = ev["rank"].isin(ranks).to_numpy(bool)
        if not keep.all():  # (every rank wanted, e.g. one rank: the events as they are)
            ev = ev[keep]
    return ev, getattr(trace, "meta", None)


def share_bound(share: float) -> float:
    """Most removing all of a finding's time (``share`` of the step) can gain: ``1 / (1 -
    share)``, rounded down to the advisor's 2 decimals (so the figure written never exceeds it)."""
    return math.floor(100.0 / (1.0 - min(max(share, 0.0), 0.999)) + 1e-9) / 100.0


def replay_bound(speedup: float, saved: float, share: float) -> float:
    """A replayed ``speedup`` (median step before / after) whose change removes ``saved`` of the
    run's step time (all steps) where the findings it acts on cost ``share`` of it, bounded:
    as replayed when ``saved <= share``; else the larger of :func:`share_bound` (the median
    step saves at most ``share`` of itself) and the replay with every step's saving scaled by
    ``share / saved`` (the run saves at most ``share`` of its time; where the cause costs the
    median step more than the average one, its median step gains more than ``1 / (1 -
    share)``), rounded down to 2 decimals. Never above ``speedup``."""
    if saved <= share + 1e-9:
        return speedup
    m = (1.0 - 1.0 / max(speedup, 1.0)) * max(share, 0.0) / saved
    scaled = math.floor(100.0 / (1.0 - min(m, 0.999)) + 1e-9) / 100.0
    return min(speedup, max(1.0, scaled, share_bound(share)))


def _claimed(fid: str, key: str, findings: list[Any]) -> dict[str, float]:
    """The findings whose time ``key``'s transform removes: ``fid`` and those of the causes it
    names (``Transform.removes``), id -> time_share."""
    got = lookup(key)
    also = set(got[0].removes) if got is not None else set()
    return {f.id: float(f.time_share) for f in findings if f.id == fid or f.cause in also}


def with_replay(recs: dict[str, list[Recommendation]], trace: Any, analysis: Any, cap: float
                ) -> dict[str, list[Recommendation]]:
    """``recs`` with replayed speedups where a transform exists, re-sorted per finding."""
    if not any(_key(r) for rs in recs.values() for r in rs):
        return recs
    meta = getattr(analysis, "meta", None)
    events, trace_meta = _events(trace, slowest_ranks(analysis),
                                 getattr(analysis, "unread_files", None))
    gs = graphs(events, max_ranks=MAX_RANKS, keep=getattr(analysis, "keep", None))
    cache: dict[str, tuple[float, float] | None] = {}
    why: dict[str, str] = {}
    out = {}
    findings = list(getattr(analysis, "findings", []))
    share = {f.id: float(f.time_share) for f in findings}
    for fid, rs in recs.items():
        # a finding's time_share is the step time its cause costs: a recommendation that removes
        # that cause saves at most that time. A transform acts on every event of its kind, not
        # only on the finding's (fusion also drops launches, more workers also read faster):
        # the time it saves over the run's steps is bounded by the shares of the findings whose
        # time it removes (its own, and those its transform names), the rest is time the
        # analysis gives other causes; the estimate is scaled down to that and the replayed
        # figure kept beside it (docs/rules.md)
        new = []
        for r in rs:
            key = _key(r)
            if key is not None and key not in cache:
                p = predict(gs, [key], trace_meta or meta)
                cache[key] = (p.speedup, p.saved_share) if key in p.applied else None
                if key in p.reasons:
                    why[key] = p.reasons[key]
            got = cache.get(key) if key is not None else None
            if got is not None:
                sp = round(min(max(got[0], 1.0), cap), 2)
                claims = _claimed(fid, key, findings) if fid in share else {}
                s = min(sum(claims.values()), 0.999)
                bound = min(replay_bound(sp, got[1], s), sp) if claims else min(sp, cap)
                own = share_bound(share[fid]) if fid in share else cap
                extra: dict[str, Any] = {}
                if bound > own:  # above the finding's own 1 / (1 - share): say why
                    extra["claims"] = {"findings": claims,
                                       "saved_share": min(got[1], s)}
                if bound < sp:
                    names = f"this finding's {100 * s:.1f} %" if list(claims) == [fid] else \
                        f"these findings' {100 * s:.1f} % (" + ", ".join(
                            f"{k} {100 * v:.1f} %" for k, v in claims.items()) + ")"
                    r = replace(r, estimated_speedup=bound, estimate="replay",
                                replayed_speedup=sp, **extra,
                                how=f"{r.how} (Replayed: {sp:.2f}x; capped at {bound:.2f}x, "
                                    f"all of {names} of the step: the rest is time other "
                                    "causes cost.)")
                else:
                    r = replace(r, estimated_speedup=sp, estimate="replay", **extra)
            elif key in why:  # a transform exists but the trace lacks what it needs: say so
                r = replace(r, how=f"{r.how} (Estimate from the rule's formula: {why[key]}.)")
            new.append(r)
        # best first; among equals (capped at the same bound) the larger replay, then the
        # table's order (a stable sort)
        new.sort(key=lambda x: (-x.estimated_speedup,
                                -(x.replayed_speedup or x.estimated_speedup)))
        out[fid] = new
    return out
