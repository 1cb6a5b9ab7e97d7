"""What one step of a workload costs before anything is injected: the yardstick of injections.

``measure(workload, device, ranks, settings) -> StepScale`` costs one step of every pipeline
stage with the runtime's own cost model (the same ``Runtime._stage`` the run uses) without
running it: device time per compute unit, host time, gradient and collective traffic. Injected
causes (``inject.py``) express their strength relative to these figures, so that strength 1.0
makes the cause *the* bottleneck of whatever workload it is applied to (an absolute knob - 20 ms
of lateness, a 25 % slower link - is decisive on a small model and invisible on a large one).
All times in seconds, per rank and per step (all microbatches), of the busiest stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hermes.devices import get as get_device
from hermes.npu.comm import Link, links, transmit_ns
from hermes.npu.graph import AI_CPU, CUBE, VECTOR
from hermes.npu.runtime import Runtime
from hermes.npu.settings import Settings
from hermes.npu.stage import Layout
from hermes.npu.workloads import get as get_workload


@dataclass(frozen=True)
class StepScale:
    """Per-step figures of one rank of the busiest pipeline stage (seconds, bytes)."""

    device_s: float                 # compute tasks on the device (roofline, incl. TransData)
    cube_s: float                   # of which on the Cube (matrix) unit
    vector_s: float                 # of which on the Vector unit
    ai_cpu_s: float                 # of which on the AI CPU
    host_s: float                   # host stack (InferShape, tiling, alloc, launch, GC, ...)
    comm_s: float                   # stream-ordered collectives' transmission (tp, pp, ep)
    grad_s: float                   # data-parallel gradient allreduce transmission
    grad_bytes: float               # gradient bytes allreduced per step
    collectives: int                # collectives per step (stream-ordered + gradient buckets)
    buckets: int                    # gradient buckets per step (0 without data parallelism)
    dp: int
    tp: int
    pp: int
    #: device seconds per step of each Vector operator type (what a fallback would move)
    vector_by_type: dict[str, float] = field(default_factory=dict)
    dp_link: Link | None = None     # the link the data-parallel group's allreduce crosses

    def grad_allreduce_s(self, bucket_B: float, s: Settings) -> float:
        """Seconds per step the gradient allreduce takes in buckets of ``bucket_B`` bytes."""
        if self.dp < 2 or self.dp_link is None or self.grad_bytes <= 0:
            return 0.0
        n = max(1.0, np.ceil(self.grad_bytes / bucket_B))
        return n * transmit_ns("allreduce", self.grad_bytes / n, self.dp, self.dp_link, s,
                               concurrent=s.overlap_comm) * 1e-9

    @property
    def step_s(self) -> float:
        """A lower bound of the step: the busiest of host and device (+ exposed comm)."""
        return max(self.device_s + self.comm_s, self.host_s)


def measure(workload: str, device: str, ranks: int, settings: Settings | None = None
            ) -> StepScale:
    """Cost one healthy step of ``workload`` on ``ranks`` devices (see the module doc)."""
    s = settings or Settings()
    prof = get_device(device)
    w = get_workload(workload)
    rt = Runtime(prof, ranks=ranks, settings=s)
    dp, tp, pp = rt.layout(w)
    intra, inter = links(prof)
    lay = Layout(dp, tp, pp, int(prof.fields.get("devices_per_node", 8)), intra, inter)
    rng = np.random.default_rng(0)
    best: StepScale | None = None
    for k in range(pp):
        st = rt._stage(w, lay, k, rng)
        o = st.order
        dur = st.base_dur[0] + st.transdata  # ns per op of the expanded order, rank 0
        comp = ~st.is_link
        unit = st.unit[o]
        costs = st.host.step_costs(st.g.sig[o], 0, st.g.objects[o], st.g.small[o])
        dur = np.where(costs.on_host, 0.0, dur)
        by_type: dict[str, float] = {}
        vec = comp & (unit == VECTOR)
        for i in np.flatnonzero(vec):
            t = st.g.optype[o[i]]
            by_type[t] = by_type.get(t, 0.0) + float(dur[i]) * 1e-9
        comm = 0.0
        for i in np.flatnonzero(st.is_link):
            op = o[i]
            group = st.g.comm_group[op]
            size = tp if group == "tp" else (dp if group in ("dp", "ep") else 2)
            comm += transmit_ns(st.g.coll[op], st.g.comm_bytes[op], size,
                                lay.link_for(group), s) * 1e-9
        grad_b = float(st.bucket_bytes.sum())
        grad = float(sum(transmit_ns("allreduce", b, dp, lay.link_for("dp"), s,
                                     concurrent=s.overlap_comm)
                         for b in st.bucket_bytes)) * 1e-9 if dp > 1 else 0.0
        sc = StepScale(
            device_s=float(dur[comp].sum()) * 1e-9,
            cube_s=float(dur[comp & (unit == CUBE)].sum()) * 1e-9,
            vector_s=float(dur[vec].sum()) * 1e-9,
            ai_cpu_s=float(dur[comp & (unit == AI_CPU)].sum()) * 1e-9,
            host_s=float(costs.total.sum()) * 1e-9, comm_s=float(comm), grad_s=grad,
            grad_bytes=grad_b if dp > 1 else 0.0,
            collectives=int(st.is_link.sum()) + (len(st.bucket_bytes) if dp > 1 else 0),
            buckets=len(st.bucket_bytes) if dp > 1 else 0,
            dp=dp, tp=tp, pp=pp, vector_by_type=by_type, dp_link=lay.link_for("dp"))
        if best is None or sc.step_s > best.step_s:
            best = sc
    assert best is not None
    return best
