"""Host software stack costs (Graph Engine host scheduling), per operator and per step.

For every operator issue: JIT compile (first sight of a shape not in the kernel cache),
InferShape, tiling (near free on a tiling-cache hit), device memory allocation (caching
allocator: a real allocation only for a size not seen before) and launch. Costs scale with
competing processes (``host_slowdown``) and carry a logging cost per call by log level.
Python GC: allocations advance the young-generation counter; a collection every
``gc_threshold`` allocations, a full one every ``gc_full_every`` young ones, whose pause is
proportional to the tracked heap. State (caches, GC counters) carries across steps.
All costs in nanoseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hermes.devices import DeviceProfile
from hermes.npu.settings import LOG_COST_S, Settings

#: Split of the host stack's per-operator work (the profile's ``host_op_overhead_s`` minus
#: the launch itself) into stages; a GPU's eager dispatch is all launch (the rest is 0).
INFER_SHARE, TILING_SHARE, ALLOC_SHARE = 0.30, 0.55, 0.15
TILING_HIT_SHARE = 0.03        # a tiling-cache hit: hash + lookup
ALLOC_MISS_FACTOR = 12.0       # a real device allocation vs a caching-allocator hit
SMALL_ON_HOST_S = 2.0e-6       # computing a small-shape operator on the host CPU
YOUNG_GC_S = 3.0e-5            # young-generation collection pause
GC_NS_PER_OBJECT = 50.0        # full collection: traversal cost per tracked object
FROZEN_HEAP_SHARE = 0.02       # after gc.freeze(), objects still traversed
LOG_CALLS_PER_OP = 4           # InferShape, tiling, allocation and launch each log a line


@dataclass(frozen=True)
class HostCosts:
    """Per-operator host stage durations (ns) of one step; arrays of the issue order."""

    compile: np.ndarray
    infer: np.ndarray
    tiling: np.ndarray
    tiling_hit: np.ndarray     # bool
    alloc: np.ndarray
    launch: np.ndarray
    gc: np.ndarray             # pause before the op (0 where none)
    gc_full: np.ndarray        # bool: the pause was a full collection
    on_host: np.ndarray        # bool: small op computed on the host (no device task)

    @property
    def total(self) -> np.ndarray:
        return self.gc + self.compile + self.infer + self.tiling + self.alloc + self.launch


class HostModel:
    """Host-side state of one pipeline stage: tiling cache, kernel cache, allocator, GC."""

    def __init__(self, profile: DeviceProfile, settings: Settings) -> None:
        self.s = settings
        self.op_s = stack_s(profile)
        self.launch_s = float(profile.fields.get("launch_latency_s", 6e-6))
        self.tiling_keys = np.empty(0, np.int64)
        self.compiled_keys = np.empty(0, np.int64)
        self.alloc_keys = np.empty(0, np.int64)
        self.allocs = 0          # allocations since start (GC young-generation counter)
        self.young = 0           # young collections so far

    def step_costs(self, sig: np.ndarray, variant: int, objects: np.ndarray,
                   small: np.ndarray) -> HostCosts:
        """Costs of issuing operators with signatures ``sig`` at shape ``variant``."""
        s = self.s
        n = len(sig)
        keys = sig.astype(np.int64) * 1_000_003 + variant
        k = s.host_slowdown * 1e9
        log = LOG_COST_S[s.log_level] * s.log_scale * 1e9
        on_host = small & s.host_small_ops
        hit = _seen(keys, self.tiling_keys) if s.tiling_cache else np.zeros(n, bool)
        new_compile = ~_seen(keys, self.compiled_keys) if (s.jit and variant != 0) \
            else np.zeros(n, bool)
        alloc_miss = ~_seen(keys, self.alloc_keys)
        if s.tiling_cache:
            self.tiling_keys = np.union1d(self.tiling_keys, keys)
        if s.jit and variant != 0:
            self.compiled_keys = np.union1d(self.compiled_keys, keys)
        self.alloc_keys = np.union1d(self.alloc_keys, keys)

        dev = ~on_host
        infer = np.where(dev, INFER_SHARE * self.op_s * k + log, 0.0)
        tiling = np.where(dev, np.where(hit, TILING_HIT_SHARE, TILING_SHARE) * self.op_s * k
                          + log, 0.0)
        alloc = np.where(dev, ALLOC_SHARE * self.op_s * k * np.where(alloc_miss,
                                                                     ALLOC_MISS_FACTOR, 1.0)
                         + log, 0.0)
        launch = np.where(dev, self.launch_s * k + log, SMALL_ON_HOST_S * k)
        comp = np.where(new_compile & dev, s.compile_s * k, 0.0)
        gc, full = self._gc(objects, k)
        return HostCosts(comp, infer, tiling, hit & dev, alloc, launch, gc, full, on_host)

    def _gc(self, objects: np.ndarray, k: float) -> tuple[np.ndarray, np.ndarray]:
        s = self.s
        cum = self.allocs + np.cumsum(objects)
        counts = cum // s.gc_threshold
        before = np.concatenate(([self.allocs // s.gc_threshold], counts[:-1]))
        n_coll = counts - before
        self.allocs = int(cum[-1]) if len(cum) else self.allocs
        young_idx = self.young + np.cumsum(n_coll)  # collections done after each op
        # a full collection happens when the running count passes a multiple of full_every
        full = (young_idx // s.gc_full_every) > ((young_idx - n_coll) // s.gc_full_every)
        self.young = int(young_idx[-1]) if len(young_idx) else self.young
        heap = s.gc_heap_objects * (FROZEN_HEAP_SHARE if s.gc_freeze else 1.0)
        pause = n_coll * YOUNG_GC_S * 1e9 + np.where(full, heap * GC_NS_PER_OBJECT, 0.0)
        return pause * (k / 1e9), full


def stack_s(profile: DeviceProfile) -> float:
    """Seconds of host-stack work per operator besides its launch (InferShape + tiling on a
    miss + allocation): the per-op host overhead minus the launch latency."""
    f = profile.fields
    return max(float(f.get("host_op_overhead_s", 3e-5)) - float(f.get("launch_latency_s", 6e-6)),
               0.0)


def _seen(keys: np.ndarray, known: np.ndarray) -> np.ndarray:
    """True where a key is in ``known`` or occurred earlier in ``keys`` itself."""
    earlier = np.ones(len(keys), bool)
    _, first = np.unique(keys, return_index=True)
    earlier[first] = False
    return earlier | np.isin(keys, known)
