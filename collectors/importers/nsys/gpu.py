"""The device activity tables -> device events on stream lanes.

=====================================  =================================================
table                                  events
=====================================  =================================================
``CUPTI_ACTIVITY_KIND_KERNEL``         ``kernel`` (unit ``sm``); a communication kernel
                                       (``hermes.trace.comm_patterns``: NCCL's
                                       ``ncclDevKernel_*``) ``collective`` (unit ``link``)
                                       with ``coll_group`` its library and ``coll_seq`` its
                                       order on the rank
``CUPTI_ACTIVITY_KIND_MEMCPY``         ``memcpy_h2d``/``d2h``/``d2d`` by ``copyKind``
                                       (``bytes``), named as Kineto does:
                                       ``Memcpy HtoD (Pinned -> Device)``
``CUPTI_ACTIVITY_KIND_MEMSET``         ``memset`` (``bytes``)
``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` ``sync`` (a stream or the host waiting)
``CUPTI_ACTIVITY_KIND_GRAPH_TRACE``    ``kernel`` named ``CUDA graph N`` (a graph launch
                                       traced whole: ``--cuda-graph-trace=graph``)
``CUPTI_ACTIVITY_KIND_CUDA_EVENT``     ``marker`` instants (``cudaEventRecord``)
=====================================  =================================================

Names are ``StringIds`` entries (a kernel's ``demangledName``, else ``shortName``); the
kernel's grid, block, registers and shared memory and the device go to ``args`` (built once
per distinct configuration). A row's step is its runtime call's step (found by correlation
id), else the step window holding its start. A correlation id whose runtime call is not in
the export is left empty (``args.correlation`` keeps it), as the Kineto importer does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from hermes.collectors.importers.nsys.context import Context, correlation_keys
from hermes.collectors.importers.nsys.events import (
    LK,
    NULL,
    K,
    Lanes,
    U,
    arg_fields,
    args_json,
    batch,
    col,
    dict_of,
)
from hermes.collectors.importers.nsys.sql import Export
from hermes.trace.arrowbuf import from_numpy
from hermes.trace.comm_patterns import CommPatterns

#: copyKind (ENUM_CUDA_MEMCPY_OPER) -> (kind, Kineto's short name); unknown kinds: 'other'
COPY_KINDS: dict[int, tuple[str, str]] = {
    1: ("memcpy_h2d", "HtoD"), 2: ("memcpy_d2h", "DtoH"), 3: ("memcpy_h2d", "HtoA"),
    4: ("memcpy_d2h", "AtoH"), 5: ("memcpy_d2d", "AtoA"), 6: ("memcpy_d2d", "AtoD"),
    7: ("memcpy_d2d", "DtoA"), 8: ("memcpy_d2d", "DtoD"), 9: ("other", "HtoH"),
    10: ("memcpy_d2d", "PtoP"), 11: ("memcpy_h2d", "HtoD (unified)"),
    12: ("memcpy_d2h", "DtoH (unified)"), 13: ("memcpy_d2d", "DtoD (unified)"),
}
#: ENUM_CUDA_MEM_KIND labels, for exports without the enum table
MEM_KINDS: dict[int, str] = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array",
                             4: "Managed", 5: "Device Static", 6: "Managed Static",
                             7: "Unknown"}
#: syncType (ENUM_CUPTI_SYNC_TYPE) -> name, as Kineto names its cuda_sync events
SYNC_TYPES: dict[int, str] = {0: "Unknown Sync", 1: "Event Sync", 2: "Stream Wait Event",
                              3: "Stream Sync", 4: "Context Sync"}

_COMMON = {"start": "start", "end": "end", "dev": "deviceId", "stream": "streamId",
           "corr": "correlationId", "pid": "globalPid"}


@dataclass(frozen=True)
class DeviceTable:
    """How one device activity table is read: its columns beyond the common ones, its args,
    and how a chunk becomes events (``to_events(chunk, state)`` -> kind, name, extra)."""

    table: str
    exprs: Callable[[Export], dict[str, str]]
    args: list[tuple[str, Any]]
    to_events: Callable[[pa.Table, DeviceState], tuple[np.ndarray, pa.Array, dict[str, Any]]]
    instant: bool = False  # one timestamp column ('timestamp') instead of start/end


class DeviceState:
    """What the device tables share while an export is read."""

    def __init__(self, export: Export, ctx: Context, patterns: CommPatterns) -> None:
        self.export = export
        self.layouts = {spec.table: arg_fields(export, spec.table, spec.args)[1]
                        for spec in TABLES}
        self.ctx = ctx
        self.patterns = patterns
        ids, values = export.strings()
        self.values = values
        self._comm: dict[int, str | None] = {}
        #: rowid of each collective kernel -> its order on its rank (filled from ``collective_order``)
        self.coll_rowid = np.zeros(0, np.int64)
        self.coll_order = np.zeros(0, np.int64)
        self.groups: list[str] = []
        self._enums: dict[str, dict[int, str]] = {}

    def library(self, code: int) -> str | None:
        """The communication library of a string (by its index), None for computation."""
        hit = self._comm.get(code, False)
        if hit is False:
            name = self.values[code] if code >= 0 else ""
            hit = self._comm[code] = (self.patterns.library(name)
                                      if self.patterns.is_comm(name) else None)
        return hit  # type: ignore[return-value]

    def enum(self, table: str, fallback: dict[int, str]) -> dict[int, str]:
        """An ENUM_* table's labels (the built-in ones where the export has none)."""
        if table not in self._enums:
            rows = self.export.rows(f'SELECT id, label FROM "{table}"') \
                if self.export.has(table, "id", "label") else []
            self._enums[table] = {int(i): str(lab) for i, lab in rows} or dict(fallback)
        return self._enums[table]


def _kernel_name_column(export: Export, table: str) -> str:
    for c in ("demangledName", "shortName", "mangledName", "name"):
        if export.has(table, c):
            return c
    return "NULL"


def collective_order(export: Export, patterns: CommPatterns, table: str
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The order of the collective kernels on each rank (by start), which is their sequence
    number in their library's group: read once, before the chunks, as (rowids sorted, each
    one's order); empty where the export names no communication kernel."""
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    name = _kernel_name_column(export, table)
    if name == "NULL" or not export.has(table, "start", "globalPid"):
        return none
    ids, values = export.strings()
    comm_ids = [int(i) for i, v in zip(ids.tolist(), values, strict=True)
                if patterns.is_comm(v)]
    if not comm_ids:
        return none
    rows = []
    for lo in range(0, len(comm_ids), 500):
        marks = ",".join(str(i) for i in comm_ids[lo:lo + 500])
        rows += export.rows(f'SELECT rowid, globalPid, start FROM "{table}" '
                            f"WHERE {name} IN ({marks})")
    arr = np.array(rows, np.int64).reshape(-1, 3)
    order = np.lexsort((arr[:, 2], arr[:, 1]))
    arr = arr[order]
    first = np.r_[0, np.flatnonzero(np.diff(arr[:, 1])) + 1]
    seq = np.arange(len(arr)) - np.repeat(first, np.diff(np.r_[first, len(arr)]))
    by_rowid = np.argsort(arr[:, 0])
    return arr[by_rowid, 0], seq[by_rowid]


#: a kernel's launch configuration packed into three integers by SQLite (fewer values to
#: read: the read costs per value), within CUDA's limits: grid x < 2^31, y and z < 2^16;
#: block x, y <= 1024, z <= 64; registers <= 255, shared memory < 16 MiB
PACKED = {
    "grid": (("gridX", "gridY", "gridZ"), (32, 16, 0)),
    "block": (("blockX", "blockY", "blockZ"), (32, 16, 0)),
    "res": (("registersPerThread", "staticSharedMemory", "dynamicSharedMemory"), (48, 24, 0)),
}
_RES_KEYS = ("registers per thread", "static shared memory", "dynamic shared memory")


def _packed(export: Export) -> dict[str, str]:
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    return {k: " | ".join(f"({c} << {sh})" for c, sh in zip(cols, shifts, strict=True))
            for k, (cols, shifts) in PACKED.items() if export.has(t, *cols)}


def _unpack(values: np.ndarray, shifts: tuple[int, ...]) -> list[np.ndarray]:
    out = []
    top = 64
    for sh in shifts:
        part = (values >> sh) & ((1 << (top - sh)) - 1 if top - sh < 63 else -1)
        out.append(np.where(values == NULL, NULL, part))
        top = sh
    return out


def _kernel_exprs(export: Export) -> dict[str, str]:
    return {"name": _kernel_name_column(export, "CUPTI_ACTIVITY_KIND_KERNEL"),
            **_packed(export)}


def _kernel_args(chunk: pa.Table) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, (_, shifts) in PACKED.items():
        if key in chunk.column_names:
            parts = _unpack(col(chunk, key, NULL), shifts)
            out += [(key, parts)] if key != "res" else list(zip(_RES_KEYS, parts, strict=True))
    return out


def _kernel_events(chunk: pa.Table, st: DeviceState) -> tuple[np.ndarray, pa.Array,
                                                              dict[str, Any]]:
    codes = st.export.string_codes(col(chunk, "name"))
    uniq, inverse = np.unique(codes, return_inverse=True)
    libs = [st.library(int(c)) for c in uniq.tolist()]
    lib_of = np.array([lib is not None for lib in libs], bool)[inverse]
    kind = np.where(lib_of, K["collective"], K["kernel"])
    unit = np.where(lib_of, U["link"], U["sm"])
    for lib in libs:
        if lib is not None and lib not in st.groups:
            st.groups.append(lib)
    group = np.array([st.groups.index(lib) if lib else -1 for lib in libs],
                     np.int64)[inverse]
    seq = np.full(len(codes), -1, np.int64)
    if lib_of.any() and len(st.coll_rowid) and "rowid" in chunk.column_names:
        rowid = col(chunk, "rowid")[lib_of]
        pos = np.minimum(np.searchsorted(st.coll_rowid, rowid), len(st.coll_rowid) - 1)
        seq[lib_of] = np.where(st.coll_rowid[pos] == rowid, st.coll_order[pos], -1)
    names = [st.values[c] if c >= 0 else "(unnamed kernel)" for c in uniq.tolist()]
    name = dict_of(inverse, names) if len(uniq) else dict_of(codes, [])
    return kind, name, {"unit": unit, "coll_group": (group, list(st.groups)),
                        "coll_seq": seq, "args": _kernel_args(chunk)}


def _memcpy_exprs(export: Export) -> dict[str, str]:
    t = "CUPTI_ACTIVITY_KIND_MEMCPY"
    out = {"bytes": "bytes", "copy": "copyKind"}
    out.update({k: c for k, c in (("src", "srcKind"), ("dst", "dstKind")) if export.has(t, c)})
    return out


def _memcpy_events(chunk: pa.Table, st: DeviceState) -> tuple[np.ndarray, pa.Array,
                                                              dict[str, Any]]:
    mem = st.enum("ENUM_CUDA_MEM_KIND", MEM_KINDS)
    key = col(chunk, "copy") * 4096 + (col(chunk, "src") + 1) * 64 + col(chunk, "dst") + 1
    uniq, inverse = np.unique(key, return_inverse=True)
    kinds, names = [], []
    for k in uniq.tolist():
        copy, src, dst = k // 4096, (k % 4096) // 64 - 1, k % 64 - 1
        kind, short = COPY_KINDS.get(copy, ("other", f"kind {copy}"))
        where = f" ({mem.get(src, src)} -> {mem.get(dst, dst)})" if src >= 0 and dst >= 0 \
            else ""
        kinds.append(K[kind])
        names.append(f"Memcpy {short}{where}")
    kind = np.array(kinds, np.int64)[inverse]
    return kind, dict_of(inverse, names), {"unit": np.full(len(key), U["copy"]),
                                           "nbytes": col(chunk, "bytes")}


def _memset_events(chunk: pa.Table, st: DeviceState) -> tuple[np.ndarray, pa.Array,
                                                              dict[str, Any]]:
    mem = st.enum("ENUM_CUDA_MEM_KIND", MEM_KINDS)
    kinds = col(chunk, "mem")
    uniq, inverse = np.unique(kinds, return_inverse=True)
    names = [f"Memset ({mem.get(k, 'Device')})" if k >= 0 else "Memset (Device)"
             for k in uniq.tolist()]
    n = len(kinds)
    return np.full(n, K["memset"]), dict_of(inverse, names), {
        "unit": np.full(n, U["copy"]), "nbytes": col(chunk, "bytes")}


def _sync_events(chunk: pa.Table, st: DeviceState) -> tuple[np.ndarray, pa.Array,
                                                            dict[str, Any]]:
    types = col(chunk, "sync")
    uniq, inverse = np.unique(types, return_inverse=True)
    names = [SYNC_TYPES.get(t, f"Sync {t}") for t in uniq.tolist()]
    return np.full(len(types), K["sync"]), dict_of(inverse, names), {}


def _graph_events(chunk: pa.Table, st: DeviceState) -> tuple[np.ndarray, pa.Array,
                                                             dict[str, Any]]:
    graph = col(chunk, "graph")
    uniq, inverse = np.unique(graph, return_inverse=True)
    names = [f"CUDA graph {g}" if g >= 0 else "CUDA graph" for g in uniq.tolist()]
    n = chunk.num_rows
    return np.full(n, K["kernel"]), dict_of(inverse, names), {"unit": np.full(n, U["sm"])}


def _event_events(chunk: pa.Table, st: DeviceState) -> tuple[np.ndarray, pa.Array,
                                                             dict[str, Any]]:
    n = chunk.num_rows
    return np.full(n, K["marker"]), dict_of(np.zeros(n, np.int64), ["cudaEventRecord"]), {}


_DEV_ARGS = [("device", "deviceId")]

TABLES: tuple[DeviceTable, ...] = (
    DeviceTable("CUPTI_ACTIVITY_KIND_KERNEL", _kernel_exprs, _DEV_ARGS, _kernel_events),
    DeviceTable("CUPTI_ACTIVITY_KIND_MEMCPY", _memcpy_exprs, [
        ("bytes", "bytes"), ("copy kind", "copyKind"), ("src kind", "srcKind"),
        ("dst kind", "dstKind"), ("src device", "srcDeviceId"), ("dst device", "dstDeviceId"),
        *_DEV_ARGS], _memcpy_events),
    DeviceTable("CUPTI_ACTIVITY_KIND_MEMSET", lambda e: {
        "bytes": "bytes", **({"mem": "memKind"} if e.has("CUPTI_ACTIVITY_KIND_MEMSET",
                                                         "memKind") else {})},
        [("bytes", "bytes"), ("value", "value"), ("mem kind", "memKind"), *_DEV_ARGS],
        _memset_events),
    DeviceTable("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", lambda e: {"sync": "syncType"},
                [("sync type", "syncType"), ("event", "eventId"),
                 ("event sync", "eventSyncId"), *_DEV_ARGS], _sync_events),
    # a whole graph launch, when captured with --cuda-graph-trace=graph (one row a launch)
    DeviceTable("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", lambda e: {
        "graph": "graphId" if e.has("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "graphId") else "NULL"},
        [("graph", "graphId"), *_DEV_ARGS], _graph_events),
    DeviceTable("CUPTI_ACTIVITY_KIND_CUDA_EVENT", lambda e: {},
                [("event", "eventId"), ("event sync", "eventSyncId"), *_DEV_ARGS],
                _event_events, instant=True),
)


def required(spec: DeviceTable) -> list[str]:
    base = ["timestamp"] if spec.instant else ["start", "end"]
    return [*base, "streamId"]


def exprs_of(export: Export, spec: DeviceTable, collectives: bool = False) -> dict[str, str]:
    common = dict(_COMMON)
    if spec.instant:
        common["start"] = common["end"] = "timestamp"
    out = {k: v for k, v in common.items() if export.has(spec.table, v)}
    out.update(spec.exprs(export))
    if collectives:  # their sequence numbers are found by rowid
        out["rowid"] = "rowid"
    out.update(arg_fields(export, spec.table, spec.args)[0])
    return out


def to_batch(chunk: pa.Table, spec: DeviceTable, st: DeviceState) -> dict[str, Any] | None:
    """One chunk of ``spec.table`` as a batch of events (rows of processes that are not
    ranks dropped and counted)."""
    ctx = st.ctx
    pid = col(chunk, "pid")
    if "pid" not in chunk.column_names and len(ctx.pids) == 1:  # an export naming no pid
        pid = np.full(chunk.num_rows, ctx.pids[0])
    rank = ctx.rank_of_pid(pid)
    keep = rank >= 0
    if not keep.all():
        ctx.skipped[spec.table] = ctx.skipped.get(spec.table, 0) + int((~keep).sum())
        chunk = chunk.filter(from_numpy(keep))
        rank = rank[keep]
    if not chunk.num_rows:
        return None
    ts, end = col(chunk, "start"), col(chunk, "end")
    dev, stream, corr = col(chunk, "dev", 0), col(chunk, "stream"), col(chunk, "corr")
    keys = correlation_keys(rank, corr)
    found, step, ext = st.ctx.launch_step(keys)
    found &= corr >= 0
    by_time = st.ctx.step_at(rank, ts)
    step = np.where(step >= 0, step, by_time)
    kind, name, extra = spec.to_events(chunk, st)
    more_args = extra.pop("args", [])
    lane_key = (rank.astype(np.int64) << 44) | (dev << 32) | (stream & 0xFFFFFFFF)
    lanes = Lanes.of(lane_key, lambda k: ctx.stream_lane(k >> 44, (k >> 32) & 0xFFF,
                                                         k & 0xFFFFFFFF))
    n = chunk.num_rows
    # the correlation id of a row whose launch is not in the export stays in args
    dangling = np.where(~found & (corr >= 0), corr, NULL)
    args = args_json(chunk, st.layouts[spec.table], [*more_args, ("correlation", dangling)])
    cols = batch(rank=rank, lanes=lanes, lane_kind=np.full(n, LK["device"]), kind=kind,
                 name=name, ts=ts, end=end, step=step, args=args,
                 corr=np.where(found, corr, -1), stream=stream, **extra)
    cols["external_id"] = from_numpy(ext.astype(np.int64), ext < 0)
    return cols
