"""The data pipeline: storage reads, loader workers, fetch to the device, three queues.

Batch k is read (over one storage channel shared by all workers) and then processed by
worker ``k % W`` (W = ``num_workers``, capped by taskset
binding); a worker may run at most ``prefetch_factor`` batches ahead of consumption. Processed
batches are fetched (pinned or pageable H2D copy) in order, at most ``prefetch`` ahead of the
step that consumes them. Queues of Hermes's queue-based I/O analysis:

* data queue: batches read but not yet processed,
* host queue: batches processed but not yet on the device,
* device queue: batches on the device, not yet consumed.

Times in nanoseconds on the run's clock; per-batch figures are scalars (every rank's loader
behaves alike; ranks wait for it at their own step start).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hermes.devices import DeviceProfile
from hermes.npu.settings import Settings
from hermes.npu.workloads import Workload

LOCAL_STORAGE_BPS = 5.0e9      # local NVMe
REMOTE_STORAGE_BPS = 6.0e7     # a congested remote file system
DECODE_S_PER_SAMPLE = 4.0e-4   # zip/tar member extraction + decompression
PIN_COPY_BPS = 1.0e10          # host memcpy into page-locked buffers
WORKER_PREFETCH_FACTOR = 2     # PyTorch DataLoader prefetch_factor


def device_bytes(w: Workload) -> float:
    """Bytes copied to the device per sample; a workload that gives none (token ids) copies
    what it read."""
    return w.sample_device_B or w.sample_storage_B


@dataclass
class DataPipeline:
    profile: DeviceProfile
    workload: Workload
    s: Settings
    t0: float = 0.0
    read_end: list[float] = field(default_factory=list)
    proc_end: list[float] = field(default_factory=list)
    fetch_end: list[float] = field(default_factory=list)
    read_dur: float = 0.0
    proc_dur: float = 0.0
    fetch_dur: float = 0.0
    copy_dur: float = 0.0
    consumed: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        w, s, f = self.workload, self.s, self.profile.fields
        b = w.samples_per_step
        #: the host's local storage read bandwidth (what the trace's device profile records)
        self.local_Bps = float(f.get("local_storage_Bps", LOCAL_STORAGE_BPS))
        bw = s.storage_Bps or (REMOTE_STORAGE_BPS if s.remote_storage else self.local_Bps)
        # Storage bandwidth is shared by all workers (reads queue on one channel), and so is
        # extracting members of one zip/tar archive (sequential); processing runs per worker.
        # The trace shows the two parts of a read apart: the transfer (its bytes) and the
        # extraction of the archive's members.
        self.read_dur = b * (w.sample_storage_B / bw
                             + (DECODE_S_PER_SAMPLE if s.compressed else 0.0)) * 1e9
        self.read_bytes = int(b * w.sample_storage_B)
        self.decode_dur = b * DECODE_S_PER_SAMPLE * 1e9 if s.compressed else 0.0
        self.transfer_dur = self.read_dur - self.decode_dur
        self.proc_dur = b * w.process_s * s.process_scale * s.host_slowdown * 1e9
        nbytes = b * device_bytes(w) * s.device_bytes_scale
        h2d = f.get("h2d_pinned_Bps", 2e10) if s.pin_memory else f.get("h2d_pageable_Bps", 8e9)
        self.copy_dur = nbytes / h2d * 1e9
        # pageable bandwidth already includes the driver's staging through a bounce buffer;
        # pinning is a memcpy on the pin thread, pipelined ahead of the copy (off the chain)
        self.pin_dur = nbytes / PIN_COPY_BPS * 1e9 if s.pin_memory else 0.0
        self.fetch_dur = self.copy_dur
        self.batch_bytes = int(nbytes)
        self.workers = max(1, min(s.num_workers, s.taskset_cores or s.num_workers))
        self.worker_free = [self.t0] * self.workers
        self.storage_free = self.t0

    def _produce(self, k: int) -> None:
        """Read and process batch k (once every batch before it is produced)."""
        w = k % self.workers
        cap = WORKER_PREFETCH_FACTOR * self.workers
        # a worker runs at most ``cap`` batches ahead of consumption; during warm-up the
        # device-side prefetcher takes batches out of the loader's queue, so batches beyond
        # ``cap`` asked for before any step (prefetch > cap) wait only for the workers
        gate = self.consumed[k - cap] if 0 <= k - cap < len(self.consumed) else self.t0
        start = max(self.worker_free[w], gate, self.storage_free)
        self.storage_free = start + self.read_dur
        self.read_end.append(start + self.read_dur)
        self.proc_end.append(start + self.read_dur + self.proc_dur)
        self.worker_free[w] = self.proc_end[-1]

    def _fetch(self, k: int, request: float) -> None:
        prev = self.fetch_end[k - 1] if k else self.t0
        pf = self.s.prefetch
        if pf == 0:  # no prefetch: the copy starts only when the step asks for the batch
            gate = request
        else:
            gate = self.consumed[k - pf] if k - pf >= 0 else self.t0
        self.fetch_end.append(max(prev, self.proc_end[k], gate) + self.fetch_dur)

    def warm(self) -> float:
        """When the loader has its first ``prefetch`` batches on the device (ns): the run's
        setup (model build, weight load) overlaps this, so training starts then."""
        k = max(self.s.prefetch, 1)
        while len(self.read_end) < k:
            self._produce(len(self.read_end))
        if self.s.prefetch == 0:
            return self.proc_end[0]
        while len(self.fetch_end) < k:
            self._fetch(len(self.fetch_end), self.t0)
        return self.fetch_end[k - 1]

    def next_batch(self, step: int, request: float) -> tuple[float, dict[str, float]]:
        """When batch ``step`` is on the device for a step asking at ``request`` (ns), and the
        queue depths seen at the request."""
        cap = WORKER_PREFETCH_FACTOR * self.workers
        while len(self.read_end) <= step or (len(self.read_end) < len(self.consumed) + cap):
            self._produce(len(self.read_end))
        while len(self.fetch_end) <= step:
            self._fetch(len(self.fetch_end), request)
        t = request
        r, p, fe = (np.asarray(x) for x in (self.read_end, self.proc_end, self.fetch_end))
        depths = {"data_queue": float(np.sum((r <= t) & (p > t))),
                  "host_queue": float(int(np.sum(p <= t)) - int(np.sum(fe <= t))),
                  "device_queue": float(max(int(np.sum(fe <= t)) - step, 0))}
        ready = self.fetch_end[step]
        self.consumed.append(max(ready, request))
        return ready, depths
