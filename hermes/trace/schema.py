"""Trace format v1: the one table of events every Hermes stage reads and writes.

The schema lives here as data, in one place. ``docs/trace-format.md`` documents it for people;
``tests/trace/test_schema_doc.py`` checks that the two agree.

Units are in the column names: ``ts_ns``/``dur_ns`` are integer nanoseconds on one clock per
rank; ``bytes`` are bytes; ``flops`` are floating-point operations.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION = 1
"""Current trace format version, stored as ``hermes.schema_version`` in the Parquet metadata."""

#: Event kinds (the ``kind`` column). Fixed vocabulary; a new kind is a minor schema change.
EVENT_KINDS: dict[str, str] = {
    "host_op": "a framework operator on a host thread (PyTorch cpu_op, GE operator)",
    "python": "a Python function frame (Kineto python_function)",
    "infer_shape": "host InferShape stage of an operator",
    "tiling": "host tiling stage of an operator (args.cache_hit tells a tiling-cache hit)",
    "alloc": "device memory allocation or free on the host (caching allocator, cudaMalloc)",
    "launch": "host call that enqueues a device task (cudaLaunchKernel, aclrtLaunchKernel, "
              "model execute); shares corr_id with the task",
    "runtime": "any other runtime/driver API call on the host",
    "kernel": "a device task (kernel / AI Core / AI CPU task) on a stream",
    "memcpy_h2d": "host-to-device copy",
    "memcpy_d2h": "device-to-host copy",
    "memcpy_d2d": "device-to-device copy (also peer-to-peer)",
    "memset": "device memset",
    "collective": "a collective or point-to-point communication task (coll_* columns set)",
    "sync": "a host wait on the device or on another stream (stream/device/event synchronize, "
            ".item(), blocking copy); on a device lane: a stream waiting on an event",
    "data_read": "reading samples from storage (data-loader worker)",
    "data_process": "per-sample CPU processing / decode (data-loader worker)",
    "data_fetch": "moving a ready batch towards the device (collate, pin, H2D issue)",
    "data_wait": "the training loop waiting for the next batch (DataLoader __next__)",
    "gc": "a Python garbage-collection pause",
    "compile": "operator compilation / JIT",
    "step": "one training iteration (ProfilerStep#N, hermes.step())",
    "marker": "a user range or instant (user_annotation, hermes.region, overlap-analysis spans)",
    "counter": "a counter sample (value column): queue depth, memory, frequency, CPU %",
    "other": "an event of a kind Hermes does not know; args.source_category keeps the original",
}

#: Lane kinds (the ``lane_kind`` column): what a lane is.
LANE_KINDS: dict[str, str] = {
    "host": "a host thread",
    "device": "a device stream (compute)",
    "copy": "a copy engine / DMA queue",
    "link": "a communication link or communication stream",
    "loader": "a data-loader worker",
    "counter": "a counter track",
}

#: Groups of event kinds and lane kinds, defined once here and used by every analysis.
#: Device work that computes or moves data on a device (not communication).
COMPUTE_KINDS: tuple[str, ...] = ("kernel", "memcpy_h2d", "memcpy_d2h", "memcpy_d2d", "memset")
#: Copies and memsets (memory operations on the device).
MEMORY_KINDS: tuple[str, ...] = ("memcpy_h2d", "memcpy_d2h", "memcpy_d2d", "memset")
#: Communication tasks.
COMM_KINDS: tuple[str, ...] = ("collective",)
#: Everything that runs on a device lane (HTA counts these as device time).
DEVICE_KINDS: tuple[str, ...] = (*COMPUTE_KINDS, *COMM_KINDS, "sync")
#: The data pipeline's stages.
IO_KINDS: tuple[str, ...] = ("data_read", "data_process", "data_fetch", "data_wait")
#: Kinds that mark time rather than spend it: never host work, never on a critical path.
#: ``other`` is Kineto's profiler span ("PyTorch Profiler (0)") and unknown categories.
NOT_WORK_KINDS: tuple[str, ...] = ("step", "marker", "counter", "other")
#: Lanes on a device (streams, copy engines, links) and lanes on the host.
DEVICE_LANES: tuple[str, ...] = ("device", "copy", "link")
HOST_LANES: tuple[str, ...] = ("host", "loader", "counter")

#: Compute units (the ``unit`` column).
UNITS: dict[str, str] = {
    "cube": "Ascend AI Core Cube (matrix) unit",
    "vector": "Ascend AI Core Vector unit",
    "mix": "Ascend AI Core task using both Cube and Vector (MIX_AIC/MIX_AIV)",
    "ai_cpu": "Ascend AI CPU",
    "sm": "GPU streaming multiprocessors",
    "copy": "copy engine / DMA / SDMA",
    "link": "communication link (HCCS, NVLink, PCIe, RDMA)",
    "host": "computed on the host (small-shape operators kept on the host)",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    nullable: bool
    unit: str
    meaning: str


_DICT = pa.dictionary(pa.int32(), pa.string())

COLUMNS: tuple[Column, ...] = (
    Column("rank", pa.int32(), False, "-", "global rank of the process that produced the event"),
    Column("lane", _DICT, False, "-",
           "where the event ran: host thread, device stream, copy engine, link or loader worker "
           "(e.g. 'thread 1234', 'stream 7', 'loader 2'); one timeline track per (rank, lane)"),
    Column("lane_kind", _DICT, False, "-", "what the lane is: " + ", ".join(LANE_KINDS)),
    Column("kind", _DICT, False, "-", "event kind, from the fixed vocabulary below"),
    Column("name", _DICT, False, "-", "operator, kernel, function or counter name"),
    Column("ts_ns", pa.int64(), False, "ns", "start time on the rank's clock"),
    Column("dur_ns", pa.int64(), False, "ns", "duration (>= 0; 0 for instants and counters)"),
    Column("step", pa.int32(), True, "-", "training step the event belongs to (null if none)"),
    Column("corr_id", pa.int64(), True, "-",
           "correlation id linking a host launch to the device task(s) it enqueued; unique "
           "per launch within a rank"),
    Column("external_id", pa.int64(), True, "-",
           "operator id linking a host operator to its runtime calls and device tasks "
           "(Kineto 'External id')"),
    Column("stream", pa.int32(), True, "-", "device stream id for device-side events"),
    Column("unit", _DICT, True, "-", "compute unit that ran a device task: " + ", ".join(UNITS)),
    Column("flops", pa.float64(), True, "FLOP", "floating-point operations of the event"),
    Column("bytes", pa.int64(), True, "B",
           "bytes moved: HBM traffic of a task, size of a copy, message size of a collective"),
    Column("value", pa.float64(), True, "varies", "counter sample value (unit in args.unit)"),
    Column("coll_group", _DICT, True, "-", "communication group of a collective"),
    Column("coll_seq", pa.int64(), True, "-",
           "sequence number of the collective within its group (same on every member rank)"),
    Column("coll_bytes", pa.int64(), True, "B", "message size of the collective per rank"),
    Column("args", pa.string(), True, "-",
           "JSON object with everything else (shapes, dtypes, ...)"),
)

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
REQUIRED: frozenset[str] = frozenset(c.name for c in COLUMNS if not c.nullable)


def arrow_schema(metadata: dict[str, str] | None = None) -> pa.Schema:
    fields = [pa.field(c.name, c.type, nullable=c.nullable) for c in COLUMNS]
    md = {k.encode(): v.encode() for k, v in (metadata or {}).items()}
    return pa.schema(fields, metadata=md or None)


#: Parquet key-value metadata keys (all values are strings; JSON where noted).
METADATA_KEYS: dict[str, str] = {
    "hermes.schema_version": "integer trace format version (this document: 1)",
    "hermes.source": "what produced the trace: emulator, profile, kineto, ascend, synthetic",
    "hermes.created_by": "'hermes-profiler X.Y.Z'",
    "hermes.device": "JSON device profile: name, peak FLOP/s per unit (peak_flops: {unit: "
                     "FLOP/s}), hbm_bw_Bps, link bandwidths; may be partial for imported traces",
    "hermes.clock_offsets_ns": "JSON {rank: offset}: add to ts_ns to put a rank on rank 0's clock",
    "hermes.collector": "JSON {mode: monitor|fine|auto|import, overhead_pct, detailed_steps}",
    "hermes.ranks": "JSON list of the ranks in the file",
    "hermes.import": "JSON import summary: source files, events per source category, "
                     "unknown categories kept as kind 'other'",
    "hermes.extra": "JSON object for anything else a producer wants to record",
}
