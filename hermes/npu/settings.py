"""Every knob of the emulated system in one frozen value.

Injected causes (``inject.py``) turn knobs bad, optimizations (``opts.py``) turn them good;
the runtime only reads a :class:`Settings`. Defaults are a healthy, well-tuned job: with
nothing injected a run is bound by computation only.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

#: Host cost of one logging call per level, in seconds (formatting + write of a log line).
LOG_COST_S: dict[str, float] = {"error": 0.0, "warning": 1e-7, "info": 3e-6, "debug": 2e-5}


@dataclass(frozen=True)
class Settings:
    # -- host software stack (Graph Engine host scheduling) --
    tiling_cache: bool = True          # reuse tiling results keyed by (op signature, shape)
    pipeline: bool = False             # MAX_RUNTIME_CORE_NUMBER=3: 3 host threads
    host_small_ops: bool = False       # compute small-shape operators on the host
    fusion: bool = False               # fold elementwise ops into their producer
    sink: bool = False                 # model offload: one model-execute task per step
    dynamic_shapes: bool = False       # input shapes change from step to step
    shape_variants: int = 1            # distinct shapes a dynamic workload cycles through
    jit: bool = True                   # compile kernels for shapes not in the kernel cache
    compile_s: float = 4.0e-4          # JIT compile per new kernel (57.9 ms/step of 762 ops)
    extra_syncs: int = 0               # .item()-style syncs inserted per step
    sync_items: int = 1                # host round trips at each inserted sync (.item() loop)
    log_level: str = "warning"
    log_scale: float = 1.0             # cost of a log line vs LOG_COST_S (slow log sink)
    gc_threshold: int = 700            # allocations between young-generation collections
    gc_full_every: int = 100           # young collections between full collections
    gc_heap_objects: int = 10_000      # objects a full collection traverses
    gc_freeze: bool = False            # gc.freeze(): long-lived objects not traversed
    host_slowdown: float = 1.0         # >1: competing processes steal host cores
    other_cpu_pct: float = 0.0         # CPU % used by other processes (counter)
    # -- data pipeline --
    num_workers: int = 8
    pin_memory: bool = True
    prefetch: int = 2                  # batches the loader may keep ready on the device side
    remote_storage: bool = False
    compressed: bool = False           # zip/tar archives: decode per sample
    taskset_cores: int = 0             # loader workers bound to this many cores (0 = unbound)
    process_scale: float = 1.0         # multiplies per-sample CPU processing
    storage_Bps: float = 0.0           # storage read bandwidth; 0 = local NVMe / remote default
    device_bytes_scale: float = 1.0    # multiplies bytes copied to the device per sample
    # -- device --
    aligned: bool = True               # cube inner axes multiples of 256
    inner_offset: int = 0              # elements added to every matmul inner axis (hidden sizes
    #                                    a few elements off a multiple of 256)
    private_format: bool = False       # TransData conversions before private-format ops
    aicpu_fallback: bool = False       # unsupported ops run on the AI CPU
    compute_scale: float = 1.0         # multiplies matmul FLOPs (bigger matmuls)
    memory_scale: float = 1.0          # multiplies elementwise bytes (unfused traffic)
    slow_rank: int = -1                # rank whose AI Core clock is reduced
    slow_factor: float = 1.0           # its clock fraction (0.5 = half speed)
    # -- communication --
    grad_bucket_mb: float = 25.0       # data-parallel gradient bucket size
    align_sizes: bool = True           # pad messages to 512 B
    misaligned: bool = False           # message sizes not multiples of 512 B
    misaligned_bw: float = 0.55        # bandwidth fraction such messages get (comm.MISALIGNED_BW)
    net_bw_factor: float = 1.0         # <1: mis-set HCCL environment
    overlap_comm: bool = True          # issue gradient allreduce during backward
    grad_syncs: int = 1                # gradient allreduces per step (accumulation micro-steps
                                       # that each sync, no ``no_sync()``)
    contention: float = 0.0            # concurrent comm/compute HBM and link contention
    rdma_retrans_prob: float = 0.0     # probability an RDMA collective hits a retransmit
    rdma_retrans_s: float = 4.5        # retransmission timeout
    late_rank: int = -1                # rank arriving late at every step (host stall)
    late_s: float = 0.0
    layout: tuple[int, int, int] | None = None   # (dp, tp, pp); None: workload default
    # -- run-to-run variation: device task durations x lognormal(sigma), mean 1, drawn from the
    # seed (same seed, same trace). Kernel durations of one operator vary by a few % on real
    # accelerators (clock boost, memory refresh, cache state); 0 gives the bare cost model.
    jitter: float = 0.02

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    def to_meta(self) -> dict[str, Any]:
        """Every knob, JSON-ready (what the trace's ``extra.settings`` records): the advisor
        reads the run's configuration from the trace alone, without these defaults."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out
