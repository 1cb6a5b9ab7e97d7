"""What-if predictions: each rank's step graph with the facts the transforms read (``graphs``),
the replay of the named optimizations on them (``predict``) and each optimization alone
(``speedups``); the package docstring (:mod:`hermes.whatif`) describes the model."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common.steps import step_windows
from hermes.trace.args import has_args
from hermes.whatif import cluster
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
    #: share of the replayed time over all steps that the change removes, on the rank that
    #: sets ``predicted_ms`` (1 - sum after / sum before; the median step may save more or
    #: less than that where steps differ)
    saved_share: float = 0.0

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
           max_ranks: int = 0, keep: Any = None) -> dict[int, rp.StepGraph]:
    """Each rank's step graph: of all its steps, or of its median step alone when
    ``median_only`` or when the rank has over ``max_events`` events (big traces stay cheap).
    ``max_ranks`` > 0 keeps only that many ranks, the slowest by median step (the run goes at
    their pace). ``keep``: the analysis run's store of the same events (``Analysis.keep``):
    the critical path's graphs are taken from it instead of built again."""
    rk = events["rank"].to_numpy() if "rank" in events.columns and len(events) else None
    if rk is not None and rk.min() == rk.max():  # one rank: no split (no copy)
        groups = {int(rk[0]): events}
    elif rk is not None:
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
    one_step = median_only or any(len(g) > max_events for g in groups.values())
    common = _common_median(groups) if len(groups) > 1 and one_step else None
    for r, ev in groups.items():
        ev = ev.reset_index(drop=True)
        one = median_only or len(ev) > max_events
        w = None
        if one:
            w = step_windows(ev) if common is not None else _median_window(ev)
            w = w[w["step"] == common].reset_index(drop=True) if common is not None else w
            w = w if len(w) else _median_window(ev)
        out[r] = _with_facts(rp.build(ev, w, rank=r, keep=keep), ev)
    return out


def _common_median(groups: Mapping[int, pd.DataFrame]) -> int | None:
    """The step number every rank replays when only one step is: the one whose slowest rank's
    time is the median (the ranks meet in its collectives, ``cluster``); None without one step
    number that every rank has."""
    ws = [step_windows(g)[["step", "dur_ns"]] for g in groups.values()]
    both = pd.concat(ws).groupby("step")["dur_ns"].agg(["max", "size"])
    both = both[(both["size"] == len(ws)) & (both.index >= 0)].sort_values("max", kind="stable")
    return int(both.index[(len(both) - 1) // 2]) if len(both) else None


#: per-event facts the device and communication transforms read (NaN / <NA> where unknown);
#: the events' ``args`` text is read where needed (``facts.args_at``), not copied per event
FACTS = ("unit", "flops", "bytes", "corr_id", "coll_bytes", "coll_group")


def _with_facts(sg: rp.StepGraph, ev: pd.DataFrame) -> rp.StepGraph:
    """``sg`` whose ``info`` also carries the events' :data:`FACTS` (unit, FLOPs, bytes, ...),
    and the events whose ``args`` transforms read (``sg.args``: their own column or, loaded
    with ``lazy_args``, their file's)."""
    src = sg.info["src"].to_numpy(np.int64)
    if has_args(ev):
        sg.args = ev
    add = [c for c in FACTS if c in ev.columns and c not in sg.info.columns]
    if not add:
        return sg
    cols = {c: sg.info[c].array for c in sg.info.columns}
    for c in add:
        col = ev[c].array.take(src)
        # text and categories keep their array (no Python string per event); numbers as
        # numpy (NaN where unknown)
        text = isinstance(col.dtype, (pd.CategoricalDtype, pd.StringDtype))
        cols[c] = col if text else col.to_numpy()
    # (one frame of the arrays as they are, not a column set at a time)
    sg.info = pd.DataFrame(cols, index=sg.info.index, copy=False)
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


def _breakdown(sg: rp.StepGraph, ch: rp.Change | None, w: np.ndarray | None = None
               ) -> dict[str, float]:
    """Own time per component (ms per step, mean over the replayed steps; ``w``: the
    weights of ``ch``, when the caller has them)."""
    w = rp.weights(sg, ch) if w is None else w
    cats = list(sg.info["component"].cat.categories)
    # each node's component (its segment's event's; one past the last: no segment), kept
    # with what it was computed of
    deps, comp = sg.memo.get("components", ((), None))
    if comp is None or not all(a is b for a, b in zip(deps, (sg.g, sg.info), strict=True)):
        seg = sg.g.seg_event
        # (one gather: seg -1 picks the table's last entry, "no segment")
        comp = np.append(sg.info["component"].cat.codes.to_numpy().astype(np.int64),
                         len(cats))[seg]
        sg.memo["components"] = ((sg.g, sg.info), comp)
    tot = np.bincount(comp, weights=w, minlength=len(cats) + 1)
    nw = max(len(sg.windows), 1)
    return {c: round(float(tot[i]) / nw / 1e6, 4) for i, c in enumerate(cats)}


def predict(gs: Mapping[int, rp.StepGraph], specs: Sequence[str] = (), meta: Any = None
            ) -> Prediction:
    """Step time after the optimizations ``specs`` (rule ids or emulator options) combined."""
    chosen, unknown = _resolve(specs, meta)
    cl, base_all = _unchanged(gs, getattr(meta, "clock_offsets_ns", None))
    straggler = any(tr.name == STRAGGLER for _, tr, _ in chosen)
    if straggler and cl is None and _collectives(gs):
        # collectives found but none matched across ranks: the other ranks' waits would stay
        # as measured, no replay, the formula stands
        unknown += [s for s, tr, _ in chosen if tr.name == STRAGGLER]
        chosen = [c for c in chosen if c[1].name != STRAGGLER]
        straggler = False
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
    changes: dict[int, rp.Change] = {}
    for r, sg in gs.items():
        ch = rp.Change.none(sg)
        for _, tr, params in chosen:
            tr.apply(sg, ch, params)
        changes[r] = ch
    if straggler and len(gs) > 1:
        # the slowest rank's stalls and durations scaled to the pace of the slowest of the
        # others (its excess removed: the run then goes at their pace; with matched collectives
        # the others' waits for it shrink in the joint replay). A rank's own pace: its step
        # replayed with no wait for another rank in collectives
        own = cluster.pace(cl) if cl is not None else measured
        late = max(own, key=lambda r: own[r])
        target = max(v for r, v in own.items() if r != late)
        gap, f = _pace_factors(cl, gs[late], late, own[late], target)
        changes[late].scale *= f
        changes[late].gap *= gap
    ws: dict[int, np.ndarray] = {}  # each rank's weights under its change (computed once)
    if cl is not None:
        new_all = cluster.replay(cl, changes)
    else:
        ws = {r: rp.weights(sg, changes[r]) for r, sg in gs.items()}
        new_all = {r: rp.replay(sg, changes[r], ws[r]) for r, sg in gs.items()}
    workers = _recorded_workers(meta)
    new_all = {r: _loader_bound(gs[r], changes[r], base_all[r], new_all[r], workers)
               for r in gs}
    per_rank: dict[int, dict[str, float]] = {}
    saved: dict[int, float] = {}
    for r in gs:
        base, new = base_all[r], new_all[r]
        per_rank[r] = {"measured_ms": measured[r] / 1e6,
                       "replay_ms": float(np.median(base)) / 1e6 if base.size else 0.0,
                       "predicted_ms": float(np.median(new)) / 1e6 if new.size else 0.0}
        saved[r] = 1.0 - float(new.sum()) / float(base.sum()) if base.sum() > 0 else 0.0

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
        # (before: the same for every set of optimizations, kept with what it was computed of)
        deps, before = sg.memo.get("breakdown", ((), None))
        if before is None or not all(a is b for a, b in zip(deps, (sg.g, sg.w, sg.span),
                                                              strict=True)):
            before = _breakdown(sg, None)
            sg.memo["breakdown"] = ((sg.g, sg.w, sg.span), before)
        bd = {"before": dict(before), "after": _breakdown(sg, changes[slow], ws.get(slow))}
    pace = max(per_rank, key=lambda r: per_rank[r]["predicted_ms"]) if per_rank else None
    return Prediction(pick("measured_ms"), pick("predicted_ms"), pick("replay_ms"), per_rank,
                      [s for s, _, _ in chosen], unknown, overlaps, bd, reasons,
                      saved[pace] if pace is not None else 0.0)


def _loader_bound(sg: rp.StepGraph, ch: rp.Change, base: np.ndarray, new: np.ndarray,
                  workers: float) -> np.ndarray:
    """Replayed steps no faster than the data loader can feed them: one batch a step, each
    taking the loader's work per step (its events' own time over the steps that show loader
    work -- a loader that read ahead shows none in the last steps --, scaled by the change),
    spread over ``W`` workers -- the most loader lanes active in one step, or the
    recorded ``num_workers`` if more (workers outside the trace's window) -- sustain a step of
    ``work / W`` at best (steady state: prefetched batches only delay the wait). A step that
    replayed faster takes that time, but never more than its unchanged replay (a loader that
    ran ahead of the trace's steps)."""
    loader = sg.info["loader"].to_numpy(bool)
    nw = len(sg.windows)
    if not loader.any() or new.size == 0 or nw == 0:
        return new
    own = (sg.info["end"] - sg.info["start"]).to_numpy(np.float64) * ch.scale
    # chains are per (step, lane): a step's loader chains are its active loader lanes
    chain = sg.g.lane[sg.g.event_start[loader]]
    win = sg.info["win"].to_numpy(np.int64)[loader]
    pairs = np.unique(np.stack([win, chain]), axis=1)
    per_step = np.bincount(pairs[0], minlength=nw)
    floor = float(own[loader].sum()) / max(int((per_step > 0).sum()), 1) / \
        max(float(per_step.max()), workers, 1.0)
    return np.maximum(new, np.minimum(floor, base)).astype(new.dtype)


def _unchanged(gs: Mapping[int, rp.StepGraph], offsets: Mapping[int, int] | None
               ) -> tuple[cluster.Cluster | None, dict[int, np.ndarray]]:
    """The ranks' matched collectives and the replay with nothing changed: the same for every
    set of optimizations, so computed once per set of graphs (kept on the first graph, with
    the graphs and offsets they were computed for) and reused by later :func:`predict` calls."""
    key = (tuple(gs), tuple(sorted((int(r), int(v)) for r, v in (offsets or {}).items())))
    graphs_ = tuple(gs.values())
    memo = graphs_[0].memo if graphs_ else {}
    got = memo.get("unchanged")
    if got is not None and got[0] == key and len(got[1]) == len(graphs_) and \
            all(a is b for a, b in zip(got[1], graphs_, strict=True)):
        return got[2], got[3]
    cl = cluster.match(gs, offsets)
    base = cluster.replay(cl) if cl is not None else {r: rp.replay(sg) for r, sg in gs.items()}
    memo["unchanged"] = (key, graphs_, cl, base)
    return cl, base


def _pace_factors(cl: cluster.Cluster | None, sg: rp.StepGraph, late: int, own: float,
                  target: float) -> tuple[float, float]:
    """Factors on the late rank's unrecorded time (gaps, stalls) and on its durations that
    bring its own pace ``own`` to ``target``: its stalls go first (a rank late at every
    collective: a stall before it), then its durations (a slow device). Each factor is found
    by interpolating the pace between 1 and 0 (what stays at 0: the transmissions)."""
    if own <= target or own <= 0:
        return 1.0, 1.0
    if cl is None:  # no collective: the pace is the step
        return target / own, target / own

    def pace(gap: float, scale: float) -> float:
        ch = rp.Change.none(sg)
        ch.scale[:] = scale
        ch.gap = gap
        return cluster.pace(cl, {late: ch})[late]

    no_gap = pace(0.0, 1.0)
    if no_gap <= target:
        return float((target - no_gap) / (own - no_gap)) if own > no_gap else 1.0, 1.0
    fixed = pace(0.0, 0.0)
    return 0.0, float(np.clip((target - fixed) / (no_gap - fixed), 0.0, 1.0)) \
        if no_gap > fixed else 1.0


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
