"""``communication.json`` / ``cluster_communication.json`` -> collective events.

Both files nest per-collective records (objects holding ``Communication Time Info`` and
``Communication Bandwidth Info``) under keys that say where they belong:

* per rank (``ASCEND_PROFILER_OUTPUT/communication.json``): ``step -> collective|p2p -> op``;
* cluster (msprof-analyze): ``"(0, 1)" rank group -> step -> op -> rank``.

The walk reads each key by its shape rather than its depth: ``stepN`` is the step (plain
``step`` = none), ``"(0, 1)"`` the rank group, a number the rank, ``collective``/``p2p`` the
type, anything else the operator (``hcom_broadcast__501_0@6297232067196334501``: name before
``@``, group hash after it). ``Total Op Info`` aggregates are skipped and counted.

Each record becomes a ``collective`` event on lane ``communication`` (link, unit link):
``ts_ns`` = Start Timestamp, ``dur_ns`` = Elapse Time, ``coll_group`` = the group hash (or the
rank group), ``coll_seq`` = order of the op by start time within (rank, group), ``coll_bytes`` =
bytes sent over SDMA (intra-node; HCCS + PCIE when no SDMA entry) plus RDMA, in bytes
(the files' MB are 10^6 B). args: ``transit_ns``, ``wait_ns``, ``sync_ns``, ``idle_ns``,
``wait_ratio``, ``sync_ratio``, and per transport ``bandwidth_GBps``, ``transit_bytes``,
``transit_ns_by_transport``, ``large_packet_ratio`` and ``size_distribution``
(``{packet bytes: [count, total transit ns]}``).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hermes.collectors.importers.ascend.common import frame, load_json
from hermes.errors import ImportFormatError

TIME_INFO = "Communication Time Info"
BW_INFO = "Communication Bandwidth Info"
_STEP = re.compile(r"step(\d*)", re.IGNORECASE)
_GROUP = re.compile(r"\(.*\)")
_TYPES = ("collective", "p2p")
_TOTAL = "Total Op Info"

#: Time fields (ms) -> args key (ns).
_TIMES = {"Transit Time(ms)": "transit_ns", "Wait Time(ms)": "wait_ns",
          "Synchronization Time(ms)": "sync_ns", "Idle Time(ms)": "idle_ns"}
_RATIOS = {"Wait Time Ratio": "wait_ratio", "Synchronization Time Ratio": "sync_ratio"}


def _ns(value: Any, scale: int, path: Path, where: str) -> int:
    """A number in ms (scale 10**6) or µs (10**3) -> exact integer ns."""
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise InvalidOperation
        d = Decimal(repr(value) if isinstance(value, float) else str(value)) * scale
        ns = int(d.to_integral_value(rounding="ROUND_HALF_UP"))
    except (InvalidOperation, ValueError):
        raise ImportFormatError(f"{value!r} is not a number", path=path, where=where,
                                hint="expected a time; re-export the profile") from None
    except OverflowError:  # Infinity
        raise ImportFormatError(f"{value!r} is not a finite number", path=path, where=where,
                                hint="expected a time; re-export the profile") from None
    if not -2 ** 63 < ns < 2 ** 63:
        raise ImportFormatError(f"{value!r} is out of range (past int64 nanoseconds)",
                                path=path, where=where, hint="expected a time; re-export the "
                                                             "profile")
    return ns


def parse(path: Path, rank: int) -> tuple[pd.DataFrame, dict[str, int]]:
    """Collective events of one communication file (``rank`` when the file has no ranks)."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise ImportFormatError("top level is not an object", path=path, where="byte offset 0",
                                hint="expected {step: {collective: {op: {...}}}} or "
                                     "{rank group: {step: {op: {rank: {...}}}}}")
    rows: list[dict[str, Any]] = []
    skipped = {"total_op_info": 0}
    stack: list[tuple[dict[str, Any], tuple[str, ...]]] = [(data, ())]
    while stack:  # walks keys (steps x ops x ranks), not events of a timeline
        node, keys = stack.pop()
        if TIME_INFO in node:
            if _TOTAL in keys:
                skipped["total_op_info"] += 1
            else:
                rows.append(_record(node, keys, rank, path))
            continue
        for k, v in node.items():
            if isinstance(v, dict):
                stack.append((v, (*keys, str(k))))
    if not rows:
        return frame(0), skipped
    rows.sort(key=lambda r: (r["rank"], r["ts_ns"]))
    df = pd.DataFrame(rows)
    seq = df.groupby([df["rank"], df["coll_group"].fillna("")]).cumcount().to_numpy()
    n = len(df)
    return frame(n, rank=df["rank"].to_numpy(), lane="communication", lane_kind="link",
                 kind="collective", name=df["name"].to_numpy(), ts_ns=df["ts_ns"].to_numpy(),
                 dur_ns=df["dur_ns"].to_numpy(),
                 step=pd.array(df["step"].to_numpy(), dtype="Int64"), unit="link",
                 coll_group=df["coll_group"].to_numpy(dtype=object),
                 coll_seq=pd.array(seq, dtype="Int64"),
                 coll_bytes=pd.array(df["coll_bytes"].to_numpy(), dtype="Int64"),
                 args=list(df["args"]), src=np.full(n, "communication", dtype=object)), skipped


def _record(node: dict[str, Any], keys: tuple[str, ...], rank: int,
            path: Path) -> dict[str, Any]:
    where = "key " + " > ".join(repr(k) for k in keys)
    info = node[TIME_INFO]
    if not isinstance(info, dict):
        raise ImportFormatError(f"{TIME_INFO!r} is not an object", path=path, where=where)
    for need in ("Start Timestamp(us)", "Elapse Time(ms)"):
        if need not in info:
            raise ImportFormatError(f"{TIME_INFO!r} has no {need!r}", path=path, where=where,
                                    hint="expected an msprof communication record")
    step = None
    group = None
    comm_type = None
    op = ""
    r = rank
    for k in keys:
        m = _STEP.fullmatch(k)
        if m:
            step = int(m.group(1)) if m.group(1) else None
        elif _GROUP.fullmatch(k):
            group = k
        elif k.isdigit():
            r = int(k)
        elif k in _TYPES:
            comm_type = k
        else:
            op = k
    name, _, ghash = op.partition("@")
    args: dict[str, Any] = {}
    if group is not None:
        args["rank_set"] = group
    if comm_type is not None:
        args["comm_type"] = comm_type
    for field, key in _TIMES.items():
        if field in info:
            args[key] = _ns(info[field], 10**6, path, f"{where} > {field!r}")
    for field, key in _RATIOS.items():
        if isinstance(info.get(field), (int, float)):
            args[key] = float(info[field])
    bw = node.get(BW_INFO) or {}
    try:
        coll_bytes = _bandwidth(bw if isinstance(bw, dict) else {}, args)
    except (TypeError, ValueError, IndexError) as exc:
        raise ImportFormatError(f"{BW_INFO!r} has a malformed value ({exc})", path=path,
                                where=where, hint="expected numbers in MB, ms and GB/s") from None
    return {"rank": r, "step": step, "name": name or op,
            "coll_group": ghash or group, "coll_bytes": coll_bytes,
            "ts_ns": _ns(info["Start Timestamp(us)"], 10**3, path,
                         f"{where} > 'Start Timestamp(us)'"),
            "dur_ns": max(_ns(info["Elapse Time(ms)"], 10**6, path,
                              f"{where} > 'Elapse Time(ms)'"), 0),
            "args": args}


def _bandwidth(bw: dict[str, Any], args: dict[str, Any]) -> int | None:
    """Fill per-transport args; return the bytes the rank sent (SDMA or HCCS+PCIE, + RDMA)."""
    mb: dict[str, float] = {}
    for transport, t in bw.items():
        if not isinstance(t, dict):
            continue
        size = t.get("Transit Size(MB)")
        if isinstance(size, (int, float)):
            mb[transport] = float(size)
            args.setdefault("transit_bytes", {})[transport] = int(round(size * 1e6))
        for field, key in (("Bandwidth(GB/s)", "bandwidth_GBps"),
                           ("Large Packet Ratio", "large_packet_ratio")):
            if isinstance(t.get(field), (int, float)):
                args.setdefault(key, {})[transport] = float(t[field])
        if isinstance(t.get("Transit Time(ms)"), (int, float)):
            args.setdefault("transit_ns_by_transport", {})[transport] = \
                int(round(t["Transit Time(ms)"] * 1e6))
        dist = t.get("Size Distribution")
        if isinstance(dist, dict) and dist:
            args.setdefault("size_distribution", {})[transport] = {
                str(int(round(float(k) * 1e6))): [int(v[0]), int(round(float(v[1]) * 1e6))]
                for k, v in dist.items() if isinstance(v, list) and len(v) == 2}
    if not mb:
        return None
    intra = mb["SDMA"] if "SDMA" in mb else mb.get("HCCS", 0.0) + mb.get("PCIE", 0.0)
    return int(round((intra + mb.get("RDMA", 0.0)) * 1e6))
