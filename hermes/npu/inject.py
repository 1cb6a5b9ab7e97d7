"""Injectable causes: every cause id of the vocabulary, each turning the knobs that produce
the effect its analyzer looks for. ``CAUSES.get(id).apply(settings, strength, ranks, ref)``.

Strength 1.0 makes the cause the run's bottleneck, whatever the workload: given the healthy
run's step (``ref``, a :class:`~hermes.npu.reference.StepRef` that ``emulate.plan`` measures
once and passes in), a knob is set so the cause costs about ``target_s`` = 2 x strength
healthy steps (the mechanism stays the one ``effect`` describes, only its size is scaled);
without a reference the knobs take fixed values. Larger strength is worse. Causes that need
several ranks (communication, slow node) declare ``min_ranks``; RDMA needs ranks beyond one node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from hermes.errors import UsageError
from hermes.findings import CAUSE_IDS
from hermes.npu.comm import MISALIGNED_BW
from hermes.npu.data import DECODE_S_PER_SAMPLE
from hermes.npu.host import GC_NS_PER_OBJECT, LOG_CALLS_PER_OP
from hermes.npu.reference import StepRef
from hermes.npu.scale import StepScale, measure
from hermes.npu.settings import LOG_COST_S, Settings
from hermes.registry import Registry

#: (settings, strength, ranks, the healthy step or None) -> settings with the cause injected
Apply = Callable[[Settings, float, int, StepRef | None], Settings]


@dataclass(frozen=True)
class Cause:
    id: str
    effect: str
    apply: Apply
    min_ranks: int = 1
    needs_inter_node: bool = False


CAUSES: Registry[Cause] = Registry("cause")


def _c(cid: str, effect: str, min_ranks: int = 1, inter: bool = False) -> Callable[[Apply], Apply]:
    def deco(fn: Apply) -> Apply:
        CAUSES.add(cid, Cause(cid, effect, fn, min_ranks, inter))
        return fn
    return deco


def target_s(r: StepRef | None, k: float) -> float:
    """Seconds per step an injected cause at strength ``k`` should cost: ``2 k`` healthy steps
    of the workload (``r``, see ``reference.py``), so the cause binds the run; 0 without a
    reference (the knobs then keep their absolute strength-1 values)."""
    return 2.0 * k * r.step_s if r is not None else 0.0


@_c("parallel.poor_parallelism", "data parallelism whose gradient allreduce is issued after "
    "backward, on every accumulation micro-step (no no_sync): communication not overlapped "
    "with computation", min_ranks=2)
def _poor_parallel(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    if r is None or r.dp_grad_s <= 0:
        return s.with_(overlap_comm=False)
    # as many gradient syncs as it takes for the communication to outlast the computation
    # (what overlapping could hide is then all of the computation: about half the step)
    syncs = max(1, int(np.ceil(1.2 * k * r.dp_device_s / r.dp_grad_s)))
    return s.with_(overlap_comm=False, layout=(n, 1, 1), grad_syncs=syncs)


@_c("io.slow_data_reading", "compressed archives on remote storage at low bandwidth: every "
    "queue empty, the loop waits on reads")
def _slow_read(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    s = s.with_(remote_storage=True, compressed=k >= 1.0,
                process_scale=s.process_scale / (1 + 4 * k))
    t = target_s(r, k)
    if r is not None and r.samples * r.sample_storage_B > 0:
        # one batch takes the healthy step plus the target to read: extracting archive
        # members where that leaves a quarter of it or more to the transfer, which runs at
        # the bandwidth that makes up the time
        read = r.step_s + t
        decode = r.samples * DECODE_S_PER_SAMPLE
        compressed = s.compressed and decode <= 0.75 * read
        left = read - (decode if compressed else 0.0)
        s = s.with_(compressed=compressed, storage_Bps=r.samples * r.sample_storage_B / left)
    return s


@_c("io.slow_data_processing", "one loader worker, per-sample CPU processing too slow: data "
    "queue non-empty, host queue empty")
def _slow_proc(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    t = target_s(r, k)
    scale = s.process_scale * k
    if r is not None and r.samples * r.process_s > 0:  # one batch: healthy step + target
        scale = (r.step_s + t) / (r.samples * r.process_s * s.host_slowdown)
    return s.with_(num_workers=1, process_scale=scale)


@_c("io.slow_data_fetching", "pageable host memory, no prefetch and a big batch: host queue "
    "non-empty, device queue empty")
def _slow_fetch(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    t = target_s(r, k)
    big = 1.0
    if r is not None and r.samples * r.sample_device_B > 0:  # the copy takes the target
        big = max(1.0, t * r.h2d_pageable_Bps / (r.samples * r.sample_device_B))
    return s.with_(pin_memory=False, prefetch=0, process_scale=s.process_scale * 0.1,
                   device_bytes_scale=s.device_bytes_scale * big)


@_c("cpu.operator_compilation", "dynamic shapes: operators recompiled for new shapes each step")
def _compile(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    t = target_s(r, k)
    cs = s.compile_s * k
    if r is not None and r.kernels:
        # every distinct kernel is recompiled each step, in all the healthy step + target (the
        # device runs what was compiled meanwhile)
        cs = (r.step_s + t) / (r.kernels * s.host_slowdown)
    return s.with_(dynamic_shapes=True, shape_variants=10_000, jit=True, compile_s=cs)


@_c("cpu.operator_dispatch", "no tiling cache and a slow host stack: per-operator host work "
    "exceeds device time")
def _dispatch(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    t = target_s(r, k)
    slow = 1 + k
    if r is not None and r.ops:  # issuing a step's operators takes the healthy step + target
        slow = (r.step_s + t) / (r.ops * r.host_op_s)
    return s.with_(tiling_cache=False, host_slowdown=s.host_slowdown * slow)


@_c("cpu.host_device_sync", ".item()-style synchronous calls inside the step (a loop of them "
    "where the device has drained)")
def _sync(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    t = target_s(r, k)
    syncs = max(int(round(20 * k)), 1)
    items = 1
    if r is not None and r.sync_s > 0:  # the round trips of all syncs add up to the target
        items = max(1, int(np.ceil(t / (syncs * r.sync_s))))
    return s.with_(extra_syncs=syncs, sync_items=items)


@_c("cpu.garbage_collection", "a large tracked heap: long full GC pauses")
def _gc(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    t = target_s(r, k)
    threshold, full_every, heap = 700, 5, int(2_000_000 * k)
    if r is not None and r.objects > 0:
        # about two full collections a step, pausing the host for the healthy step + target
        # in all (the device runs what was queued before a pause)
        threshold = max(1, min(threshold, r.objects // 2))
        young = r.objects / threshold
        full_every = max(1, int(young // 2))
        fulls = young / full_every
        heap = int((r.step_s + t) / fulls / (GC_NS_PER_OBJECT * 1e-9 * s.host_slowdown))
    return s.with_(gc_heap_objects=heap, gc_full_every=full_every, gc_threshold=threshold)


@_c("cpu.resource_contention", "a competing process using 4000 % CPU inflates host costs")
def _contention(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    t = target_s(r, k)
    slow = 1 + 3 * k
    if r is not None and r.host_s > 0:  # the inflated host stack takes the healthy step + target
        slow = (r.step_s + t) / r.host_s
    return s.with_(host_slowdown=s.host_slowdown * slow, other_cpu_pct=4000.0 * k)


@_c("cpu.environment_configuration", "debug log level (a log line per host call, to a slow "
    "log sink) and loader workers bound to 2 cores with taskset")
def _env(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    t = target_s(r, k)
    scale = 1.0
    if r is not None and r.ops:  # the log lines of a step's host calls take the target
        per_line = LOG_COST_S["debug"] * s.host_slowdown
        scale = max(1.0, (r.step_s + t - r.host_s) / (LOG_CALLS_PER_OP * r.ops * per_line))
    return s.with_(log_level="debug", taskset_cores=2, log_scale=s.log_scale * scale)


def _units(s: Settings, r: StepRef | None) -> StepScale | None:
    """Per-unit costs of the healthy step (``scale.measure``) for the reference's workload; None
    without a reference (the knobs then keep their absolute strength-1 values)."""
    if r is None or not r.workload:
        return None
    return _measure(r.workload, r.device, r.ranks, s)


@lru_cache(maxsize=32)
def _measure(workload: str, device: str, ranks: int, s: Settings) -> StepScale:
    return measure(workload, device, ranks, s)


def _data_parallel(s: Settings, n: int, r: StepRef | None
                   ) -> tuple[Settings, StepScale | None]:
    """Causes of concurrent gradient traffic need data parallelism: a workload whose default
    layout on ``n`` ranks has none (tensor-parallel LLMs) runs as ``n`` data-parallel replicas."""
    sc = _units(s, r)
    if sc is not None and sc.dp < 2 and s.layout is None:
        s = s.with_(layout=(n, 1, 1))
        sc = _units(s, r)
    return s, sc


@_c("computation.compute_bound", "larger matmuls: Cube time dominates")
def _compute(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    f = 1 + 2 * k
    sc = _units(s, r)
    if sc is not None and sc.cube_s > 0:  # Cube time (1 + 2k) x the Vector time's double
        f = max(f, (1 + 2 * k) * 2 * sc.vector_s / sc.cube_s)
    return s.with_(compute_scale=s.compute_scale * f)


@_c("computation.memory_bound", "unfused elementwise traffic: Vector ops bandwidth-bound")
def _memory(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    f = 1 + 3 * k
    sc = _units(s, r)
    if sc is not None and sc.vector_s > 0:  # Vector time (1 + 3k) x the Cube time
        f = max(f, (1 + 3 * k) * sc.cube_s / sc.vector_s)
    return s.with_(memory_scale=s.memory_scale * f)


@_c("computation.underutilization", "cube inner axes not multiples of 256 (hidden sizes 8 "
    "elements off), TransData private formats and AI CPU fallbacks")
def _underuse(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    return s.with_(aligned=False, inner_offset=8, private_format=True, aicpu_fallback=True)


@_c("computation.slow_node", "one rank's AI Core clock drops to a third (thermal throttling)",
    min_ranks=2)
def _slow_node(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    # the others wait (f - 1) / f of the step for the slow rank: at a third of the clock, 2/3
    return s.with_(slow_rank=n - 1, slow_factor=1 / (1 + 2 * k))


@_c("communication.synchronization_wait", "one rank arrives late at every collective",
    min_ranks=2)
def _late(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    late = target_s(r, k) or 0.02 * k  # the others wait the target at the first collective
    return s.with_(late_rank=n // 2, late_s=late)


@_c("communication.bandwidth_contention", "concurrent collectives and compute contend for "
    "links and HBM: the gradient allreduce overlapping backward crawls", min_ranks=2)
def _bw(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    s, sc = _data_parallel(s, n, r)
    c = min(0.9, 0.6 * k)
    if sc is not None and sc.grad_s > 0 and sc.buckets > 1:
        # the buckets issued during backward (all but the last) take the step + target
        g = sc.grad_s * (sc.buckets - 1) / sc.buckets
        c = max(c, min(0.995, 1.0 - g / (g + sc.step_s + 2 * k * sc.step_s)))
    return s.with_(contention=c)


@_c("communication.rdma_retransmission", "rare multi-second RDMA transmissions",
    min_ranks=9, inter=True)
def _rdma(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    p = min(1.0, 0.05 * k)
    sc = _units(s, r)
    if sc is not None and sc.collectives:  # about k retransmissions a step (4.5 s >> a step)
        p = max(p, min(0.5, k / sc.collectives))
    return s.with_(rdma_retrans_prob=p)


#: Fewest bytes a gradient bucket gets (bounds the collectives a step issues).
MIN_BUCKET_B = 64 << 10


@_c("communication.small_packet", "tiny gradient buckets: many small collectives", min_ranks=2)
def _small(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    mb = 0.25 / k
    s, sc = _data_parallel(s, n, r)
    if sc is not None and sc.grad_bytes > 0:  # the largest bucket whose allreduce takes the
        goal = sc.step_s + 2 * k * sc.step_s  # step + target (bisection on log size)
        lo, hi = np.log(MIN_BUCKET_B), np.log(max(sc.grad_bytes, 2.0 * MIN_BUCKET_B))
        if sc.grad_allreduce_s(np.exp(hi), s) < goal:
            for _ in range(40):
                mid = 0.5 * (lo + hi)
                lo, hi = (lo, mid) if sc.grad_allreduce_s(np.exp(mid), s) < goal else (mid, hi)
            mb = min(mb, float(np.exp(lo)) / 2**20)
    return s.with_(grad_bucket_mb=mb)


@_c("communication.byte_alignment", "message sizes not multiples of 512 B: the link moves them "
    "at a fraction of its bandwidth", min_ranks=2)
def _align(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    frac = MISALIGNED_BW
    sc = _units(s, r)
    if sc is not None and sc.comm_s + sc.grad_s > 0:  # the misaligned traffic takes the target
        w = sc.comm_s + sc.grad_s
        frac = min(frac, w / (w + sc.step_s + target_s(r, k)))
    return s.with_(misaligned=True, align_sizes=False, misaligned_bw=frac)


@_c("communication.network_configuration", "mis-set HCCL environment: bandwidth everywhere "
    "at a fraction", min_ranks=2)
def _net(s: Settings, k: float, n: int, r: StepRef | None) -> Settings:
    f = 1 / (1 + 2 * k)
    sc = _units(s, r)
    if sc is not None and sc.comm_s + sc.grad_s > 0:  # all traffic takes the step + target
        w = sc.comm_s + sc.grad_s
        f = min(f, w / (w + sc.step_s + target_s(r, k)))
    return s.with_(net_bw_factor=f)


assert set(CAUSES) == set(CAUSE_IDS), set(CAUSE_IDS) ^ set(CAUSES)


def parse(spec: str) -> tuple[str, float]:
    """``CAUSE_ID[=STRENGTH]`` -> (id, strength); unknown ids list the valid ones."""
    cid, _, raw = spec.partition("=")
    cid = cid.strip()
    CAUSES.get(cid, flag="--inject")
    try:
        strength = float(raw) if raw else 1.0
    except ValueError:
        raise UsageError(f"bad strength {raw!r} for --inject {cid}",
                         hint=f"give a positive number, e.g. --inject {cid}=2") from None
    if not strength > 0:
        raise UsageError(f"strength must be > 0 for --inject {cid}, got {raw!r}")
    return cid, strength


def apply(settings: Settings, causes: list[tuple[str, float]], ranks: int,
          devices_per_node: int, ref: StepRef | None) -> Settings:
    """``settings`` with every cause injected, scaled to the healthy step ``ref`` (None: the
    knobs' absolute strength-1 values)."""
    for cid, k in causes:
        c = CAUSES.get(cid)
        need = max(c.min_ranks, devices_per_node + 1 if c.needs_inter_node else 1)
        if ranks < need:
            raise UsageError(f"--inject {cid} needs at least {need} ranks, got --ranks {ranks}",
                             hint=f"add --ranks {need}")
        settings = c.apply(settings, k, ranks, ref)
    return settings
