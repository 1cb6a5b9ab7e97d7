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

from hermes.analyzers import families

KERNEL_COLUMNS = ["name", "count", "total_ns", "mean_ns", "med_ns", "min_ns", "max_ns",
                  "std_ns", "share_pct", "family", "bound", "flops", "bytes", "tflops", "GBps"]
FAMILY_COLUMNS = ["family", "kernels", "time_ns", "share_pct", "usual_bound", "flops", "bytes",
                  "tflops", "GBps", "flops_known_pct"]


def rates(sums: np.ndarray, known_ns: np.ndarray, scale: float) -> np.ndarray:
    """Achieved rate (``scale`` 1e12: TFLOP/s, 1e9: GB/s) of summed FLOPs or bytes over the
    time of the tasks whose figure is known (NaN where none is)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(known_ns > 0, sums / (known_ns * 1e-9) / scale, np.nan)


def desc_order(x: np.ndarray, kind: str = "stable") -> np.ndarray:
    """The order of ``DataFrame.sort_values(col, ascending=False, kind=kind)`` on ``x`` (no
    NaN): pandas reverses, sorts ascending and reverses back."""
    idx = np.arange(len(x))[::-1]
    return idx[x[::-1].argsort(kind=kind)][::-1]


def _codes(x: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Integer codes (-1 for missing) and the categories of a column."""
    if isinstance(x.dtype, pd.CategoricalDtype):
        return x.cat.codes.to_numpy(np.int64), x.cat.categories
    codes, uniq = pd.factorize(x.astype(object), use_na_sentinel=True, sort=True)
    return codes.astype(np.int64), pd.Index(uniq, dtype=object)


def _fsums(key: np.ndarray, n: int, cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-group sums of float columns (NaN for a group without a value), rows with key < 0
    left out: pandas' group-by sum (compensated, in row order)."""
    out = {c: np.full(n, np.nan) for c in cols}
    keep = key >= 0
    if not keep.any():
        return out
    g = pd.DataFrame({c: v[keep] for c, v in cols.items()}, copy=False) \
        .groupby(key[keep], sort=True).sum(min_count=1)
    pos = g.index.to_numpy(np.int64)
    for c in cols:
        out[c][pos] = g[c].to_numpy(np.float64)
    return out


def _isums(key: np.ndarray, n: int, w: np.ndarray | None = None) -> np.ndarray:
    """Per-group counts (``w`` None) or exact sums of integer weights, rows with key < 0 out."""
    keep = key >= 0
    if w is None:
        return np.bincount(key[keep], minlength=n).astype(np.int64)
    # integer-valued float64 partial sums are exact below 2**53 ns (104 days)
    return np.bincount(key[keep], weights=w[keep], minlength=n).round().astype(np.int64)


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
        self._by_class: dict[str, Any] = {}

    # ---------------------------------------------------------------- one row per name

    def first_order(self, mask: np.ndarray | None = None) -> np.ndarray:
        """Name codes in order of first appearance (a group-by with ``sort=False``)."""
        c = self.nc if mask is None else self.nc[mask]
        return pd.unique(c[c >= 0])

    def op_table(self, mask: np.ndarray | None = None) -> pd.DataFrame:
        """``groupby("name", sort=False)["dur_ns"].agg(["sum", "count"])`` of the rows."""
        nn = len(self.names)
        key = self.nc if mask is None else np.where(mask, self.nc, -1)
        order = self.first_order(mask)
        tot, cnt = _isums(key, nn, self.dur.astype(np.float64)), _isums(key, nn)
        return pd.DataFrame({"sum": tot[order], "count": cnt[order]},
                            index=pd.CategoricalIndex(pd.Categorical.from_codes(
                                order, categories=self.names), name="name"))

    def kernels(self) -> pd.DataFrame:
        """One row per kernel name (``KERNEL_COLUMNS``), sorted by total time."""
        if self.n == 0:
            return pd.DataFrame(columns=KERNEL_COLUMNS)
        nn, key = len(self.names), self.nc
        order = self.first_order()
        durf = self.dur.astype(np.float64)
        cnt, tot = _isums(key, nn), _isums(key, nn, durf)
        keep = key >= 0
        g = pd.Series(self.dur[keep]).groupby(key[keep], sort=True)
        pos = np.searchsorted(np.flatnonzero(cnt > 0), order)
        cols: dict[str, Any] = {
            "name": np.asarray(self.names, dtype=object)[order],
            "count": cnt[order], "total_ns": tot[order], "mean_ns": tot[order] / cnt[order],
            "med_ns": g.median().to_numpy(np.float64)[pos],
            "min_ns": g.min().to_numpy(np.int64)[pos], "max_ns": g.max().to_numpy(np.int64)[pos],
            "std_ns": g.std(ddof=0).to_numpy(np.float64)[pos]}
        total = float(self.dur.sum())
        share = 100.0 * tot[order] / total if total else np.zeros(len(order))
        first = np.full(nn, -1, np.int64)
        idx = np.flatnonzero(keep)
        first[key[idx][::-1]] = idx[::-1]          # the first row of each name
        f = _fsums(key, nn, {"flops": self.fl, "bytes": self.by})
        fl, by = f["flops"][order], f["bytes"][order]
        tf_ns = _isums(key, nn, np.where(self.flk, durf, 0.0))[order]
        gb_ns = _isums(key, nn, np.where(self.byk, durf, 0.0))[order]
        fam = np.asarray(self.fams, dtype=object)[self.fc[first[order]]]
        cols.update({"share_pct": share, "family": fam, "bound": self._bound()[order],
            "flops": fl, "bytes": by, "tflops": rates(fl, tf_ns, 1e12),
            "GBps": rates(by, gb_ns, 1e9)})
        srt = desc_order(cols["total_ns"])
        out = pd.DataFrame({c: cols[c][srt] for c in KERNEL_COLUMNS})
        return out.astype({"name": object, "family": object, "bound": object})

    def _bound(self) -> np.ndarray:
        """Per name, the class holding most of its time (ties: the later class)."""
        nn, nk = len(self.names), len(self.classes)
        key = np.where(self.nc >= 0, self.nc * nk + self.cls, -1)
        cnt = _isums(key, nn * nk).reshape(nn, nk)
        tot = _isums(key, nn * nk, self.dur.astype(np.float64)).reshape(nn, nk)
        best, val = np.full(nn, -1), np.full(nn, -1, np.int64)
        for c in range(nk):
            take = (cnt[:, c] > 0) & (tot[:, c] >= val)
            best[take], val[take] = c, tot[take, c]
        labels = np.array(list(self.classes) + [None], dtype=object)
        return labels[best]

    # ---------------------------------------------------------------- one row per family

    def families(self, mask: np.ndarray | None = None, frame: bool = True) -> Any:
        """One row per kernel family of the rows in ``mask`` (``FAMILY_COLUMNS``), as a
        DataFrame or (``frame`` False) a dict of columns."""
        fc = self.fc if mask is None else np.where(mask, self.fc, -1)
        nf = len(self.fams)
        if not (fc >= 0).any():
            return pd.DataFrame(columns=FAMILY_COLUMNS) if frame else \
                {c: np.zeros(0) for c in FAMILY_COLUMNS}
        durf = self.dur.astype(np.float64)
        cnt = _isums(fc, nf)
        f = _fsums(fc, nf, {"flops": self.fl, "bytes": self.by})
        present = np.flatnonzero(cnt > 0)
        names = np.asarray(self.fams, dtype=object)[present]
        srt = np.argsort(names.astype(str), kind="stable")  # a group-by's sorted keys
        sel = present[srt]
        time = _isums(fc, nf, durf)[sel].astype(np.float64)
        fl, by = f["flops"][sel], f["bytes"][sel]
        tf_ns = _isums(fc, nf, np.where(self.flk, durf, 0.0))[sel].astype(np.float64)
        gb_ns = _isums(fc, nf, np.where(self.byk, durf, 0.0))[sel].astype(np.float64)
        total = float(durf[fc >= 0].sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            known = 100.0 * tf_ns / np.where(time > 0, time, np.nan)
        cols = {"family": names[srt], "kernels": cnt[sel], "time_ns": time.astype(np.int64),
                "share_pct": 100.0 * time / total if total else np.zeros(len(sel)),
                "usual_bound": np.array([families.bound_of(x) for x in names[srt]], object),
                "flops": fl, "bytes": by, "tflops": rates(fl, tf_ns, 1e12),
                "GBps": rates(by, gb_ns, 1e9), "flops_known_pct": known}
        o = desc_order(cols["time_ns"])
        out = {c: cols[c][o] for c in FAMILY_COLUMNS}
        return pd.DataFrame(out) if frame else out

    # ---------------------------------------------------------------- a class's evidence

    def top_kernels(self, mask: np.ndarray, n: int) -> dict[str, np.ndarray]:
        """The ``n`` names with most time among the rows in ``mask``, summarized over those rows
        (count, total_ns, family, tflops, GBps), by total time."""
        nn = len(self.names)
        key = np.where(mask, self.nc, -1)
        cnt, tot = _isums(key, nn), _isums(key, nn, self.dur.astype(np.float64))
        seen = np.flatnonzero(cnt > 0)
        top = pd.Series(tot[seen], index=seen).nlargest(n).index.to_numpy(np.int64)
        # the summary of those names lists them by first appearance, then by total (stable)
        order = self.first_order(mask & np.isin(self.nc, top))
        durf = self.dur.astype(np.float64)
        sub = np.where(np.isin(key, order), key, -1)
        f = _fsums(sub, nn, {"flops": self.fl, "bytes": self.by})
        first = np.full(nn, -1, np.int64)
        idx = np.flatnonzero(sub >= 0)
        first[sub[idx][::-1]] = idx[::-1]
        fl, by = f["flops"][order], f["bytes"][order]
        tf_ns = _isums(sub, nn, np.where(self.flk, durf, 0.0))[order]
        gb_ns = _isums(sub, nn, np.where(self.byk, durf, 0.0))[order]
        cols = {"name": np.asarray(self.names, dtype=object)[order], "count": cnt[order],
                "total_ns": tot[order], "family": np.asarray(self.fams, dtype=object)[
                    self.fc[first[order]]] if len(order) else np.zeros(0, object),
                "flops": fl, "bytes": by, "tflops": rates(fl, tf_ns, 1e12),
                "GBps": rates(by, gb_ns, 1e9)}
        o = desc_order(cols["total_ns"])
        return {c: v[o] for c, v in cols.items()}

    def matmul_precision(self, mask: np.ndarray, matrix: tuple[str, ...]) -> dict[str, Any]:
        """``devicework.matmul_precision`` of the rows in ``mask``."""
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
