"""Rank analyzer ``cpu``: apportion the device's host-bound idle time to its host cause.

``cpu(ctx: RankContext) -> AnalyzerResult`` (needs ``overlap``'s ``device_idle`` gaps). Definitions
(formulas and thresholds in ``docs/analysis/cpu.md``):

* Steps: those captured in detail (``steps.fine_windows``; every step of an ordinary trace).
* ``HB`` = device-idle time (``I``) during which a host lane works (``H``: host-lane events other
  than step/marker/counter): ``HB = I ∩ H`` — overlap's ``host_bound`` part. A host call that
  waits while the device is busy costs nothing here: only device-idle time is charged.
* ``HB`` is claimed class by class in ``hostcalls.CLAIM_ORDER`` (data processing inside the
  loader is left to the ``io`` analyzer; then GC, compilation, host-device syncs including
  blocking copies, one-off initialization, allocator calls, logging, and operator dispatch).
* ``resource_contention`` is carved out of the dispatch time: the fraction of leaf host calls' time
  that is *inflation* — an event lasting over ``INFLATION`` x the median of its name (names seen >=
  ``MIN_CALLS`` times, not copies or syncs, at least half inside device-idle time) contributes
  ``dur - median`` — times the dispatch time; it needs ``MIN_INFLATED`` such calls with the largest
  ``SPREAD_TOP`` under ``SPREAD_MAX`` of the excess (else 0). It is reported when that fraction
  reaches ``CONTENTION_MIN_FRACTION``, or ``CONTENTION_MIN_FRACTION_CPU`` when CPU-% counter
  samples of other processes exceed ``OTHER_CPU_MIN_PCT``.
* **No finding without evidence**: a cause needs recorded events of its own. Device-idle time
  during which the host records nothing either is *unattributed* (metric ``unattributed_share``,
  with ``long_gaps``: the gaps of at least ``LONG_GAP_NS``), never a guessed cause such as GC:
  the way to see it is to capture it (``with_stack=True``, ``hermes profile``).
* ``time_share`` = claimed time / sum of step durations; a finding needs ``MIN_SHARE``, except
  compilation and sync findings with at least ``STRONG_COUNT`` events (strong evidence).
* **Kinds of run** (``common/runkind.py``, metric ``run_kind``): in a ``cpu_only`` run no device
  waits — the CPU computes the model, so the dispatch claim is the CPU's operator time, filed
  with reason ``cpu_operators``, worded in CPU terms, with the operators by self time (table
  ``operators``) and the evidence CPU advice needs (``CPU_EVIDENCE``). Where the device was not
  captured (``device_not_captured``) the causes whose cost is measured against the device
  (``NEEDS_DEVICE``: dispatch, Python, contention, allocator calls, syncs) are withheld
  (metric ``withheld``): nothing tells whether the device waited for them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common import hostcalls, pytime
from hermes.analyzers.common import intervals as iv
from hermes.analyzers.common.cpuwork import cpu_profile
from hermes.analyzers.common.names import is_, name_matches
from hermes.analyzers.common.nesting import event_nodes
from hermes.analyzers.common.runkind import CPU_ONLY, NEEDS_DEVICE, NOT_CAPTURED, rank_kind
from hermes.analyzers.common.spans import device_idle, per_step_ns, spans, top_names, windows_union
from hermes.analyzers.common.steps import fine_windows, window_note
from hermes.analyzers.engine.base import AnalyzerResult, RankContext, register
from hermes.findings import MIN_SHARE, Finding
from hermes.trace.schema import NOT_WORK_KINDS

#: Compile / sync events worth reporting whatever their share (msprof-analyze: >= 20
#: aclopCompileAndExecute calls; SyncBatchNorm > 20).
STRONG_COUNT = 20
#: Host-and-device idle gaps this long are listed as ``long_gaps`` of the unattributed time
#: (msprof-analyze conjectures GC from free gaps > 200 ms; Hermes reports them, unexplained).
LONG_GAP_NS = 200_000_000
INFLATION = 2.0
MIN_CALLS = 5
#: Contention slows many calls, not a few: at least this many inflated calls, and the largest
#: ``SPREAD_TOP`` of them below ``SPREAD_MAX`` of the excess (a handful of huge calls is one-off
#: setup -- context creation, lazy module loading -- not another process taking the cores).
MIN_INFLATED = 5
SPREAD_TOP = 3
SPREAD_MAX = 0.5
#: Calls that block by design are not inflated by contention: copies (a D2H copy to pageable
#: memory waits for the device) and synchronizations.
BLOCKING_NAME = r"(?i)memcpy|synchroniz"
CONTENTION_MIN_FRACTION = 0.2
CONTENTION_MIN_FRACTION_CPU = 0.05
OTHER_CPU_MIN_PCT = 50.0
#: Kernels shorter than this are "small" (launch overhead of the order of their run time).
SMALL_KERNEL_NS = 10_000

OTHER_CPU_NAME = r"(?i)cpu.*(other|steal|contention|external|foreign|background)|" \
                 r"(other|steal|foreign|background).*cpu"
#: Leaf host calls whose cost should not vary by call (allocation and tiling are bimodal by nature:
#: cache hit vs miss), so a call far above its name's median was slowed from outside.
LEAF_KINDS = ("launch", "runtime", "infer_shape")
#: Recorded environment settings (``meta.extra`` ``settings``/``environment``/``env``) that make
#: every host call pay for logging: DESIGN's "log level" environment cause
#: (ASCEND_GLOBAL_LOG_LEVEL 0/1 = debug/info).
VERBOSE_LOG = {"log_level": ("debug", "info"), "ASCEND_GLOBAL_LOG_LEVEL": ("0", "1")}
CAUSE_TEXT = {
    "garbage_collection": "Python garbage collection pauses the host",
    "operator_compilation": "operators are compiled at run time",
    "host_device_sync": "the host blocks on the device (synchronize, .item(), blocking copies)",
    "initialization": "one-off start-up runs inside the profiled steps (device runtime "
                      "initialization, library handles, module loading)",
    "memory_allocation": "device memory allocator calls (cudaMalloc/cudaFree and kin) hold up "
                         "the host: the caching allocator is off or thrashing",
    "environment_configuration": "host time goes to logging / environment overheads",
    "operator_dispatch": "the host dispatches operators slower than the device runs them",
    "python": "the host runs Python code outside operators while the device waits",
    "resource_contention": "host calls run slower than their usual cost (CPU contention)",
}
#: A CPU-only run's wording: the CPU computes, no device waits.
CPU_TEXT = {
    "python": "the CPU runs Python code outside operators",
    "initialization": "one-off start-up runs inside the profiled steps (library handles, "
                      "module loading)",
    "resource_contention": "operators run slower than their usual cost (CPU contention)",
}
#: Classes filed under a vocabulary id with a ``reason`` (findings of one id and different
#: reasons stay apart when ranks are merged; rules key on the reason): allocator calls are the
#: memory-allocation stage of per-operator host scheduling (DESIGN: InferShape -> tiling ->
#: allocation -> launch), start-up is an environment cost paid once. (Own ids,
#: ``cpu.memory_allocation`` / ``cpu.initialization``, wait for the emulator's cause list to
#: accept ids it cannot inject.)
FILED_AS: dict[str, tuple[str, dict[str, Any]]] = {
    "memory_allocation": ("operator_dispatch", {"reason": "memory_allocation"}),
    # Python frames' own time between operators (``pytime``): the dispatch claim's part that
    # no operator, runtime call or other host event covers, named by function and line
    "python": ("operator_dispatch", {"reason": "python"}),
    "initialization": ("environment_configuration",
                       {"reason": "initialization", "initialization_share": 1.0}),
}
#: classes whose events are not dispatch (the more specific causes)
SPECIFIC = tuple(c for c in hostcalls.CLAIM_ORDER if c != "operator_dispatch")


def self_ns(ev: pd.DataFrame, mask: np.ndarray) -> np.ndarray:
    """Exclusive (self) time of every event in ``mask`` (0 elsewhere): its duration minus the
    time events nested in it on the same lane cover. Each instant of a lane belongs to the
    innermost event active there (the latest started, at the deepest nesting level), as in the
    critical path's lane segments; vectorized per nesting depth."""
    out = np.zeros(len(ev), np.int64)
    idx = np.flatnonzero(mask)
    n = idx.size
    if n == 0:
        return out
    t, ln, st, eid, active = event_nodes(ev, idx)
    owner = active[:-1]
    seg = t[1:] - t[:-1]
    ok = (owner >= 0) & (ln[1:] == ln[:-1])
    out[idx] = np.bincount(owner[ok], weights=seg[ok], minlength=n).astype(np.int64)
    return out


def _other_cpu(ev: pd.DataFrame) -> dict[str, float] | None:
    m = is_(ev, "kind", "counter") & name_matches(ev["name"], OTHER_CPU_NAME)
    if not m.any():
        return None
    v = pd.to_numeric(ev.loc[m, "value"], errors="coerce").dropna()
    return {"mean_pct": float(v.mean()), "max_pct": float(v.max()), "samples": int(v.size)} \
        if v.size else None


def _environment(meta: Any) -> dict[str, Any]:
    """Verbose-logging settings found in the trace's recorded environment."""
    extra = dict(getattr(meta, "extra", {}) or {})
    found: dict[str, Any] = {}
    for key in ("settings", "environment", "env"):
        rec = extra.get(key)
        if isinstance(rec, dict):
            for name, bad in VERBOSE_LOG.items():
                if str(rec.get(name, "")).lower() in bad:
                    found[name] = rec[name]
    return found


def _launch_excess(ev: pd.DataFrame, ctx: RankContext) -> dict[str, Any] | None:
    """How far host launch calls run above the device profile's launch latency: the fraction
    ``1 - expected / median observed`` of launch time that is not launching."""
    from hermes import devices

    prof = None
    for key in ("name", "display_name"):  # the trace's device name -> its profile
        prof = prof or devices.match(str(ctx.device.get(key) or ""))
    expected = float(getattr(prof, "fields", {}).get("launch_latency_s", 0.0) or 0.0) * 1e9 \
        if prof is not None else 0.0
    m = is_(ev, "kind", "launch") & is_(ev, "lane_kind", "host")
    if expected <= 0 or not m.any():
        return None
    observed = float(np.median(ev.loc[m, "dur_ns"].to_numpy(np.float64)))
    frac = max(0.0, 1.0 - expected / observed) if observed > 0 else 0.0
    return {"fraction": frac, "launch_median_us": observed / 1e3,
            "launch_expected_us": expected / 1e3}


def _inflation(ev: pd.DataFrame, dispatch: np.ndarray, idle: iv.Union) -> dict[str, Any]:
    """Fraction of leaf host-call time that exceeds each name's median (see module docstring)."""
    leaf = dispatch & is_(ev, "kind", *LEAF_KINDS)
    if not leaf.any():
        leaf = dispatch
    leaf &= ~name_matches(ev["name"], BLOCKING_NAME)
    sub = ev.loc[leaf, ["name", "ts_ns", "dur_ns"]]
    if len(sub) == 0:
        return {"fraction": 0.0, "events": 0, "names": []}
    # grouped by the categorical's codes (one group per distinct name, as by the strings)
    names = sub["name"]
    g = sub.groupby(names, observed=True, sort=False)["dur_ns"]
    med = g.transform("median").to_numpy(np.float64)
    cnt = g.transform("count").to_numpy(np.int64)
    dur = sub["dur_ns"].to_numpy(np.float64)
    ts = sub["ts_ns"].to_numpy(np.int64)
    inflated = (cnt >= MIN_CALLS) & (dur > INFLATION * med)
    if inflated.any():  # (the tests below only for the calls over their median)
        # a call that outlasts its median while the device is busy is back-pressure (a full
        # launch queue), not contention: only calls at least half inside device-idle time count
        c = np.flatnonzero(inflated)
        tc = ts[c]
        inflated[c] = iv.overlap_per_interval(tc, tc + sub["dur_ns"].to_numpy(np.int64)[c],
                                              idle) >= 0.5 * dur[c]
    if inflated.any():
        # a name's first call (lazy set-up inside the runtime) and the first launch of each
        # kernel (its module is loaded then) are start-up costs, not contention
        codes = (names if isinstance(names.dtype, pd.CategoricalDtype)
                 else names.astype("category")).array.codes
        o = np.argsort(ts, kind="stable")
        first = np.zeros(ts.size, bool)
        first[o[np.unique(codes[o], return_index=True)[1]]] = True
        first |= hostcalls.first_kernel_launches(ev, leaf)[leaf]
        inflated &= ~first
    excess = np.where(inflated, dur - med, 0.0)
    total = float(dur[cnt >= MIN_CALLS].sum())
    n_inflated = int(inflated.sum())
    spread = excess.sum() > 0 and \
        float(np.sort(excess)[-SPREAD_TOP:].sum()) < SPREAD_MAX * float(excess.sum())
    if n_inflated < MIN_INFLATED or not spread:
        excess = np.zeros_like(excess)  # sporadic stalls: not evidence of contention
    pos = excess > 0  # (rows without excess add nothing to a name's sum)
    if not pos.any():
        return {"fraction": float(excess.sum() / total) if total else 0.0, "events": 0,
                "names": []}
    top = pd.Series(excess[pos], index=names[pos].astype(str).to_numpy()).groupby(level=0).sum()
    top = top[top > 0].sort_values(ascending=False).head(10)
    return {"fraction": float(excess.sum() / total) if total else 0.0,
            "events": int((excess > 0).sum()),
            "names": [{"name": str(k), "excess_ns": int(v)} for k, v in top.items()]}


def _dispatch_evidence(ev: pd.DataFrame, windows: pd.DataFrame) -> dict[str, Any]:
    dev = is_(ev, "lane_kind", "device", "copy") & is_(ev, "kind", "kernel")
    host = is_(ev, "lane_kind", "host")
    launches = int((is_(ev, "kind", "launch") & host).sum())
    host_ops = is_(ev, "kind", "host_op") & host
    k = ev.loc[dev, "dur_ns"].to_numpy(np.int64)
    n_steps = max(len(windows), 1)
    return {"launches_per_step": round(launches / n_steps, 1),
            "kernels_per_step": round(int(dev.sum()) / n_steps, 1),
            "small_kernels_pct": round(100.0 * float((k < SMALL_KERNEL_NS).mean()), 2)
            if k.size else 0.0,
            "kernel_median_us": round(float(np.median(k)) / 1e3, 3) if k.size else 0.0,
            "host_op_median_us": round(float(ev.loc[host_ops, "dur_ns"].median()) / 1e3, 3)
            if host_ops.any() else 0.0}


def _claim(ev: pd.DataFrame, idle: iv.Union, cls: dict[str, np.ndarray]
           ) -> tuple[dict[str, iv.Union], iv.Union]:
    """Device-idle host time claimed by each class in ``CLAIM_ORDER``, and ``HB``."""
    us = {name: spans(ev, cls[name]) for name in hostcalls.CLAIM_ORDER}
    # the host work's span from the two classes' unions (the union of unions: the same union
    # as of their events together, without sorting every host event again)
    work, io = us["operator_dispatch"], us["io"]
    remaining = hb = iv.intersect(idle, iv.union(np.concatenate([work[0], io[0]]),
                                                 np.concatenate([work[1], io[1]])))
    claimed: dict[str, iv.Union] = {}
    for name in hostcalls.CLAIM_ORDER:
        u = us[name]
        claimed[name] = iv.intersect(remaining, u)
        remaining = iv.subtract(remaining, u)
    return claimed, hb


def _unattributed(ev: pd.DataFrame, idle: iv.Union, windows: pd.DataFrame,
                  helper: np.ndarray) -> dict[str, Any]:
    """Device-idle time with no host event recorded either: what the trace cannot explain
    (``helper``: ``hostcalls.helper_lanes`` of ``ev``)."""
    host_any = spans(ev, is_(ev, "lane_kind", "host") & ~is_(ev, "kind", *NOT_WORK_KINDS)
                     & ~helper)
    free = iv.subtract(iv.intersect(idle, windows_union(windows)), host_any)
    gaps = free[1] - free[0]
    return {"ns": int(iv.total(free)), "long_gaps": int((gaps >= LONG_GAP_NS).sum()),
            "longest_gap_ms": round(float(gaps.max(initial=0)) / 1e6, 3),
            "per_step": per_step_ns(free, windows)}


def _dispatch_split(ev: pd.DataFrame, ctx: RankContext, dispatch_only: np.ndarray,
                    idle: iv.Union) -> dict[str, Any]:
    """Fractions of the dispatch time that are contention and verbose-environment overhead."""
    infl = _inflation(ev, dispatch_only, idle)
    other = _other_cpu(ev)
    busy_cpu = bool(other and other["mean_pct"] >= OTHER_CPU_MIN_PCT)
    env = _environment(ctx.meta)
    excess = _launch_excess(ev, ctx) if (busy_cpu or env) else None
    # a uniform slow-down explained by the environment record or by other processes' CPU use: the
    # launch excess over the device profile's latency is the share of dispatch time lost to it
    lost = excess["fraction"] if excess and excess["fraction"] >= CONTENTION_MIN_FRACTION_CPU \
        else 0.0
    env_frac = lost * (0.5 if busy_cpu else 1.0) if env else 0.0
    cont_frac = lost - env_frac if busy_cpu else 0.0
    threshold = CONTENTION_MIN_FRACTION_CPU if busy_cpu else CONTENTION_MIN_FRACTION
    if cont_frac == 0.0 and infl["fraction"] >= threshold:  # outliers of their own name
        cont_frac = min(infl["fraction"], 1.0 - env_frac)
    return {"infl": infl, "other": other, "env": env, "excess": excess, "env_frac": env_frac,
            "cont_frac": cont_frac, "runtime": hostcalls.runtime_of(ev), "busy_cpu": busy_cpu,
            "framework": hostcalls.framework_of(ev)}


def _per_step(claimed: dict[str, iv.Union], windows: pd.DataFrame, hb: iv.Union,
              split: dict[str, Any], unattributed: np.ndarray) -> pd.DataFrame:
    table: dict[str, Any] = {"step": windows["step"].to_numpy(np.int64),
                             "dur_ns": windows["dur_ns"].to_numpy(np.int64),
                             "host_bound_ns": per_step_ns(hb, windows)}
    for c in CAUSE_TEXT:
        if c != "resource_contention":
            table[f"{c}_ns"] = per_step_ns(claimed[c], windows)
    d_ps = table["operator_dispatch_ns"].astype(np.float64)
    table["resource_contention_ns"] = np.round(d_ps * split["cont_frac"]).astype(np.int64)
    env_ps = np.round(d_ps * split["env_frac"]).astype(np.int64)
    table["environment_configuration_ns"] = table["environment_configuration_ns"] + env_ps
    table["operator_dispatch_ns"] = table["operator_dispatch_ns"] - env_ps \
        - table["resource_contention_ns"]
    table["unattributed_ns"] = unattributed
    return pd.DataFrame(table)


def _events_of(c: str, ev: pd.DataFrame, cls: dict[str, np.ndarray], split: dict[str, Any],
               pure_dispatch: np.ndarray) -> tuple[np.ndarray, int]:
    """(mask of the events behind cause ``c``, their count) -- ``pure_dispatch``: dispatch
    events of no more specific class, not Python frames."""
    mask = cls.get(c, cls["operator_dispatch"])
    if c in ("operator_dispatch", "resource_contention"):
        mask = pure_dispatch
    n = int(mask.sum())
    if c == "resource_contention":
        # the evidence: calls inflated over their own median, or other processes' CPU samples
        other = split["other"] or {}
        n = split["infl"]["events"] + (int(other.get("samples", 0)) if split["busy_cpu"] else 0)
    if c == "environment_configuration" and split["env_frac"]:
        mask = mask | (cls["operator_dispatch"] & is_(ev, "kind", "launch"))
        n = int(mask.sum())
    return mask, n


def _evidence(c: str, ev: pd.DataFrame, cls: dict[str, np.ndarray], split: dict[str, Any],
              table: pd.DataFrame, windows: pd.DataFrame, mask: np.ndarray, n: int
              ) -> tuple[dict[str, Any], str]:
    """(cause-specific evidence, summary text) of one cause whose events are ``mask``
    (``n`` of them: :func:`_events_of`)."""
    evidence: dict[str, Any] = {"top_ops": top_names(ev, mask), "runtime": split["runtime"],
                                "framework": split["framework"]}
    text = CAUSE_TEXT[c]
    if c == "operator_dispatch":
        evidence.update(_dispatch_evidence(ev, windows))
        # by self time: an operator's own host time, not its callees' (nested ops, runtime
        # calls, syncs and start-up inside it)
        evidence["top_ops"] = top_names(ev, mask, weights=self_ns(ev, cls["operator_dispatch"]))
    if c in ("resource_contention", "environment_configuration"):
        evidence.update({"launch_excess": split["excess"], "environment": split["env"]})
    if c == "resource_contention":
        infl = split["infl"]
        evidence.update({"inflation_fraction": round(split["cont_frac"], 4),
                         "inflated_ops": infl["names"], "other_process_cpu": split["other"]})
        evidence["top_ops"] = [{"name": d["name"], "time_ns": d["excess_ns"]}
                               for d in infl["names"]]
        if not evidence["top_ops"]:
            # a uniform slow-down (other processes' CPU use, the launch excess): no call stands
            # out of its own name, every dispatch call is slowed by the same fraction -- the
            # calls named are those, with the time the contention costs in them
            evidence["top_ops"] = [{**d, "time_ns": int(round(d["time_ns"] * split["cont_frac"]))}
                                   for d in top_names(ev, mask)]
    if c == "initialization":
        evidence["initialization_ms"] = round(float(table["initialization_ns"].sum()) / 1e6, 3)
    if c == "python":
        fns = pytime.functions(ev, split.get("python_outside", iv.EMPTY), len(windows))
        evidence["functions"] = fns
        evidence["top_ops"] = [{"name": f["name"], "time_ns": int(f["time_ms"] * 1e6)}
                               for f in fns]
        if fns:
            top = fns[0]
            evidence.update({"top_function": top["name"], "top_line": top["line"] or 0,
                             "top_ms_per_step": top["ms_per_step"]})
            at = f", at line {top['line']}" if top["line"] else ""
            text += f" -- most in {top['name']}{at}, {top['ms_per_step']:.3g} ms per step"
    if c == "memory_allocation":
        evidence["calls_per_step"] = round(n / max(len(windows), 1), 1)
    if c == "operator_compilation":
        # compiled once in the first step (torch.compile / JIT warm-up) or again and again
        # (new shapes): the share of compile time after the first step tells them apart
        ps = table["operator_compilation_ns"].to_numpy(np.float64)
        evidence.update({"trace_steps": int(len(ps)), "compile_after_first_share":
                         round(float(ps[1:].sum() / ps.sum()), 4) if ps.sum() else 0.0})
        if len(ps) > 1 and evidence["compile_after_first_share"] < 0.1:
            text = "operators are compiled once, in the first step (one-off warm-up)"
    return evidence, text


@register("cpu", scope="rank", needs=("overlap",))
def cpu(ctx: RankContext) -> AnalyzerResult:
    """Host-bound device idle time apportioned to compilation, dispatch, sync, GC, contention."""
    ev = ctx.events
    res = AnalyzerResult("cpu")
    windows = fine_windows(ev, ctx.meta)
    step_total = int(windows["dur_ns"].sum()) if len(windows) else 0
    causes = list(CAUSE_TEXT)
    res.metrics.update({"step_total_ns": step_total, "host_bound_ns": 0, "unattributed_ns": 0,
                        "unattributed_share": 0.0, **{f"{c}_share": 0.0 for c in causes}})
    res.tables["per_step"] = pd.DataFrame(
        {c: np.empty(0, np.int64) for c in
         ["step", "dur_ns", "host_bound_ns", *[f"{c}_ns" for c in causes], "unattributed_ns"]})
    kind = rank_kind(ev)
    res.metrics.update({"run_kind": kind, "withheld": []})
    if step_total == 0:
        return res
    idle = device_idle(ctx, windows)
    helper = hostcalls.helper_lanes(ev)  # (read by both: computed once)
    cls = hostcalls.classes(ev, helper)
    claimed, hb = _claim(ev, idle, cls)
    claimed["python"], claimed["operator_dispatch"], own = pytime.split(
        ev, cls["operator_dispatch"], claimed["operator_dispatch"])
    res.metrics["collector_ns"] = int(iv.total(own))  # Hermes's hooks: not the job's time
    cls["python"] = cls["operator_dispatch"] & pytime.python_mask(ev)
    hb_total = int(iv.total(hb))
    specific = np.zeros(len(ev), bool)
    for other in SPECIFIC:
        specific |= cls[other]
    split = _dispatch_split(ev, ctx, cls["operator_dispatch"] & ~specific, idle)
    split["python_outside"] = claimed["python"]
    times = {c: float(iv.total(claimed[c])) for c in (*hostcalls.CLAIM_ORDER, "python")}
    dispatch_t = times["operator_dispatch"]
    times["environment_configuration"] += dispatch_t * split["env_frac"]
    times["resource_contention"] = dispatch_t * split["cont_frac"]
    times["operator_dispatch"] = dispatch_t * (1.0 - split["env_frac"] - split["cont_frac"])
    free = _unattributed(ev, idle, windows, helper)
    table = _per_step(claimed, windows, hb, split, free.pop("per_step"))
    res.tables["per_step"] = table
    res.metrics.update({"host_bound_ns": hb_total, "io_wait_ns": int(times["io"]),
                        "inflation_fraction": split["infl"]["fraction"],
                        "unattributed_ns": free["ns"],
                        "unattributed_share": min(1.0, free["ns"] / step_total),
                        "long_gaps": free["long_gaps"], "longest_gap_ms": free["longest_gap_ms"],
                        "windows": window_note(windows)})
    pure_dispatch = cls["operator_dispatch"] & ~specific & ~is_(ev, "kind", "python")
    profile: dict[str, Any] = {}
    if kind == CPU_ONLY:  # where the CPU's time goes, by operator (self time)
        res.tables["operators"], profile = cpu_profile(
            ev, pure_dispatch, self_ns(ev, cls["operator_dispatch"]), step_total)
        res.metrics["cpu_profile"] = profile
    for c in causes:
        share = min(1.0, times[c] / step_total)
        res.metrics[f"{c}_share"] = share
        mask, n = _events_of(c, ev, cls, split, pure_dispatch)
        strong = c in ("operator_compilation", "host_device_sync") and n >= STRONG_COUNT
        # no finding without evidence: a cause must have recorded events of its own
        if n == 0 or (share < MIN_SHARE and not (strong and share > 0)):
            continue
        if kind == NOT_CAPTURED and c in NEEDS_DEVICE:
            # its cost is host time while the device waits: unknown without the device
            res.metrics["withheld"].append({"cause": c, "host_ms": round(times[c] / 1e6, 3)})
            continue
        evidence, text = _evidence(c, ev, cls, split, table, windows, mask, n)
        summary = f"{text}: {100 * share:.1f}% of step time"
        if kind == CPU_ONLY:
            summary = summary.replace(CAUSE_TEXT[c], CPU_TEXT.get(c, CAUSE_TEXT[c]))
            if c == "operator_dispatch":  # (no launches, no kernels: no such figures)
                for key in ("launches_per_step", "kernels_per_step", "small_kernels_pct",
                            "kernel_median_us"):
                    evidence.pop(key, None)
                evidence.update(profile)
                top = res.tables["operators"]
                summary = f"the CPU runs operators {100 * share:.1f}% of step time (self time)"
                if len(top):
                    summary += (f", most in {top['name'].iloc[0]} "
                                f"({float(top['share_pct'].iloc[0]):.1f}% of step time)")
        evidence = {"time_ms": round(times[c] / 1e6, 3), "events": n,
                    "host_bound_ms": round(hb_total / 1e6, 3),
                    "steps_total_ms": round(step_total / 1e6, 3), **evidence}
        steps = tuple(int(s) for s, v in zip(table["step"], table[f"{c}_ns"], strict=True) if v > 0)
        cause, extra = FILED_AS.get(c, (c, {}))
        if c == "environment_configuration":
            extra = {"initialization_share": 0.0}
        if c == "operator_dispatch" and kind == CPU_ONLY:
            extra = {"reason": "cpu_operators"}  # the CPU computing, not dispatching
        res.findings.append(Finding("cpu", cause, share, summary,
                                    evidence={**evidence, **extra}, ranks=(int(ctx.rank),),
                                    steps=steps))
    return res
