"""Where device time goes: kernels linked to their host operators (FLOPs and bytes derived from
shapes, ``opcost``), kernel families (``families``), the per-kernel summary table (``nsys stats``'
``cuda_gpu_kern_sum``), the family table, MFU and the evidence of the computation findings.

Helpers of the ``computation`` analyzer (``docs/analysis/computation.md``); every function works on
the task table (one row per kernel) with group-bys, never per-event Python loops.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers import families
from hermes.analyzers.opcost import op_costs
from hermes.analyzers.opinfo import base_frame, input_shapes

#: kernel families that carry a matrix operator's FLOPs (its other kernels, e.g. cuDNN's layout
#: transposes or a split-K reduction, are bookkeeping)
MATRIX = ("gemm", "conv", "attention")
TOP_KERNELS = 5
KERNEL_COLUMNS = ["name", "count", "total_ns", "mean_ns", "med_ns", "min_ns", "max_ns",
                  "std_ns", "share_pct", "family", "bound", "flops", "bytes", "tflops", "GBps"]
FAMILY_COLUMNS = ["family", "kernels", "time_ns", "share_pct", "usual_bound", "flops", "bytes",
                  "tflops", "GBps", "flops_known_pct"]


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
    ``host_family``, ``shape`` and ``host_args`` from the host operator that launched them.

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
    h = base_frame(ev, hm)
    cost = op_costs(h["name"], h["args"])
    h["flops"] = h["flops"].where(h["flops"].notna(), cost["flops"])
    h["bytes"] = h["bytes"].where(h["bytes"].notna() & (h["bytes"] > 0), cost["bytes"])
    h["elem"], h["family"] = cost["elem"], cost["family"]
    h["shape"] = input_shapes(h["args"])
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
    k.loc[has, "host_args"] = grp.map(h["args"])[has]


def assign_families(k: pd.DataFrame) -> None:
    """``family`` by kernel name; a name no pattern knows takes its host operator's family."""
    fam = k["family"].astype(object) if "family" in k.columns else \
        families.classify(k["name"]).astype(object)
    if "host_family" in k.columns:
        # looked up once per distinct host family, not per kernel
        codes, uniq = pd.factorize(k["host_family"].astype(object), use_na_sentinel=True)
        vals = np.array([families.HOST_TO_KERNEL.get(f, f) if isinstance(f, str) else None
                         for f in uniq] + [None], dtype=object)
        host = pd.Series(vals[np.where(codes >= 0, codes, len(uniq))], index=k.index,
                         dtype=object)
        fam = fam.where(~((fam == families.OTHER) & host.notna()), host)
    k["family"] = pd.Categorical(fam)


# ---------------------------------------------------------------- tables

def _rates(flops: pd.Series, byts: pd.Series, known_ns: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Achieved TFLOP/s and GB/s over the time of the tasks whose figure is known."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return (flops / (known_ns * 1e-9) / 1e12).where(known_ns > 0), \
            (byts / (known_ns * 1e-9) / 1e9).where(known_ns > 0)


def kernel_summary(k: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel name, like ``nsys stats --report cuda_gpu_kern_sum``: count, total /
    mean / median / min / max / std of durations (ns), share of all kernel time (%), family,
    bound (the class holding most of the name's time), FLOPs and bytes (where known) and the
    achieved TFLOP/s and GB/s over the time of the tasks they are known for. Sorted by total."""
    if len(k) == 0:
        return pd.DataFrame(columns=KERNEL_COLUMNS)
    g = k.groupby("name", observed=True, sort=False)
    d = g["dur_ns"]
    out = pd.DataFrame({"count": d.size(), "total_ns": d.sum(), "mean_ns": d.mean(),
                        "med_ns": d.median(), "min_ns": d.min(), "max_ns": d.max(),
                        "std_ns": d.std(ddof=0)})
    total = float(k["dur_ns"].sum())
    out["share_pct"] = 100.0 * out["total_ns"] / total if total else 0.0
    out["family"] = g["family"].first().astype(object)
    by_cls = k.groupby(["name", "class"], observed=True)["dur_ns"].sum().reset_index()
    by_cls = by_cls.sort_values("dur_ns", kind="stable").drop_duplicates("name", keep="last")
    out["bound"] = by_cls.set_index("name")["class"].astype(object).reindex(out.index)
    fl = k["flops"].where(k["flops"] > 0)
    by = k["bytes"].where(k["bytes"] > 0)
    out["flops"] = fl.groupby(k["name"], observed=True).sum(min_count=1).reindex(out.index)
    out["bytes"] = by.groupby(k["name"], observed=True).sum(min_count=1).reindex(out.index)
    tf_ns = k["dur_ns"].where(fl.notna(), 0).groupby(k["name"], observed=True).sum()
    gb_ns = k["dur_ns"].where(by.notna(), 0).groupby(k["name"], observed=True).sum()
    out["tflops"], _ = _rates(out["flops"], out["bytes"], tf_ns.reindex(out.index))
    _, out["GBps"] = _rates(out["flops"], out["bytes"], gb_ns.reindex(out.index))
    out = out.reset_index().rename(columns={"index": "name"})
    out["name"] = out["name"].astype(object)
    for c in ("count", "total_ns", "min_ns", "max_ns"):
        out[c] = out[c].astype("int64")
    return out.sort_values("total_ns", ascending=False, kind="stable")[KERNEL_COLUMNS] \
        .reset_index(drop=True)


def family_table(k: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel family: kernels, time, share of kernel time (%), the family's usual
    bound, FLOPs / bytes where known, achieved TFLOP/s and GB/s over the time they are known
    for, and the share of the family's time whose FLOPs are known (%)."""
    if len(k) == 0:
        return pd.DataFrame(columns=FAMILY_COLUMNS)
    fam = k["family"].astype(object)
    fl = k["flops"].where(k["flops"] > 0)
    by = k["bytes"].where(k["bytes"] > 0)
    dur = k["dur_ns"].astype("float64")
    out = pd.DataFrame({"kernels": dur.groupby(fam).size(), "time_ns": dur.groupby(fam).sum(),
                        "flops": fl.groupby(fam).sum(min_count=1),
                        "bytes": by.groupby(fam).sum(min_count=1)})
    tf_ns = dur.where(fl.notna(), 0).groupby(fam).sum()
    gb_ns = dur.where(by.notna(), 0).groupby(fam).sum()
    out["tflops"], _ = _rates(out["flops"], out["bytes"], tf_ns)
    _, out["GBps"] = _rates(out["flops"], out["bytes"], gb_ns)
    total = float(dur.sum())
    out["share_pct"] = 100.0 * out["time_ns"] / total if total else 0.0
    out["flops_known_pct"] = 100.0 * tf_ns / out["time_ns"].where(out["time_ns"] > 0)
    out["usual_bound"] = [families.bound_of(f) for f in out.index]
    out = out.reset_index().rename(columns={"index": "family"})
    out["time_ns"] = out["time_ns"].astype("int64")
    return out.sort_values("time_ns", ascending=False, kind="stable")[FAMILY_COLUMNS] \
        .reset_index(drop=True)


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
    rate = float(fl[known].sum()) / (step_total_ns * 1e-9)
    out["achieved_tflops"] = rate / 1e12
    out["mfu"] = rate / peak if peak else None
    return out


# ---------------------------------------------------------------- finding evidence

def class_evidence(sub: pd.DataFrame, total_ns: float, pk: dict[str, Any]) -> dict[str, Any]:
    """Evidence of a computation finding over its tasks ``sub``: families and top kernels with
    their share of all kernel time (%), achieved TFLOP/s and GB/s, the device's peaks, and the
    share of the finding's time classified by kernel family alone (no FLOP/byte data)."""
    peak = max((float(v) for v in (pk.get("peak_flops") or {}).values()), default=0.0)
    hbm = float(pk.get("hbm_bw_Bps") or 0.0)

    def rows(t: pd.DataFrame, key: str, n: int) -> list[dict[str, Any]]:
        res = []
        for r in t.head(n).itertuples(index=False):
            row = {key: str(getattr(r, key)), "share_of_device_time_pct":
                   round(100.0 * float(getattr(r, "total_ns", getattr(r, "time_ns", 0)))
                         / total_ns, 3) if total_ns else 0.0}
            tf, gb = r.tflops, r.GBps
            row["tflops"] = round(float(tf), 2) if pd.notna(tf) else None
            row["GBps"] = round(float(gb), 1) if pd.notna(gb) else None
            row["pct_of_peak_flops"] = round(100e12 * float(tf) / peak, 1) \
                if pd.notna(tf) and peak else None
            row["pct_of_peak_bw"] = round(100e9 * float(gb) / hbm, 1) \
                if pd.notna(gb) and hbm else None
            if key == "name":
                row["family"], row["count"] = str(r.family), int(r.count)
            res.append(row)
        return res

    t = float(sub["dur_ns"].sum()) if len(sub) else 0.0
    fam_only = float(sub.loc[sub["basis"] == "family", "dur_ns"].sum()) if len(sub) else 0.0
    # the summary of the top kernels only (one cheap group-by picks them)
    top = sub["dur_ns"].groupby(sub["name"], observed=True).sum().nlargest(TOP_KERNELS) \
        if len(sub) else pd.Series(dtype="int64")
    few = sub[sub["name"].isin(top.index).to_numpy()] if len(sub) else sub
    fams = rows(family_table(sub), "family", 10)
    return {**matmul_precision(sub), "families": fams,
            # the leading family as scalars: the rule table reads scalar evidence
            "top_family": fams[0]["family"] if fams else "",
            "top_family_pct": fams[0]["share_of_device_time_pct"] if fams else 0.0,
            "top_kernels": rows(kernel_summary(few), "name", TOP_KERNELS),
            "peak_tflops": round(peak / 1e12, 1) if peak else None,
            "peak_hbm_GBps": round(hbm / 1e9, 1) if hbm else None,
            "family_basis_pct": round(100.0 * fam_only / t, 3) if t else 0.0}


def matmul_precision(sub: pd.DataFrame) -> dict[str, Any]:
    """Element size (bytes) of the matrix kernels' inputs, from their operators' recorded dtypes:
    ``matmul_elem_B`` is the size holding most of the matrix-kernel time with a known dtype
    (4: fp32, 2: bf16/fp16, 1: fp8/int8) and ``matmul_dtype_known_pct`` the share of matrix time
    whose dtype is known. The precision rules read them: advice to move to bf16 is for fp32
    matmuls only, advice for fp8 for 16-bit ones (no guess when no dtype is recorded)."""
    if not len(sub) or "elem" not in sub.columns:
        return {"matmul_dtype_known_pct": 0.0}
    mat = sub[sub["family"].isin(MATRIX).to_numpy()]
    t = float(mat["dur_ns"].sum())
    known = mat[mat["elem"].notna().to_numpy()]
    if not t or not len(known):
        return {"matmul_dtype_known_pct": 0.0}
    by = known["dur_ns"].groupby(known["elem"].astype(float)).sum()
    return {"matmul_elem_B": float(by.idxmax()),
            "matmul_dtype_known_pct": round(100.0 * float(by.sum()) / t, 3)}


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
