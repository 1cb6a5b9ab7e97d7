"""Injectable causes: every cause id of the vocabulary, each turning the knobs that produce
the effect its analyzer looks for. ``CAUSES[id].apply(settings, strength, ranks)``.

Strength 1.0 is a clear, realistic case; larger is worse. Causes that need several ranks
(communication, slow node) declare ``min_ranks``; RDMA needs ranks beyond one node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hermes.analyzers.base import CAUSE_IDS
from hermes.errors import UsageError
from hermes.npu.settings import Settings

Apply = Callable[[Settings, float, int], Settings]


@dataclass(frozen=True)
class Cause:
    id: str
    effect: str
    apply: Apply
    min_ranks: int = 1
    needs_inter_node: bool = False


CAUSES: dict[str, Cause] = {}


def _c(cid: str, effect: str, min_ranks: int = 1, inter: bool = False) -> Callable[[Apply], Apply]:
    def deco(fn: Apply) -> Apply:
        CAUSES[cid] = Cause(cid, effect, fn, min_ranks, inter)
        return fn
    return deco


@_c("parallel.poor_parallelism", "gradient allreduce issued after backward: communication "
    "not overlapped with computation", min_ranks=2)
def _poor_parallel(s: Settings, k: float, n: int) -> Settings:
    return s.with_(overlap_comm=False)


@_c("io.slow_data_reading", "compressed archives on remote storage at low bandwidth: every "
    "queue empty, the loop waits on reads")
def _slow_read(s: Settings, k: float, n: int) -> Settings:
    return s.with_(remote_storage=True, compressed=k >= 1.0,
                   process_scale=s.process_scale / (1 + 4 * k))


@_c("io.slow_data_processing", "one loader worker, per-sample CPU processing too slow: data "
    "queue non-empty, host queue empty")
def _slow_proc(s: Settings, k: float, n: int) -> Settings:
    return s.with_(num_workers=1, process_scale=s.process_scale * k)


@_c("io.slow_data_fetching", "pageable host memory, no prefetch and a big batch: host queue "
    "non-empty, device queue empty")
def _slow_fetch(s: Settings, k: float, n: int) -> Settings:
    return s.with_(pin_memory=False, prefetch=0, process_scale=s.process_scale * 0.1)


@_c("cpu.operator_compilation", "dynamic shapes: operators recompiled for new shapes each step")
def _compile(s: Settings, k: float, n: int) -> Settings:
    return s.with_(dynamic_shapes=True, shape_variants=10_000, jit=True,
                   compile_s=s.compile_s * k)


@_c("cpu.operator_dispatch", "no tiling cache and a slow host stack: per-operator host work "
    "exceeds device time")
def _dispatch(s: Settings, k: float, n: int) -> Settings:
    return s.with_(tiling_cache=False, host_slowdown=s.host_slowdown * (1 + k))


@_c("cpu.host_device_sync", ".item()-style synchronous calls inside the step")
def _sync(s: Settings, k: float, n: int) -> Settings:
    return s.with_(extra_syncs=int(round(20 * k)))


@_c("cpu.garbage_collection", "a large tracked heap: full GC pauses of ~100 ms")
def _gc(s: Settings, k: float, n: int) -> Settings:
    return s.with_(gc_heap_objects=int(2_000_000 * k), gc_full_every=5, gc_threshold=700)


@_c("cpu.resource_contention", "a competing process using 4000 % CPU inflates host costs")
def _contention(s: Settings, k: float, n: int) -> Settings:
    return s.with_(host_slowdown=s.host_slowdown * (1 + 3 * k), other_cpu_pct=4000.0 * k)


@_c("cpu.environment_configuration", "debug log level (a log line per host call) and loader "
    "workers bound to 2 cores with taskset")
def _env(s: Settings, k: float, n: int) -> Settings:
    return s.with_(log_level="debug", taskset_cores=2)


@_c("computation.compute_bound", "larger matmuls: Cube time dominates")
def _compute(s: Settings, k: float, n: int) -> Settings:
    return s.with_(compute_scale=s.compute_scale * (1 + 2 * k))


@_c("computation.memory_bound", "unfused elementwise traffic: Vector ops bandwidth-bound")
def _memory(s: Settings, k: float, n: int) -> Settings:
    return s.with_(memory_scale=s.memory_scale * (1 + 3 * k))


@_c("computation.underutilization", "cube inner axes not multiples of 256, TransData private "
    "formats and AI CPU fallbacks")
def _underuse(s: Settings, k: float, n: int) -> Settings:
    return s.with_(aligned=False, private_format=True, aicpu_fallback=True)


@_c("computation.slow_node", "one rank's AI Core clock drops to 60 %", min_ranks=2)
def _slow_node(s: Settings, k: float, n: int) -> Settings:
    return s.with_(slow_rank=n - 1, slow_factor=1 / (1 + 0.67 * k))


@_c("communication.synchronization_wait", "one rank arrives late at every collective",
    min_ranks=2)
def _late(s: Settings, k: float, n: int) -> Settings:
    return s.with_(late_rank=n // 2, late_s=0.02 * k)


@_c("communication.bandwidth_contention", "concurrent collectives and compute contend for "
    "links and HBM", min_ranks=2)
def _bw(s: Settings, k: float, n: int) -> Settings:
    return s.with_(contention=min(0.9, 0.6 * k))


@_c("communication.rdma_retransmission", "rare multi-second RDMA transmissions",
    min_ranks=9, inter=True)
def _rdma(s: Settings, k: float, n: int) -> Settings:
    return s.with_(rdma_retrans_prob=min(1.0, 0.05 * k))


@_c("communication.small_packet", "tiny gradient buckets: many small collectives", min_ranks=2)
def _small(s: Settings, k: float, n: int) -> Settings:
    return s.with_(grad_bucket_mb=0.25 / k)


@_c("communication.byte_alignment", "message sizes not multiples of 512 B", min_ranks=2)
def _align(s: Settings, k: float, n: int) -> Settings:
    return s.with_(misaligned=True, align_sizes=False)


@_c("communication.network_configuration", "mis-set HCCL environment: bandwidth everywhere "
    "at a third", min_ranks=2)
def _net(s: Settings, k: float, n: int) -> Settings:
    return s.with_(net_bw_factor=1 / (1 + 2 * k))


assert set(CAUSES) == set(CAUSE_IDS), set(CAUSE_IDS) ^ set(CAUSES)


def parse(spec: str) -> tuple[str, float]:
    """``CAUSE_ID[=STRENGTH]`` -> (id, strength); unknown ids list the valid ones."""
    cid, _, raw = spec.partition("=")
    cid = cid.strip()
    if cid not in CAUSES:
        raise UsageError(f"unknown cause {cid!r} for --inject", hint=f"valid: {', '.join(CAUSES)}")
    try:
        strength = float(raw) if raw else 1.0
    except ValueError:
        raise UsageError(f"bad strength {raw!r} for --inject {cid}",
                         hint=f"give a positive number, e.g. --inject {cid}=2") from None
    if not strength > 0:
        raise UsageError(f"strength must be > 0 for --inject {cid}, got {raw!r}")
    return cid, strength


def apply(settings: Settings, causes: list[tuple[str, float]], ranks: int,
          devices_per_node: int) -> Settings:
    for cid, k in causes:
        c = CAUSES[cid]
        need = max(c.min_ranks, devices_per_node + 1 if c.needs_inter_node else 1)
        if ranks < need:
            raise UsageError(f"--inject {cid} needs at least {need} ranks, got --ranks {ranks}",
                             hint=f"add --ranks {need}")
        settings = c.apply(settings, k, ranks)
    return settings
