"""Precision in use: which matmul kernels a trace ran and in which dtype, as the share of matmul
time per dtype (with the share whose dtype is unknown).

A kernel's dtype comes from the dtype recorded with its operator (Kineto ``Input type`` with
``record_shapes``, Ascend ``Input Data Types``) where there is one, else from its name: cuBLAS /
CUTLASS / cuBLASLt (``sgemm``, ``tf32``, ``h884``/``h1688``/``hgemm``, ``bf16``, ``e4m3``/``e5m2``,
``i8816``; instruction shapes without a type: ``s884``/``s16816`` are fp16 inputs, ``s1688`` is TF32
on Ampere and newer, fp16 on Turing), Tensile / hipBLASLt (``Cijk_Alik_Bljk_BBS_...``: the type code
after the two index tokens: S fp32, D fp64, H fp16, B bf16, X xf32, F8/B8 fp8, I8 int8), MIOpen
(``igemm_fwd_gtcx2_nhwc_bf16``), Triton (``matmul_..._bf16xbf16xmxfp4``: the activations' dtype,
first). Where a name carries several dtypes (inputs, accumulator, output), the first one is the
inputs'. A recorded fp32 whose kernel name says tf32 ran as tf32.

Everything works on the distinct names (a categorical's categories in use, else ``pd.factorize``),
each classified once by compiled patterns, then mapped back to the events.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

#: Matmul-class kernels: GEMM/GEMV, batched matmul, convolution (implicit GEMM) and fused
#: attention, which run on the matrix units. ``fbgemm`` is a library name, not a GEMM.
MATMUL = (r"(?<!fb)gemm|gemv|cijk_|matmul|xmma_|nvjet|wgmma|hmma|imma|dmma|(?:^|_)bmm|"
          r"(?:^|[^a-z])mm(?:$|[^a-z])|conv|fprop|dgrad|wgrad|flash|fmha|attention|sdpa")

#: (dtype, pattern) on lower-case names; the earliest match in a name wins, and a ``shape``
#: pattern (instruction shape, no type) only where no explicit type token is found.
EXPLICIT = (
    ("fp8", r"e4m3|e5m2|fp8|float8|f8f8|(?<![a-z0-9])f8(?![0-9])|fnuz"),
    ("fp4", r"mxfp4|nvfp4|fp4|e2m1"),
    ("fp6", r"mxfp6|fp6|e3m2|e2m3"),
    ("bf16", r"bf16|bfloat16"),
    ("tf32", r"tf32|xf32"),
    ("fp16", r"(?<!b)(?:fp16|f16|float16)|(?<![a-z])half|hgemm|h884|h1688|h16816|c10::half"),
    ("int8", r"(?<![a-z0-9])(?:int8|i8|s8|u8)(?![0-9])|imma|i8816|i16832|i8832"),
    ("fp64", r"fp64|f64|dgemm|double|dmma|d884"),
    ("fp32", r"fp32|(?<![a-z0-9])f32|float32|sgemm|cgemm|gcgemm|ffma|(?<![a-z])float(?![0-9])"),
)
SHAPE = (
    ("fp16", r"s884gemm|s16816gemm|s161616gemm"),
    ("tf32", r"s1688gemm"),
)
#: Tensile type code (first letters of the token after ``Cijk_A.._B.._``) -> dtype.
TENSILE = (("f8", "fp8"), ("b8", "fp8"), ("4xi8", "int8"), ("i8", "int8"), ("s", "fp32"),
           ("d", "fp64"), ("h", "fp16"), ("b", "bf16"), ("x", "tf32"), ("c", "fp32"),
           ("z", "fp64"))
#: Recorded dtypes (PyTorch ``Input type``, Ascend ``Input Data Types``) -> dtype, in order.
RECORDED = (
    ("fp8", r"float8|e4m3|e5m2|fp8"),
    ("bf16", r"bfloat16|bf16"),
    ("fp16", r"(?<!b)float16|half|fp16"),
    ("fp64", r"double|float64|fp64"),
    ("int8", r"signed char|int8|(?<![a-z])char|qint8"),
    ("fp32", r"(?<![a-z])float(?:32)?(?![0-9])|fp32"),
)


def is_matmul(names: pd.Series) -> np.ndarray:
    """Per name: a matmul-class kernel (Ascend ``aclnnX_Y_Op`` names: by their last part)."""
    return _per_unique(names, _matmul_unique).astype(bool)


def name_dtypes(names: pd.Series) -> pd.Series:
    """Per kernel name: its matmul dtype (``fp32``, ``tf32``, ``fp16``, ``bf16``, ``fp8``,
    ``fp6``, ``fp4``, ``int8``, ``fp64``), None where the name does not say."""
    return pd.Series(_per_unique(names, _dtype_unique), index=names.index, dtype=object)


def recorded_dtypes(types: pd.Series) -> pd.Series:
    """Per recorded dtype text (``"['c10::BFloat16', 'c10::BFloat16']"``, ``FLOAT16;FLOAT16``,
    ``DT_BF16``): the dtype of its first input that has one, None where none."""
    return pd.Series(_per_unique(types, _recorded_unique), index=types.index, dtype=object)


def matmul_mix(names: pd.Series, dur_ns: Any, recorded: pd.Series | None = None,
               matmul: Any = None, fallback: pd.Series | None = None) -> dict[str, Any]:
    """Share of matmul time per dtype among the kernels ``names`` with durations ``dur_ns``;
    ``recorded`` the dtype text recorded with each kernel's operator (aligned, may be None),
    ``matmul`` a mask of the matmul kernels (default ``is_matmul(names)``), ``fallback`` a
    dtype label per kernel for those neither recorded nor named (a recorded element size:
    ``"fp16/bf16"``).

    Returns ``{"matmul_ns", "kernels", "shares": {dtype: share}, "unknown_share",
    "source": {"recorded": share, "kernel names": share}, "top": dtype or None}``; shares are of
    matmul time and, with ``unknown_share``, sum to 1."""
    names = pd.Series(names).reset_index(drop=True)
    dur = np.asarray(dur_ns, dtype=np.float64)
    mm = is_matmul(names) if matmul is None else np.asarray(matmul, dtype=bool)
    mm &= np.isfinite(dur) & (dur > 0)
    total = float(dur[mm].sum())
    out: dict[str, Any] = {"matmul_ns": total, "kernels": int(mm.sum()), "shares": {},
                           "unknown_share": 1.0 if total else 0.0,
                           "source": {"recorded": 0.0, "kernel names": 0.0}, "top": None}
    if total <= 0:
        return out
    by_name = name_dtypes(names[mm]).to_numpy(object)
    rec = recorded_dtypes(pd.Series(recorded).reset_index(drop=True)[mm]).to_numpy(object) \
        if recorded is not None else np.full(int(mm.sum()), None, object)
    has_rec = pd.notna(rec)
    # a recorded fp32 that the kernel ran as TF32 (its name says so) counts as tf32
    rec = np.where(has_rec & (rec == "fp32") & (by_name == "tf32"), "tf32", rec)
    dt = np.where(has_rec, rec, by_name)
    if fallback is not None:
        fb = pd.Series(fallback).reset_index(drop=True)[mm].to_numpy(object)
        dt = np.where(pd.isna(dt) & pd.notna(fb), fb, dt)
    d = dur[mm]
    frame = pd.DataFrame({"dt": pd.Series(dt, dtype=object).fillna("?"), "d": d})
    sums = frame.groupby("dt", sort=True)["d"].sum() / total
    shares = {k: float(v) for k, v in sums.sort_values(ascending=False).items() if k != "?"}
    out["shares"] = shares
    out["unknown_share"] = float(sums.get("?", 0.0))
    named = ~has_rec & pd.notna(by_name)
    out["source"] = {"recorded": float(d[has_rec | (~named & pd.notna(dt))].sum() / total),
                     "kernel names": float(d[named].sum() / total)}
    out["top"] = next(iter(shares), None)
    return out


def _per_unique(values: pd.Series, fn: Any) -> np.ndarray:
    """``fn`` (of one lower-case text) on each distinct value present, spread back per value
    (None where missing): a categorical's codes as they are (only the categories in use are
    classified), else factorized once."""
    s = pd.Series(values)
    if isinstance(s.dtype, pd.CategoricalDtype):
        codes, uniq = s.cat.codes.to_numpy(), np.asarray(s.cat.categories, dtype=object)
        used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(uniq)))
    else:
        codes, uniq = pd.factorize(s.astype(object), use_na_sentinel=True)
        uniq = np.asarray(uniq, dtype=object)
        used = np.arange(len(uniq))
    got = np.full(len(uniq) + 1, None, object)  # the last: code -1 (missing) -> None
    got[used] = [fn(str(u).lower()) for u in uniq[used]]
    return got[codes]


# the distinct values are few (a trace's vocabulary), so each is classified by compiled
# patterns in plain Python: pandas' string methods loop over the values the same way, with
# a Series' overhead per operation on top
_MATMUL_RE = re.compile(MATMUL)
_EXPLICIT_RE = tuple((d, re.compile(p)) for d, p in EXPLICIT)
_SHAPE_RE = tuple((d, re.compile(p)) for d, p in SHAPE)
_RECORDED_RE = tuple((d, re.compile(p)) for d, p in RECORDED)
_TENSILE_RE = re.compile(r"^cijk_[a-z]+_[a-z]+_([a-z0-9]+)")
_TURING_RE = re.compile(r"turing_|cutlass_75|sm_?75")


def _last_part(low: str) -> str:
    """Ascend ``aclnnMm_MatMulCommon_MatMulV2`` -> ``matmulv2`` (the kernel is the last part)."""
    return low.rsplit("_", 1)[-1] if low.startswith("aclnn") else low


def _matmul_unique(low: str) -> bool:
    return _MATMUL_RE.search(_last_part(low)) is not None


def _first_of(low: str, table: tuple[tuple[str, re.Pattern[str]], ...]) -> str | None:
    """The dtype of ``table``'s earliest match in ``low`` (the first entry on a tie), None
    where none matches on the text's first line."""
    line_end = low.find("\n")
    best, at = None, len(low) + 1
    for dtype, pattern in table:
        m = pattern.search(low)
        if m is not None and m.start() < at and (line_end < 0 or m.start() <= line_end):
            best, at = dtype, m.start()
    return best


def _tensile(low: str) -> str | None:
    m = _TENSILE_RE.search(low)
    if m is None:
        return None
    code = m.group(1)
    return next((dtype for prefix, dtype in TENSILE if code.startswith(prefix)), None)


def _dtype_unique(low: str) -> str | None:
    low = _last_part(low)
    found = _tensile(low) or _first_of(low, _EXPLICIT_RE)
    if found is not None:
        return found
    shape = _first_of(low, _SHAPE_RE)
    # s1688 on Turing (cutlass_75, turing_) takes fp16 inputs; TF32 exists from Ampere on
    return "fp16" if shape == "tf32" and _TURING_RE.search(low) else shape


def _recorded_unique(low: str) -> str | None:
    return _first_of(low, _RECORDED_RE)
