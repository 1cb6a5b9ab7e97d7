"""One pipeline stage's ranks stepping through their operators, vectorized over ranks.

All ranks of a stage run the same graph; what differs per rank (a slow clock, a late arrival,
waits inside collectives) lives in arrays of shape (ranks,) or (ranks, ops). Operators are
processed in segments that end where ranks interact or the host blocks: a collective (wait for
the last arriving member, then transmit), a host sync (the host waits for the device) and the
optimizer (which waits for the data-parallel gradient allreduce). Inside a segment every time is
a cumulative sum or an in-order-queue running maximum (``device.in_order``). Times in ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hermes.npu.comm import Link, message_bytes, retransmit_ns, transmit_ns
from hermes.npu.device import in_order
from hermes.npu.graph import BWD, LINK, OPT, Graph
from hermes.npu.host import HostCosts, HostModel
from hermes.npu.settings import Settings


@dataclass
class Layout:
    dp: int
    tp: int
    pp: int
    devices_per_node: int
    intra: Link
    inter: Link

    def link_for(self, group: str) -> Link:
        span = {"tp": self.tp, "dp": self.dp * self.tp, "ep": self.dp * self.tp,
                "pp_prev": self.dp * self.tp * 2, "pp_next": self.dp * self.tp * 2}[group]
        return self.intra if span <= self.devices_per_node else self.inter


@dataclass
class StepRecord:
    """Everything the emitter needs about one stage's step (arrays over ranks x ops)."""

    step: int
    costs: HostCosts
    s1: np.ndarray            # start of gc/compile/infer/tiling
    s2: np.ndarray            # start of alloc
    s3: np.ndarray            # start of launch
    dev_ts: np.ndarray
    dev_dur: np.ndarray
    transdata: np.ndarray     # (ops,) TransData time before the task
    sync_ts: np.ndarray
    sync_dur: np.ndarray
    comm_bytes: np.ndarray    # (ops,) message bytes of LINK ops
    scale: float
    start: np.ndarray         # (ranks,) step start (request for data)
    data_wait: np.ndarray     # (ranks,)
    stall: np.ndarray         # (ranks,) late-arrival stall before the step's work
    end: np.ndarray = field(default_factory=lambda: np.empty(0))
    end_sync_ts: np.ndarray = field(default_factory=lambda: np.empty(0))
    grad_ts: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    grad_dur: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    grad_bytes: np.ndarray = field(default_factory=lambda: np.empty(0))
    opt_wait_ts: np.ndarray = field(default_factory=lambda: np.empty(0))
    opt_wait_dur: np.ndarray = field(default_factory=lambda: np.empty(0))


class Stage:
    """State of one pipeline stage: its ranks, expanded op order, host model and cursors."""

    # set by the runtime after construction (device-side views of the graph, groups)
    unit: np.ndarray             # unit codes after AI CPU fallback
    flops: np.ndarray            # FLOPs after compute scaling
    nbytes: np.ndarray           # HBM bytes after memory scaling
    clock_mhz: np.ndarray        # (ranks,) AI Core clock
    group_code: dict[str, int]   # communication group kind -> index into group_names[li]
    group_names: list[list[str]]
    link_occ: np.ndarray         # occurrence of each LINK op within its group kind per step
    link_count: np.ndarray       # LINK ops of that group kind per step

    def __init__(self, stage: int, ranks: np.ndarray, graph: Graph, micro: int, lay: Layout,
                 s: Settings, host: HostModel, base_dur: np.ndarray, transdata: np.ndarray,
                 rank_factor: np.ndarray, sched_ns: float, sync_ns: float, sink_ns: float,
                 rng: np.random.Generator) -> None:
        self.stage, self.ranks, self.g, self.lay, self.s = stage, ranks, graph, lay, s
        self.host, self.rng = host, rng
        fwd = np.flatnonzero(graph.phase == 0)
        bwd = np.flatnonzero(graph.phase == BWD)
        opt = np.flatnonzero(graph.phase == OPT)
        self.order = np.concatenate([np.tile(fwd, micro), np.tile(bwd, micro), opt])
        self.micro = np.concatenate([np.repeat(np.arange(micro), len(fwd)),
                                     np.repeat(np.arange(micro), len(bwd)),
                                     np.zeros(len(opt), int)])
        self.n = len(self.order)
        self.fwd_end = len(fwd) * micro
        self.opt_start = self.fwd_end + len(bwd) * micro
        o = self.order
        self.is_link = graph.unit[o] == LINK
        self.sync = graph.sync[o].copy()
        # host cost of each sync after the device drained: one round trip, or a loop of
        # ``sync_items`` .item() round trips where a sync was inserted
        self.sync_cost = np.full(self.n, sync_ns)
        if s.extra_syncs and self.fwd_end:  # .item() calls spread over the forward pass
            pos = np.linspace(0, self.fwd_end - 1, s.extra_syncs + 2)[1:-1].astype(int)
            self.sync_cost[pos[~self.sync[pos]]] = sync_ns * max(s.sync_items, 1)
            self.sync[pos] = True
        if s.sink:  # a sunk graph cannot stop for the host inside an iteration
            self.sync[:] = False
        self.base_dur = base_dur[o] * rank_factor[:, None]
        bwd_mask = (graph.phase[o] == BWD) & ~self.is_link
        if s.contention > 0 and lay.dp > 1 and s.overlap_comm:
            # gradient communication overlapping backward contends for HBM: 20-40 % slower
            self.base_dur[:, bwd_mask] *= 1.0 + 0.5 * min(s.contention, 0.6)
        self.transdata = transdata[o]
        self.sched, self.sync_ns, self.sink_ns = sched_ns, sync_ns, sink_ns
        self.R = len(ranks)
        self.h = np.zeros(self.R)
        self.dev_free = np.zeros(self.R)
        self.comm_free = np.zeros(self.R)
        self.sends: dict[tuple[str, int], np.ndarray] = {}
        self.seq: dict[str, int] = {}
        self.noise: np.ndarray | None = None  # this step's duration factors (Settings.jitter)
        self._buckets()

    def _buckets(self) -> None:
        """Gradient buckets over the last microbatch's backward ops, closed at bucket_mb."""
        idx = np.arange(self.n)
        last = self.micro.max() if self.n else 0
        pos = np.flatnonzero((idx >= self.fwd_end) & (idx < self.opt_start) & (self.micro == last))
        pb = self.g.param_bytes[self.order[pos]] if len(pos) else np.empty(0)
        cap = self.s.grad_bucket_mb * 2**20
        cum = np.cumsum(pb)
        ids = np.floor((cum - 1e-9) / cap).astype(int) if len(cum) else np.empty(0, int)
        close = np.flatnonzero(np.diff(np.append(ids, ids[-1] + 1 if len(ids) else 0)) != 0)
        self.bucket_pos = pos[close] if len(close) else np.empty(0, int)
        sizes = np.diff(np.concatenate(([0.0], cum[close]))) if len(close) else np.empty(0)
        keep = sizes > 0
        # a gradient bigger than the bucket is sent in bucket-sized chunks
        chunks = np.maximum(np.floor(sizes[keep] / cap), 1).astype(int)
        self.bucket_pos = np.repeat(self.bucket_pos[keep], chunks)
        self.bucket_bytes = np.repeat(sizes[keep] / chunks, chunks)
        if self.s.grad_syncs > 1:  # every accumulation micro-step allreduces the gradients
            self.bucket_pos = np.tile(self.bucket_pos, self.s.grad_syncs)
            self.bucket_bytes = np.tile(self.bucket_bytes, self.s.grad_syncs)

    # -- one step -------------------------------------------------------------------------
    def begin(self, step: int, variant: int, scale: float, start: np.ndarray,
              data_ready: float, stall: np.ndarray) -> StepRecord:
        g, o = self.g, self.order
        costs = self.host.step_costs(g.sig[o], variant, g.objects[o], g.small[o])
        if self.s.sink:
            z = np.zeros(self.n)
            costs = HostCosts(z, z, z, np.zeros(self.n, bool), z, z.copy(), costs.gc * 0, z > 1,
                              np.zeros(self.n, bool))
            costs.launch[0] = self.sink_ns
        shape = (self.R, self.n)
        wait = np.maximum(data_ready - start, 0.0)
        rec = StepRecord(step, costs, np.zeros(shape), np.zeros(shape), np.zeros(shape),
                         np.zeros(shape), np.zeros(shape), self.transdata, np.zeros(shape),
                         np.zeros(shape), np.zeros(self.n), scale, start.copy(), wait, stall)
        self.h = start + wait + stall
        self.dev_free = np.maximum(self.dev_free, data_ready)
        rec.comm_bytes[self.is_link] = [
            message_bytes(b * scale, self.s) for b in g.comm_bytes[o[self.is_link]]]
        self.rec = rec
        self.pos = 0
        sigma = self.s.jitter
        self.noise = self.rng.lognormal(-sigma * sigma / 2, sigma, shape) if sigma > 0 else None
        return rec

    def run_until(self, stop: int, peers: dict[int, Stage]) -> None:
        """Process ops up to (not including) index ``stop`` of the expanded order."""
        brk = np.flatnonzero((self.is_link | self.sync)[self.pos:stop]) + self.pos
        edges = list(brk + 1) + [stop]
        if self.pos < self.opt_start <= stop and self.opt_start not in edges:
            edges.append(self.opt_start)
        for end in sorted({int(e) for e in edges if e > self.pos}):
            if self.pos == self.opt_start:
                self._grad_allreduce()
            self._segment(self.pos, end, peers)
            self.pos = end
        if self.pos == self.opt_start == stop and self.opt_start == self.n:
            self._grad_allreduce()

    def _segment(self, lo: int, hi: int, peers: dict[int, Stage]) -> None:
        r, c, s = self.rec, self.rec.costs, self.s
        c1 = (c.gc + c.compile + c.infer + c.tiling)[lo:hi]
        c2, c3 = c.alloc[lo:hi], c.launch[lo:hi]
        h = self.h[:, None]
        if s.pipeline and not s.sink:
            s1 = h + np.cumsum(c1) - c1
            s2 = in_order(s1 + c1, np.broadcast_to(c2, s1.shape), self.h)
            s3 = in_order(s2 + c2, np.broadcast_to(c3, s1.shape), self.h)
        else:
            tot = c1 + c2 + c3
            s1 = h + np.cumsum(tot) - tot
            s2, s3 = s1 + c1, s1 + c1 + c2
        launch_end = s3 + c3
        r.s1[:, lo:hi], r.s2[:, lo:hi], r.s3[:, lo:hi] = s1, s2, s3
        self.h = launch_end[:, -1].copy() if hi > lo else self.h
        arrival = launch_end + self.sched
        if s.sink:  # every task was delivered at load; each iteration waits for the execute
            arrival = np.broadcast_to(launch_end[:, :1] + self.sched, launch_end.shape)
        dur = self.base_dur[:, lo:hi] * r.scale
        if self.noise is not None:
            dur = dur * self.noise[:, lo:hi]
        dur = dur + self.transdata[lo:hi]
        dur = np.where(c.on_host[lo:hi], 0.0, dur)
        last_link = self.is_link[hi - 1]
        m = hi - lo - (1 if last_link else 0)
        if lo == 0 and s.sink:
            self.dev_free = np.maximum(self.dev_free, arrival[:, 0]) + self.sink_header
        st = in_order(arrival[:, :m], dur[:, :m], self.dev_free)
        r.dev_ts[:, lo:lo + m], r.dev_dur[:, lo:lo + m] = st, dur[:, :m]
        if m:
            self.dev_free = st[:, -1] + dur[:, m - 1]
        if last_link:
            self._collective(hi - 1, np.maximum(arrival[:, -1], self.dev_free), peers)
        if self.sync[hi - 1]:
            done = r.dev_ts[:, hi - 1] + r.dev_dur[:, hi - 1]
            r.sync_ts[:, hi - 1] = self.h
            self.h = np.maximum(self.h, done) + self.sync_cost[hi - 1]
            r.sync_dur[:, hi - 1] = self.h - r.sync_ts[:, hi - 1]

    @property
    def sink_header(self) -> float:
        """Per-iteration model-execute header: address updates of every task's I/O."""
        return 1.0e4 + 100.0 * self.n

    def _collective(self, i: int, arrive: np.ndarray, peers: dict[int, Stage]) -> None:
        r, lay, g = self.rec, self.lay, self.g
        op = self.order[i]
        coll, group = g.coll[op], g.comm_group[op]
        nbytes = r.comm_bytes[i]
        link = lay.link_for(group)
        if group in ("tp", "ep", "dp"):
            size = lay.tp if group == "tp" else lay.dp
            grid = arrive.reshape(lay.dp, lay.tp)
            start = np.broadcast_to(grid.max(axis=1 if group == "tp" else 0,
                                             keepdims=True), grid.shape).reshape(-1)
            xmit = transmit_ns(coll, nbytes, size, link, self.s) if size > 1 else 0.0
            end = start + xmit + retransmit_ns(self.rng, 1, self.s, link.name == "rdma")[0] \
                * (size > 1)
        elif coll == "send":
            end = arrive + transmit_ns(coll, nbytes, 2, link, self.s)
            key = ("fwd" if i < self.fwd_end else "bwd", int(self.micro[i]))
            self.sends[key] = end
            r.dev_ts[:, i], r.dev_dur[:, i] = arrive, end - arrive
            return  # asynchronous: the compute stream does not wait for a send
        else:  # recv: wait for the partner stage's send of this microbatch
            fwd = i < self.fwd_end
            peer = peers.get(self.stage - 1 if fwd else self.stage + 1)
            sent = peer.sends.get(("fwd" if fwd else "bwd", int(self.micro[i]))) \
                if peer else None
            end = np.maximum(arrive, sent) if sent is not None else arrive + link.alpha_s * 1e9
        r.dev_ts[:, i], r.dev_dur[:, i] = arrive, end - arrive
        self.dev_free = end

    def _grad_allreduce(self) -> None:
        """Data-parallel gradient allreduce per bucket on the communication stream."""
        r, lay, s = self.rec, self.lay, self.s
        nb = len(self.bucket_pos)
        if lay.dp <= 1 or nb == 0:
            r.opt_wait_ts, r.opt_wait_dur = self.dev_free.copy(), np.zeros(self.R)
            return
        done = r.dev_ts[:, self.bucket_pos] + r.dev_dur[:, self.bucket_pos]
        if not s.overlap_comm:  # everything waits for the end of backward
            done = np.broadcast_to(self.dev_free[:, None], done.shape)
        link = lay.link_for("dp")
        sizes = np.array([message_bytes(b, s) for b in self.bucket_bytes])
        # a bucket issued while backward still computes shares links and HBM with it (and with
        # the buckets before it); the last one, issued when backward ends, has the link alone
        conc = (done.max(axis=0) < self.dev_free.max()) & s.overlap_comm
        xmit = np.array([transmit_ns("allreduce", b, lay.dp, link, s, concurrent=bool(c))
                         for b, c in zip(sizes, conc, strict=True)])
        xmit = xmit + retransmit_ns(self.rng, nb, s, link.name == "rdma")
        ts, dur = np.zeros((self.R, nb)), np.zeros((self.R, nb))
        free = self.comm_free
        for b in range(nb):
            a = np.maximum(done[:, b], free)
            start = a.reshape(lay.dp, lay.tp).max(axis=0)
            start = np.broadcast_to(start, (lay.dp, lay.tp)).reshape(-1)
            free = start + xmit[b]
            ts[:, b], dur[:, b] = a, free - a
        self.comm_free = free
        r.grad_ts, r.grad_dur, r.grad_bytes = ts, dur, sizes
        r.opt_wait_ts = self.dev_free.copy()
        r.opt_wait_dur = np.maximum(free - self.dev_free, 0.0)
        self.dev_free = np.maximum(self.dev_free, free)

    def finish(self) -> StepRecord:
        r = self.rec
        if not len(r.opt_wait_ts):
            r.opt_wait_ts, r.opt_wait_dur = self.dev_free.copy(), np.zeros(self.R)
        r.end_sync_ts = self.h.copy()
        self.h = np.maximum(np.maximum(self.h, self.dev_free), self.comm_free) + self.sync_ns
        r.end = self.h.copy()
        return r
