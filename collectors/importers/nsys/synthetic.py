"""Synthetic Nsight Systems exports in the real schema (the columns of Nsight 2026.2's export,
schema 3.25), for tests and ``benchmarks/nsys_import.py``: any number of processes (one GPU
each), kernels, steps and NCCL kernels, with every row computable by hand.

Layout, per process ``p`` (globalPid ``(p + 1) << 24``, one thread, tid ``p + 1``; GPU ``p``,
stream 7): kernel ``i`` starts at ``T0 + i * PERIOD`` and lasts ``KERNEL_NS``; its
``cudaLaunchKernel`` (correlation id ``i + 1``) starts ``LAUNCH_LEAD`` ns earlier and lasts
``LAUNCH_NS``. Every ``nccl_every``-th kernel is ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``,
the others cycle through ``GEMM`` and ``ELEMENTWISE``. Step ``s`` is an NVTX range
``ProfilerStep#s`` over kernels ``[s * k, (s + 1) * k)`` (k = kernels / steps), from the
first one's launch to the last one's end; each kernel's launch sits inside an ``emit_nvtx``
range ``aten::mm, seq = i, op_id = i``. Every ``memcpy_every``-th kernel is followed by a
4096-byte HtoD copy on the same stream. The rows are made by SQLite itself (a recursive
CTE), so a million-kernel export takes seconds.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

T0 = 1_000_000_000
PERIOD = 4_000
KERNEL_NS = 3_000
LAUNCH_LEAD = 2_000
LAUNCH_NS = 1_000
MEMCPY_BYTES = 4096
KERNEL_NAMES = ("GEMM", "ELEMENTWISE")
NCCL_NAME = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GPU_NAME = "NVIDIA H100 80GB HBM3"

SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT,
  busLocation TEXT, isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER,
  memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, pwGpuId INTEGER, uuid TEXT,
  luid INTEGER, chipName TEXT, cuDevice INTEGER, ctxId INTEGER, computeMajor INTEGER,
  computeMinor INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
  launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
  gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
  blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
  staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
  localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
  gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
  sharedMemoryLimitConfig INTEGER, qmdBulkReleaseDone INTEGER, qmdPreexitDone INTEGER,
  qmdLastCtaDone INTEGER, graphId INTEGER, clusterX INTEGER, clusterY INTEGER,
  clusterZ INTEGER, clusterSchedulingPolicy INTEGER, maxPotentialClusterSize INTEGER,
  maxActiveClusters INTEGER, sharedMemoryRequestedPercentage INTEGER,
  tensorSizeMinusOneElements TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
  eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
  nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER,
  srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER,
  dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER,
  virtualAddress INTEGER, copyCount INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
  rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
  endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER,
  int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,
  floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
"""

# StringIds: 1 cudaLaunchKernel, 2 cudaMemcpyAsync, 3 thread name, 10.. kernel names
_STRINGS = {1: "cudaLaunchKernel_v7000", 2: "cudaMemcpyAsync_v3020", 3: "python3",
            10: KERNEL_NAMES[0], 11: KERNEL_NAMES[1], 12: NCCL_NAME}


def write(path: Path, kernels: int, processes: int = 1, steps: int = 4, nccl_every: int = 10,
          memcpy_every: int = 100, gpu_table: bool = True) -> Path:
    """Write a synthetic export of ``kernels`` kernels per process at ``path``."""
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.executescript(SCHEMA)
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", _STRINGS.items())
        con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", [
            ("EXPORT_PRODUCT_VERSION", "2026.2.1.210"), ("EXPORT_SCHEMA_VERSION", "3.25.0")])
        per_step = max(1, kernels // max(1, steps))
        for p in range(processes):
            gpid, gtid = (p + 1) << 24, ((p + 1) << 24) | (p + 1)
            con.execute("INSERT INTO PROCESSES VALUES (?, ?, 'python3')", (gpid, p + 1))
            con.execute("INSERT INTO ThreadNames VALUES (3, 0, ?)", (gtid,))
            if gpu_table:
                con.execute("INSERT INTO TARGET_INFO_GPU (vmId, id, name, smCount, "
                            "totalMemory, clockRate, computeMajor, computeMinor, cuDevice) "
                            "VALUES (0, ?, ?, 132, 85520809984, 1980000000, 9, 0, ?)",
                            (p, GPU_NAME, p))
            _rows(con, p, gpid, gtid, kernels, per_step, steps, nccl_every, memcpy_every)
        con.commit()
    finally:
        con.close()
    return path


def _rows(con: sqlite3.Connection, p: int, gpid: int, gtid: int, n: int, per_step: int,
          steps: int, nccl_every: int, memcpy_every: int) -> None:
    seq = (f"WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < {n - 1})")
    name = (f"CASE WHEN {nccl_every} > 0 AND i % {nccl_every} = {nccl_every} - 1 THEN 12 "
            "ELSE 10 + i % 2 END")
    con.execute(
        f"{seq} INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, "
        "streamId, correlationId, globalPid, demangledName, shortName, registersPerThread, "
        "gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, "
        "dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId, "
        "tensorSizeMinusOneElements) "
        f"SELECT {T0} + i * {PERIOD}, {T0} + i * {PERIOD} + {KERNEL_NS}, {p}, 1, 7, i + 1, "
        f"{gpid}, {name}, {name}, 32, 128, 1, 1, 256, 1, 1, 0, 1024, 0, 0, i, '' FROM c")
    con.execute(
        f"{seq} INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
        "correlationId, nameId, returnValue) "
        f"SELECT {T0} + i * {PERIOD} - {LAUNCH_LEAD}, "
        f"{T0} + i * {PERIOD} - {LAUNCH_LEAD} + {LAUNCH_NS}, 0, {gtid}, i + 1, 1, 0 FROM c")
    if memcpy_every > 0:
        con.execute(
            f"{seq} INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, "
            "streamId, correlationId, globalPid, bytes, copyKind, srcKind, dstKind) "
            f"SELECT {T0} + i * {PERIOD} + {KERNEL_NS}, {T0} + i * {PERIOD} + {KERNEL_NS} "
            f"+ 500, {p}, 1, 7, NULL, {gpid}, {MEMCPY_BYTES}, 1, 1, 2 FROM c "
            f"WHERE i % {memcpy_every} = 0")
    con.execute(
        f"{seq} INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
        f"SELECT {T0} + i * {PERIOD} - {LAUNCH_LEAD} - 100, "
        f"{T0} + i * {PERIOD} - {LAUNCH_LEAD} + {LAUNCH_NS} + 100, 59, "
        f"'aten::mm, seq = ' || i || ', op_id = ' || i, {gtid}, 0 FROM c")
    for s in range(steps):
        first, last = s * per_step, min(n, (s + 1) * per_step) - 1
        if first > last:
            break
        con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, "
                    "domainId) VALUES (?, ?, 59, ?, ?, 0)",
                    (T0 + first * PERIOD - LAUNCH_LEAD - 200, T0 + last * PERIOD + KERNEL_NS,
                     f"ProfilerStep#{s}", gtid))
