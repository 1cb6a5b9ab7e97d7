"""Columns of the collectives table (``analyzers/communication/rank.py``) that read more than
the collective itself: the message size from the operator's input tensor where the trace
records none, and how the rank spent the time from its last sync point to its arrival
(``pre_*_ns``, what ``communication_cluster`` says a late rank did instead of arriving).
Formulas: ``docs/analysis/communication.md``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hermes.analyzers.common import intervals as iv
from hermes.analyzers.common.names import is_
from hermes.analyzers.common.spans import data_wait_mask, spans
from hermes.trace.schema import COMPUTE_KINDS, IO_KINDS, NOT_WORK_KINDS

#: What a rank did between its previous sync point and its arrival at a collective, in this
#: order of precedence (time two of them share counts for the first): device work, data
#: loading, host waits on the device, other host work, nothing recorded. The cluster analysis
#: compares the late rank's parts with the others' to say what it did instead of arriving.
PRE_PARTS = ("compute", "io", "sync", "host", "unrecorded")


#: The first input tensor of a Kineto operator's args: its shape and element type.
_INPUT_DIMS = r'"Input Dims":\s*\[\s*\[([0-9,\s]*)\]'
_INPUT_TYPE = r'"Input type":\s*\[\s*"([^"]*)"'
#: Bytes per element of PyTorch's scalar type names (``Input type``).
ELEMENT_BYTES = {"float": 4, "double": 8, "half": 2, "bfloat16": 2, "c10::half": 2,
                 "c10::bfloat16": 2, "int": 4, "long": 8, "long int": 8, "short": 2,
                 "signed char": 1, "unsigned char": 1, "char": 1, "bool": 1,
                 "c10::complex<float>": 8, "c10::complex<double>": 16,
                 "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1}


def input_bytes(args: pd.Series) -> pd.Series:
    """Bytes of the first input tensor named in each row's Kineto args (``Input Dims`` x the
    element size of ``Input type``): the message of a collective that records no message size
    (a ``gloo:all_reduce`` ProcessGroup range reduces its input in place). NaN where either is
    missing or the type is not a known scalar type."""
    s = args.astype("string[pyarrow]")
    dims = s.str.extract(_INPUT_DIMS, expand=False)
    kind = s.str.extract(_INPUT_TYPE, expand=False).str.strip().str.lower()
    parts = dims.str.split(",", expand=True) if dims.notna().any() else None
    if parts is None:
        return pd.Series(np.nan, index=args.index)
    num = parts.apply(lambda c: pd.to_numeric(c.str.strip(), errors="coerce"))
    # a shape with an empty or unreadable dimension is not read (a scalar's [] has no bytes)
    ok = dims.notna() & dims.str.strip().ne("") & ~(num.isna() & parts.notna()).any(axis=1)
    n = num.fillna(1.0).prod(axis=1).where(ok)
    return (n * kind.map(ELEMENT_BYTES).astype("float64")).astype("float64")


def before_arrival(ev: pd.DataFrame, t: pd.DataFrame, step_start: np.ndarray, offset: int
                    ) -> dict[str, np.ndarray]:
    """Per collective of ``t`` (sorted by arrival), how the rank spent the time from its last
    sync point to its arrival, in the parts of ``PRE_PARTS`` (ns, disjoint, summing to the
    window). The sync point is the latest end of an earlier collective of the same group that
    ended before this arrival (collectives of a group that overlap, such as DDP's buckets,
    share it), else the start of the arrival's step; times on the rank's own clock."""
    arrive = t["arrive_ns"].to_numpy(np.int64) - offset
    end = t["end_ns"].to_numpy(np.int64) - offset
    start = np.minimum(step_start.astype(np.int64), arrive)
    for _, idx in t.groupby("group", sort=False).indices.items():
        ends = np.sort(end[idx])
        k = np.searchsorted(ends, arrive[idx], side="right") - 1
        start[idx] = np.where(k >= 0, np.maximum(start[idx], ends[np.maximum(k, 0)]),
                              start[idx])
    start = np.minimum(start, arrive)
    work = ~is_(ev, "kind", *NOT_WORK_KINDS, "collective")
    io_m = is_(ev, "kind", *IO_KINDS) | data_wait_mask(ev)
    host = is_(ev, "lane_kind", "host", "loader")
    masks = {"compute": is_(ev, "kind", *COMPUTE_KINDS),
             "io": io_m, "sync": host & is_(ev, "kind", "sync") & ~io_m,
             "host": host & work & ~io_m}
    out: dict[str, np.ndarray] = {}
    seen = iv.EMPTY
    for part, m in masks.items():
        u = iv.subtract(spans(ev, m), seen)
        out[part] = iv.overlap_per_interval(start, arrive, u)
        seen = iv.union(np.r_[seen[0], u[0]], np.r_[seen[1], u[1]])
    out["unrecorded"] = (arrive - start) - sum(out.values())
    return out
