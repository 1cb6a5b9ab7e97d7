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

from hermes.analyzers.common import intervals as iv
from hermes.analyzers.common import precision
from hermes.analyzers.common.names import codes_in, desc_order
from hermes.analyzers.common.opinfo import (
    TOP_N,
    arg_values,
    clip_to_windows,
    has,
    peaks,
    rich_args,
    step_of,
    union_time,
)
from hermes.analyzers.common.steps import step_windows
from hermes.analyzers.computation import devicework, opvec
from hermes.analyzers.computation.kernelstats import KernelStats
from hermes.analyzers.computation.roofline import (
    CLASS_DTYPE,
    CLASSES,
    U_THRESHOLD,
    freq_samples,
    task_table,
)
from hermes.analyzers.engine.base import AnalyzerResult, RankContext, register
from hermes.findings import MIN_SHARE, Finding

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
_FA = re.compile(r"flash|fmha|FlashAttention|scaled_dot_product|sdpa", re.I)
_DYNAMIC = r"^\s*dynamic\s*$"


# ---------------------------------------------------------------- underutilization causes

def _causes(ctx: RankContext, k: pd.DataFrame, kind: str, args: pd.Series | None = None
            ) -> dict[str, np.ndarray]:
    """Operators behind each underutilization cause (masks of the rows of ``k``)."""
    if len(k) == 0:
        return {}
    if args is None:
        args = rich_args(k["args"]) if "args" in k.columns else \
            pd.Series([], dtype="string[pyarrow]")
    pos = args.index.to_numpy(np.int64)  # the task table's RangeIndex: labels = positions

    def rows(hit: np.ndarray) -> np.ndarray:  # the rows with args -> all rows
        out = np.zeros(len(k), bool)
        out[pos] = hit
        return out

    typ = arg_values(args, "Type", "op_type")
    mm_align, fa_align = ALIGNMENT.get(kind, ALIGNMENT["gpu"])
    fa = has(k["name"], _FA) | rows(has(typ, _FA))
    gemm = k["gemm"].to_numpy() & ~fa
    shape = k["shape"].to_numpy()
    mis = np.zeros(len(k), bool)
    for sel, n_in, align in ((gemm, 2, mm_align), (fa, 3, fa_align)):
        idx = np.flatnonzero(sel & pd.notna(shape))
        if idx.size:  # once per distinct shape string
            codes, uniq = pd.factorize(shape[idx])
            mis[idx] = opvec.misaligned(np.asarray(uniq, dtype=object), n_in, align)[codes]
    state = arg_values(args, "OP State", "op_state", "op state")
    return {
        "ai_cpu": (k["unit"] == "ai_cpu").to_numpy() & (k["dur_ns"] > AI_CPU_MIN_NS).to_numpy(),
        "shape_affinity": mis,
        "private_format": has(k["name"], "TransData", case=False)
        | rows(has(typ, "TransData", case=False)),
        "dynamic_shape": rows(has(state, _DYNAMIC, case=False)),
    }


_CAUSE_TEXT = {
    "ai_cpu": "AI CPU operators longer than 20 us (slow fallback for unsupported ops/dtypes)",
    "shape_affinity": "matmul / FlashAttention shapes missing the matrix unit's alignment",
    "private_format": "private-format conversions (TransData)",
    "dynamic_shape": "dynamic-shape operators (compiled and tiled at run time)",
}


def _frequency(c: pd.DataFrame, windows: pd.DataFrame, nominal: float) -> dict[str, float]:
    """Mean clock drop from frequency counter samples in the steps (0 when none)."""
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
    m = _isin(ev["lane_kind"], ("device", "copy", "link")) & \
        ~_isin(ev["kind"], ("step", "marker", "counter"))
    ts = ev["ts_ns"].to_numpy(np.int64)[m]
    return union_time(ts, ts + ev["dur_ns"].to_numpy(np.int64)[m], windows)


def _isin(x: pd.Series, values: tuple[str, ...]) -> np.ndarray:
    """``x.isin(values)``, decided once per category of a categorical column."""
    if not isinstance(x.dtype, pd.CategoricalDtype):
        return x.isin(list(values)).to_numpy(bool)
    return codes_in(x, x.dtype.categories.isin(list(values)).tolist())


@register("computation", scope="rank")
def computation(ctx: RankContext) -> AnalyzerResult:
    """Roofline per device task; compute/memory-bound and underutilized shares and causes."""
    ev = ctx.events
    windows = step_windows(ev)
    step_total = int(windows["dur_ns"].sum()) if len(windows) else 0
    pk = peaks(ctx)
    samples = freq_samples(ev)
    k, args = task_table(ctx, windows, samples)
    causes = _causes(ctx, k, pk["kind"], args)
    # tasks that exist or run slowly only because of a cause (AI CPU fallbacks, misaligned
    # shapes, format conversions) are underutilization whatever roof they sit under
    cls = k["class"].array.codes.astype(np.int64).copy() if len(k) else np.zeros(0, np.int64)
    for reason in OVERRIDING_CAUSES:
        if reason in causes and causes[reason].any():
            cls[causes[reason]] = CLASSES.index("underutilized")
    if len(k):
        k["class"] = pd.Categorical.from_codes(cls, dtype=CLASS_DTYPE)
    ks = KernelStats(k, cls, CLASSES)
    ts, end = _starts_ends(k)
    # every kernel clipped to its step window once: a subset's step time is the union of its
    # clipped pieces (clipping is per interval)
    clipped = clip_to_windows(ts, end, windows)
    clock = k["clock"].to_numpy(np.float64) if len(k) else np.zeros(0)
    res = AnalyzerResult("computation")
    per_step = _per_step(clipped, windows)
    total_dev = float(ks.dur.sum()) if len(k) else 0.0
    rows = []
    for ci, c in enumerate(CLASSES):
        m = cls == ci
        t = float(ks.dur[m].sum()) if m.any() else 0.0
        u = _clipped_time(clipped, m) if m.any() else 0
        # time at the nominal clock: what a downclocked device adds is the frequency drop's
        clk = float((ks.dur[m] * clock[m]).sum() / t) if t > 0 else 1.0
        rows.append({"class": c, "kernels": int(m.sum()), "device_time_ns": int(t),
                     "share_pct": 100.0 * t / total_dev if total_dev else 0.0,
                     "step_share": u / step_total * clk if step_total else 0.0})
    classes = pd.DataFrame(rows)
    busy = _device_busy(ev, windows)
    measured = (k["basis"] == "roofline").to_numpy(bool) if len(k) else np.zeros(0, bool)
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
        "no_data_pct": 100.0 * float(ks.dur[~measured].sum())
        / total_dev if total_dev else 0.0,
        "family_basis_pct": 100.0 * float(ks.dur[ks.family_basis].sum())
        / total_dev if total_dev else 0.0,
        **devicework.mfu(k, step_total, pk), "precision": precision.facts(ctx, k, args),
    })
    res.tables.update({"tasks": k.drop(columns=["args", "host_row", "shape", "lane",
                                                "coll_group", "coll_bytes", "coll_seq",
                                                "value"], errors="ignore"),
                       "kernels": ks.kernels(), "families": ks.families(),
                       "classes": classes, "per_step": per_step})
    top = []
    for c in ("compute_bound", "memory_bound", "underutilized"):
        for op in top_ops(ks, cls=CLASSES.index(c)):
            top.append({"class": c, **op})
    res.tables["top_ops"] = pd.DataFrame(top, columns=["class", "name", "time_ns", "count"])
    # every operator's time and count: the cluster analyzer compares the same operators across
    # ranks (slower device vs more work)
    res.tables["op_time"] = (ks.op_table().rename(columns={"sum": "time_ns"}).reset_index()
                             if len(k) else pd.DataFrame(columns=["name", "time_ns", "count"]))
    steps = tuple(int(s) for s in windows["step"]) if len(windows) else ()
    ranks = (int(ctx.rank),)
    _class_findings(res, ks, rows, pk, ranks, steps)
    cause_rows = []
    named: dict[str, dict] = {}
    for reason, m in causes.items():
        if not m.any():
            continue
        share = _clipped_time(clipped, m) / step_total if step_total else 0.0
        ops = top_ops(ks, m, n=50)
        for op in ops:
            cause_rows.append({"cause": reason, **op})
        named[reason] = {"share": round(min(1.0, share), 6), "text": _CAUSE_TEXT[reason],
                         "tasks": int(m.sum()), "time_ns": int(ks.dur[m].sum()),
                         "operators": [o["name"] for o in ops], "top_ops": ops[:TOP_N]}
    res.tables["causes"] = pd.DataFrame(cause_rows, columns=["cause", "name", "time_ns", "count"])
    freq = _frequency(samples, windows, pk["clock_mhz"])
    res.metrics["frequency"] = freq
    freq_share = 0.0
    if freq and freq["drop"] >= DOWNCLOCK_MIN and step_total:
        freq_share = min(1.0, busy / step_total * freq["drop"])
        named["frequency_drop"] = {
            "share": round(freq_share, 6),
            "text": f"device clock {100 * freq['drop']:.1f}% below nominal "
                    f"({freq['mean_mhz']:.0f} of {freq['nominal_mhz']:.0f} MHz)",
            **{k2: round(v, 3) for k2, v in freq.items()}}
    _underutilization(res, ks, rows, named, freq_share, ranks, steps,
                      _computing_share(k, clipped, step_total), pk)
    return res


def _starts_ends(k: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    if len(k) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return k["ts_ns"].to_numpy(np.int64), k["end_ns"].to_numpy(np.int64)


def top_ops(ks: KernelStats, mask: np.ndarray | None = None, n: int = TOP_N,
             cls: int | None = None) -> list[dict[str, Any]]:
    """``opinfo.top_ops`` of the tasks in ``mask`` or of class ``cls``: [{name, time_ns,
    count}]."""
    if not (mask.any() if mask is not None else (ks.cls == cls).any()):
        return []
    # = op_table(...).sort_values("sum", ascending=False).head(n), without the frame: the
    # same quicksort on the same sums (pandas' descending order: reversed, sorted, reversed)
    codes, tot, cnt = ks.op_arrays(mask, cls)
    names = ks.names
    return [{"name": str(names[codes[i]]), "time_ns": int(tot[i]), "count": int(cnt[i])}
            for i in desc_order(tot, kind="quicksort")[:n]]


def _clipped_time(clipped: tuple[np.ndarray, np.ndarray], m: np.ndarray) -> int:
    """``union_time`` of the kernels in ``m``, from all kernels clipped to the windows."""
    return iv.total(iv.union(clipped[0][m], clipped[1][m]))


def _computing_share(k: pd.DataFrame, clipped: tuple[np.ndarray, np.ndarray],
                     step_total: int) -> float:
    """Share of step time some computation kernel runs (communication kernels left out): no
    computation finding may claim more (the verdict's device share also counts copies).
    ``clipped``: the kernels clipped to the step windows."""
    if not step_total or len(k) == 0:
        return 0.0
    c = (k["family"] != "communication").to_numpy()
    return _clipped_time(clipped, c) / step_total


def _class_findings(res: AnalyzerResult, ks: KernelStats, classes: list[dict[str, Any]],
                    pk: dict[str, Any], ranks: tuple[int, ...], steps: tuple[int, ...]) -> None:
    """``computation.compute_bound`` / ``memory_bound``: time_share = the class's step share;
    evidence: where its device time goes (families, top kernels, achieved TFLOP/s and GB/s
    against the device's peaks) and how much of it was judged by kernel family alone.
    ``classes``: the rows of the ``classes`` table, in ``CLASSES`` order."""
    total = float(ks.dur.sum()) if ks.n else 0.0
    for c in ("compute_bound", "memory_bound"):
        r = classes[CLASSES.index(c)]
        if r["step_share"] < MIN_SHARE:
            continue
        ci = CLASSES.index(c)
        ev = devicework.class_evidence(ks, ci, total, pk)
        where = devicework.describe(ev, compute=c == "compute_bound")
        res.findings.append(Finding(
            "computation", c, min(1.0, float(r["step_share"])),
            f"{r['share_pct']:.1f}% of device task time is {c.replace('_', '-')} "
            f"({100 * r['step_share']:.1f}% of step time)" + (f": {where}" if where else ""),
            evidence={"share_of_device_time_pct": round(float(r["share_pct"]), 3),
                      "no_data_pct": round(res.metrics["no_data_pct"], 3),
                      "u_threshold": U_THRESHOLD, "kernels": int(r["kernels"]),
                      "top_ops": top_ops(ks, cls=ci), **ev},
            ranks=ranks, steps=steps))


def _underutilization(res: AnalyzerResult, ks: KernelStats, classes: list[dict[str, Any]],
                      named: dict[str, dict], freq_share: float, ranks: tuple[int, ...],
                      steps: tuple[int, ...], computing: float, pk: dict[str, Any]) -> None:
    """One ``computation.underutilization`` finding per rank: time_share = the underutilized
    tasks' share (at the nominal clock) + the frequency drop's; its named causes (AI CPU,
    alignment, private formats, dynamic shapes, frequency drop) in ``evidence.causes``, the
    largest as ``evidence.reason``. Named operators are strong evidence: the finding is emitted
    whatever its share when there are any (msprof-analyze lists them without a threshold)."""
    r = classes[CLASSES.index("underutilized")]
    share = min(1.0, float(r["step_share"]) + freq_share, max(computing, float(r["step_share"])))
    if share < MIN_SHARE and not named:
        return
    reason = max(named, key=lambda x: named[x]["share"]) if named else ""
    ci = CLASSES.index("underutilized")
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
                  "top_ops": top_ops(ks, cls=ci),
                  **devicework.class_evidence(ks, ci, float(ks.dur.sum()) if ks.n else 0.0,
                                              pk)},
        ranks=ranks, steps=steps))


def _per_step(clipped: tuple[np.ndarray, np.ndarray], windows: pd.DataFrame) -> pd.DataFrame:
    """Per step: step, dur_ns, compute_ns (union of kernel time in the step); ``clipped``: the
    kernels clipped to the step windows."""
    cols = ["step", "dur_ns", "compute_ns"]
    if len(windows) == 0:
        return pd.DataFrame(columns=cols)
    comp = np.zeros(len(windows), np.int64)
    if clipped[0].size:
        u = iv.union(*clipped)
        comp = iv.overlap_per_interval(windows["start_ns"].to_numpy(np.int64),
                                       windows["end_ns"].to_numpy(np.int64), u)
    return pd.DataFrame({"step": windows["step"].to_numpy(np.int64),
                         "dur_ns": windows["dur_ns"].to_numpy(np.int64), "compute_ns": comp})
