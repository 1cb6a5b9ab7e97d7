"""Where device time goes: kernels linked to their host operators (FLOPs and bytes derived from
shapes, ``opcost``), kernel families (``families``), MFU and the evidence of the computation
findings (from the grouped figures of ``kernelstats``, which also makes the per-kernel and family
tables).

Helpers of the ``computation`` analyzer (``docs/analysis/computation.md``); every function works on
the task table (one row per kernel) with group-bys and codes, never per-event Python loops.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common.opinfo import base_frame, category, input_shapes, take_num
from hermes.analyzers.computation import families
from hermes.analyzers.computation.kernelstats import KernelStats
from hermes.analyzers.computation.opvec import op_costs
from hermes.trace.args import args_of

#: kernel families that carry a matrix operator's FLOPs (its other kernels, e.g. cuDNN's layout
#: transposes or a split-K reduction, are bookkeeping)
MATRIX = ("gemm", "conv", "attention")
TOP_KERNELS = 5


# ---------------------------------------------------------------- kernels <- host operators

def _external_ids(ev: pd.DataFrame, k: pd.DataFrame) -> pd.Series:
    """Each kernel's host external id: its own, else its launch's (same correlation id)."""
    ext = k["external_id"].copy()
    miss = ext.isna() & k["corr_id"].notna()
    if miss.any() and "corr_id" in ev.columns:
        lm = (ev["kind"] == "launch").to_numpy() & ev["external_id"].notna().to_numpy() & \
            ev["corr_id"].notna().to_numpy()
        if lm.any():
            la = base_frame(ev, lm).drop_duplicates("corr_id").set_index("corr_id")
            ext[miss] = k.loc[miss, "corr_id"].map(la["external_id"])
    return ext


def link_host_ops(ev: pd.DataFrame, k: pd.DataFrame) -> None:
    """Fill the kernels' ``flops``/``bytes`` (where the trace has none), ``elem``,
    ``host_family``, ``shape`` and ``host_row`` (the operator's row in ``ev``: -1 for none,
    the caller's initial value) from the host operator that launched them.

    FLOPs: the operator's own (Kineto ``with_flops``), else derived from its shapes (``opcost``).
    An operator's FLOPs and bytes go to its matrix-family kernels (all its kernels when it has
    none), split in proportion to their durations, so each gets the operator's achieved rate."""
    k["elem"] = np.nan
    k["host_family"] = None
    if "external_id" not in ev.columns or len(k) == 0:
        return
    ext = _external_ids(ev, k)
    if ext.isna().all():
        return
    wanted = pd.unique(ext.dropna())
    hm = (ev["kind"] == "host_op").to_numpy() & ev["external_id"].isin(wanted).to_numpy()
    if not hm.any():
        return
    hidx = np.flatnonzero(hm)
    # base_frame's columns that linking reads (a big trace's operators are most of its rows)
    h = pd.DataFrame({"name": category(pd.Series(ev["name"].array.take(hidx))),
                      **{c: take_num(ev, c, hidx) for c in ("flops", "bytes", "external_id")}},
                     copy=False)
    cost, h["shape"] = _signatures(ev, hidx, h["name"])
    h["_ev"] = hidx  # the operator's row in ev: its args are read from there when needed
    h["flops"] = h["flops"].where(h["flops"].notna(), cost["flops"])
    h["bytes"] = h["bytes"].where(h["bytes"].notna() & (h["bytes"] > 0), cost["bytes"])
    h["elem"], h["family"] = cost["elem"], cost["family"]
    # several ops may share an id (nested records): keep the one that says most
    h["_rank"] = h["family"].notna().astype(int) + h["flops"].notna().astype(int) * 2
    h = h.sort_values("_rank", kind="stable").drop_duplicates("external_id", keep="last")
    h = h.set_index("external_id")
    has = ext.notna() & ext.isin(h.index)
    if not has.any():
        return
    grp = ext.where(has)
    matrix = k["family"].isin(MATRIX)
    any_matrix = matrix.groupby(grp).transform("any").reindex(k.index).fillna(False).astype(bool)
    target = has & (matrix | ~any_matrix)
    w = k["dur_ns"].astype("float64").where(target, 0.0).clip(lower=1.0).where(target, 0.0)
    frac = w / w.groupby(grp).transform("sum").reindex(k.index)
    for col in ("flops", "bytes"):
        fill = k[col].isna() & target
        k.loc[fill, col] = (grp.map(h[col]) * frac)[fill]
    k.loc[has, "elem"] = grp.map(h["elem"])[has]
    k.loc[has, "host_family"] = grp.map(h["family"])[has]
    k.loc[k["shape"].isna() & has, "shape"] = grp.map(h["shape"])[k["shape"].isna() & has]
    # the row (in ev) of each kernel's operator: its args are read only where needed
    k.loc[has, "host_row"] = grp.map(h["_ev"])[has].to_numpy(np.int64)


#: host operators whose args are read and searched at a time (a big trace's are never all
#: held at once, nor all their signature strings)
ARGS_BATCH = 1 << 16


def _signatures(ev: pd.DataFrame, rows: np.ndarray, names: pd.Series
                ) -> tuple[pd.DataFrame, pd.Series]:
    """``op_costs`` and ``input_shapes`` of the host operators at rows ``rows`` of ``ev``
    (``names``: theirs, on a RangeIndex), their args read ``ARGS_BATCH`` rows at a time."""
    costs, shapes = [], []
    for lo in range(0, max(rows.size, 1), ARGS_BATCH):
        a = args_of(ev, rows[lo:lo + ARGS_BATCH])
        a.index = pd.RangeIndex(lo, lo + len(a))
        costs.append(op_costs(names.iloc[lo:lo + ARGS_BATCH], a))
        shapes.append(input_shapes(a))
        del a
    if len(costs) == 1:
        return costs[0], shapes[0]
    return pd.concat(costs), pd.concat(shapes)


def assign_families(k: pd.DataFrame) -> None:
    """``family`` by kernel name; a name no pattern knows takes its host operator's family.
    Works on codes: each distinct name and host family is looked up once."""
    fam = k["family"] if "family" in k.columns else families.classify(k["name"])
    if isinstance(fam.dtype, pd.CategoricalDtype):
        codes, cats = fam.array.codes.astype(np.int64), list(fam.dtype.categories)
    else:
        c, u = pd.factorize(fam.astype(object), use_na_sentinel=True)
        codes, cats = c.astype(np.int64), list(u)
    if "host_family" in k.columns:
        hf = k["host_family"].to_numpy(object)
        rows = np.flatnonzero(pd.notna(hf))
        if rows.size and families.OTHER in cats:
            hc, hu = pd.factorize(hf[rows], use_na_sentinel=True)
            mapped = [families.HOST_TO_KERNEL.get(f, f) if isinstance(f, str) else None
                      for f in hu]
            cats += [m for m in dict.fromkeys(mapped) if m is not None and m not in cats]
            to = np.array([cats.index(m) if m is not None else -1 for m in mapped] + [-1])
            new = to[np.where(hc >= 0, hc, len(hu))]
            swap = (codes[rows] == cats.index(families.OTHER)) & (new >= 0)
            codes[rows[swap]] = new[swap]
    # = pd.Categorical(the family strings): the used families, sorted, as categories
    used = np.flatnonzero(np.bincount(codes + 1, minlength=len(cats) + 1)[1:])
    names = sorted(cats[i] for i in used)
    remap = np.full(len(cats) + 1, -1, np.int64)
    remap[used] = [names.index(cats[i]) for i in used]
    k["family"] = pd.Categorical.from_codes(remap[codes], categories=pd.Index(names, dtype=object))


# ---------------------------------------------------------------- MFU

def mfu(k: pd.DataFrame, step_total_ns: int, pk: dict[str, Any]) -> dict[str, Any]:
    """``achieved_tflops`` = FLOPs of the kernels in the steps / step time; ``mfu`` = that /
    the device's dense matrix peak (its best ``peak_flops``: bf16/fp16 Tensor/Matrix Core, the
    peak MFU is conventionally quoted against, as in PaLM's MFU); None without FLOPs.
    ``flops_known_pct``: share of in-step kernel time whose FLOPs are known (annotated or derived
    from shapes) -- below 100 the figures are lower bounds."""
    peak = max((float(v) for v in (pk.get("peak_flops") or {}).values()), default=0.0)
    out: dict[str, Any] = {"mfu": None, "achieved_tflops": None,
                           "mfu_peak_tflops": peak / 1e12 if peak else None,
                           "flops_known_pct": 0.0}
    if len(k) == 0 or step_total_ns <= 0:
        return out
    inside = k["step"].to_numpy() >= 0
    fl = k["flops"].where(k["flops"] > 0).to_numpy(np.float64)[inside]
    dur = k["dur_ns"].to_numpy(np.float64)[inside]
    known = ~np.isnan(fl)
    out["flops_known_pct"] = float(100.0 * dur[known].sum() / dur.sum()) if dur.sum() else 0.0
    if not known.any():
        return out
    with np.errstate(over="ignore"):  # absurd FLOP counts (1e308 each): their sum is inf
        total = float(fl[known].sum())
    if not np.isfinite(total):  # no rate to state (hermes validate names the events)
        return out
    rate = total / (step_total_ns * 1e-9)
    out["achieved_tflops"] = rate / 1e12
    out["mfu"] = rate / peak if peak else None
    return out


# ---------------------------------------------------------------- finding evidence

def class_evidence(ks: KernelStats, cls: int, total_ns: float, pk: dict[str, Any]
                   ) -> dict[str, Any]:
    """Evidence of a computation finding over its tasks (class ``cls``): families
    and top kernels with their share of all kernel time (%), achieved TFLOP/s and GB/s, the
    device's peaks, and the share of the finding's time classified by kernel family alone (no
    FLOP/byte data)."""
    peak = max((float(v) for v in (pk.get("peak_flops") or {}).values()), default=0.0)
    hbm = float(pk.get("hbm_bw_Bps") or 0.0)

    def rows(t: dict[str, np.ndarray], key: str, n: int) -> list[dict[str, Any]]:
        res = []
        time = t["total_ns"] if "total_ns" in t else t["time_ns"]
        for i in range(min(n, len(time))):
            row = {key: str(t[key][i]), "share_of_device_time_pct":
                   round(100.0 * float(time[i]) / total_ns, 3) if total_ns else 0.0}
            tf, gb = t["tflops"][i], t["GBps"][i]
            row["tflops"] = round(float(tf), 2) if pd.notna(tf) else None
            row["GBps"] = round(float(gb), 1) if pd.notna(gb) else None
            row["pct_of_peak_flops"] = round(100e12 * float(tf) / peak, 1) \
                if pd.notna(tf) and peak else None
            row["pct_of_peak_bw"] = round(100e9 * float(gb) / hbm, 1) \
                if pd.notna(gb) and hbm else None
            if key == "name":
                row["family"], row["count"] = str(t["family"][i]), int(t["count"][i])
            res.append(row)
        return res

    mask = ks.cls == cls
    any_ = bool(mask.any())
    t = float(ks.dur[mask].sum()) if any_ else 0.0
    fam_only = float(ks.dur[mask & ks.family_basis].sum()) if any_ else 0.0
    fams = rows(ks.families(cls, frame=False), "family", 10) if any_ else []
    return {**ks.matmul_precision(mask, MATRIX), "families": fams,
            # the leading family as scalars: the rule table reads scalar evidence
            "top_family": fams[0]["family"] if fams else "",
            "top_family_pct": fams[0]["share_of_device_time_pct"] if fams else 0.0,
            "top_kernels": rows(ks.top_kernels(cls, TOP_KERNELS), "name", TOP_KERNELS)
            if any_ else [],
            "peak_tflops": round(peak / 1e12, 1) if peak else None,
            "peak_hbm_GBps": round(hbm / 1e9, 1) if hbm else None,
            "family_basis_pct": round(100.0 * fam_only / t, 3) if t else 0.0}


def describe(ev: dict[str, Any], compute: bool = True) -> str:
    """A short phrase naming the leading families: "gemm 58.0% at 780 TFLOP/s (79% of peak)";
    memory-bound families by their GB/s (``compute`` False)."""
    parts = []
    for f in ev.get("families", [])[:3]:
        s = f"{f['family']} {f['share_of_device_time_pct']:.1f}%"
        if f.get("tflops") is not None and (compute or f.get("GBps") is None):
            s += f" at {f['tflops']:.1f} TFLOP/s"
            if f.get("pct_of_peak_flops") is not None:
                s += f" ({f['pct_of_peak_flops']:.0f}% of peak)"
        elif f.get("GBps") is not None:
            s += f" at {f['GBps']:.0f} GB/s"
            if f.get("pct_of_peak_bw") is not None:
                s += f" ({f['pct_of_peak_bw']:.0f}% of HBM)"
        parts.append(s)
    return ", ".join(parts)
