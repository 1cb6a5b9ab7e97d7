"""What one step of a healthy run costs: the yardstick injected causes are scaled against.

``step_ref(workload, profile, ranks, settings)`` runs the workload for a few steps on the
virtual clock with nothing recorded (milliseconds even for large models) and returns a
:class:`StepRef` of the steady-state step (step 0 warms caches and the allocator). An
injection at strength ``k`` then sets its knob so that the cause costs about ``2 k`` healthy
steps (``inject.target_s``): a run with one cause injected is bound by that cause whatever the
workload's size, as the same misconfiguration would be on a real job of that size.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from hermes.devices import DeviceProfile
from hermes.npu.comm import links, message_bytes, transmit_ns
from hermes.npu.data import device_bytes
from hermes.npu.graph import OPT
from hermes.npu.runtime import Runtime
from hermes.npu.settings import Settings
from hermes.npu.stage import Layout
from hermes.npu.workloads import Workload

REF_STEPS = 3


@dataclass(frozen=True)
class StepRef:
    """Steady-state figures of one rank's step in a healthy run (seconds, counts, bytes)."""

    step_s: float            # median step time
    device_s: float          # device compute busy time per step
    host_s: float            # host stack time per step (every operator issue)
    comm_s: float            # time in collectives per step
    ops: int                 # operator issues per step (stage 0, all microbatches)
    kernels: int             # distinct operator signatures (kernels) of the step
    objects: int             # Python objects allocated per step (drives GC)
    samples: int             # samples per step
    sample_storage_B: float  # bytes read from storage per sample
    sample_device_B: float   # bytes copied host -> device per sample
    process_s: float         # CPU seconds of loader processing per sample
    host_op_s: float         # the profile's host cost of one operator issue
    sync_s: float            # the profile's host-device synchronization round trip
    h2d_pageable_Bps: float  # the profile's pageable H2D copy bandwidth
    dp: int                  # data-parallel degree of the run's layout
    workload: str = ""       # workload and device names (``scale.measure`` costs them per unit)
    device: str = ""
    ranks: int = 1
    dp_device_s: float = 0.0  # pure data parallelism over the run's ranks: device time / step
    dp_grad_s: float = 0.0    # ... and its gradient allreduce transmission per step

    def to_meta(self) -> dict[str, Any]:
        return {k: (round(v, 9) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def step_ref(w: Workload, prof: DeviceProfile, ranks: int, settings: Settings) -> StepRef:
    """Run ``w`` healthy (``settings`` as given) for a few steps and measure its steady step."""
    res = Runtime(prof, ranks=ranks, settings=settings).run(w, REF_STEPS)
    dp, tp, pp = res.layout
    g = w.build(tp, pp, 0)
    micro = w.microbatches
    per_micro = g.phase != OPT
    ops = int(per_micro.sum()) * micro + int((~per_micro).sum())
    objects = int(g.objects[per_micro].sum()) * micro + int(g.objects[~per_micro].sum())
    f = prof.fields
    steady = slice(1, None)
    dp_dev, dp_grad = _pure_dp(w, prof, ranks, settings) if ranks > 1 else (0.0, 0.0)
    comm = res.comm_ns if res.comm_ns is not None else np.zeros_like(res.step_ns)
    return StepRef(
        step_s=float(np.median(res.step_ns[steady])) / 1e9,
        device_s=float(np.median(res.device_busy_ns[steady])) / 1e9,
        host_s=float(np.median(res.host_ns[steady])) / 1e9,
        comm_s=float(np.median(comm[steady])) / 1e9,
        ops=ops, kernels=int(np.unique(g.sig).size), objects=objects,
        samples=int(w.samples_per_step),
        sample_storage_B=float(w.sample_storage_B), sample_device_B=float(device_bytes(w)),
        process_s=float(w.process_s),
        host_op_s=float(f.get("host_op_overhead_s", 3e-5)),
        sync_s=float(f.get("sync_roundtrip_s", 4e-5)),
        h2d_pageable_Bps=float(f.get("h2d_pageable_Bps", 8e9)), dp=int(dp),
        workload=w.name, device=prof.name, ranks=int(ranks),
        dp_device_s=dp_dev, dp_grad_s=dp_grad)


def _pure_dp(w: Workload, prof: DeviceProfile, ranks: int, s: Settings) -> tuple[float, float]:
    """(device s, gradient allreduce transmission s) per step of one rank when all ``ranks``
    are data parallel: the full model per rank, its gradients allreduced every step."""
    s = s.with_(layout=(ranks, 1, 1))
    rt = Runtime(prof, ranks=ranks, settings=s)
    res = rt.run(w, 2)
    intra, inter = links(prof)
    lay = Layout(ranks, 1, 1, int(prof.fields.get("devices_per_node", 8)), intra, inter)
    st = rt._stage(w, lay, 0, np.random.default_rng(0))
    link = lay.link_for("dp")
    grad = sum(transmit_ns("allreduce", message_bytes(b, s), ranks, link, s)
               for b in st.bucket_bytes)
    return float(res.device_busy_ns[-1, 0]) / 1e9, float(grad) / 1e9
