"""Host API tables -> host events on thread lanes.

``CUPTI_ACTIVITY_KIND_RUNTIME`` holds CUDA runtime and driver calls (``eventClass``): named
from ``StringIds`` without Nsight's version suffix (``cudaLaunchKernel_v7000`` ->
``cudaLaunchKernel``, the name Kineto gives), they are ``sync`` (``*Synchronize``, blocking
copies), ``alloc`` (malloc/free), ``launch`` when a device row carries their correlation id
(or their name says they enqueue work), else ``runtime``. ``OSRT_API`` (OS runtime calls:
``pthread_cond_wait``, ``poll``, ``read``...) become ``runtime`` events whose
``args.source_category`` is ``os_runtime``.

Before the device tables are read, :func:`correlations` reads the runtime calls' correlation
ids (three integer columns): the device rows' steps come from their launches, and a device
row whose launch is not in the export has its ``corr_id`` left empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from hermes.collectors.importers.nsys.context import Context, correlation_keys
from hermes.collectors.importers.nsys.events import LK, K, Lanes, batch, col, dict_of, texts
from hermes.collectors.importers.nsys.gpu import json_printf
from hermes.collectors.importers.nsys.sql import Export

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
    HostTable(RUNTIME, [("correlation", "correlationId"), ("class", "eventClass"),
                        ("return", "returnValue")]),
    HostTable(OSRT, [("return", "returnValue"), ("nesting", "nestingLevel")], "os_runtime"),
)


def correlations(export: Export, ctx: Context) -> None:
    """The runtime calls' (rank, correlation id) keys, sorted, with each call's step."""
    if not export.has(RUNTIME, "start", "globalTid", "correlationId"):
        return
    keys, steps = [], []
    for chunk in export.chunks(RUNTIME, {"start": "start", "tid": "globalTid",
                                         "corr": "correlationId"},
                               where="correlationId IS NOT NULL"):
        rank = ctx.rank_of_tid(col(chunk, "tid"))
        ok = rank >= 0
        rank = rank[ok]
        keys.append(correlation_keys(rank, col(chunk, "corr")[ok]))
        steps.append(ctx.step_at(rank, col(chunk, "start")[ok]))
    if keys:
        k, s = np.concatenate(keys), np.concatenate(steps)
        order = np.argsort(k, kind="stable")
        ctx.host_keys, ctx.host_steps = k[order], s[order].astype(np.int32)


def exprs_of(export: Export, spec: HostTable) -> dict[str, str]:
    out = {"start": "start", "end": "end", "tid": "globalTid", "name": "nameId"}
    if export.has(spec.table, "correlationId") and spec.table == RUNTIME:
        out["corr"] = "correlationId"
    expr = json_printf(export, spec.table, spec.args,
                       {"source_category": spec.category} if spec.category else None)
    out["args"] = expr
    return out


def required(spec: HostTable) -> list[str]:
    return ["start", "end", "globalTid", "nameId"]


class HostState:
    def __init__(self, export: Export, ctx: Context) -> None:
        self.export = export
        self.ctx = ctx
        self.values = export.strings()[1]
        self._names: dict[int, tuple[str, str]] = {}

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
        chunk = chunk.filter(pa.array(keep))
        rank, tid = rank[keep], tid[keep]
    if not chunk.num_rows:
        return None
    ts, end = col(chunk, "start"), col(chunk, "end")
    codes = st.export.string_codes(col(chunk, "name"))
    uniq, inverse = np.unique(codes, return_inverse=True)
    named = [st.name(int(c)) for c in uniq.tolist()]
    by_name = np.array([K[kind] for _, kind in named], np.int64)[inverse]
    corr = col(chunk, "corr")
    if spec.table == RUNTIME:
        reaches = ctx.reaches_device(correlation_keys(rank, corr)) & (corr >= 0)
        kind = np.where((by_name != K["sync"]) & (by_name != K["alloc"]) & reaches,
                        K["launch"], by_name)
        kind = np.where((kind == K["launch"]) & ~reaches & (corr < 0), K["runtime"], kind)
    else:
        kind = np.full(len(ts), K["runtime"])
        corr = np.full(len(ts), -1, np.int64)
    lanes = Lanes.of(tid, ctx.thread_lane)
    n = len(ts)
    return batch(rank=rank, lanes=lanes, lane_kind=np.full(n, LK["host"]), kind=kind,
                 name=dict_of(inverse, [nm for nm, _ in named]), ts=ts, end=end,
                 step=ctx.step_at(rank, ts), args=texts(chunk, "args"), corr=corr)
