"""Group figures of the task table (one row per kernel), computed once per rank.

``KernelStats`` holds the task table as integer codes (name, family, class) and numpy arrays, and
answers every grouped question of the ``computation`` analyzer from them: the per-kernel summary
(``nsys stats``' ``cuda_gpu_kern_sum``), the family table, the operators of a subset and the
evidence of a class's finding. Counts and integer durations come from ``np.bincount``; sums of
floats (FLOPs, bytes) go through one pandas group-by per key, whose compensated summation in row
order gives, for every group, the figure a group-by of that subset alone gives. Same tables as
grouping a DataFrame of the subset each time, without the per-call cost (``docs/analysis/
computation.md``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common.names import desc_order
from hermes.analyzers.computation import families

KERNEL_COLUMNS = ["name", "count", "total_ns", "mean_ns", "med_ns", "min_ns", "max_ns",
                  "std_ns", "share_pct", "family", "bound", "flops", "bytes", "tflops", "GBps"]
FAMILY_COLUMNS = ["family", "kernels", "time_ns", "share_pct", "usual_bound", "flops", "bytes",
                  "tflops", "GBps", "flops_known_pct"]


def rates(sums: np.ndarray, known_ns: np.ndarray, scale: float) -> np.ndarray:
    """Achieved rate (``scale`` 1e12: TFLOP/s, 1e9: GB/s) of summed FLOPs or bytes over the
    time of the tasks whose figure is known (NaN where none is)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # absurd sums: inf
        return np.where(known_ns > 0, sums / (known_ns * 1e-9) / scale, np.nan)




def _codes(x: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Integer codes (-1 for missing) and the categories of a column."""
    if isinstance(x.dtype, pd.CategoricalDtype):
        return x.array.codes.astype(np.int64), x.dtype.categories
    codes, uniq = pd.factorize(x.astype(object), use_na_sentinel=True, sort=True)
    return codes.astype(np.int64), pd.Index(uniq, dtype=object)


def _objects(a: np.ndarray) -> pd.Series:
    """Strings as an object column, missing values as NaN: what a frame's inferred string
    column gives ``astype(object)``, without inferring and converting back."""
    a = np.asarray(a, dtype=object)
    miss = pd.isna(a)
    if miss.any():
        a = a.copy()
        a[miss] = np.nan
    return pd.Series(a, dtype=object, copy=False)


def fsums(key: np.ndarray, n: int, cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-group sums of float columns (NaN for a group without a value), rows with key < 0
    left out: pandas' group-by sum (compensated, in row order)."""
    out = {c: np.full(n, np.nan) for c in cols}
    keep = key >= 0
    # a NaN adds nothing to a group's sum (the group-by skips it): a column with no value in
    # the rows kept is NaN throughout, and no group-by is run for it
    cols = {c: v for c, v in cols.items() if (keep & ~np.isnan(v)).any()}
    if not cols:
        return out
    every = bool(keep.all())
    with np.errstate(over="ignore"):  # absurd counts (1e308 FLOPs each): a group's sum is inf
        g = pd.DataFrame({c: v if every else v[keep] for c, v in cols.items()}, copy=False) \
            .groupby(key if every else key[keep], sort=True).sum(min_count=1)
    pos = g.index.to_numpy(np.int64)
    for c in cols:
        out[c][pos] = g[c].to_numpy(np.float64)
    return out


def _isums(key: np.ndarray, n: int, w: np.ndarray | None = None) -> np.ndarray:
    """Per-group counts (``w`` None) or exact sums of integer weights, rows with key < 0 out
    (counted in a spare first bin)."""
    out = np.bincount(key + 1, weights=w, minlength=n + 1)[1:]
    # integer-valued float64 partial sums are exact below 2**53 ns (104 days)
    return out.astype(np.int64) if w is None else out.round().astype(np.int64)


class KernelStats:
    """The task table ``k`` (columns name, family, dur_ns, flops, bytes, basis, elem) as codes
    and arrays, with ``cls`` the class code of each task (into ``classes``)."""

    def __init__(self, k: pd.DataFrame, cls: np.ndarray, classes: tuple[str, ...]) -> None:
        self.n = len(k)
        self.classes = classes
        self.nc, self.names = _codes(k["name"])
        self.fc, self.fams = _codes(k["family"])
        self.cls = np.asarray(cls, np.int64)
        self.dur = k["dur_ns"].to_numpy(np.int64)
        fl, by = k["flops"].to_numpy(np.float64), k["bytes"].to_numpy(np.float64)
        with np.errstate(invalid="ignore"):
            self.fl = np.where(fl > 0, fl, np.nan)
            self.by = np.where(by > 0, by, np.nan)
        self.flk, self.byk = ~np.isnan(self.fl), ~np.isnan(self.by)
        self.family_basis = (k["basis"] == "family").to_numpy() if "basis" in k.columns \
            else np.zeros(self.n, bool)
        self.elem = k["elem"].to_numpy(np.float64) if "elem" in k.columns else None
        self._groups: dict[str, dict[str, np.ndarray]] = {}

    def group(self, by: str) -> dict[str, np.ndarray]:
        """Figures per group, computed once: ``by`` "name", "family", "class_name" or
        "class_family" (group ``class * len(keys) + key``): count, total (ns), first row, FLOPs
        and bytes (NaN when none known) and the time of the tasks they are known for."""
        if by in self._groups:
            return self._groups[by]
        codes, keys = (self.nc, self.names) if by.endswith("name") else (self.fc, self.fams)
        n = len(keys)
        if by.startswith("class"):
            codes = np.where(codes >= 0, self.cls * n + codes, -1)
            n *= len(self.classes)
        durf = self.dur.astype(np.float64)
        g = {"count": _isums(codes, n), "total": _isums(codes, n, durf),
             "tf_ns": _isums(codes, n, np.where(self.flk, durf, 0.0)),
             "gb_ns": _isums(codes, n, np.where(self.byk, durf, 0.0)),
             **fsums(codes, n, {"flops": self.fl, "bytes": self.by})}
        first = np.full(n + 1, -1, np.int64)
        idx = np.flatnonzero(codes >= 0)[::-1]
        first[codes[idx]] = idx                   # the first row of each group
        g["first"] = first[:n]
        self._groups[by] = g
        return g

    def _class_slice(self, by: str, cls: int | None) -> dict[str, np.ndarray]:
        if cls is None:
            return self.group(by)
        n = len(self.names) if by == "name" else len(self.fams)
        return {c: v[cls * n:(cls + 1) * n] for c, v in self.group("class_" + by).items()}

    # ---------------------------------------------------------------- one row per name

    def _order(self, g: dict[str, np.ndarray]) -> np.ndarray:
        """Groups with rows, in order of their first row (a group-by with ``sort=False``)."""
        seen = np.flatnonzero(g["count"] > 0)
        return seen[np.argsort(g["first"][seen], kind="stable")]

    def op_arrays(self, mask: np.ndarray | None = None, cls: int | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`op_table` as arrays: (name codes, sum, count), one per row of the table."""
        if mask is not None:
            key = np.where(mask, self.nc, -1)
            c = self.nc[mask]
            order = pd.unique(c[c >= 0])
            nn = len(self.names)
            tot, cnt = _isums(key, nn, self.dur.astype(np.float64)), _isums(key, nn)
        else:
            g = self._class_slice("name", cls)
            order, tot, cnt = self._order(g), g["total"], g["count"]
        return order, tot[order], cnt[order]

    def op_table(self, mask: np.ndarray | None = None, cls: int | None = None) -> pd.DataFrame:
        """``groupby("name", sort=False)["dur_ns"].agg(["sum", "count"])`` of the rows of
        class ``cls``, of ``mask`` or of all."""
        order, tot, cnt = self.op_arrays(mask, cls)
        return pd.DataFrame({"sum": tot, "count": cnt},
                            index=pd.CategoricalIndex(pd.Categorical.from_codes(
                                order, categories=self.names), name="name"))

    def kernels(self) -> pd.DataFrame:
        """One row per kernel name (``KERNEL_COLUMNS``), sorted by total time."""
        if self.n == 0:
            return pd.DataFrame(columns=KERNEL_COLUMNS)
        g, key = self.group("name"), self.nc
        order = self._order(g)
        cnt, tot = g["count"][order], g["total"][order]
        keep = key >= 0
        d = pd.Series(self.dur[keep]).groupby(key[keep], sort=True)
        pos = np.searchsorted(np.flatnonzero(g["count"] > 0), order)
        total = float(self.dur.sum())
        fl, by = g["flops"][order], g["bytes"][order]
        cols: dict[str, Any] = {
            "name": np.asarray(self.names, dtype=object)[order],
            "count": cnt, "total_ns": tot, "mean_ns": tot / cnt,
            "med_ns": d.median().to_numpy(np.float64)[pos],
            "min_ns": d.min().to_numpy(np.int64)[pos], "max_ns": d.max().to_numpy(np.int64)[pos],
            "std_ns": d.std(ddof=0).to_numpy(np.float64)[pos],
            "share_pct": 100.0 * tot / total if total else np.zeros(len(order)),
            "family": np.asarray(self.fams, dtype=object)[self.fc[g["first"][order]]],
            "bound": self._bound()[order], "flops": fl, "bytes": by,
            "tflops": rates(fl, g["tf_ns"][order], 1e12),
            "GBps": rates(by, g["gb_ns"][order], 1e9)}
        srt = desc_order(cols["total_ns"])
        return pd.DataFrame({c: _objects(cols[c][srt]) if c in ("name", "family", "bound")
                             else cols[c][srt] for c in KERNEL_COLUMNS})

    def _bound(self) -> np.ndarray:
        """Per name, the class holding most of its time (ties: the later class)."""
        nn, nk = len(self.names), len(self.classes)
        g = self.group("class_name")
        cnt, tot = g["count"].reshape(nk, nn), g["total"].reshape(nk, nn)
        best, val = np.full(nn, -1), np.full(nn, -1, np.int64)
        for c in range(nk):
            take = (cnt[c] > 0) & (tot[c] >= val)
            best[take], val[take] = c, tot[c][take]
        labels = np.array(list(self.classes) + [None], dtype=object)
        return labels[best]

    # ---------------------------------------------------------------- one row per family

    def families(self, cls: int | None = None, frame: bool = True) -> Any:
        """One row per kernel family of the tasks of class ``cls`` (all when None)
        (``FAMILY_COLUMNS``), as a DataFrame or (``frame`` False) a dict of columns."""
        g = self._class_slice("family", cls)
        present = np.flatnonzero(g["count"] > 0)
        if not present.size:
            return pd.DataFrame(columns=FAMILY_COLUMNS) if frame else \
                {c: np.zeros(0) for c in FAMILY_COLUMNS}
        names = np.asarray(self.fams, dtype=object)[present]
        srt = np.argsort(names.astype(str), kind="stable")  # a group-by's sorted keys
        sel = present[srt]
        time = g["total"][sel].astype(np.float64)
        fl, by = g["flops"][sel], g["bytes"][sel]
        tf_ns, gb_ns = g["tf_ns"][sel].astype(np.float64), g["gb_ns"][sel].astype(np.float64)
        total = float(self.dur.sum() if cls is None else self.dur[self.cls == cls].sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            known = 100.0 * tf_ns / np.where(time > 0, time, np.nan)
        cols = {"family": names[srt], "kernels": g["count"][sel],
                "time_ns": time.astype(np.int64),
                "share_pct": 100.0 * time / total if total else np.zeros(len(sel)),
                "usual_bound": np.array([families.bound_of(x) for x in names[srt]], object),
                "flops": fl, "bytes": by, "tflops": rates(fl, tf_ns, 1e12),
                "GBps": rates(by, gb_ns, 1e9), "flops_known_pct": known}
        o = desc_order(cols["time_ns"])
        out = {c: cols[c][o] for c in FAMILY_COLUMNS}
        return pd.DataFrame(out) if frame else out

    # ---------------------------------------------------------------- a class's evidence

    def top_kernels(self, cls: int, n: int) -> dict[str, np.ndarray]:
        """The ``n`` names with most time among the tasks of class ``cls``, summarized over
        those tasks (count, total_ns, family, tflops, GBps), by total time."""
        g = self._class_slice("name", cls)
        seen = np.flatnonzero(g["count"] > 0)
        top = pd.Series(g["total"][seen], index=seen).nlargest(n).index.to_numpy(np.int64)
        # the summary of those names lists them by first appearance, then by total (stable)
        order = top[np.argsort(g["first"][top], kind="stable")]
        fl, by = g["flops"][order], g["bytes"][order]
        cols = {"name": np.asarray(self.names, dtype=object)[order], "count": g["count"][order],
                "total_ns": g["total"][order], "family": np.asarray(self.fams, dtype=object)[
                    self.fc[g["first"][order]]] if len(order) else np.zeros(0, object),
                "flops": fl, "bytes": by, "tflops": rates(fl, g["tf_ns"][order], 1e12),
                "GBps": rates(by, g["gb_ns"][order], 1e9)}
        o = desc_order(cols["total_ns"])
        return {c: v[o] for c, v in cols.items()}

    def matmul_precision(self, mask: np.ndarray, matrix: tuple[str, ...]) -> dict[str, Any]:
        """Element size (bytes) of the matrix kernels' inputs among the rows in ``mask``, from
        their operators' recorded dtypes: ``matmul_elem_B`` is the size holding most of the
        matrix-kernel time with a known dtype (4: fp32, 2: bf16/fp16, 1: fp8/int8) and
        ``matmul_dtype_known_pct`` the share of matrix time whose dtype is known. The precision
        rules read them: advice to move to bf16 is for fp32 matmuls only, advice for fp8 for
        16-bit ones (no guess when no dtype is recorded)."""
        if not mask.any() or self.elem is None:
            return {"matmul_dtype_known_pct": 0.0}
        fam_is = np.isin(np.asarray(self.fams, dtype=object), list(matrix))
        mat = mask & (self.fc >= 0) & fam_is[np.maximum(self.fc, 0)]
        t = float(self.dur[mat].sum())
        known = mat & ~np.isnan(self.elem)
        if not t or not known.any():
            return {"matmul_dtype_known_pct": 0.0}
        vals, inv = np.unique(self.elem[known], return_inverse=True)
        by = np.bincount(inv, weights=self.dur[known].astype(np.float64))
        return {"matmul_elem_B": float(vals[int(np.argmax(by))]),
                "matmul_dtype_known_pct": round(100.0 * float(by.sum()) / t, 3)}
