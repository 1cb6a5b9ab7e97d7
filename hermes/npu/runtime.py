"""The emulated NPU runtime: N ranks of a workload on the virtual clock, reported through hooks.

Usage::

    rt = Runtime("ascend910b", ranks=8, collector=FineCollector("run"))
    result = rt.run("resnet50", steps=10)

Each step: every rank asks the data pipeline for its batch, then each pipeline stage's ranks
issue their operators (host stack -> device streams -> collectives, see ``stage.py``). The
runtime knows nothing of files: it calls ``collector.wants_detail(rank, step)`` and, if so,
``on_events(batch)``; ``on_step(StepInfo)`` for every rank and step; ``close(meta)`` at the end.
The virtual clock is deterministic: same seed and settings -> the same events. The real clock
is ``real.RealRuntime``; the caller picks one of the two once (``emulate.emulate``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hermes.devices import DeviceProfile
from hermes.devices import get as get_device
from hermes.errors import UsageError
from hermes.hooks import Collector, NullCollector, StepInfo
from hermes.npu.comm import links
from hermes.npu.data import DataPipeline
from hermes.npu.device import UnitPeaks, task_durations
from hermes.npu.emit import MAX_LOADER_LANES, Vocab, stage_events
from hermes.npu.graph import AI_CPU, CUBE, VECTOR, Graph
from hermes.npu.host import HostModel
from hermes.npu.result import RunResult
from hermes.npu.settings import Settings
from hermes.npu.stage import Layout, Stage
from hermes.npu.workloads import Workload
from hermes.npu.workloads import get as get_workload

SINK_EXECUTE_S = 2.0e-5        # host cost of one model-execute call (argument packing)


def fuse(g: Graph) -> Graph:
    """Fold each fusible elementwise op into the nearest earlier op: its FLOPs and gradient
    bytes move there, its own HBM traffic and host dispatch disappear."""
    keep = ~g.fusible
    keep[0] = True
    gid = np.cumsum(keep) - 1
    flops = g.flops[keep].copy()
    pb = g.param_bytes[keep].copy()
    drop = ~keep
    np.add.at(flops, gid[drop], g.flops[drop])
    np.add.at(pb, gid[drop], g.param_bytes[drop])
    out = g.select(keep)
    return Graph(**{**out.__dict__, "flops": flops, "param_bytes": pb})


class Runtime:
    """Emulate ``ranks`` devices of profile ``device`` running a workload."""

    def __init__(self, device: str | DeviceProfile = "ascend910b", *, ranks: int = 1,
                 settings: Settings | None = None, collector: Collector | None = None,
                 seed: int = 0, meta: dict[str, Any] | None = None,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.profile = get_device(device) if isinstance(device, str) else device
        if ranks < 1:
            raise UsageError(f"--ranks must be >= 1, got {ranks}")
        self.progress = progress  # called with (steps done, steps) after every step
        self.ranks = ranks
        self.s = settings or Settings()
        self.collector = collector or NullCollector()
        self.seed = seed
        self.meta = dict(meta or {})

    def layout(self, w: Workload) -> tuple[int, int, int]:
        lay = self.s.layout or w.default_layout(self.ranks)
        if lay[0] * lay[1] * lay[2] != self.ranks:
            raise UsageError(f"parallel layout dp{lay[0]},tp{lay[1]},pp{lay[2]} covers "
                             f"{lay[0] * lay[1] * lay[2]} ranks, not --ranks {self.ranks}",
                             hint="make dp*tp*pp equal to --ranks")
        return lay

    def _stage(self, w: Workload, lay: Layout, stage: int, rng: np.random.Generator) -> Stage:
        s, prof = self.s, self.profile
        g = w.build(lay.tp, lay.pp, stage)
        if s.inner_offset:  # hidden sizes off a multiple of the cube's alignment
            g = g.offset_inner(s.inner_offset)
        if s.fusion:
            g = fuse(g)
        unit = g.unit.copy()
        if s.aicpu_fallback:
            unit[g.aicpu] = AI_CPU
        flops = np.where(unit == CUBE, g.flops * s.compute_scale, g.flops)
        nbytes = np.where(unit == VECTOR, g.bytes * s.memory_scale, g.bytes)
        peaks = UnitPeaks.of(prof)
        base = task_durations(g, peaks, flops=flops, nbytes=nbytes, unit=unit, aligned=s.aligned)
        # TransData: read + write the input once more in the private layout (Vector unit)
        transdata = np.where(g.private_fmt & s.private_format,
                             2 * (nbytes / 3) / peaks.hbm_Bps * 1e9, 0.0)
        per = lay.dp * lay.tp
        ranks = np.arange(stage * per, (stage + 1) * per)
        factor = np.where(ranks == s.slow_rank, 1.0 / s.slow_factor, 1.0)
        f = prof.fields
        micro = w.microbatches
        st = Stage(stage, ranks, g, micro, lay, s, HostModel(prof, s), base, transdata, factor,
                   f.get("task_sched_latency_s", 2e-6) * 1e9, f.get("sync_roundtrip_s", 4e-5)
                   * 1e9, (f.get("launch_latency_s", 6e-6) + SINK_EXECUTE_S) * 1e9, rng)
        st.unit, st.flops, st.nbytes = unit, flops, nbytes
        st.clock_mhz = float(prof.fields.get("clock_mhz", 1000)) / factor
        self._groups(st, lay)
        return st

    @staticmethod
    def _groups(st: Stage, lay: Layout) -> None:
        """Communication group names per local rank and sequence bookkeeping of LINK ops."""
        codes = {"tp": 0, "dp": 1, "ep": 1, "pp_next": 2, "pp_prev": 3}
        st.group_code = codes
        s = st.stage
        st.group_names = [[f"tp{s}.{li // lay.tp}", f"dp{s}.{li % lay.tp}",
                           f"pp{s}-{s + 1}.{li}", f"pp{s - 1}-{s}.{li}"] for li in range(st.R)]
        kinds = np.array([st.g.comm_group[i] if st.is_link[k] else "" for k, i in
                          enumerate(st.order)])
        kinds = np.where(kinds == "ep", "dp", kinds)
        st.link_occ = np.zeros(st.n)
        st.link_count = np.zeros(st.n)
        for kname in set(kinds[st.is_link]):
            m = kinds == kname
            st.link_occ[m] = np.arange(m.sum())
            st.link_count[m] = m.sum()

    def run(self, workload: str | Workload, steps: int) -> RunResult:
        w = get_workload(workload) if isinstance(workload, str) else workload
        if steps < 1:
            raise UsageError(f"--steps must be >= 1, got {steps}")
        s, prof = self.s, self.profile
        dp, tp, pp = self.layout(w)
        intra, inter = links(prof)
        lay = Layout(dp, tp, pp, int(prof.fields.get("devices_per_node", 8)), intra, inter)
        rng = np.random.default_rng(self.seed)
        stages = [self._stage(w, lay, k, rng) for k in range(pp)]
        vocabs = [Vocab.of(st) for st in stages]
        peers = dict(enumerate(stages))
        data = DataPipeline(prof, w, s)
        t_start = data.warm()
        for st in stages:
            st.h[:] = t_start
            st.dev_free[:] = t_start
            st.comm_free[:] = t_start
        sink_load = 0.0
        R = self.ranks
        step_ns = np.zeros((steps, R))
        host_ns = np.zeros((steps, R))
        busy_ns = np.zeros((steps, R))
        comm_ns = np.zeros((steps, R))
        tasks = 0
        for step in range(steps):
            if s.dynamic_shapes:
                variant = 1 + int(rng.integers(max(s.shape_variants, 1)))
                scale = 0.5 + 0.5 * ((variant * 2654435761) % 1000) / 1000
            else:
                variant, scale = 0, 1.0
            request = max(float(st.h.max()) for st in stages)
            ready, depths = data.next_batch(step, request)
            recs = []
            for st in stages:
                stall = np.where(st.ranks == s.late_rank, s.late_s * 1e9, 0.0)
                if s.sink and step == 0:  # one-off model load: every op's host stages once
                    full = HostModel(prof, s.with_(sink=False))
                    c = full.step_costs(st.g.sig[st.order], 0, st.g.objects[st.order],
                                        st.g.small[st.order])
                    sink_load = float(c.total.sum())
                    stall = stall + sink_load
                recs.append(st.begin(step, variant, scale, st.h.copy(), ready, stall))
            for st in stages:
                st.run_until(st.fwd_end, peers)
            for st in reversed(stages):
                st.run_until(st.n, peers)
            for st, rec, vocab in zip(stages, recs, vocabs, strict=True):
                rec = st.finish()
                self._report(st, rec, vocab, data, depths, w, sink_load if step == 0 else 0.0)
                step_ns[step, st.ranks] = rec.end - rec.start
                host_ns[step, st.ranks] = rec.costs.total.sum()
                compute = ~st.is_link & ~rec.costs.on_host
                busy_ns[step, st.ranks] = rec.dev_dur[:, compute].sum(axis=1)
                comm_ns[step, st.ranks] = rec.dev_dur[:, st.is_link].sum(axis=1) + (
                    rec.grad_dur.sum(axis=1) if rec.grad_dur.size else 0.0)
                tasks += int(compute.sum()) * st.R
            if self.progress is not None:
                self.progress(step + 1, steps)
        res = RunResult(w.name, R, (dp, tp, pp), step_ns, host_ns, busy_ns, tasks, s, comm_ns)
        # the node's local storage read bandwidth, as a collector is told it (device profile)
        device = {**prof.to_meta(), "local_storage_Bps": data.local_Bps}
        res.meta = {"device": device, "source": "emulator",
                    "clock_offsets_ns": {r: 0 for r in range(R)} if R <= 4096 else {},
                    "extra": {**self.meta, "workload": w.name, "ranks": R, "world_size": R,
                              "layout": {"dp": dp, "tp": tp, "pp": pp}, "seed": self.seed,
                              "settings": s.to_meta()}}
        return res

    def _report(self, st: Stage, rec: Any, vocab: Vocab, data: DataPipeline,
                depths: dict[str, float], w: Workload, sink_load: float) -> None:
        step = rec.step
        k = step
        dinfo = {"read_end": data.read_end[k], "proc_end": data.proc_end[k],
                 "fetch_end": data.fetch_end[k], "read_dur": data.read_dur,
                 "proc_dur": data.proc_dur, "fetch_dur": data.fetch_dur,
                 "copy_dur": data.copy_dur, "pin_dur": data.pin_dur,
                 "batch_bytes": data.batch_bytes, "transfer_dur": data.transfer_dur,
                 "decode_dur": data.decode_dur, "read_bytes": data.read_bytes, **depths}
        loader = f"loader {k % min(data.workers, MAX_LOADER_LANES)}"
        compute = ~st.is_link & ~rec.costs.on_host
        flops = float((st.flops[st.order[compute]]).sum() * rec.scale)
        comm_b = float(rec.comm_bytes.sum() + (rec.grad_bytes.sum() if len(rec.grad_bytes)
                                                 else 0.0))
        coll = st.is_link
        frozen = None
        for li, rank in enumerate(st.ranks):
            rank = int(rank)
            if self.collector.wants_detail(rank, step):
                if frozen is None:
                    frozen = stage_events(st, rec, vocab, dinfo, loader, sink_load)
                groups = st.group_names[li]
                self.collector.on_events(frozen.batch(li, rank, step, groups))
            comm_ns = float(rec.dev_dur[li, coll].sum() + (rec.grad_dur[li].sum()
                                                           if rec.grad_dur.size else 0.0))
            self.collector.on_step(StepInfo(
                rank=rank, step=step, start_ns=int(round(rec.start[li])),
                end_ns=int(round(rec.end[li])),
                device_busy_ns=int(round(rec.dev_dur[li, compute].sum())),
                samples=w.samples_per_step, tokens=w.tokens_per_step, flops=flops,
                comm_bytes=int(comm_b), comm_ns=int(round(comm_ns)), queue_depths=depths))

    def close(self, result: RunResult) -> None:
        """Close the collector with the run's metadata (device profile, settings, truth)."""
        self.collector.close(result.meta)


