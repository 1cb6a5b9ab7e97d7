"""The task table of the ``computation`` analyzer: one row per device task with its roofline
columns, unit, family and class (rules in ``computation``'s docstring and
``docs/analysis/computation.md``). Built from numpy arrays and integer codes: string work runs once
per distinct name, unit or family, never per task.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hermes.analyzers.common.opinfo import (
    arg_numbers,
    arg_values,
    base_frame,
    category,
    dtype_bytes,
    has,
    input_shapes,
    peaks,
    rich_args,
    step_of,
    take_num,
)
from hermes.analyzers.computation import devicework, families
from hermes.analyzers.computation.opvec import gemm_bytes
from hermes.analyzers.engine.base import RankContext
from hermes.trace.args import args_of

#: Utilization (achieved / peak) a task must reach to count as compute- or memory-bound. Hermes's
#: choice: the best dense bf16 GEMM measured on an H100 reaches 0.80 of the datasheet peak
#: (h100_calibration.json) and a streaming kernel ~0.9 of HBM; a task below 0.7 of its roof
#: leaves 30 % or more of the unit idle. Also applied to Ascend pipe ratios (the fraction of a
#: task's time its cube/vector/MTE2 pipe was busy).
U_THRESHOLD = 0.7
CLASSES = ("compute_bound", "memory_bound", "underutilized", "no_data")
CLASS_DTYPE = pd.CategoricalDtype(list(CLASSES))
_GEMM = re.compile(r"gemm|matmul|cutlass|xmma|nvjet|cublas|wgmma|BatchMatMul|\bmm\b|addmm|bmm",
                   re.I)


# ---------------------------------------------------------------- the roofline table

def task_table(ctx: RankContext, windows: pd.DataFrame, freq: pd.DataFrame | None = None
               ) -> tuple[pd.DataFrame, pd.Series]:
    """One row per device task with the roofline columns, and the args (pyarrow strings) of
    its rows that carry known keys; ``freq``: the rank's ``freq_samples`` when known."""
    ev = ctx.events
    pk = peaks(ctx)
    m = (ev["kind"] == "kernel").to_numpy() if len(ev) else np.zeros(0, bool)
    k = _task_frame(ev, m) if m.any() else pd.DataFrame()
    if len(k) == 0:
        return pd.DataFrame(columns=["name", "ts_ns", "dur_ns", "unit", "flops", "bytes",
                                     "ai_flop_per_B", "ridge_flop_per_B", "achieved_flops",
                                     "achieved_Bps", "u_compute", "u_bandwidth", "class",
                                     "family", "basis", "step"]), \
            pd.Series([], dtype="string[pyarrow]")
    kidx = np.flatnonzero(m)
    args = _rich_args(ev, kidx)  # one pass; the lookups below only see rows with keys
    n, pos = len(k), args.index.to_numpy(np.int64)  # k has a RangeIndex: labels = positions
    gemm = has(k["name"], _GEMM)
    gemm[pos] |= has(arg_values(args, "Type", "op_type"), _GEMM)
    k["gemm"] = gemm
    k["shape"] = _scatter(n, pos, input_shapes(args))
    k["host_row"] = np.full(n, -1, np.int64)  # (devicework: the linked operator's event)
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
    elem = np.full(n, 2.0)
    hrow = k["host_row"].to_numpy(np.int64)
    for lo in range(0, gi.size, ARGS_BATCH):  # (a row's size depends on its args alone)
        g = gi[lo:lo + ARGS_BATCH]
        elem[g] = dtype_bytes(_gemm_args(ev, kidx[g], hrow[g])).to_numpy(np.float64)
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
    clock = _clock_ratio(freq_samples(ev) if freq is None else freq,
                         k["ts_ns"].to_numpy(np.int64), pk["clock_mhz"])
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
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # absurd flops: inf
        flops = np.where(fl0 > 0, fl0, np.nan)
        byts = np.where(by0 > 0, by0, np.nan)
        ach_f = np.where(dur_s > 0, flops / dur_s, np.nan)
        ach_b = np.where(dur_s > 0, byts / dur_s, np.nan)
        roof = {"ai_flop_per_B": flops / byts, "ridge_flop_per_B": peak_unit / hbm,
                "achieved_flops": ach_f, "achieved_Bps": ach_b,
                "u_compute": ach_f / peak_unit, "u_bandwidth": ach_b / hbm}
    cls = _classify(roof, args, n)
    klass, basis = _family_fallback(k["family"], cls)
    # the new columns joined at once, without a copy (a column set at a time is copied twice)
    new = pd.DataFrame({"clock": clock, **roof, "class": klass, "basis": basis,
                        "step": step_of(k["ts_ns"].to_numpy(np.int64), windows)},
                       index=k.index, copy=False)
    return pd.concat([k, new], axis=1), args


def _task_frame(ev: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """``opinfo.base_frame``'s columns a task table needs (not the args: read where needed,
    :func:`_rich_args`), the strings kept as they are stored (categorical unit): no per-row
    object conversion."""
    idx = np.flatnonzero(mask)
    ts = ev["ts_ns"].to_numpy(np.int64)[idx]
    dur = ev["dur_ns"].to_numpy(np.int64)[idx]
    data: dict[str, Any] = {"name": category(pd.Series(ev["name"].array.take(idx))),
                            "ts_ns": ts, "dur_ns": dur, "end_ns": ts + dur}
    for col in ("flops", "bytes", "external_id", "corr_id", "stream"):
        data[col] = take_num(ev, col, idx)
    data["unit"] = pd.Series(ev["unit"].array.take(idx)) if "unit" in ev.columns else \
        pd.Series(np.full(idx.size, None, dtype=object), dtype=object)
    return pd.DataFrame(data, copy=False)


#: rows of args read and searched at a time (the args of a big trace's kernels are not all
#: held at once: only the rows that carry known keys are kept)
ARGS_BATCH = 1 << 17


def _rich_args(ev: pd.DataFrame, idx: np.ndarray) -> pd.Series:
    """``opinfo.rich_args`` of the args of rows ``idx`` of ``ev``, indexed by position in
    ``idx``, read and filtered ``ARGS_BATCH`` rows at a time."""
    parts = []
    for lo in range(0, max(idx.size, 1), ARGS_BATCH):
        a = args_of(ev, idx[lo:lo + ARGS_BATCH])
        a.index = pd.RangeIndex(lo, lo + len(a))
        parts.append(rich_args(a))
    return parts[0] if len(parts) == 1 else pd.concat(parts)


def _gemm_args(ev: pd.DataFrame, rows: np.ndarray, host: np.ndarray) -> pd.Series:
    """The args a GEMM's dtype is read from: its operator's (event ``host``, -1 for none) where
    it has an operator with args, else its own (event ``rows``); Arrow strings, no Python
    string per task."""
    own = args_of(ev, rows)
    linked = host >= 0
    if not linked.any():
        return pd.Series(own.array)
    try:
        mine, theirs = _text(own), _text(args_of(ev, host[linked]))
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # not text: Python objects, as they are
        ha = np.full(rows.size, None, dtype=object)
        ha[linked] = np.asarray(args_of(ev, host[linked]).array, dtype=object)
        return pd.Series(np.where(pd.notna(ha), ha, own.to_numpy(object)), dtype=object)
    at = np.full(rows.size, -1, np.int64)
    at[linked] = np.arange(int(linked.sum()))
    theirs = theirs.take(pa.array(at, mask=at < 0))
    both = pc.if_else(pc.is_valid(theirs), theirs, mine)
    return pa.table({"args": both}).to_pandas()["args"]


def _text(x: pd.Series) -> pa.Array:
    """A text column as one Arrow large_string array (zero-copy from pyarrow-backed strings)."""
    a = x.array
    if isinstance(a.dtype, pd.StringDtype) and a.dtype.storage == "pyarrow":
        got = pa.array(a)
    else:
        got = pa.array(np.asarray(a, dtype=object), type=pa.large_string(), from_pandas=True)
    if isinstance(got, pa.ChunkedArray):
        got = got.combine_chunks()
    return got.cast(pa.large_string())


def _scatter(n: int, pos: np.ndarray, values: pd.Series) -> pd.Series:
    """An object column of ``n`` rows: ``values`` at rows ``pos``, NaN elsewhere."""
    out = np.full(n, np.nan, dtype=object)
    out[pos] = values.to_numpy(object)
    return pd.Series(out, dtype=object)


def _codes(x: pd.Series) -> tuple[np.ndarray, pd.Index]:
    if isinstance(x.dtype, pd.CategoricalDtype):
        return x.array.codes.astype(np.int64), x.dtype.categories
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
    return pd.Categorical.from_codes(cls, dtype=CLASS_DTYPE), \
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


def freq_samples(ev: pd.DataFrame) -> pd.DataFrame:
    """Frequency counter samples (``counter`` events whose name contains "freq"), by time."""
    if len(ev) == 0:
        return base_frame(ev.iloc[:0], np.zeros(0, bool)) if len(ev.columns) else pd.DataFrame()
    m = (ev["kind"] == "counter").to_numpy()
    if m.any():
        m = m & has(ev["name"], "freq", case=False)
    if not m.any():
        return pd.DataFrame({"ts_ns": np.zeros(0, np.int64), "value": np.zeros(0)})
    c = base_frame(ev, m)
    return c[c["value"].notna()].sort_values("ts_ns", kind="stable")


def _clock_ratio(c: pd.DataFrame, ts: np.ndarray, nominal: float) -> np.ndarray:
    """Clock at each time / nominal: the latest frequency sample at or before it (the first
    sample before any); 1 without samples."""
    if len(c) == 0 or ts.size == 0:
        return np.ones(ts.size)
    vals = c["value"].to_numpy(np.float64)
    ref = nominal if nominal > 0 else float(vals.max())
    i = np.clip(np.searchsorted(c["ts_ns"].to_numpy(np.int64), ts, side="right") - 1, 0, None)
    return np.clip(vals[i] / ref, 0.0, 1.0) if ref > 0 else np.ones(ts.size)
