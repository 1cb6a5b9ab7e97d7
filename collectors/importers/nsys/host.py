"""Host API tables -> host events on thread lanes.

``CUPTI_ACTIVITY_KIND_RUNTIME`` holds CUDA runtime and driver calls (``eventClass``): named
from ``StringIds`` without Nsight's version suffix (``cudaLaunchKernel_v7000`` ->
``cudaLaunchKernel``, the name Kineto gives), they are, by the Kineto importer's name
rules, ``sync`` (``*Synchronize``, blocking copies), ``alloc`` (malloc/free), ``launch``
(calls that enqueue work: ``*Launch*``, async copies and memsets), else ``runtime``.
``OSRT_API`` (OS runtime calls: ``pthread_cond_wait``, ``poll``, ``read``...) become
``runtime`` events whose ``args.source_category`` is ``os_runtime``.

The runtime table is read before the device tables: its calls' correlation ids and steps
are kept (12 bytes a call), so a device row's step is its launch's, and a device row whose
launch is not in the export has its ``corr_id`` left empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from hermes.collectors.importers.nsys.context import Context, correlation_keys
from hermes.collectors.importers.nsys.events import (
    LK,
    K,
    Lanes,
    arg_fields,
    args_json,
    batch,
    col,
    dict_of,
)
from hermes.collectors.importers.nsys.sql import Export
from hermes.trace.arrowbuf import from_numpy

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
OSRT = "OSRT_API"
_VERSION = re.compile(r"_v\d+$")
#: runtime/driver calls by what they do; the first rule that matches wins (as for Kineto)
RUNTIME_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"synchronize", re.I), "sync"),
    (re.compile(r"^(cuda|hip)Memcpy(2D|3D)?$|^cuMemcpy(HtoD|DtoH|DtoD)?(_v2)?$", re.I), "sync"),
    (re.compile(r"malloc|free|hostalloc|memalloc|memfree|hostregister|memcreate|"
                r"memaddressreserve|memmap", re.I), "alloc"),
    (re.compile(r"launch|memcpy|memset|memprefetch", re.I), "launch"),
)


def api_name(raw: str) -> str:
    return _VERSION.sub("", raw)


def rule_kind(name: str) -> str:
    return next((kind for rx, kind in RUNTIME_RULES if rx.search(name)), "runtime")


@dataclass(frozen=True)
class HostTable:
    table: str
    args: list[tuple[str, Any]]
    #: args.source_category of its events (None: none)
    category: str | None = None


TABLES: tuple[HostTable, ...] = (
    HostTable(RUNTIME, [("class", "eventClass"), ("return", "returnValue")]),
    HostTable(OSRT, [("return", "returnValue"), ("nesting", "nestingLevel")], "os_runtime"),
)


def exprs_of(export: Export, spec: HostTable) -> dict[str, str]:
    out = {"start": "start", "end": "end", "tid": "globalTid", "name": "nameId"}
    if spec.table == RUNTIME and export.has(spec.table, "correlationId"):
        out["corr"] = "correlationId"
    out.update(arg_fields(export, spec.table, spec.args)[0])
    return out


def required(spec: HostTable) -> list[str]:
    return ["start", "end", "globalTid", "nameId"]


class HostState:
    def __init__(self, export: Export, ctx: Context) -> None:
        self.export = export
        self.ctx = ctx
        self.values = export.strings()[1]
        self._names: dict[int, tuple[str, str]] = {}
        self.layouts = {spec.table: arg_fields(export, spec.table, spec.args)[1]
                        for spec in TABLES}

    def name(self, code: int) -> tuple[str, str]:
        """(name, kind by name) of a string index."""
        hit = self._names.get(code)
        if hit is None:
            name = api_name(self.values[code]) if code >= 0 else "(unnamed call)"
            hit = self._names[code] = (name, rule_kind(name))
        return hit


def to_batch(chunk: pa.Table, spec: HostTable, st: HostState) -> dict[str, Any] | None:
    ctx = st.ctx
    tid = col(chunk, "tid")
    rank = ctx.rank_of_tid(tid)
    keep = rank >= 0
    if not keep.all():
        ctx.skipped[spec.table] = ctx.skipped.get(spec.table, 0) + int((~keep).sum())
        chunk = chunk.filter(from_numpy(keep))
        rank, tid = rank[keep], tid[keep]
    if not chunk.num_rows:
        return None
    ts, end = col(chunk, "start"), col(chunk, "end")
    codes = st.export.string_codes(col(chunk, "name"))
    uniq, inverse = np.unique(codes, return_inverse=True)
    named = [st.name(int(c)) for c in uniq.tolist()]
    by_name = np.array([K[kind] for _, kind in named], np.int64)[inverse]
    corr = col(chunk, "corr")
    step = ctx.step_at(rank, ts)
    ext = ctx.ops.at(tid, ts)
    if spec.table == RUNTIME:
        kind = by_name
        has = corr >= 0
        ctx.add_host(correlation_keys(rank[has], corr[has]), step[has], ext[has])
    else:
        kind = np.full(len(ts), K["runtime"])
        corr = np.full(len(ts), -1, np.int64)
    lanes = Lanes.of(tid, ctx.thread_lane)
    n = len(ts)
    cols = batch(rank=rank, lanes=lanes, lane_kind=np.full(n, LK["host"]), kind=kind,
                 name=dict_of(inverse, [nm for nm, _ in named]), ts=ts, end=end,
                 step=step, args=_args(chunk, spec, st), corr=corr)
    cols["external_id"] = from_numpy(ext.astype(np.int64), ext < 0)
    return cols


def _args(chunk: pa.Table, spec: HostTable, st: HostState) -> pa.Array:
    args = args_json(chunk, st.layouts[spec.table])
    if spec.category is None:
        return args
    import pyarrow.compute as pc

    # '{"source_category":"os_runtime",' + the rest (or '}' when args is empty)
    head = f'{{"source_category":"{spec.category}"'
    rest = pc.utf8_slice_codeunits(args, 1)
    return pc.binary_join_element_wise(
        head, pc.if_else(pc.equal(rest, "}"), "", ","), rest, "")
