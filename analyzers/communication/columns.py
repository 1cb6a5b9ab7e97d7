"""Columns of the collectives table (``analyzers/communication/rank.py``) that read more than
the collective itself: the message size from the operator's input tensor where the trace
records none, and how the rank spent the time from its last sync point to its arrival
(``pre_*_ns``, what ``communication_cluster`` says a late rank did instead of arriving).
Also the collective's shape: the job's size, the bus-bandwidth factor and latency steps of
its algorithm, and the communication matrix. Formulas: ``docs/analysis/communication.md``."""

from __future__ import annotations

import re
from typing import Any

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


def before_arrival(ev: pd.DataFrame, t: pd.DataFrame, step_start: np.ndarray, offset: int,
                   comp: iv.Union | None = None) -> dict[str, np.ndarray]:
    """Per collective of ``t`` (sorted by arrival), how the rank spent the time from its last
    sync point to its arrival, in the parts of ``PRE_PARTS`` (ns, disjoint, summing to the
    window). The sync point is the latest end of an earlier collective of the same group that
    ended before this arrival (collectives of a group that overlap, such as DDP's buckets,
    share it), else the start of the arrival's step; times on the rank's own clock. ``comp``:
    the union of the rank's computation (``COMPUTE_KINDS`` spans) when the caller has it."""
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
    masks = {"compute": is_(ev, "kind", *COMPUTE_KINDS) if comp is None else comp,
             "io": io_m, "sync": host & is_(ev, "kind", "sync") & ~io_m,
             "host": host & work & ~io_m}
    out: dict[str, np.ndarray] = {}
    seen = iv.EMPTY
    for part, m in masks.items():
        u = iv.subtract(m if isinstance(m, tuple) else spans(ev, m), seen)
        out[part] = iv.overlap_per_interval(start, arrive, u)
        seen = iv.union(np.r_[seen[0], u[0]], np.r_[seen[1], u[1]])
    out["unrecorded"] = (arrive - start) - sum(out.values())
    return out


#: Bus-bandwidth factor of a collective with n ranks: bytes each rank moves on its link per byte
#: of message (nccl-tests' busbw conventions).
BUS_FACTOR: dict[str, Any] = {
    "allreduce": lambda n: 2.0 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
}
#: Latency steps of each collective's algorithm for a group of n ranks (ring; a binomial tree
#: for broadcast; Thakur et al.): each step pays the link's latency once.
LATENCY_STEPS: dict[str, Any] = {
    "allreduce": lambda n: 2.0 * (n - 1),
    "allgather": lambda n: n - 1.0,
    "reducescatter": lambda n: n - 1.0,
    "alltoall": lambda n: n - 1.0,
    "broadcast": lambda n: np.ceil(np.log2(np.maximum(n, 2.0))),
}
_NON_LETTER = re.compile(r"[^a-z]")


def op_keys(op: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Each collective's code into its distinct operator names, and those names lowercased
    with every non-letter dropped (``all_reduce`` -> ``allreduce``): each distinct name is
    matched once, in Python (a few names: cheaper than pandas' string methods)."""
    codes, uniq = pd.factorize(op)
    return codes, [_NON_LETTER.sub("", str(u).lower()) for u in uniq]


def named(keys: list[str], name: str) -> np.ndarray:
    """Which ``keys`` contain ``name`` (letters only: a substring), plus a trailing False."""
    return np.array([name in k for k in keys] + [False], bool)


def latency_bound(op: pd.Series, n: pd.Series, nbytes: pd.Series, bus: np.ndarray,
                   exp_GBps: np.ndarray, alpha_s: np.ndarray) -> np.ndarray:
    """Collectives whose algorithm's latency (steps x the link's latency) is at least the time
    their bytes need at the link's bandwidth (bus factor x bytes / bandwidth): the message is
    small *for its group* -- a ring over n ranks moves bytes / n per step, so on thousands of
    ranks even a 25 MB gradient bucket is latency-bound. False where the group size, the
    link's latency or its bandwidth is unknown."""
    codes, keys = op_keys(op)
    nn = n.to_numpy(np.float64)
    steps = np.full(len(op), np.nan)
    for name, f in LATENCY_STEPS.items():
        m = named(keys, name)[codes] & np.isnan(steps)
        steps[m] = f(nn[m])
    with np.errstate(divide="ignore", invalid="ignore"):
        lat_ns = steps * alpha_s * 1e9
        bw_ns = bus * nbytes.astype("float64").to_numpy() / exp_GBps
    return np.nan_to_num(lat_ns, nan=-1.0) >= np.nan_to_num(bw_ns, nan=np.inf)


def distributed_info(extra: dict[str, Any]) -> list[dict[str, Any]]:
    """Kineto's ``distributedInfo`` objects kept in the trace's ``extra``: at its top level
    or per rank (``extra.kineto.<rank>.distributedInfo``, as the importer keeps them)."""
    found = []
    for v in extra.values():
        if not isinstance(v, dict):
            continue
        for x in (v, *v.values()):
            if isinstance(x, dict) and isinstance(x.get("distributedInfo"), dict):
                found.append(x["distributedInfo"])
    return found


def world_size(meta: Any) -> int:
    """Ranks of the job: the trace's rank list, or more where the collector recorded the job's
    size (``extra.world_size``; Kineto's ``distributedInfo.world_size``, kept per rank by the
    importer) -- a worker analyzing one rank's file of a per-rank directory sees one rank."""
    sizes = [len(getattr(meta, "ranks", ()) or ())]
    extra = getattr(meta, "extra", None) or {}
    values = [extra.get("world_size")]
    values += [d.get("world_size") for d in distributed_info(extra)]
    sizes += [int(v) for v in values if isinstance(v, int) and not isinstance(v, bool)
              and 0 < v < 2 ** 31]
    return max(sizes)


def bus_factor(op: pd.Series, n: pd.Series) -> np.ndarray:
    codes, keys = op_keys(op)
    out = np.ones(len(op))
    nn = n.fillna(1e9).clip(lower=2).to_numpy(np.float64)  # unknown size: the large-n limit
    for name, f in BUS_FACTOR.items():
        m = named(keys, name)[codes]
        out[m] = f(nn[m])
    return out


MATRIX_COLUMNS = ["rank", "group", "op", "peer", "count", "bytes"]


def comm_matrix(t: pd.DataFrame) -> pd.DataFrame:
    """Bytes sent per (rank, group, op, peer); peer = -1 for group collectives (every member)."""
    if len(t) == 0:
        return pd.DataFrame(columns=MATRIX_COLUMNS)
    peer = t["peer"].fillna(-1).astype("int64")
    keys = [t["rank"], t["group"], t["op"], peer]
    # = groupby(keys, sort=True)["bytes"] .sum() and .size(), reset_index(): the groups
    # numbered in the order of their sorted keys (each key factorized sorted, the rows ordered
    # by all four), the two reductions by that one number, each group's keys from its first
    # row -- no MultiIndex built and taken apart again
    codes = [pd.factorize(k, sort=True)[0] for k in keys]
    order = np.lexsort(codes[::-1])
    sc = np.stack([c[order] for c in codes])
    new = np.r_[True, (sc[:, 1:] != sc[:, :-1]).any(axis=0)]
    gid = np.empty(len(t), np.int64)
    gid[order] = np.cumsum(new) - 1
    g = t["bytes"].fillna(0).groupby(gid, sort=True)
    first = order[new]
    return pd.DataFrame({"rank": t["rank"].to_numpy()[first], "group": t["group"].to_numpy()[first],
                         "op": t["op"].array[first], "peer": peer.to_numpy()[first],
                         "count": g.size().to_numpy(), "bytes": g.sum().to_numpy()})
