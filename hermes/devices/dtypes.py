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

Everything works on the distinct names (``pd.factorize``), each classified once with vectorized
string operations, then mapped back to the events.
"""

from __future__ import annotations

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
    """``fn`` (of lower-case text) on each distinct value, spread back per value (None where
    missing): a categorical's categories and codes as they are, else factorized once."""
    s = pd.Series(values)
    if isinstance(s.dtype, pd.CategoricalDtype):
        codes, uniq = s.cat.codes.to_numpy(), np.asarray(s.cat.categories, dtype=object)
    else:
        codes, uniq = pd.factorize(s.astype(object), use_na_sentinel=True)
    if len(uniq) == 0:
        return np.full(len(codes), None, object)
    got = np.asarray(fn(pd.Series(uniq, dtype=object).astype(str).str.lower()), dtype=object)
    got = np.append(got, None)  # code -1 (missing) -> None
    return got[codes]


def _last_part(low: pd.Series) -> pd.Series:
    """Ascend ``aclnnMm_MatMulCommon_MatMulV2`` -> ``matmulv2`` (the kernel is the last part)."""
    acl = low.str.startswith("aclnn")
    return low.where(~acl, low.str.rsplit("_", n=1).str[-1])


def _matmul_unique(low: pd.Series) -> np.ndarray:
    return _last_part(low).str.contains(MATMUL, regex=True).to_numpy(object)


def _first_of(low: pd.Series, table: tuple[tuple[str, str], ...]) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    """(dtype of the earliest match, its position) per string; None / inf where none."""
    pos = np.full((len(table), len(low)), np.inf)
    for i, (_, pattern) in enumerate(table):
        head = low.str.extract(f"^(.*?)(?:{pattern})", expand=False)
        pos[i] = head.str.len().to_numpy(np.float64, na_value=np.inf)
    best = pos.argmin(axis=0) if len(low) else np.zeros(0, int)
    found = np.isfinite(pos.min(axis=0)) if len(low) else np.zeros(0, bool)
    labels = np.array([d for d, _ in table] + [None], dtype=object)
    return labels[np.where(found, best, len(table))], pos.min(axis=0)


def _tensile(low: pd.Series) -> np.ndarray:
    code = low.str.extract(r"^cijk_[a-z]+_[a-z]+_([a-z0-9]+)", expand=False)
    out = np.full(len(low), None, object)
    for prefix, dtype in TENSILE:  # in order: the first prefix that fits wins
        hit = code.str.startswith(prefix).fillna(False).to_numpy(bool) & pd.isna(out)
        out[hit] = dtype
    return out


def _dtype_unique(low: pd.Series) -> np.ndarray:
    low = _last_part(low)
    tensile = _tensile(low)
    explicit, _ = _first_of(low, EXPLICIT)
    shape, _ = _first_of(low, SHAPE)
    # s1688 on Turing (cutlass_75, turing_) takes fp16 inputs; TF32 exists from Ampere on
    turing = low.str.contains(r"turing_|cutlass_75|sm_?75", regex=True).to_numpy(bool)
    shape = np.where((shape == "tf32") & turing, "fp16", shape)
    return np.where(pd.notna(tensile), tensile, np.where(pd.notna(explicit), explicit, shape))


def _recorded_unique(low: pd.Series) -> np.ndarray:
    got, _ = _first_of(low, RECORDED)
    return got
