"""Rank analyzer ``cpu``: apportion the device's host-bound idle time to its host cause.

``cpu(ctx: RankContext) -> AnalyzerResult`` (needs ``overlap``'s ``device_idle`` gaps). Definitions
(formulas and thresholds in ``docs/analysis/cpu.md``):

* ``HB`` = device-idle time (``I``) during which a host lane works (``H``: host-lane events other
  than step/marker/counter): ``HB = I ∩ H`` — overlap's ``host_bound`` part.
* ``HB`` is claimed by the first matching class, in this order (a host op that *contains* a sync or
  a compile loses that time to the more specific cause): data waits (left to the ``io`` analyzer),
  ``garbage_collection`` (``gc`` events), ``operator_compilation`` (``compile`` events, compile
  functions), ``host_device_sync`` (``sync`` events on host lanes, blocking D2H copies issued on
  the host, ``*Synchronize``, ``aten::item`` / ``_local_scalar_dense``),
  ``environment_configuration`` (logging calls, and one-off runtime start-up: context creation,
  library handles, module loading, ``INIT_NAME``), then ``operator_dispatch`` (every other host
  activity: framework ops, InferShape, tiling, allocation, launches, runtime calls).
* ``resource_contention`` is carved out of the dispatch time: the fraction of leaf host calls' time
  that is *inflation* — an event lasting over ``INFLATION`` x the median of its name (names seen >=
  ``MIN_CALLS`` times, not copies or syncs, at least half inside device-idle time) contributes
  ``dur - median`` — times the dispatch time; it needs ``MIN_INFLATED`` such calls with the largest
  ``SPREAD_TOP`` under ``SPREAD_MAX`` of the excess (else 0). It is reported when that fraction
  reaches ``CONTENTION_MIN_FRACTION``, or ``CONTENTION_MIN_FRACTION_CPU`` when CPU-% counter
  samples of other processes exceed ``OTHER_CPU_MIN_PCT``.
* ``garbage_collection`` also gets msprof-analyze's *conjectured GC*: device-and-host-idle gaps of
  at least ``GC_GAP_NS`` when the trace records no GC events.
* ``time_share`` = claimed time / sum of step durations; a finding needs ``MIN_SHARE``, except
  compilation and sync findings with at least ``STRONG_COUNT`` events (strong evidence).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers import intervals as iv
from hermes.analyzers.base import AnalyzerResult, RankContext, register
from hermes.analyzers.critical_path import innermost_active, node_order
from hermes.analyzers.io import (
    data_wait_mask,
    device_idle,
    is_,
    name_matches,
    per_step_ns,
    spans,
    top_names,
    windows_union,
)
from hermes.analyzers.steps import step_windows
from hermes.findings import Finding
from hermes.trace.schema import NOT_WORK_KINDS

MIN_SHARE = 0.01
#: Compile / sync events worth reporting whatever their share (msprof-analyze: >= 20
#: aclopCompileAndExecute calls; SyncBatchNorm > 20).
STRONG_COUNT = 20
#: msprof-analyze's GC conjecture: a free gap > 200 ms with almost no host events.
GC_GAP_NS = 200_000_000
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

GC_NAME = r"(?i)(^|[^a-z])gc([^a-z]|$)|garbage.?collect"
#: run-time compilation: CANN's operator compiler, TorchScript JIT, and torch.compile's phases
#: (PyTorch wraps them in record_function ranges named "<phase> (dynamo_timed)", e.g.
#: "compile_inner (dynamo_timed)"; torch 2.13 calls the outer one "entire_frame_compile"; Triton
#: autotuning benchmarks configs in CachingAutotuner)
COMPILE_NAME = (r"(?i)aclopCompile|jit.?compil|compile_fx|torch_compile|dynamo.*compile|"
                r"\(dynamo_timed\)|entire_frame_compile|GraphLowering\.compile|"
                r"Scheduler\.codegen|CachingAutotuner")
SYNC_NAME = r"(?i)synchroniz|^aten::item$|_local_scalar_dense|aclrtSynchronize"
LOG_NAME = r"(?i)^(?!aten::)(.*(logging|dlog|slog|log_write|write_log|printf?\b)|log)\b"
#: One-off start-up calls of the device runtime (context creation, the first call that creates it
#: lazily, library handles, module loading): paid once per run, not per step.
INIT_NAME = (r"(?i)^(cu|hip)Init$|DevicePrimaryCtx|^(cu|hip)CtxCreate|"
             r"^cudaDeviceGetStreamPriorityRange$|^(cuda|hip)GetDeviceCount$|"
             r"^(cuda|hip)GetDeviceProperties|^(cu|hip)ModuleLoad|^cuLibraryLoad|"
             r"^(cuda|hip)StreamCreate|^Lazy Function Loading$|^Runtime Triggered Module Loading$|"
             r"^(cudnn|miopen|cublas|cublasLt|hipblas|hipblasLt|rocblas)Create(Handle)?$|"
             r"^nccl\w*CommInit|^acl(Init|rtSetDevice|rtCreateContext)$")
#: A launch that takes this long and this many times its name's median, the first launch of its
#: kernel in the trace, is lazy module loading (the kernel's code is loaded on first use): start-up.
FIRST_LAUNCH_MIN_NS = 1_000_000
FIRST_LAUNCH_FACTOR = 50.0
OTHER_CPU_NAME = r"(?i)cpu.*(other|steal|contention|external|foreign|background)|" \
                 r"(other|steal|foreign|background).*cpu"
#: Leaf host calls whose cost should not vary by call (allocation and tiling are bimodal by nature:
#: cache hit vs miss), so a call far above its name's median was slowed from outside.
LEAF_KINDS = ("launch", "runtime", "infer_shape")
#: Recorded environment settings (``meta.extra`` ``settings``/``environment``/``env``) that make
#: every host call pay for logging: DESIGN's "log level" environment cause
#: (ASCEND_GLOBAL_LOG_LEVEL 0/1 = debug/info).
VERBOSE_LOG = {"log_level": ("debug", "info"), "ASCEND_GLOBAL_LOG_LEVEL": ("0", "1")}
#: not host work, as in overlap (HOST_IDLE_KINDS): annotations, counters and unknown events
#: ("other": e.g. Kineto's whole-capture "PyTorch Profiler (0)" span)
HOST_WORK_EXCLUDED = NOT_WORK_KINDS
CAUSE_TEXT = {
    "garbage_collection": "Python garbage collection pauses the host",
    "operator_compilation": "operators are compiled at run time",
    "host_device_sync": "the host blocks on the device (synchronize, .item(), blocking copies)",
    "environment_configuration": "host time goes to logging / environment overheads",
    "initialization": "one-off start-up runs inside the profiled steps (device runtime "
                      "initialization, library handles, module loading)",
    "operator_dispatch": "the host dispatches operators slower than the device runs them",
    "resource_contention": "host calls run slower than their usual cost (CPU contention)",
}


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
    s = ev["ts_ns"].to_numpy(np.int64)[idx]
    d = ev["dur_ns"].to_numpy(np.int64)[idx]
    lane = ev["lane"].astype("category").cat.codes.to_numpy().astype(np.int64)[idx]
    t = np.concatenate([s, s + d])
    ln = np.concatenate([lane, lane])
    st = np.concatenate([np.ones(n, np.int64), np.zeros(n, np.int64)])
    eid = np.concatenate([np.arange(n), np.arange(n)])
    # equal times: ends before starts; starts outer (longer) first; ends inner first (one
    # int64 key sorted stably, as the critical path orders its nodes)
    order = node_order(eid, np.concatenate([-d, d]), st, t, ln)
    t, ln, st, eid = t[order], ln[order], st[order], eid[order]
    active = innermost_active(st, eid, ln)
    owner = active[:-1]
    seg = t[1:] - t[:-1]
    ok = (owner >= 0) & (ln[1:] == ln[:-1])
    out[idx] = np.bincount(owner[ok], weights=seg[ok], minlength=n).astype(np.int64)
    return out


def _first_kernel_launches(ev: pd.DataFrame, launch: np.ndarray) -> np.ndarray:
    """The launches (of ``launch``) that launch a kernel name for the first time in the trace."""
    out = np.zeros(len(ev), bool)
    if "corr_id" not in ev.columns or not launch.any():
        return out
    has_corr = ev["corr_id"].notna().to_numpy()
    dev = ~is_(ev, "lane_kind", "host") & is_(ev, "kind", "kernel") & has_corr
    if not dev.any():
        return out
    # kernel names as integer codes (no per-event strings on big traces), first by start time
    names = ev["name"] if isinstance(ev["name"].dtype, pd.CategoricalDtype) \
        else ev["name"].astype("category")
    code = names.cat.codes.to_numpy()[dev]
    ts = ev["ts_ns"].to_numpy(np.int64)[dev]
    corr = ev["corr_id"].to_numpy()[dev].astype(np.int64)
    o = np.argsort(ts, kind="stable")
    _, first = np.unique(code[o], return_index=True)
    first_corr = corr[o][first]
    idx = np.flatnonzero(launch & has_corr)
    out[idx[np.isin(ev["corr_id"].to_numpy()[idx].astype(np.int64), first_corr)]] = True
    return out


def _first_launch_outliers(ev: pd.DataFrame, host: np.ndarray) -> np.ndarray:
    """Launches ``FIRST_LAUNCH_FACTOR`` x slower than their name's median (and at least
    ``FIRST_LAUNCH_MIN_NS``) that launch a kernel name for the first time in the trace: the
    runtime loaded the kernel's module on that call (lazy loading), a one-off cost."""
    out = np.zeros(len(ev), bool)
    launch = host & is_(ev, "kind", "launch")
    if "corr_id" not in ev.columns or not launch.any():
        return out
    dur = ev["dur_ns"].to_numpy(np.int64)
    slow = launch & (dur >= FIRST_LAUNCH_MIN_NS)
    if not slow.any():
        return out
    names = ev["name"].astype(str) if not isinstance(ev["name"].dtype, pd.CategoricalDtype) \
        else ev["name"]
    med = pd.Series(dur[launch]).groupby(names[launch].to_numpy(), observed=True).median()
    slow &= dur >= FIRST_LAUNCH_FACTOR * names.map(med).to_numpy(np.float64, na_value=np.inf)
    if not slow.any():
        return out
    return _first_kernel_launches(ev, slow)


def _classes(ev: pd.DataFrame) -> dict[str, np.ndarray]:
    host = is_(ev, "lane_kind", "host")
    work = host & ~is_(ev, "kind", *HOST_WORK_EXCLUDED)
    names = ev["name"]
    io = data_wait_mask(ev) | (host & is_(ev, "kind", "data_read", "data_process", "data_fetch"))
    init = work & (name_matches(names, INIT_NAME) | _first_launch_outliers(ev, host))
    return {
        "io": io,
        "garbage_collection": work & (is_(ev, "kind", "gc") | name_matches(names, GC_NAME)),
        "operator_compilation": work & (is_(ev, "kind", "compile")
                                        | name_matches(names, COMPILE_NAME)),
        "host_device_sync": work & (is_(ev, "kind", "sync", "memcpy_d2h")
                                    | name_matches(names, SYNC_NAME)),
        "environment_configuration": work & (name_matches(names, LOG_NAME) | init),
        "initialization": init,
        "operator_dispatch": work,
    }


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
    # a call that outlasts its median while the device is busy is back-pressure (a full launch
    # queue), not contention: only calls at least half inside device-idle time count
    in_idle = iv.overlap_per_interval(ts, ts + sub["dur_ns"].to_numpy(np.int64), idle) \
        >= 0.5 * dur
    # a name's first call (lazy set-up inside the runtime) and the first launch of each kernel
    # (its module is loaded then) are start-up costs, not contention
    codes = (names if isinstance(names.dtype, pd.CategoricalDtype)
             else names.astype("category")).cat.codes.to_numpy()
    o = np.argsort(ts, kind="stable")
    first = np.zeros(ts.size, bool)
    first[o[np.unique(codes[o], return_index=True)[1]]] = True
    first |= _first_kernel_launches(ev, leaf)[leaf]
    inflated = (cnt >= MIN_CALLS) & (dur > INFLATION * med) & in_idle & ~first
    excess = np.where(inflated, dur - med, 0.0)
    total = float(dur[cnt >= MIN_CALLS].sum())
    n_inflated = int(inflated.sum())
    spread = excess.sum() > 0 and \
        float(np.sort(excess)[-SPREAD_TOP:].sum()) < SPREAD_MAX * float(excess.sum())
    if n_inflated < MIN_INFLATED or not spread:
        excess = np.zeros_like(excess)  # sporadic stalls: not evidence of contention
    pos = excess > 0  # (rows without excess add nothing to a name's sum)
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


@register("cpu", scope="rank", needs=("overlap",))
def cpu(ctx: RankContext) -> AnalyzerResult:
    """Host-bound device idle time apportioned to compilation, dispatch, sync, GC, contention."""
    ev = ctx.events
    res = AnalyzerResult("cpu")
    windows = step_windows(ev)
    step_total = int(windows["dur_ns"].sum()) if len(windows) else 0
    causes = [c for c in CAUSE_TEXT if c != "initialization"]
    res.metrics.update({"step_total_ns": step_total, "host_bound_ns": 0,
                        **{f"{c}_share": 0.0 for c in causes}})
    empty = {"step": np.empty(0, np.int64), "dur_ns": np.empty(0, np.int64),
             **{f"{c}_ns": np.empty(0, np.int64) for c in ["host_bound", *causes]}}
    res.tables["per_step"] = pd.DataFrame(empty)
    if step_total == 0:
        return res
    idle = device_idle(ctx, windows)
    cls = _classes(ev)
    remaining = iv.intersect(idle, spans(ev, cls["operator_dispatch"] | cls["io"]))
    hb_total = iv.total(remaining)
    claimed: dict[str, iv.Union] = {}
    for name in ("io", "garbage_collection", "operator_compilation", "host_device_sync",
                 "environment_configuration", "operator_dispatch"):
        u = spans(ev, cls[name])
        claimed[name] = iv.intersect(remaining, u)
        remaining = iv.subtract(remaining, u)
    # conjectured GC: long device-and-host-idle gaps, only when GC is not instrumented
    gc_instrumented = bool(is_(ev, "kind", "gc").any())
    host_any = spans(ev, is_(ev, "lane_kind", "host") & ~is_(ev, "kind", *HOST_WORK_EXCLUDED))
    free = iv.subtract(iv.intersect(idle, windows_union(windows)), host_any)
    long_gap = (free[1] - free[0]) >= GC_GAP_NS
    long_free = (free[0][long_gap], free[1][long_gap])
    conjectured = iv.EMPTY if gc_instrumented else long_free
    claimed["garbage_collection"] = iv.union(
        np.concatenate([claimed["garbage_collection"][0], conjectured[0]]),
        np.concatenate([claimed["garbage_collection"][1], conjectured[1]]))
    times = {c: float(iv.total(claimed[c])) for c in causes if c in claimed}
    # the start-up part of the environment time (its own wording and rule)
    init_t = float(iv.total(iv.intersect(claimed["environment_configuration"],
                                         spans(ev, cls["initialization"]))))
    specific = np.zeros(len(ev), bool)
    for other_cls in ("io", "garbage_collection", "operator_compilation", "host_device_sync",
                      "environment_configuration"):
        specific |= cls[other_cls]
    infl = _inflation(ev, cls["operator_dispatch"] & ~specific, idle)
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
    dispatch_t = times["operator_dispatch"]
    times["environment_configuration"] += dispatch_t * env_frac
    times["resource_contention"] = dispatch_t * cont_frac
    times["operator_dispatch"] = dispatch_t * (1.0 - env_frac - cont_frac)
    res.metrics["host_bound_ns"] = int(hb_total)
    res.metrics["io_wait_ns"] = int(iv.total(claimed["io"]))
    res.metrics["inflation_fraction"] = infl["fraction"]
    table: dict[str, Any] = {"step": windows["step"].to_numpy(np.int64),
                             "dur_ns": windows["dur_ns"].to_numpy(np.int64),
                             "host_bound_ns": per_step_ns(iv.intersect(
                                 idle, spans(ev, cls["operator_dispatch"] | cls["io"])), windows)}
    for c in causes:
        if c != "resource_contention":
            table[f"{c}_ns"] = per_step_ns(claimed[c], windows)
    d_ps = table["operator_dispatch_ns"].astype(np.float64)
    table["resource_contention_ns"] = np.round(d_ps * cont_frac).astype(np.int64)
    env_ps = np.round(d_ps * env_frac).astype(np.int64)
    table["environment_configuration_ns"] = table["environment_configuration_ns"] + env_ps
    table["operator_dispatch_ns"] = table["operator_dispatch_ns"] - env_ps \
        - table["resource_contention_ns"]
    res.tables["per_step"] = pd.DataFrame(table)
    dispatch_ev = _dispatch_evidence(ev, windows)
    for c in causes:
        share = min(1.0, times[c] / step_total)
        res.metrics[f"{c}_share"] = share
        mask = cls.get(c, cls["operator_dispatch"])
        if c in ("operator_dispatch", "resource_contention"):
            specific = np.zeros(len(ev), bool)
            for other_cls in ("io", "garbage_collection", "operator_compilation",
                              "host_device_sync", "environment_configuration"):
                specific |= cls[other_cls]
            mask = cls["operator_dispatch"] & ~specific & ~is_(ev, "kind", "python")
        n = int(mask.sum()) if c != "resource_contention" else infl["events"]
        if c == "environment_configuration" and env_frac:
            mask = mask | (cls["operator_dispatch"] & is_(ev, "kind", "launch"))
        strong = c in ("operator_compilation", "host_device_sync") and n >= STRONG_COUNT
        if share < MIN_SHARE and not (strong and share > 0):
            continue
        evidence: dict[str, Any] = {"time_ms": round(times[c] / 1e6, 3), "events": n,
                                    "host_bound_ms": round(hb_total / 1e6, 3),
                                    "steps_total_ms": round(step_total / 1e6, 3),
                                    "top_ops": top_names(ev, mask)}
        if c == "operator_dispatch":
            evidence.update(dispatch_ev)
            # by self time: an operator's own host time, not its callees' (nested ops, runtime
            # calls, syncs and start-up inside it)
            own = self_ns(ev, cls["operator_dispatch"])
            evidence["top_ops"] = top_names(ev, mask, weights=own)
        if c in ("resource_contention", "environment_configuration"):
            evidence.update({"launch_excess": excess, "environment": env})
        text = CAUSE_TEXT[c]
        if c == "environment_configuration":
            init_share = round(min(1.0, init_t / times[c]), 4) if times[c] else 0.0
            evidence.update({"initialization_ms": round(init_t / 1e6, 3),
                             "initialization_share": init_share})
            if init_share >= 0.5:
                text = CAUSE_TEXT["initialization"]
                evidence["top_ops"] = top_names(ev, cls["initialization"])
        if c == "resource_contention":
            evidence.update({"inflation_fraction": round(cont_frac, 4),
                             "inflated_ops": infl["names"], "other_process_cpu": other})
            evidence["top_ops"] = [{"name": d["name"], "time_ns": d["excess_ns"]}
                                   for d in infl["names"]]
        if c == "garbage_collection":
            evidence["conjectured_gaps"] = int(conjectured[0].size)
        if c == "operator_compilation":
            # compiled once in the first step (torch.compile / JIT warm-up) or again and again
            # (new shapes): the share of compile time after the first step tells them apart
            ps = table["operator_compilation_ns"].astype(np.float64)
            evidence.update({"trace_steps": int(len(ps)), "compile_after_first_share":
                             round(float(ps[1:].sum() / ps.sum()), 4) if ps.sum() else 0.0})
            if len(ps) > 1 and evidence["compile_after_first_share"] < 0.1:
                text = "operators are compiled once, in the first step (one-off warm-up)"
        steps = tuple(int(s) for s, v in zip(table["step"], table[f"{c}_ns"], strict=True) if v > 0)
        res.findings.append(Finding("cpu", c, share,
                                    f"{text}: {100 * share:.1f}% of step time",
                                    evidence=evidence, ranks=(int(ctx.rank),), steps=steps))
    return res
