"""Rank analyzer ``computation``: roofline per device task and the causes of underutilization.

``computation(ctx: RankContext) -> AnalyzerResult`` over one rank's ``kernel`` events. Formulas,
thresholds and their sources are in ``docs/analysis/computation.md``; in short:

* AI = flops / bytes (FLOP/B); ridge = peak FLOP/s of the task's unit / HBM bandwidth;
  U_c = achieved FLOP/s / peak, U_b = achieved B/s / HBM bandwidth (achieved = value / dur).
* memory-bound: AI <= ridge and U_b >= U_THRESHOLD; compute-bound: AI > ridge and
  U_c >= U_THRESHOLD; otherwise underutilized. Missing bytes or flops: classified by what is known
  (U_c >= U -> compute-bound, U_b >= U -> memory-bound), else by Ascend pipe ratios
  (``aic_mac_ratio``/``aiv_vec_ratio`` -> compute, ``aic_mte2_ratio``/``aiv_mte2_ratio`` -> memory),
  else ``no_data``.
* A finding's ``time_share`` = |union of its operators' device intervals, clipped to the step
  windows| / sum of step window durations.

Tables: ``kernels`` (one row per task, the roofline columns), ``classes`` (device time per class),
``top_ops`` (by class and name), ``causes`` (underutilization causes and their operators).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers import devicework, families
from hermes.analyzers import intervals as iv
from hermes.analyzers.base import AnalyzerResult, RankContext, register
from hermes.analyzers.kernelstats import KernelStats
from hermes.analyzers.opinfo import (
    TOP_N,
    arg_numbers,
    arg_values,
    base_frame,
    clip_to_windows,
    dtype_bytes,
    gemm_bytes,
    has,
    input_shapes,
    misaligned,
    peaks,
    rich_args,
    step_of,
    union_time,
)
from hermes.analyzers.steps import step_windows
from hermes.findings import MIN_SHARE, Finding

#: Utilization (achieved / peak) a task must reach to count as compute- or memory-bound. Hermes's
#: choice: the best dense bf16 GEMM measured on an H100 reaches 0.80 of the datasheet peak
#: (h100_calibration.json) and a streaming kernel ~0.9 of HBM; a task below 0.7 of its roof
#: leaves 30 % or more of the unit idle. Also applied to Ascend pipe ratios (the fraction of a
#: task's time its cube/vector/MTE2 pipe was busy).
U_THRESHOLD = 0.7
#: msprof-analyze's AI CPU checker: AI CPU tasks longer than 20 us are worth replacing.
AI_CPU_MIN_NS = 20_000
#: Frequency drop reported when the clock is >= 5 % below nominal (msprof-analyze, Hermes).
DOWNCLOCK_MIN = 0.05
#: Inner-axis alignment (elements) for matrix units and FlashAttention head dims, per device kind:
#: Ascend cube affinity 256 / FA head dim 128 (CANN guidance); NVIDIA Tensor Cores need multiples
#: of 8 fp16/bf16 elements (cuBLAS / FlashAttention requirements).
ALIGNMENT: dict[str, tuple[int, int]] = {"npu": (256, 128), "gpu": (8, 8)}
#: A finding needs at least this share of step time unless its evidence is named operators.

#: Causes whose tasks count as underutilized in the class shares (dynamic shapes cost host time,
#: not device efficiency, so they do not).
OVERRIDING_CAUSES = ("ai_cpu", "shape_affinity", "private_format")
CLASSES = ("compute_bound", "memory_bound", "underutilized", "no_data")
_GEMM = re.compile(r"gemm|matmul|cutlass|xmma|nvjet|cublas|wgmma|BatchMatMul|\bmm\b|addmm|bmm",
                   re.I)
_FA = re.compile(r"flash|fmha|FlashAttention|scaled_dot_product|sdpa", re.I)


# ---------------------------------------------------------------- the roofline table

def kernel_table(ctx: RankContext, windows: pd.DataFrame) -> pd.DataFrame:
    """One row per device task with the roofline columns (see the module docstring)."""
    return _kernel_table(ctx, windows)[0]


def _kernel_table(ctx: RankContext, windows: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """The kernel table and the args (pyarrow strings) of its rows that carry known keys."""
    ev = ctx.events
    pk = peaks(ctx)
    k = base_frame(ev, (ev["kind"] == "kernel").to_numpy()) if len(ev) else \
        base_frame(ev.iloc[:0], np.zeros(0, bool)) if len(ev.columns) else pd.DataFrame()
    if len(k) == 0:
        return pd.DataFrame(columns=["name", "ts_ns", "dur_ns", "unit", "flops", "bytes",
                                     "ai_flop_per_B", "ridge_flop_per_B", "achieved_flops",
                                     "achieved_Bps", "u_compute", "u_bandwidth", "class",
                                     "family", "basis", "step"]), \
            pd.Series([], dtype="string[pyarrow]")
    args = rich_args(k["args"])  # one pass; the lookups below only see rows with keys
    n, pos = len(k), args.index.to_numpy(np.int64)  # k has a RangeIndex: labels = positions
    gemm = has(k["name"], _GEMM)
    gemm[pos] |= has(arg_values(args, "Type", "op_type"), _GEMM)
    k["gemm"] = gemm
    k["shape"] = _scatter(n, pos, input_shapes(args))
    k["host_args"] = None
    devicework.assign_families(k)
    devicework.link_host_ops(ev, k)
    devicework.assign_families(k)  # names no pattern knows take their host operator's family
    # the unit: the trace's, else AI CPU by the task's core type, else by GEMM-ness
    ucodes, ucats = _codes(k["unit"])
    vocab = [str(u) for u in ucats] + ["ai_cpu", "cube" if pk["kind"] != "gpu" else "sm",
                                       "sm" if pk["kind"] == "gpu" else "vector"]
    ai_cpu = np.zeros(n, bool)
    ai_cpu[pos] = has(arg_values(args, "Accelerator Core", "Task Type", "task_type"), "AI_CPU",
                      case=False)
    nu = len(ucats)
    ucodes = np.where(ucodes >= 0, ucodes, np.where(ai_cpu, nu, np.where(gemm, nu + 1, nu + 2)))
    k["unit"] = pd.array(vocab, dtype="str").take(ucodes)
    # = unit.replace({"mix": "cube"}).map(peak_flops), decided once per distinct unit
    pf = pk["peak_flops"]
    per = pd.Series(vocab, dtype=object).replace({"mix": "cube"}).map(pf).to_numpy(np.float64)
    peak_unit = per[ucodes]
    # a GEMM's peak depends on its dtype (fp32 GEMMs on an H100 run at the fp32 rate)
    gi = np.flatnonzero(gemm)
    ha = k["host_args"].to_numpy(object)[gi]
    src = pd.Series(k["args"].array.take(gi))
    if pd.notna(ha).any():
        src = pd.Series(np.where(pd.notna(ha), ha, src.to_numpy(object)), dtype=object)
    elem = np.full(n, 2.0)
    elem[gi] = dtype_bytes(src).to_numpy(np.float64)
    kel = k["elem"].to_numpy(np.float64)
    elem = np.where(~np.isnan(kel) & gemm, kel, elem)  # the operator's parsed input dtype
    if pk["dtype_flops"]:
        fp32 = pk["dtype_flops"].get("fp32")
        if fp32:
            top = float(np.nanmax(peak_unit)) if (~np.isnan(peak_unit)).any() else np.nan
            peak_unit = np.where(gemm & (elem == 4.0), min(fp32, top), peak_unit)
    # judge a task against the clock it ran at: a downclocked unit is a frequency drop (its own
    # finding), not an inefficient kernel. Both roofs scale: the AI Core's MTE pipes move data
    # from HBM at the core clock, so a downclocked core also loads more slowly.
    clock = _clock_ratio(ev, k["ts_ns"].to_numpy(np.int64), pk["clock_mhz"])
    k["clock"] = clock
    peak_unit = peak_unit * clock
    # shape-based bytes only complete a GEMM whose flops are known (its AI); alone they would
    # judge the task by a guessed bandwidth
    fl0, by0 = k["flops"].to_numpy(np.float64), k["bytes"].to_numpy(np.float64)
    shape = k["shape"].to_numpy(object)
    sel = np.flatnonzero(gemm & ~np.isnan(fl0) & pd.notna(shape))
    est = np.full(n, np.nan)
    if sel.size:
        est[sel] = gemm_bytes(pd.Series(shape[sel], dtype=object), pd.Series(elem[sel])) \
            .to_numpy(np.float64)
    with np.errstate(invalid="ignore"):
        by0 = np.where(~np.isnan(by0) & (by0 > 0), by0, est)
    k["bytes"] = by0
    hbm = (pk["hbm_bw_Bps"] or np.nan) * clock
    dur_s = k["dur_ns"].to_numpy(np.float64) * 1e-9
    with np.errstate(divide="ignore", invalid="ignore"):
        flops = np.where(fl0 > 0, fl0, np.nan)
        byts = np.where(by0 > 0, by0, np.nan)
        ach_f = np.where(dur_s > 0, flops / dur_s, np.nan)
        ach_b = np.where(dur_s > 0, byts / dur_s, np.nan)
        roof = {"ai_flop_per_B": flops / byts, "ridge_flop_per_B": peak_unit / hbm,
                "achieved_flops": ach_f, "achieved_Bps": ach_b,
                "u_compute": ach_f / peak_unit, "u_bandwidth": ach_b / hbm}
    for c, v in roof.items():
        k[c] = v
    cls = _classify(roof, args, n)
    k["class"], k["basis"] = _family_fallback(k["family"], cls)
    k["step"] = step_of(k["ts_ns"].to_numpy(np.int64), windows)
    return k, args


def _scatter(n: int, pos: np.ndarray, values: pd.Series) -> pd.Series:
    """An object column of ``n`` rows: ``values`` at rows ``pos``, NaN elsewhere."""
    out = np.full(n, np.nan, dtype=object)
    out[pos] = values.to_numpy(object)
    return pd.Series(out, dtype=object)


def _codes(x: pd.Series) -> tuple[np.ndarray, pd.Index]:
    if isinstance(x.dtype, pd.CategoricalDtype):
        return x.cat.codes.to_numpy(np.int64), x.cat.categories
    codes, uniq = pd.factorize(x.astype(object), use_na_sentinel=True)
    return codes.astype(np.int64), pd.Index(uniq, dtype=object)


_BASIS = pd.array(["roofline", "family", "none"], dtype="str")


def _family_fallback(family: pd.Series, cls: np.ndarray) -> tuple[pd.Categorical, Any]:
    """Tasks without FLOP/byte data take their kernel family's usual bound (``families.toml``:
    matrix families compute-bound, the rest memory-bound); ``basis`` says which tasks were
    judged by measurement (``roofline``), by family (``family``) or not at all (``none``:
    communication kernels, which are not computation). Returns (class, basis)."""
    nd = cls == CLASSES.index("no_data")
    fcodes, fcats = _codes(family)
    usual = np.array([CLASSES.index(b) if b in ("compute_bound", "memory_bound") else -1
                      for b in (families.bound_of(f) for f in fcats)] +
                     [-1 if families.bound_of(None) not in CLASSES[:2]
                      else CLASSES.index(families.bound_of(None))], np.int64)[fcodes]
    fb = nd & (usual >= 0)
    cls = np.where(fb, usual, cls)
    return pd.Categorical.from_codes(cls, CLASSES), \
        _BASIS.take(np.where(nd, np.where(fb, 1, 2), 0))


def _classify(roof: dict[str, np.ndarray], args: pd.Series, n: int) -> np.ndarray:
    """The roofline class of each task (codes into ``CLASSES``), rules as in the module doc."""
    cb, mb, uu, nd = range(4)
    ai, ridge = roof["ai_flop_per_B"], roof["ridge_flop_per_B"]
    uc, ub = roof["u_compute"], roof["u_bandwidth"]
    with np.errstate(invalid="ignore"):
        both = ~(np.isnan(ai) | np.isnan(ridge) | np.isnan(uc) | np.isnan(ub))
        cls = np.full(n, nd, np.int8)
        cls[both] = uu
        cls[both & (ai <= ridge) & (ub >= U_THRESHOLD)] = mb
        cls[both & (ai > ridge) & (uc >= U_THRESHOLD)] = cb
        # Ascend kernel_details pipe ratios (measured): fraction of the task's time each pipe
        # was busy; only rows whose args carry them
        if len(args):
            mac = pd.concat([arg_numbers(args, "aic_mac_ratio", "aic_mac_fp16_ratio"),
                             arg_numbers(args, "aiv_vec_ratio", "aiv_vec_fp16_ratio")],
                            axis=1).max(axis=1)
            mte = pd.concat([arg_numbers(args, "aic_mte2_ratio"),
                             arg_numbers(args, "aiv_mte2_ratio")], axis=1).max(axis=1)
            pos = args.index.to_numpy(np.int64)
            mac_v, mte_v = mac.to_numpy(), mte.to_numpy()
            sel = (cls[pos] == nd) & ~(np.isnan(mac_v) & np.isnan(mte_v))
            pc = np.where(mac_v >= U_THRESHOLD, cb, np.where(mte_v >= U_THRESHOLD, mb, uu))
            cls[pos[sel]] = pc[sel]
        # only one of flops / bytes known: a task at >= U of that roof is bound by it; below it
        # we cannot tell which roof applies, so it stays no_data
        one = cls == nd
        cls[one & (uc >= U_THRESHOLD)] = cb
        cls[(cls == nd) & (ub >= U_THRESHOLD)] = mb
    return cls


# ---------------------------------------------------------------- underutilization causes

def _causes(ctx: RankContext, k: pd.DataFrame, kind: str, args: pd.Series | None = None
            ) -> dict[str, np.ndarray]:
    """Operators behind each underutilization cause (masks of the rows of ``k``)."""
    if len(k) == 0:
        return {}
    args = rich_args(k["args"]) if args is None else args
    typ = arg_values(args, "Type", "op_type").reindex(k.index)
    mm_align, fa_align = ALIGNMENT.get(kind, ALIGNMENT["gpu"])
    fa = has(k["name"], _FA) | has(typ, _FA)
    gemm = k["gemm"].to_numpy() & ~fa
    shape = k["shape"].to_numpy()
    mis = np.zeros(len(k), bool)
    for sel, n_in, align in ((gemm, 2, mm_align), (fa, 3, fa_align)):
        idx = np.flatnonzero(sel & pd.notna(shape))
        # once per distinct shape string (shapes is cached)
        mis[idx] = [misaligned(shape[i], n_in, align) for i in idx]
    state = arg_values(args, "OP State", "op_state", "op state").reindex(k.index)
    return {
        "ai_cpu": (k["unit"] == "ai_cpu").to_numpy() & (k["dur_ns"] > AI_CPU_MIN_NS).to_numpy(),
        "shape_affinity": mis,
        "private_format": has(k["name"], "TransData", case=False)
        | has(typ, "TransData", case=False),
        "dynamic_shape": has(state, r"^\s*dynamic\s*$", case=False),
    }


_CAUSE_TEXT = {
    "ai_cpu": "AI CPU operators longer than 20 us (slow fallback for unsupported ops/dtypes)",
    "shape_affinity": "matmul / FlashAttention shapes missing the matrix unit's alignment",
    "private_format": "private-format conversions (TransData)",
    "dynamic_shape": "dynamic-shape operators (compiled and tiled at run time)",
}


def _freq_samples(ev: pd.DataFrame) -> pd.DataFrame:
    """Frequency counter samples (``counter`` events whose name contains "freq"), by time."""
    if len(ev) == 0:
        return base_frame(ev.iloc[:0], np.zeros(0, bool)) if len(ev.columns) else pd.DataFrame()
    m = (ev["kind"] == "counter").to_numpy() & has(ev["name"], "freq", case=False)
    c = base_frame(ev, m)
    return c[c["value"].notna()].sort_values("ts_ns", kind="stable")


def _clock_ratio(ev: pd.DataFrame, ts: np.ndarray, nominal: float) -> np.ndarray:
    """Clock at each time / nominal: the latest frequency sample at or before it (the first
    sample before any); 1 without samples."""
    c = _freq_samples(ev)
    if len(c) == 0 or ts.size == 0:
        return np.ones(ts.size)
    vals = c["value"].to_numpy(np.float64)
    ref = nominal if nominal > 0 else float(vals.max())
    i = np.clip(np.searchsorted(c["ts_ns"].to_numpy(np.int64), ts, side="right") - 1, 0, None)
    return np.clip(vals[i] / ref, 0.0, 1.0) if ref > 0 else np.ones(ts.size)


def _frequency(ev: pd.DataFrame, windows: pd.DataFrame, nominal: float) -> dict[str, float]:
    """Mean clock drop from frequency counter samples in the steps (0 when none)."""
    c = _freq_samples(ev)
    if len(c) == 0:
        return {}
    c = c[step_of(c["ts_ns"].to_numpy(np.int64), windows) >= 0] if len(windows) else c
    vals = c["value"]
    if len(vals) == 0:
        return {}
    ref = nominal if nominal > 0 else float(vals.max())
    drop = float(np.clip(1.0 - vals.mean() / ref, 0.0, 1.0))
    return {"nominal_mhz": ref, "mean_mhz": float(vals.mean()), "drop": drop}


# ---------------------------------------------------------------- the analyzer

def _device_busy(ev: pd.DataFrame, windows: pd.DataFrame) -> int:
    if len(ev) == 0:
        return 0
    m = ev["lane_kind"].isin(["device", "copy", "link"]).to_numpy() & \
        ~ev["kind"].isin(["step", "marker", "counter"]).to_numpy()
    ts = ev["ts_ns"].to_numpy(np.int64)[m]
    return union_time(ts, ts + ev["dur_ns"].to_numpy(np.int64)[m], windows)


@register("computation", scope="rank")
def computation(ctx: RankContext) -> AnalyzerResult:
    """Roofline per device task; compute/memory-bound and underutilized shares and causes."""
    ev = ctx.events
    windows = step_windows(ev)
    step_total = int(windows["dur_ns"].sum()) if len(windows) else 0
    pk = peaks(ctx)
    k, args = _kernel_table(ctx, windows)
    causes = _causes(ctx, k, pk["kind"], args)
    # tasks that exist or run slowly only because of a cause (AI CPU fallbacks, misaligned
    # shapes, format conversions) are underutilization whatever roof they sit under
    cls = k["class"].cat.codes.to_numpy(np.int64).copy() if len(k) else np.zeros(0, np.int64)
    for reason in OVERRIDING_CAUSES:
        if reason in causes and causes[reason].any():
            cls[causes[reason]] = CLASSES.index("underutilized")
    if len(k):
        k["class"] = pd.Categorical.from_codes(cls, CLASSES)
    ks = KernelStats(k, cls, CLASSES)
    ts, end = _starts_ends(k)
    clock = k["clock"].to_numpy(np.float64) if len(k) else np.zeros(0)
    res = AnalyzerResult("computation")
    per_step = _per_step(k, windows)
    total_dev = float(ks.dur.sum()) if len(k) else 0.0
    rows = []
    for ci, c in enumerate(CLASSES):
        m = cls == ci
        t = float(ks.dur[m].sum()) if m.any() else 0.0
        u = union_time(ts[m], end[m], windows) if m.any() else 0
        # time at the nominal clock: what a downclocked device adds is the frequency drop's
        clk = float((ks.dur[m] * clock[m]).sum() / t) if t > 0 else 1.0
        rows.append({"class": c, "kernels": int(m.sum()), "device_time_ns": int(t),
                     "share_pct": 100.0 * t / total_dev if total_dev else 0.0,
                     "step_share": u / step_total * clk if step_total else 0.0})
    classes = pd.DataFrame(rows)
    busy = _device_busy(ev, windows)
    basis = k["basis"].to_numpy(object) if len(k) else np.zeros(0, object)
    res.metrics.update({
        "u_threshold": U_THRESHOLD,
        "steps": int(len(windows)),
        "step_total_ns": step_total,
        "step_median_ms": float(windows["dur_ns"].median() / 1e6) if len(windows) else 0.0,
        "compute_ns": int(per_step["compute_ns"].sum()) if len(per_step) else 0,
        "compute_median_ms": float(per_step["compute_ns"].median() / 1e6) if len(per_step)
        else 0.0,
        "device_busy_pct": 100.0 * busy / step_total if step_total else 0.0,
        "device_idle_pct": 100.0 * (1 - busy / step_total) if step_total else 0.0,
        **{f"{r['class']}_pct": r["share_pct"] for r in rows},
        # share of kernel time without FLOP/byte data (judged by kernel family, or not at all)
        "no_data_pct": 100.0 * float(ks.dur[basis != "roofline"].sum())
        / total_dev if total_dev else 0.0,
        "family_basis_pct": 100.0 * float(ks.dur[basis == "family"].sum())
        / total_dev if total_dev else 0.0,
        **devicework.mfu(k, step_total, pk),
    })
    res.tables.update({"tasks": k.drop(columns=["args", "host_args", "shape", "lane",
                                                "coll_group", "coll_bytes", "coll_seq",
                                                "value"], errors="ignore"),
                       "kernels": ks.kernels(), "families": ks.families(),
                       "classes": classes, "per_step": per_step})
    top = []
    for c in ("compute_bound", "memory_bound", "underutilized"):
        for op in _top_ops(ks, cls == CLASSES.index(c)):
            top.append({"class": c, **op})
    res.tables["top_ops"] = pd.DataFrame(top, columns=["class", "name", "time_ns", "count"])
    # every operator's time and count: the cluster analyzer compares the same operators across
    # ranks (slower device vs more work)
    res.tables["op_time"] = (ks.op_table().rename(columns={"sum": "time_ns"}).reset_index()
                             if len(k) else pd.DataFrame(columns=["name", "time_ns", "count"]))
    steps = tuple(int(s) for s in windows["step"]) if len(windows) else ()
    ranks = (int(ctx.rank),)
    _class_findings(res, ks, classes, pk, ranks, steps)
    cause_rows = []
    named: dict[str, dict] = {}
    for reason, m in causes.items():
        if not m.any():
            continue
        share = union_time(ts[m], end[m], windows) / step_total if step_total else 0.0
        ops = _top_ops(ks, m, n=50)
        for op in ops:
            cause_rows.append({"cause": reason, **op})
        named[reason] = {"share": round(min(1.0, share), 6), "text": _CAUSE_TEXT[reason],
                         "tasks": int(m.sum()), "time_ns": int(ks.dur[m].sum()),
                         "operators": [o["name"] for o in ops], "top_ops": ops[:TOP_N]}
    res.tables["causes"] = pd.DataFrame(cause_rows, columns=["cause", "name", "time_ns", "count"])
    freq = _frequency(ev, windows, pk["clock_mhz"])
    res.metrics["frequency"] = freq
    freq_share = 0.0
    if freq and freq["drop"] >= DOWNCLOCK_MIN and step_total:
        freq_share = min(1.0, busy / step_total * freq["drop"])
        named["frequency_drop"] = {
            "share": round(freq_share, 6),
            "text": f"device clock {100 * freq['drop']:.1f}% below nominal "
                    f"({freq['mean_mhz']:.0f} of {freq['nominal_mhz']:.0f} MHz)",
            **{k2: round(v, 3) for k2, v in freq.items()}}
    _underutilization(res, ks, classes, named, freq_share, ranks, steps,
                      _computing_share(k, windows, step_total), pk)
    return res


def _starts_ends(k: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    if len(k) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return k["ts_ns"].to_numpy(np.int64), k["end_ns"].to_numpy(np.int64)


def _top_ops(ks: KernelStats, mask: np.ndarray, n: int = TOP_N) -> list[dict[str, Any]]:
    """``opinfo.top_ops`` of the tasks in ``mask``: [{name, time_ns, count}]."""
    if not mask.any():
        return []
    g = ks.op_table(mask).sort_values("sum", ascending=False).head(n)
    return [{"name": str(k), "time_ns": int(v["sum"]), "count": int(v["count"])}
            for k, v in g.iterrows()]


def _computing_share(k: pd.DataFrame, windows: pd.DataFrame, step_total: int) -> float:
    """Share of step time some computation kernel runs (communication kernels left out): no
    computation finding may claim more (the verdict's device share also counts copies)."""
    if not step_total or len(k) == 0:
        return 0.0
    c = (k["family"] != "communication").to_numpy()
    ts, end = _starts_ends(k)
    return union_time(ts[c], end[c], windows) / step_total


def _class_findings(res: AnalyzerResult, ks: KernelStats, classes: pd.DataFrame,
                    pk: dict[str, Any], ranks: tuple[int, ...], steps: tuple[int, ...]) -> None:
    """``computation.compute_bound`` / ``memory_bound``: time_share = the class's step share;
    evidence: where its device time goes (families, top kernels, achieved TFLOP/s and GB/s
    against the device's peaks) and how much of it was judged by kernel family alone."""
    total = float(ks.dur.sum()) if ks.n else 0.0
    for c in ("compute_bound", "memory_bound"):
        r = classes[classes["class"] == c].iloc[0]
        if r["step_share"] < MIN_SHARE:
            continue
        sub = ks.cls == CLASSES.index(c)
        ev = devicework.class_evidence(ks, sub, total, pk)
        where = devicework.describe(ev, compute=c == "compute_bound")
        res.findings.append(Finding(
            "computation", c, min(1.0, float(r["step_share"])),
            f"{r['share_pct']:.1f}% of device task time is {c.replace('_', '-')} "
            f"({100 * r['step_share']:.1f}% of step time)" + (f": {where}" if where else ""),
            evidence={"share_of_device_time_pct": round(float(r["share_pct"]), 3),
                      "no_data_pct": round(res.metrics["no_data_pct"], 3),
                      "u_threshold": U_THRESHOLD, "kernels": int(r["kernels"]),
                      "top_ops": _top_ops(ks, sub), **ev},
            ranks=ranks, steps=steps))


def _underutilization(res: AnalyzerResult, ks: KernelStats, classes: pd.DataFrame,
                      named: dict[str, dict], freq_share: float, ranks: tuple[int, ...],
                      steps: tuple[int, ...], computing: float, pk: dict[str, Any]) -> None:
    """One ``computation.underutilization`` finding per rank: time_share = the underutilized
    tasks' share (at the nominal clock) + the frequency drop's; its named causes (AI CPU,
    alignment, private formats, dynamic shapes, frequency drop) in ``evidence.causes``, the
    largest as ``evidence.reason``. Named operators are strong evidence: the finding is emitted
    whatever its share when there are any (msprof-analyze lists them without a threshold)."""
    r = classes[classes["class"] == "underutilized"].iloc[0]
    share = min(1.0, float(r["step_share"]) + freq_share, max(computing, float(r["step_share"])))
    if share < MIN_SHARE and not named:
        return
    reason = max(named, key=lambda x: named[x]["share"]) if named else ""
    sub = ks.cls == CLASSES.index("underutilized")
    parts = ", ".join(f"{x} {100 * v['share']:.1f}%" for x, v in
                      sorted(named.items(), key=lambda kv: -kv[1]["share"]))
    res.findings.append(Finding(
        "computation", "underutilization", share,
        f"{r['share_pct']:.1f}% of device task time is underutilized; "
        f"{100 * share:.1f}% of step time" + (f" (causes: {parts})" if parts else ""),
        evidence={"reason": reason, "causes": named,
                  "operators": named[reason].get("operators", []) if reason else [],
                  "share_of_device_time_pct": round(float(r["share_pct"]), 3),
                  "no_data_pct": round(res.metrics["no_data_pct"], 3),
                  "u_threshold": U_THRESHOLD, "kernels": int(r["kernels"]),
                  "top_ops": _top_ops(ks, sub),
                  **devicework.class_evidence(ks, sub, float(ks.dur.sum()) if ks.n else 0.0,
                                              pk)},
        ranks=ranks, steps=steps))


def _per_step(k: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Per step: step, dur_ns, compute_ns (union of kernel time in the step)."""
    cols = ["step", "dur_ns", "compute_ns"]
    if len(windows) == 0:
        return pd.DataFrame(columns=cols)
    comp = np.zeros(len(windows), np.int64)
    if len(k):
        s, e = clip_to_windows(k["ts_ns"].to_numpy(np.int64), k["end_ns"].to_numpy(np.int64),
                               windows)
        u = iv.union(s, e)
        comp = iv.overlap_per_interval(windows["start_ns"].to_numpy(np.int64),
                                       windows["end_ns"].to_numpy(np.int64), u)
    return pd.DataFrame({"step": windows["step"].to_numpy(np.int64),
                         "dur_ns": windows["dur_ns"].to_numpy(np.int64), "compute_ns": comp})
