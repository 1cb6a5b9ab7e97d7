"""Rank analyzer ``fluctuation``: step-time variability, spikes, and what co-occurs with them.

``fluctuation(ctx: RankContext) -> AnalyzerResult``. Definitions (``docs/analysis/fluctuation.md``):

* step times ``x`` from ``steps.step_windows``; ``cv = std(x) / mean(x)``;
  robust z-score ``z = 0.6745 (x - median) / MAD`` (MAD = median absolute deviation).
* a **spike** is a step with ``z > Z_SPIKE`` and ``x > (1 + MIN_EXCESS) * median`` (the Hermes paper
  counts steps fluctuating by more than 10 %); with ``MAD = 0`` only the second test applies.
  Needs at least ``MIN_STEPS`` steps (fewer give no reliable median). The first step is never a
  spike: it has no history to deviate from (warm-up fills caches and data queues).
* Steps: every window, monitored-only ones of a coarse-to-fine trace included (step-time
  statistics use all steps); a monitored-only step has no events, so its components come from
  the monitor's per-step counters (``gc_ms``, ``data_wait_ms``, ``device_busy_pct`` x step time).
* For every spike, each *component* — GC pauses, data waits, checkpoint/storage writes, compilation,
  host syncs *while the device is idle* (a sync waiting on a busy device is device time, not a
  sync cost), device communication, device work, host work while the device is idle — is
  measured in the spike and in the median of the normal steps; the spike's excess time
  ``x - median`` is attributed to the component whose own excess is largest, when that excess
  covers at least ``MIN_EXPLAINED`` of the spike's excess. A slow step whose device work grew is
  therefore not blamed on the sync that waited for it.
* A finding per component is emitted under the co-occurring cause's id (``COMPONENTS``) with
  ``time_share`` = attributed spike excess / sum of step durations (>= ``MIN_SHARE``); its summary
  names the step(s) and what grew. Spikes nothing recorded in them explains are listed in
  ``unexplained_spikes`` and are one ``computation.slow_node`` finding with ``reason =
  "step_spike"`` (no cause guessed): the monitor's counters in them and what the steps the
  trigger captured right after them show (``common/spikes.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common import intervals as iv
from hermes.analyzers.common import spikes as sp
from hermes.analyzers.common.names import is_, name_matches
from hermes.analyzers.common.spans import data_wait_mask, per_step_ns, spans
from hermes.analyzers.common.steps import step_windows
from hermes.analyzers.engine.base import AnalyzerResult, RankContext, register
from hermes.findings import MIN_SHARE, Finding
from hermes.trace.schema import DEVICE_LANES, NOT_WORK_KINDS

MIN_STEPS = 5
Z_SPIKE = 3.5
MIN_EXCESS = 0.10
MIN_EXPLAINED = 0.5
CHECKPOINT_NAME = r"(?i)checkpoint|ckpt|torch\.save|save_state|state_dict_save"

#: component -> (category, cause) of the finding it leads to. Data waits are filed under the io
#: analyzer's leading cause when it has one.
COMPONENTS: dict[str, tuple[str, str]] = {
    "gc": ("cpu", "garbage_collection"),
    "data_wait": ("io", "slow_data_processing"),
    "checkpoint": ("io", "slow_data_reading"),
    "compile": ("cpu", "operator_compilation"),
    "sync": ("cpu", "host_device_sync"),
    "communication": ("communication", "synchronization_wait"),
    # the device itself ran longer (throttling, a slower kernel, more work in that step)
    "device": ("computation", "slow_node"),
    # the host worked longer while the device waited (more or slower host calls)
    "host": ("cpu", "operator_dispatch"),
}
WHAT_GREW = {"gc": "garbage collection", "data_wait": "the wait for data",
             "checkpoint": "checkpoint / storage writes", "compile": "compilation",
             "sync": "host-device sync time on an idle device",
             "communication": "device communication", "device": "device work",
             "host": "host work while the device waited"}
#: monitor counter (per step, at its end) -> component, and the factor to ns
COUNTER_COMPONENTS = {"gc_ms": ("gc", 1e6), "data_wait_ms": ("data_wait", 1e6)}


def _component_unions(ev: pd.DataFrame) -> dict[str, iv.Union]:
    device = is_(ev, "lane_kind", *DEVICE_LANES) & ~is_(ev, "kind", *NOT_WORK_KINDS)
    busy = spans(ev, device)
    host_work = is_(ev, "lane_kind", "host") & ~is_(ev, "kind", *NOT_WORK_KINDS)
    masks = {
        "gc": is_(ev, "kind", "gc"),
        "data_wait": data_wait_mask(ev),
        "checkpoint": is_(ev, "lane_kind", "host", "loader")
        & name_matches(ev["name"], CHECKPOINT_NAME),
        "compile": is_(ev, "kind", "compile"),
        "communication": is_(ev, "kind", "collective") | is_(ev, "lane_kind", "link"),
    }
    out = {name: spans(ev, m) for name, m in masks.items()}
    # a sync costs the device-idle time it causes, not the time it waits on a busy device
    out["sync"] = iv.subtract(spans(ev, is_(ev, "lane_kind", "host") & is_(ev, "kind", "sync")),
                              busy)
    out["device"] = iv.subtract(busy, out["communication"])
    # host work the named host components do not already explain
    named = masks["gc"] | masks["data_wait"] | masks["checkpoint"] | masks["compile"] | \
        is_(ev, "kind", "sync")
    out["host"] = iv.subtract(spans(ev, host_work & ~named), busy)
    return out


def _from_counters(ev: pd.DataFrame, windows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per-window component time from the monitor's per-step counters (the ones the monitor
    writes for every step, captured in detail or not); steps without a sample get 0."""
    out: dict[str, np.ndarray] = {}
    counter = is_(ev, "kind", "counter")
    if not counter.any() or "step" not in ev.columns:
        return out
    # (no counter of a name read below: nothing to add, without a frame of the counters)
    if not (counter & is_(ev, "name", *COUNTER_COMPONENTS, "device_busy_pct")).any():
        return out
    steps = windows["step"].to_numpy(np.int64)
    sub = ev.loc[counter, ["name", "step", "value"]].copy()
    sub["name"] = sub["name"].astype(str)
    sub["step"] = pd.to_numeric(sub["step"], errors="coerce")
    sub["value"] = pd.to_numeric(sub["value"], errors="coerce")
    sub = sub.dropna()
    for name, (comp, scale) in COUNTER_COMPONENTS.items():
        per = sub[sub["name"] == name].groupby("step")["value"].sum()
        if len(per):
            out[comp] = np.round(per.reindex(steps).fillna(0.0).to_numpy() * scale)
    busy = sub[sub["name"] == "device_busy_pct"].groupby("step")["value"].mean()
    if len(busy):
        out["device"] = np.round(busy.reindex(steps).fillna(0.0).to_numpy() / 100.0
                                 * windows["dur_ns"].to_numpy(np.float64))
    return out


def components(ev: pd.DataFrame, windows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per-window ns of every component: from the events, or from the monitor's counters where
    they say more (a monitored-only step has counters and no events)."""
    comp = {name: per_step_ns(u, windows) if u[0].size else np.zeros(len(windows), np.int64)
            for name, u in _component_unions(ev).items()}
    for name, v in _from_counters(ev, windows).items():
        comp[name] = np.maximum(comp[name], v.astype(np.int64))
    return comp


def robust_z(x: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(z-scores, median, MAD) of ``x``; z is +inf/0 where MAD is 0 (above/at the median)."""
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    if mad == 0:
        return np.where(x > med, np.inf, 0.0), med, mad
    return 0.6745 * (x - med) / mad, med, mad


def _io_cause(ctx: RankContext) -> str:
    io = ctx.results.get("io")
    if io is None or not io.findings:
        return COMPONENTS["data_wait"][1]
    return max(io.findings, key=lambda f: f.time_share).cause


@register("fluctuation", scope="rank", needs=("io",))
def fluctuation(ctx: RankContext) -> AnalyzerResult:
    """Step-time variability (CV, robust z-score spikes) and the causes co-occurring with spikes."""
    ev = ctx.events
    res = AnalyzerResult("fluctuation")
    windows = step_windows(ev)
    x = windows["dur_ns"].to_numpy(np.float64)
    res.metrics.update({"steps": int(x.size), "cv": 0.0, "spikes": 0, "spike_excess_ns": 0})
    cols = ["step", "dur_ns", "z", "spike", "attributed_to", *[f"{c}_ns" for c in COMPONENTS]]
    res.tables["per_step"] = pd.DataFrame({c: [] for c in cols})
    if x.size == 0 or x.sum() <= 0:
        return res
    res.metrics["cv"] = float(x.std() / x.mean()) if x.mean() else 0.0
    res.metrics["fluctuating_steps"] = int((np.abs(x - np.median(x)) > MIN_EXCESS
                                            * np.median(x)).sum())
    comp = components(ev, windows)
    det = sp.detailed(ev, windows)  # a spike is compared with normal steps of its own kind
    z, med, mad = robust_z(x)
    spike = (z > Z_SPIKE) & (x > (1 + MIN_EXCESS) * med) if x.size >= MIN_STEPS \
        else np.zeros(x.size, bool)
    spike[:1] = False  # the first step has no history to deviate from (warm-up: caches, queues)
    normal = ~spike
    attributed = np.array([""] * x.size, dtype=object)
    attributed_ns: dict[str, float] = {c: 0.0 for c in COMPONENTS}
    spikes_of: dict[str, list[int]] = {c: [] for c in COMPONENTS}
    grew_ns: dict[str, list[float]] = {c: [] for c in COMPONENTS}
    unexplained: list[int] = []
    for i in np.flatnonzero(spike):  # spikes are few by definition
        excess = x[i] - med
        best, best_ex = "", 0.0
        base = normal & (det == det[i])
        base = base if base.any() else normal
        for name, v in comp.items():
            ex = float(v[i] - np.median(v[base])) if base.any() else float(v[i])
            if ex > best_ex:
                best, best_ex = name, ex
        if best and best_ex >= MIN_EXPLAINED * excess:
            attributed[i] = best
            attributed_ns[best] += min(best_ex, excess)
            spikes_of[best].append(int(windows["step"].iloc[i]))
            grew_ns[best].append(best_ex)
        else:
            unexplained.append(int(windows["step"].iloc[i]))
    after = _captured(ctx, windows, det, unexplained)
    table = {"step": windows["step"].to_numpy(np.int64), "dur_ns": x.astype(np.int64),
             "z": np.where(np.isinf(z), np.nan, z), "spike": spike, "attributed_to": attributed}
    table.update({f"{c}_ns": comp[c] for c in COMPONENTS})
    res.tables["per_step"] = pd.DataFrame(table)
    res.metrics.update({"spikes": int(spike.sum()), "median_ms": med / 1e6, "mad_ms": mad / 1e6,
                        "spike_excess_ns": int(np.clip(x[spike] - med, 0, None).sum()),
                        "unexplained_spikes": unexplained})
    total = float(x.sum())
    for name, t in attributed_ns.items():
        share = t / total
        if share < MIN_SHARE:
            continue
        category, cause = COMPONENTS[name]
        if name == "data_wait":
            cause = _io_cause(ctx)
        spike_ns = [float(x[windows["step"].to_numpy() == s][0]) for s in spikes_of[name]]
        spike_ms = [round(v / 1e6, 3) for v in spike_ns]
        evidence: dict[str, Any] = {
            "component": name, "spike_steps": spikes_of[name], "spikes": int(spike.sum()),
            "cv": round(res.metrics["cv"], 4), "median_step_ms": round(med / 1e6, 3),
            "attributed_ms": round(t / 1e6, 3), "spike_step_ms": spike_ms,
            "grew_ms": [round(g / 1e6, 3) for g in grew_ns[name]],
            "events": len(spikes_of[name]),
        }
        if name in ("device", "host"):
            # kept apart from the steady-state findings of the same id when merged
            evidence["reason"] = "fluctuation"
        evidence.update(_spike_context(ev, windows, normal, spikes_of[name], after))
        what = WHAT_GREW[name]
        first = spikes_of[name][0]
        more = f" and {len(spikes_of[name]) - 1} more" if len(spikes_of[name]) > 1 else ""
        res.findings.append(Finding(
            category, cause, min(1.0, share),
            f"step {first}{more} took {spike_ns[0] / 1e6:.3g} ms against a median of "
            f"{med / 1e6:.3g} ms: {what} grew by {grew_ns[name][0] / 1e6:.3g} ms "
            f"({100 * share:.1f}% of step time)", evidence=evidence, ranks=(int(ctx.rank),),
            steps=tuple(spikes_of[name])))
    if unexplained:
        res.findings.append(_unexplained(ctx, windows, x, med, normal, unexplained, total, after,
                                         {s: c for c, v in spikes_of.items() for s in v}))
    return res


def _captured(ctx: RankContext, windows: pd.DataFrame, det: np.ndarray,
              unexplained: list[int]) -> dict[int, list[int]]:
    """Spike step -> the steps the trigger captured in detail right after it."""
    steps = windows["step"].to_numpy(np.int64)
    detailed = {int(s) for s in steps[det]}
    out = {s: sp.captured_after(ctx.meta, s, detailed) for s in unexplained}
    return {s: v for s, v in out.items() if v}


def _spike_context(ev: pd.DataFrame, windows: pd.DataFrame, normal: np.ndarray,
                   steps: list[int], after: dict[int, list[int]]) -> dict[str, Any]:
    """The monitor's counters in the spike steps, and the steps captured after them."""
    out: dict[str, Any] = {}
    normal_steps = windows["step"].to_numpy(np.int64)[normal]
    monitor = sp.monitor_evidence(ev, steps, normal_steps)
    if monitor:
        out["monitor"] = monitor
    captured = {str(s): after[s] for s in steps if s in after}
    if captured:
        out["captured_after"] = captured
    return out


def _unexplained(ctx: RankContext, windows: pd.DataFrame, x: np.ndarray, med: float,
                 normal: np.ndarray, left: list[int], total: float,
                 after: dict[int, list[int]], explained: dict[int, str]) -> Finding:
    """Spikes their own records do not explain (monitored only, or nothing in them grew):
    still a finding -- a monitor must catch them -- with what the monitor saw in them and what
    the steps captured in detail right after them show (spikes too? what grew there, which
    Python function spent most). Filed as ``computation.slow_node`` with ``reason =
    "step_spike"`` (its own rule: capture them); ``time_share`` counts these spikes' excess
    only (captured spikes count under their own cause), ``steps`` names both."""
    steps = windows["step"].to_numpy(np.int64)
    dur = [float(x[steps == s][0]) for s in left]
    lost = sum(d - med for d in dur)
    share = min(1.0, max(0.0, lost / total))
    captured = sorted({t for s in left for t in after.get(s, [])})
    slow_after = [t for t in captured if t in explained]
    grew = sorted({WHAT_GREW[explained[t]] for t in slow_after})
    evidence: dict[str, Any] = {
        "reason": "step_spike", "component": "", "spike_steps": left,
        "spike_step_ms": [round(d / 1e6, 3) for d in dur],
        "median_step_ms": round(med / 1e6, 3), "lost_ms": round(lost / 1e6, 3),
        "slower_x": [round(d / med, 2) if med else None for d in dur],
        "slower_x_max": round(max(dur) / med, 2) if med else 0.0, "events": len(left),
        "captured_slow_steps": slow_after, "captured_grew": grew,
        **_spike_context(ctx.events, windows, normal, left, after)}
    said = ""
    if slow_after:
        fns = _top_python(ctx.events, windows, slow_after)
        evidence["captured_python"] = fns
        where = f", most in {fns[0]['name']}" if fns else ""
        said = (f"; step(s) {', '.join(map(str, slow_after))}, captured in detail after it, "
                f"were slow too: {' and '.join(grew)} grew{where}")
    elif captured:
        said = "; the steps captured after it were not slow"
    else:
        said = "; none was captured in detail"
    more = f" and {len(left) - 1} more" if len(left) > 1 else ""
    return Finding("computation", "slow_node", share,
                   f"step {left[0]}{more} took {max(dur) / 1e6:.3g} ms against a median of "
                   f"{med / 1e6:.3g} ms ({max(dur) / max(med, 1.0):.2g}x), and nothing recorded "
                   f"in it explains that{said} ({100 * share:.1f}% of step time)",
                   evidence=evidence, ranks=(int(ctx.rank),),
                   steps=tuple(sorted({*left, *slow_after})))


def _top_python(ev: pd.DataFrame, windows: pd.DataFrame, steps: list[int]) -> list[Any]:
    """The Python functions that spent most of the given steps (their frames' self time)."""
    from hermes.analyzers.common import pytime

    w = windows[windows["step"].isin(steps)]
    if w.empty:
        return []
    return pytime.functions(ev, iv.union(w["start_ns"].to_numpy(np.int64),
                                         w["end_ns"].to_numpy(np.int64)), len(w), top=3)
