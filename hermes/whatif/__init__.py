"""What-if: predict a step's time after optimizations by replaying its dependency graph.

Stage 3 (beside the advisor): takes a trace's events, builds each rank's step graph
(:mod:`hermes.analyzers.stepgraph`, the critical path's graph), applies the transforms of the
named optimizations (:mod:`hermes.whatif.transforms`) and replays it (:mod:`.replay`).
Figures are medians over steps; the run's step time is its slowest rank's (synchronous training
goes at the pace of the slowest rank). ``graphs(..., median_only=True)`` replays only each
rank's median step (ranks of over a million events always: big traces stay fast).

Left out (the replay keeps their measured times): collectives are not matched across ranks
(a collective's wait for a late rank stays as measured on the other ranks), CUDA graph launches
are one task each, precision / tiling / bucket size / alignment changes have no transform yet.
A transform that needs what a trace does not record says why (``Prediction.reasons``) and is
not applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.steps import step_windows
from hermes.whatif import replay as rp
from hermes.whatif.transforms import STRAGGLER, TRANSFORMS, Transform, lookup

__all__ = ["TRANSFORMS", "Prediction", "graphs", "predict", "speedups"]


@dataclass
class Prediction:
    """Measured and predicted step time (ms; medians over steps, slowest rank), per rank."""

    measured_ms: float
    predicted_ms: float
    replay_ms: float  # the replay with nothing changed (its own error vs measured_ms)
    per_rank: dict[int, dict[str, float]]
    applied: list[str]
    unknown: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    breakdown: dict[str, dict[str, float]] = field(default_factory=dict)
    #: spec -> why its transform was not applied (the trace lacks what it needs)
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def speedup(self) -> float:
        """Replayed step before / after (the replay's own error cancels out)."""
        return self.replay_ms / self.predicted_ms if self.predicted_ms > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"measured_ms": round(self.measured_ms, 6),
                "predicted_ms": round(self.predicted_ms, 6),
                "replay_ms": round(self.replay_ms, 6),
                "replay_error_pct": round(100 * (self.replay_ms / self.measured_ms - 1), 3)
                if self.measured_ms else 0.0,
                "speedup": round(self.speedup, 4),
                "per_rank": {str(r): v for r, v in self.per_rank.items()},
                "applied": self.applied, "unknown": self.unknown, "overlaps": self.overlaps,
                "breakdown": self.breakdown, "reasons": self.reasons}


def _median_window(ev: pd.DataFrame) -> pd.DataFrame:
    w = step_windows(ev)
    if len(w) <= 1:
        return w
    d = (w["end_ns"] - w["start_ns"]).to_numpy(np.int64)
    i = int(np.argsort(d, kind="stable")[(d.size - 1) // 2])
    return w.iloc[[i]].reset_index(drop=True)


def graphs(events: pd.DataFrame, ranks: Iterable[int] | None = None,
           median_only: bool = False, max_events: int = 1_000_000,
           max_ranks: int = 0) -> dict[int, rp.StepGraph]:
    """Each rank's step graph: of all its steps, or of its median step alone when
    ``median_only`` or when the rank has over ``max_events`` events (big traces stay cheap).
    ``max_ranks`` > 0 keeps only that many ranks, the slowest by median step (the run goes at
    their pace)."""
    if "rank" in events.columns and len(events):
        groups = {int(r): g for r, g in events.groupby("rank", sort=True)}
    else:
        groups = {0: events}
    if ranks is not None:
        want = set(ranks)
        groups = {r: g for r, g in groups.items() if r in want}
    if max_ranks and len(groups) > max_ranks:
        med = {r: float(step_windows(g)["dur_ns"].median()) for r, g in groups.items()}
        keep = sorted(groups, key=lambda r: -med[r])[:max_ranks]
        groups = {r: groups[r] for r in sorted(keep)}
    out = {}
    for r, ev in groups.items():
        ev = ev.reset_index(drop=True)
        one = median_only or len(ev) > max_events
        out[r] = _with_facts(rp.build(ev, _median_window(ev) if one else None, rank=r), ev)
    return out


#: per-event facts the device and communication transforms read (NaN / <NA> where unknown)
FACTS = ("unit", "flops", "bytes", "corr_id", "coll_bytes", "coll_group", "args")


def _with_facts(sg: rp.StepGraph, ev: pd.DataFrame) -> rp.StepGraph:
    """``sg`` whose ``info`` also carries the events' :data:`FACTS` (unit, FLOPs, bytes, ...)."""
    src = sg.info["src"].to_numpy(np.int64)
    # a helper thread pinning a later batch (data_fetch on a host lane) works for the data
    # pipeline like the loader workers: the loop waits for its batch through its data wait,
    # so the step does not end when the pinning does (the replay's step end leaves loader
    # lanes out)
    fetch = (sg.info["kind"].astype(str) == "data_fetch").to_numpy() & \
        sg.info["host"].to_numpy(bool)
    if fetch.any():
        sg.info["loader"] = sg.info["loader"].to_numpy(bool) | fetch
    for c in FACTS:
        if c in ev.columns and c not in sg.info.columns:
            sg.info[c] = ev[c].take(src).to_numpy()
    return sg


def _resolve(specs: Sequence[str], meta: Any) -> tuple[list[tuple[str, Transform, dict]],
                                                       list[str]]:
    got, unknown = [], []
    workers = _recorded_workers(meta)
    device = dict(getattr(meta, "device", {}) or {})
    settings = dict(dict(getattr(meta, "extra", {}) or {}).get("settings") or {})
    for spec in specs:
        t = lookup(spec)
        if t is None:
            unknown.append(spec)
            continue
        tr, params = t
        params["device"], params["settings"] = device, settings
        params["ranks"] = len(getattr(meta, "ranks", ()) or ())
        if tr.name == "data" and "workers" in params and workers:
            params["speedup"] = max(params["workers"] / workers, 1.0)
        got.append((spec, tr, params))
    return got, unknown


def _recorded_workers(meta: Any) -> float:
    extra = dict(getattr(meta, "extra", {}) or {})
    for key in ("settings", "environment", "env"):
        rec = extra.get(key)
        if isinstance(rec, Mapping) and isinstance(rec.get("num_workers"), (int, float)):
            return float(rec["num_workers"])
    return 0.0


def _breakdown(sg: rp.StepGraph, ch: rp.Change | None) -> dict[str, float]:
    """Own time per component (ms per step, mean over the replayed steps)."""
    w = rp.weights(sg, ch)
    seg = sg.g.seg_event
    ok = seg >= 0
    comp = sg.info["component"].cat.codes.to_numpy()[seg[ok]]
    cats = list(sg.info["component"].cat.categories)
    tot = np.bincount(comp, weights=w[ok], minlength=len(cats))
    nw = max(len(sg.windows), 1)
    return {c: round(float(tot[i]) / nw / 1e6, 4) for i, c in enumerate(cats)}


def predict(gs: Mapping[int, rp.StepGraph], specs: Sequence[str] = (), meta: Any = None
            ) -> Prediction:
    """Step time after the optimizations ``specs`` (rule ids or emulator options) combined."""
    chosen, unknown = _resolve(specs, meta)
    if any(tr.name == STRAGGLER for _, tr, _ in chosen) and _collectives(gs):
        # the other ranks' waits in collectives would stay as measured (collectives are not
        # matched across ranks yet): no replay, the formula stands
        unknown += [s for s, tr, _ in chosen if tr.name == STRAGGLER]
        chosen = [c for c in chosen if c[1].name != STRAGGLER]
    reasons: dict[str, str] = {}
    for spec, tr, params in chosen:
        why = next((m for sg in gs.values() if (m := tr.missing(sg, params))), None) \
            if tr.missing is not None else None
        if why:
            reasons[spec] = why
    unknown += list(reasons)
    chosen = [c for c in chosen if c[0] not in reasons]
    measured = {r: float(np.median(rp.measured(sg))) if len(sg.windows) else 0.0
                for r, sg in gs.items()}
    slow = max(measured, key=lambda r: measured[r]) if measured else 0
    per_rank: dict[int, dict[str, float]] = {}
    changes: dict[int, rp.Change] = {}
    for r, sg in gs.items():
        ch = rp.Change.none(sg)
        for _, tr, params in chosen:
            tr.apply(sg, ch, params)
        if any(tr.name == STRAGGLER for _, tr, _ in chosen) and r == slow and len(gs) > 1:
            # that rank's durations scaled to the median rank (its excess removed)
            target = float(np.median(list(measured.values())))
            ch.scale *= target / measured[r] if measured[r] else 1.0
        changes[r] = ch
        base = rp.replay(sg)
        new = rp.replay(sg, ch)
        per_rank[r] = {"measured_ms": measured[r] / 1e6,
                       "replay_ms": float(np.median(base)) / 1e6 if base.size else 0.0,
                       "predicted_ms": float(np.median(new)) / 1e6 if new.size else 0.0}

    def pick(key: str) -> float:
        return max((v[key] for v in per_rank.values()), default=0.0)

    touched: dict[str, list[str]] = {}
    for spec, tr, _ in chosen:
        touched.setdefault(tr.touches, []).append(spec)
    overlaps = [f"{', '.join(v)} all shrink {k} time: their gains overlap, the combined "
                f"figure is less than the product" for k, v in touched.items() if len(v) > 1]
    bd = {}
    if gs:
        sg = gs[slow]
        bd = {"before": _breakdown(sg, None), "after": _breakdown(sg, changes[slow])}
    return Prediction(pick("measured_ms"), pick("predicted_ms"), pick("replay_ms"), per_rank,
                      [s for s, _, _ in chosen], unknown, overlaps, bd, reasons)


def _collectives(gs: Mapping[int, rp.StepGraph]) -> bool:
    return len(gs) > 1 and any((sg.info["kind"] == "collective").any() for sg in gs.values())


def speedups(gs: Mapping[int, rp.StepGraph], specs: Iterable[str], meta: Any = None
             ) -> dict[str, float]:
    """Replayed speedup of each optimization alone (specs without a transform left out)."""
    out = {}
    for spec in specs:
        if lookup(spec) is None:
            continue
        out[spec] = round(predict(gs, [spec], meta).speedup, 4)
    return out
