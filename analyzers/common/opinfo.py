"""What the analyzers know about events and operators, shared by ``computation`` and
``communication``: column selection from a rank's event frame, args lookups (vectorized, one pass
over the rows that carry a key), step-window clipping, input shapes (Kineto ``Input Dims``, Ascend
``Input Shapes``), GEMM FLOPs and bytes estimated from shapes, and the device's peaks.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hermes import devices
from hermes.analyzers.common import intervals as iv
from hermes.analyzers.common.names import codes_in
from hermes.analyzers.engine.base import RankContext
from hermes.trace.args import args_of, has_args

TOP_N = 10


def profile_of(ctx: RankContext) -> devices.DeviceProfile | None:
    """The device profile of a rank: by the trace's device name, else by the Kineto
    ``deviceProperties`` a profile lists as ``kineto_props`` (ROCm may name a device "AMD Radeon
    Graphics" or nothing; its architecture and CU count still identify it), else None."""
    dev = ctx.device
    for key in ("name", "display_name"):
        p = devices.match(str(dev.get(key) or ""))
        if p is not None:
            return p
    props = dev.get("kineto")
    if isinstance(props, dict):
        for p in devices.profiles().values():
            want = p.fields.get("kineto_props")
            if isinstance(want, dict) and want and \
                    all(props.get(k) == v for k, v in want.items()):
                return p
    return None


def arg_pattern(*keys: str) -> str:
    """Regex capturing the value of any of ``keys`` in a JSON args string (quotes stripped)."""
    alt = "|".join(re.escape(k) for k in keys)
    return rf'"(?:{alt})"\s*:\s*"?\s*([^",}}]*)'


def is_arrow(s: pd.Series) -> bool:
    """Strings stored as pyarrow (either missing-value convention)."""
    return isinstance(s.dtype, pd.StringDtype) and s.dtype.storage == "pyarrow"


def extract(s: pd.Series, pattern: str, flags: int = 0) -> pd.Series:
    """``s.str.extract(pattern, flags, expand=False)`` (one capture group); on pyarrow strings
    with pyarrow's regex kernel (the pandas one calls Python's ``re`` row by row)."""
    if is_arrow(s) and flags & ~re.I == 0:
        rx = ("(?i)" if flags & re.I else "") + re.sub(r"(?<!\\)\((?!\?)", "(?P<v>", pattern,
                                                      count=1)
        try:
            got = pc.struct_field(pc.extract_regex(pa.array(s.array), rx), [0])
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass  # a pattern RE2 does not take
        else:
            return pd.Series(pd.array(got, dtype=s.dtype), index=s.index)
    return s.str.extract(pattern, flags=flags, expand=False)


class ArgKeys:
    """The args of many rows (pyarrow strings, NaN rows dropped) and which keys each carries,
    for several lookups over the same rows: the rows are grouped by their text with digit runs
    blanked (rows that differ only in numbers -- ids, timestamps, sizes -- carry the same keys)
    and each group's text is searched once. ``carries(k)`` is exactly ``'"k"' in text``."""

    def __init__(self, args: pd.Series, group: bool = True) -> None:
        s = args.dropna()
        if not isinstance(s.dtype, pd.StringDtype):
            s = s.astype("string[pyarrow]")
        self.s = s
        self.codes: np.ndarray | None = None
        self.texts: list[str] = []
        if group and is_arrow(s) and len(s):
            enc = pc.dictionary_encode(pc.replace_substring_regex(pa.array(s.array), "[0-9]+",
                                                                  "0"))
            if len(enc.dictionary) * 4 <= len(s):  # else a scan per key is as cheap
                self.codes = enc.indices.to_numpy(zero_copy_only=False)
                self.texts = enc.dictionary.to_pylist()

    def carries(self, key: str) -> np.ndarray:
        lit = f'"{key}"'
        if self.codes is None or any(c in "0123456789" for c in key):
            return self.s.str.contains(lit, regex=False).to_numpy(bool)
        return np.array([lit in t for t in self.texts], bool)[self.codes]


def arg_values(args: pd.Series, *keys: str, index: ArgKeys | None = None) -> pd.Series:
    """Vectorized extraction of one args value (string, NaN where absent); ``index``: an
    ``ArgKeys`` of ``args`` shared by several lookups."""
    out = pd.Series(np.nan, index=args.index, dtype=object)
    if len(args) == 0:
        return out
    ix = ArgKeys(args, group=False) if index is None else index
    s = ix.s
    # a literal pre-filter keeps the regex off the (usually many) rows without the key
    has = np.zeros(len(s), bool)
    for k in keys:
        has |= ix.carries(k)
    if has.any():
        sub = s[has]
        out.loc[sub.index] = extract(sub, arg_pattern(*keys), flags=re.I)
    return out


def arg_numbers(args: pd.Series, *keys: str, index: ArgKeys | None = None) -> pd.Series:
    return pd.to_numeric(arg_values(args, *keys, index=index), errors="coerce").astype("float64")


def clip_to_windows(start: np.ndarray, end: np.ndarray, windows: pd.DataFrame
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Clip intervals to the step window containing their start; intervals outside every window
    become empty (start == end)."""
    if len(windows) == 0 or start.size == 0:
        return start, start.copy()
    ws = windows["start_ns"].to_numpy(np.int64)
    we = windows["end_ns"].to_numpy(np.int64)
    k = np.searchsorted(ws, start, side="right") - 1
    kk = np.maximum(k, 0)
    inside = (k >= 0) & (start < we[kk])
    s = np.where(inside, start, 0)
    e = np.where(inside, np.minimum(end, we[kk]), 0)
    return s, np.maximum(e, s)


def union_time(start: np.ndarray, end: np.ndarray, windows: pd.DataFrame) -> int:
    """Length (ns) of the union of intervals, clipped to the step windows."""
    s, e = clip_to_windows(np.asarray(start, np.int64), np.asarray(end, np.int64), windows)
    return iv.total(iv.union(s, e))


def has(x: pd.Series, pattern: str | re.Pattern[str], case: bool = True) -> np.ndarray:
    """Boolean mask: the value matches ``pattern`` (regex search). Runs once per distinct
    value (categories / factorized values), so it is cheap on repetitive columns."""
    if len(x) == 0:
        return np.zeros(0, bool)
    rx = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, 0 if case else re.I)
    if isinstance(x.dtype, pd.CategoricalDtype):  # (a few matching values: compared codes)
        return codes_in(x, [bool(rx.search(str(u))) for u in x.dtype.categories])
    codes, uniq = pd.factorize(x, use_na_sentinel=True)
    hit = np.array([bool(rx.search(str(u))) for u in uniq] + [False], bool)
    return hit[np.where(codes >= 0, codes, len(uniq))]


#: Keys the analyzers read from args; rows without any of them are skipped in one pass.
ARG_KEYS = re.compile(r'"(?:Type|op_type|Accelerator Core|Task Type|task_type|OP State|op_state'
                      r'|op state|aic_\w+|aiv_\w+|Input Dims|Input Shapes|input_shapes)"')


#: What a pattern must not have for :func:`may_match` (anchors, word boundaries, lookarounds:
#: their meaning at a row's edge differs inside the rows' concatenation).
_EDGE_SENSITIVE = re.compile(r"\\[bBAZz]|[\^$]|\(\?<?[=!]")


def may_match(s: pd.Series, pattern: str, ignore_case: bool = False) -> bool:
    """False when no row of the string column ``s`` can match regex ``pattern``: the pattern
    is searched once in the rows' bytes as Arrow stores them, back to back (a row's match is a
    match there), instead of row by row (~100 ns a row). True when it may: a match there can
    also span two rows, and a pattern with anchors, ``\\b`` or lookarounds, or a column
    that is not Arrow-backed, is not tested at all."""
    a = s.array
    if not (isinstance(a.dtype, pd.StringDtype) and a.dtype.storage == "pyarrow") \
            or _EDGE_SENSITIVE.search(pattern):
        return True
    arr = pa.array(a)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    large = pa.types.is_large_string(arr.type)
    if not (large or pa.types.is_string(arr.type)) or len(arr) == 0:
        return len(arr) > 0
    off_b, data = arr.buffers()[1], arr.buffers()[2]
    if off_b is None or data is None:
        return True
    offs = np.frombuffer(off_b, dtype=np.int64 if large else np.int32, count=len(arr) + 1,
                         offset=arr.offset * (8 if large else 4))
    whole = pa.LargeStringArray.from_buffers(
        1, pa.py_buffer(np.array([offs[0], offs[-1]], np.int64)), data)
    return bool(pc.match_substring_regex(whole, pattern, ignore_case=ignore_case)[0].as_py())


def rich_args(args: pd.Series) -> pd.Series:
    """The args (as pyarrow strings) of the rows that carry any of ``ARG_KEYS``."""
    s = args.dropna()
    if not isinstance(s.dtype, pd.StringDtype):
        s = s.astype("string[pyarrow]")
    if len(s) and not may_match(s, ARG_KEYS.pattern):
        return s[np.zeros(len(s), bool)]
    return s[s.str.contains(ARG_KEYS.pattern, regex=True).to_numpy()] if len(s) else s


def category(x: pd.Series) -> pd.Series:
    """A string column as a categorical (string methods then run once per distinct value)."""
    if isinstance(x.dtype, pd.CategoricalDtype):
        # = x.cat.remove_unused_categories(), the used categories found by a bincount
        codes = x.array.codes.astype(np.int64)
        used = np.bincount(codes + 1, minlength=len(x.dtype.categories) + 1)[1:] > 0
        remap = np.append(np.cumsum(used) - 1, -1)
        return pd.Series(pd.Categorical.from_codes(
            remap[codes], dtype=pd.CategoricalDtype(x.dtype.categories[used],
                                                    ordered=x.cat.ordered)))
    return x.astype("category").reset_index(drop=True)


def take_num(events: pd.DataFrame, col: str, idx: np.ndarray) -> np.ndarray:
    if col not in events.columns:
        return np.full(idx.size, np.nan)
    arr = events[col].array.take(idx)
    try:
        return np.asarray(arr.to_numpy(dtype="float64", na_value=np.nan))
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(arr), errors="coerce").to_numpy("float64")


def base_frame(events: pd.DataFrame, mask: np.ndarray, text_args: bool = False,
               with_args: bool = True) -> pd.DataFrame:
    """Selected events with plain dtypes: name, ts_ns, dur_ns, end_ns and the optional columns
    (numeric ones as float64 with NaN; unit, args, coll_group, lane as objects). Only the needed
    columns are taken, row by row index, so selecting from a wide 10M-row frame stays cheap.
    ``text_args``: ``args`` keeps the frame's own string dtype (Arrow-backed in a loaded
    trace) instead of one Python string per row (millions of them on a big trace);
    ``with_args=False``: no ``args`` column (a caller that reads them in batches)."""
    idx = np.flatnonzero(np.asarray(mask, bool))
    ts = events["ts_ns"].to_numpy(np.int64)[idx]
    dur = events["dur_ns"].to_numpy(np.int64)[idx]
    data: dict[str, Any] = {"name": category(pd.Series(events["name"].array.take(idx))),
                            "ts_ns": ts, "dur_ns": dur, "end_ns": ts + dur}
    for col in ("flops", "bytes", "value", "coll_bytes", "coll_seq", "external_id", "corr_id",
                "stream"):
        data[col] = take_num(events, col, idx)
    for col in ("unit", "args", "coll_group", "lane"):
        if col == "args" and not with_args:
            continue
        if col == "args" and has_args(events):  # the frame's own, or its file's (on demand)
            text = args_of(events, idx).array
            data[col] = pd.Series(text) if text_args else np.asarray(text, dtype=object)
            continue
        data[col] = (np.asarray(events[col].array.take(idx), dtype=object)
                     if col in events.columns else np.full(idx.size, None, dtype=object))
    return pd.DataFrame(data, copy=False)  # (fresh arrays: no consolidation copy needed)


def top_ops(df: pd.DataFrame, n: int = TOP_N) -> list[dict[str, Any]]:
    """The operators of ``df`` with most device time: [{name, time_ns, count}]."""
    if len(df) == 0:
        return []
    g = df.groupby("name", sort=False, observed=True)["dur_ns"].agg(["sum", "count"])
    g = g.sort_values("sum", ascending=False).head(n)
    return [{"name": str(k), "time_ns": int(v["sum"]), "count": int(v["count"])}
            for k, v in g.iterrows()]


# ---------------------------------------------------------------- shapes

@lru_cache(maxsize=4096)
def shapes(raw: str) -> tuple[tuple[int, ...], ...]:
    """Input shapes from Kineto ``Input Dims`` (JSON list) or Ascend ``Input Shapes``
    (``"81920,4096;8192,512"``)."""
    raw = raw.strip().strip('"').strip()
    if raw.startswith("["):
        try:
            val = json.loads(raw)
        except ValueError:
            return ()
        return tuple(tuple(int(x) for x in s) if isinstance(s, list) and
                     all(isinstance(x, int) for x in s) else () for s in val)
    out = []
    for part in raw.split(";"):
        dims = [d for d in part.replace('"', "").split(",") if d.strip()]
        try:
            out.append(tuple(int(float(d)) for d in dims))
        except ValueError:
            out.append(())
    return tuple(out)


def input_shapes(args: pd.Series) -> pd.Series:
    """Raw shape strings from args: Ascend "Input Shapes" or Kineto "Input Dims" (a list)."""
    out = pd.Series(np.nan, index=args.index, dtype=object)
    s = args.dropna()
    if not isinstance(s.dtype, pd.StringDtype):
        s = s.astype("string[pyarrow]")
    if is_arrow(s):  # one scan for the three keys
        keep = pc.match_substring_regex(pa.array(s.array), "Input Dims|Input Shapes|input_shapes")
        s = s[keep.to_numpy(zero_copy_only=False)]
    else:
        s = s[(s.str.contains("Input Dims", regex=False)
               | s.str.contains("Input Shapes", regex=False)
               | s.str.contains("input_shapes", regex=False)).to_numpy()]
    if len(s) == 0:
        return out
    dims = extract(s, r'"Input Dims"\s*:\s*(\[\[.*?\]\])', flags=re.I)
    asc = extract(s, r'"(?:Input Shapes|input_shapes)"\s*:\s*"((?:[^"\\]|\\.)*)"', flags=re.I)
    out.loc[s.index] = dims.fillna(asc.str.replace('\\"', "", regex=False)).astype(object)
    return out


def misaligned(raw: Any, n_inputs: int, align: int) -> bool:
    if not isinstance(raw, str) or not raw:
        return False
    found = [s for s in shapes(raw)[:n_inputs] if s]
    return any(s[-1] % align != 0 for s in found)


def dtype_bytes(args: pd.Series) -> pd.Series:
    """Element size guessed from the dtype named in args (2 unless fp32/fp64/int8 is named)."""
    size = pd.Series(2.0, index=args.index)
    if len(args) == 0:
        return size
    s = args.astype("string").fillna("")
    # every pattern below names "float", "double" or "fp32": only rows with one can differ
    if not may_match(s, "float|double|fp32", ignore_case=True):
        return pd.Series(size.to_numpy(copy=True), index=args.index)
    pos = np.flatnonzero(s.str.contains("float|double|fp32", case=False, regex=True)
                         .to_numpy(bool))
    s = s.iloc[pos].str.lower()
    val = np.full(pos.size, 2.0)
    val[s.str.contains(r"float64|double", regex=True).to_numpy(bool)] = 8.0
    val[(s.str.contains(r'"(?:dt_)?float(?:32)?"|\bfloat\b|fp32|c10::float\b', regex=True)
         & ~s.str.contains(r"float16|bfloat16|half|bf16|fp16", regex=True)).to_numpy(bool)] = 4.0
    out = size.to_numpy(copy=True)
    out[pos] = val
    return pd.Series(out, index=args.index)


#: PyTorch matrix operators whose FLOPs follow from their input shapes (Kineto "Input Dims"):
#: operator -> (index of A, index of B, B laid out as (N, K) like a Linear weight)
GEMM_OPS = {"mm": (0, 1, False), "matmul": (0, 1, False), "bmm": (0, 1, False),
             "addmm": (1, 2, False), "baddbmm": (1, 2, False), "addbmm": (1, 2, False),
             "linear": (0, 1, True), "_scaled_mm": (0, 1, False)}


def gemm_flops(names: pd.Series, shape_raw: pd.Series) -> pd.Series:
    """FLOPs (2 x M x N x K, batch included) of matrix operators from their input shapes, when
    the trace has no FLOP count (Kineto without ``with_flops``); NaN for other operators."""
    def one(name: str, raw: Any) -> float:
        spec = GEMM_OPS.get(str(name).split("::")[-1])
        if spec is None or not isinstance(raw, str):
            return float("nan")
        sh = shapes(raw)
        ia, ib, transposed = spec
        if len(sh) <= max(ia, ib) or len(sh[ia]) < 2 or len(sh[ib]) < 1:
            return float("nan")
        a, b = sh[ia], sh[ib]
        n = b[0] if transposed else b[-1]
        return 2.0 * float(np.prod(a[:-1])) * a[-1] * n

    pairs = pd.DataFrame({"n": names.astype(str), "s": shape_raw})
    uniq = pairs.drop_duplicates()
    val = {(r.n, r.s): one(r.n, r.s) for r in uniq.itertuples(index=False)}
    return pd.Series([val[(n, s_)] for n, s_ in zip(pairs["n"], pairs["s"], strict=True)],
                     index=names.index, dtype="float64")


def gemm_bytes(shape_raw: pd.Series, elem: pd.Series) -> pd.Series:
    """HBM bytes of a matmul estimated from its input shapes: both inputs read once and the
    output written once, element size from the dtype. Computed once per distinct shape string."""
    def elems(raw: Any) -> float:
        sh = [s for s in shapes(raw)[:2] if s] if isinstance(raw, str) else []
        if len(sh) != 2:
            return float("nan")
        a, b = sh
        m = math.prod(a[:-1]) if len(a) > 1 else 1
        k = a[-1]
        # B is (K, N) or, transposed, (N, K)
        n = b[-1] if len(b) > 1 and b[-2] == k else (b[-2] if len(b) > 1 else 1)
        # exact integers (a recorded shape may be absurd: no int64 wrap, no overflow error)
        total = math.prod(a) + math.prod(b) + m * n
        return float(total) if total < 2 ** 1000 else float("nan")

    uniq = {raw: elems(raw) for raw in pd.unique(shape_raw.dropna())}
    return shape_raw.map(uniq).astype("float64") * elem


def peaks(ctx: RankContext) -> dict[str, Any]:
    """Peak FLOP/s per unit and per dtype, HBM bandwidth and device kind: the trace's device dict
    first, gaps filled from the matched device profile."""
    dev, prof = ctx.device, profile_of(ctx)
    base = prof.to_meta() if prof is not None else {}
    return {"peak_flops": dict(dev.get("peak_flops") or base.get("peak_flops") or {}),
            "dtype_flops": dict(dev.get("dtype_flops") or base.get("dtype_flops") or {}),
            "hbm_bw_Bps": float(dev.get("hbm_bw_Bps") or base.get("hbm_bw_Bps") or 0.0),
            "kind": str(dev.get("kind") or base.get("kind") or "gpu"),
            "clock_mhz": float(dev.get("clock_mhz") or base.get("clock_mhz") or 0.0)}


def step_of(ts: np.ndarray, windows: pd.DataFrame) -> np.ndarray:
    if len(windows) == 0 or ts.size == 0:
        return np.full(ts.size, -1, np.int64)
    ws = windows["start_ns"].to_numpy(np.int64)
    we = windows["end_ns"].to_numpy(np.int64)
    k = np.searchsorted(ws, ts, side="right") - 1
    kk = np.maximum(k, 0)
    inside = (k >= 0) & (ts < we[kk])
    return np.where(inside, windows["step"].to_numpy(np.int64)[kk], -1)
