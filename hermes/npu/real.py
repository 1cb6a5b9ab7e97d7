"""A step-by-step Python API on the emulated NPU, on a real or a virtual clock.

:class:`Session` is what a plain training loop calls: ``with npu.step():`` around an
iteration, ``npu.matmul(...)`` / ``npu.eltwise(...)`` to issue operators, ``npu.item()`` for a
host sync. On the **real** clock every host stage really runs in Python (shape inference,
tiling with a tiling cache, a caching allocator, the launch) and is timed with
``perf_counter_ns``; the device follows the cost model, and a sync sleeps until the modelled
device time. On the **virtual** clock host stages cost what the host model says. Events go
to the collector exactly as from :class:`hermes.npu.Runtime`.

:class:`RealRuntime` runs a zoo workload through a Session (one rank).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from hermes.devices import DeviceProfile
from hermes.devices import get as get_device
from hermes.errors import UsageError
from hermes.hooks import Collector, NullCollector, StepInfo
from hermes.npu.device import UnitPeaks
from hermes.npu.graph import AI_CPU, CUBE, LINK, UNIT_NAMES, VECTOR
from hermes.npu.host import ALLOC_SHARE, INFER_SHARE, TILING_HIT_SHARE, TILING_SHARE, stack_s
from hermes.npu.result import RunResult
from hermes.npu.settings import Settings
from hermes.npu.workloads import Workload
from hermes.npu.workloads import get as get_workload

_UNIT = {"cube": CUBE, "vector": VECTOR, "ai_cpu": AI_CPU}


class Session:
    """One emulated device driven op by op from Python. Times are ns since the session began."""

    def __init__(self, device: str | DeviceProfile = "ascend910b", *, clock: str = "real",
                 settings: Settings | None = None, collector: Collector | None = None,
                 rank: int = 0) -> None:
        if clock not in ("real", "virtual"):
            raise UsageError(f"unknown clock {clock!r}", hint="valid: virtual, real")
        self.profile = get_device(device) if isinstance(device, str) else device
        self.clock, self.s = clock, settings or Settings()
        self.collector = collector or NullCollector()
        self.rank = rank
        self.peaks = UnitPeaks.of(self.profile)
        f = self.profile.fields
        self.op_s = stack_s(self.profile) * self.s.host_slowdown
        self.launch_s = f.get("launch_latency_s", 6e-6) * self.s.host_slowdown
        self.sched_ns = f.get("task_sched_latency_s", 2e-6) * 1e9
        self.sync_ns = f.get("sync_roundtrip_s", 4e-5) * 1e9
        self._t0 = time.perf_counter_ns()
        self._vt = 0.0
        self.dev_free = 0.0
        self.tiling_cache: dict[tuple[Any, ...], tuple[int, ...]] = {}
        self.pool: dict[int, list[int]] = {}
        self.step_no = -1
        self.detail = False
        self.rows: list[tuple[Any, ...]] = []
        self.corr = 0
        self.busy = 0.0
        self.flops = 0.0
        self.tasks = 0
        self.steps_ns: list[float] = []
        self.host_ns: list[float] = []

    # -- clock --------------------------------------------------------------------------
    def now(self) -> float:
        if self.clock == "real":
            return float(time.perf_counter_ns() - self._t0)
        return self._vt

    def _spend(self, modelled_ns: float, work: Any = None, *args: Any) -> tuple[float, float]:
        """Run a host stage: really (timed) on the real clock, modelled on the virtual one."""
        t = self.now()
        if self.clock == "real":
            if work is not None:
                work(*args)
            return t, self.now() - t
        if work is not None:
            work(*args)
        self._vt += modelled_ns
        return t, modelled_ns

    def _wait_until(self, t_ns: float) -> None:
        if self.clock == "real":
            delay = (t_ns - self.now()) / 1e9
            if delay > 0:
                time.sleep(delay)
        else:
            self._vt = max(self._vt, t_ns)

    def _ev(self, lane: str, lk: str, kind: str, name: str, ts: float, dur: float,
            **kw: Any) -> None:
        if self.detail:
            self.rows.append((lane, lk, kind, name, ts, dur, kw))

    # -- the real host work of each stage ------------------------------------------------
    @staticmethod
    def _infer(shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(int(d) for d in shape[:-1]) + (int(shape[-1]),)

    def _tiling(self, key: tuple[Any, ...], shape: tuple[int, ...]) -> bool:
        if self.s.tiling_cache and key in self.tiling_cache:
            return True
        # block split search over the output: what a tiling function computes
        best = min(((-(-shape[0] // b)) * b - shape[0], b) for b in (16, 32, 64, 128, 256))
        tiles = tuple(-(-d // best[1]) for d in shape)
        if self.s.tiling_cache:
            self.tiling_cache[key] = tiles
        return False

    def _alloc(self, nbytes: int) -> None:
        size = 1 << max(int(nbytes) - 1, 1).bit_length()   # caching allocator size class
        free = self.pool.setdefault(size, [])
        free.append(free.pop() if free else size)

    # -- public API ------------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, samples: int | None = None, tokens: int | None = None) -> Iterator[Session]:
        """One training iteration; ends with a device synchronize."""
        self.step_no += 1
        self.detail = self.collector.wants_detail(self.rank, self.step_no)
        self.rows, self.busy, self.flops = [], 0.0, 0.0
        start = self.now()
        host0 = self._host_total = 0.0
        yield self
        self.item("StreamSynchronize")
        end = self.now()
        self._ev("thread 0", "host", "step", "ProfilerStep", start, end - start)
        if self.detail:
            self.collector.on_events(self._batch())
        self.steps_ns.append(end - start)
        self.host_ns.append(self._host_total - host0)
        self.collector.on_step(StepInfo(rank=self.rank, step=self.step_no,
                                        start_ns=int(start), end_ns=int(end),
                                        device_busy_ns=int(self.busy), samples=samples,
                                        tokens=tokens, flops=self.flops))

    def op(self, name: str, unit: str, flops: float, nbytes: float,
           shape: tuple[int, ...] = (1,), small: bool = False) -> float:
        """Issue one operator through InferShape -> tiling -> alloc -> launch; returns the
        modelled device end time (ns)."""
        u = _UNIT[unit]
        key = (name, shape)
        if small and self.s.host_small_ops:
            t, d = self._spend(2e3, np.add, np.zeros(4), 1.0)
            self._host_total += d
            self._ev("thread 0", "host", "host_op", name, t, d, unit="host")
            return t + d
        t1, d1 = self._spend(INFER_SHARE * self.op_s * 1e9, self._infer, shape)
        hit_box: list[bool] = []
        t2, d2 = self._spend(0.0, lambda: hit_box.append(self._tiling(key, shape)))
        if self.clock == "virtual":
            d2 = (TILING_HIT_SHARE if hit_box[0] else TILING_SHARE) * self.op_s * 1e9
            self._vt = t2 + d2
        t3, d3 = self._spend(ALLOC_SHARE * self.op_s * 1e9, self._alloc, int(nbytes))
        self.corr += 1
        t4, d4 = self._spend(self.launch_s * 1e9)
        self._host_total += d1 + d2 + d3 + d4
        dur = max(flops / self.peaks.array()[u], nbytes / self.peaks.hbm_Bps) * 1e9
        start = max(self.dev_free, t4 + d4 + self.sched_ns)
        self.dev_free = start + dur
        self.busy += dur
        self.flops += flops
        self.tasks += 1
        self._ev("thread 0", "host", "infer_shape", name, t1, d1)
        self._ev("thread 0", "host", "tiling", name, t2, d2,
                 args='{"cache_hit":true}' if hit_box[0] else '{"cache_hit":false}')
        self._ev("thread 0", "host", "alloc", name, t3, d3)
        self._ev("thread 0", "host", "launch", name, t4, d4, corr_id=self.corr)
        self._ev("stream 0", "device", "kernel", name, start, dur, corr_id=self.corr, stream=0,
                 unit=UNIT_NAMES[u], flops=flops, bytes=int(nbytes))
        return self.dev_free

    def matmul(self, name: str, m: int, k: int, n: int) -> float:
        return self.op(name, "cube", 2.0 * m * k * n, 2.0 * (m * k + k * n + m * n), (m, k, n))

    def eltwise(self, name: str, elems: int) -> float:
        return self.op(name, "vector", float(elems), 6.0 * elems, (elems,))

    def item(self, name: str = "item_sync") -> None:
        """A host sync (``tensor.item()``): block until the device is done."""
        t = self.now()
        self._wait_until(self.dev_free)
        self._spend(self.sync_ns)
        self._ev("thread 0", "host", "sync", name, t, self.now() - t)

    def _batch(self) -> dict[str, list[Any]]:
        cols: dict[str, list[Any]] = {k: [] for k in (
            "rank", "lane", "lane_kind", "kind", "name", "ts_ns", "dur_ns", "step", "corr_id",
            "stream", "unit", "flops", "bytes", "args")}
        for lane, lk, kind, name, ts, dur, kw in self.rows:
            for k, v in (("rank", self.rank), ("lane", lane), ("lane_kind", lk), ("kind", kind),
                         ("name", name), ("ts_ns", int(ts)), ("dur_ns", max(int(dur), 0)),
                         ("step", self.step_no)):
                cols[k].append(v)
            for k in ("corr_id", "stream", "unit", "flops", "bytes", "args"):
                cols[k].append(kw.get(k))
        return cols


class RealRuntime:
    """Run a zoo workload (one rank) through a :class:`Session` on the real clock."""

    def __init__(self, device: str | DeviceProfile = "ascend910b", *,
                 settings: Settings | None = None, collector: Collector | None = None,
                 seed: int = 0, meta: dict[str, Any] | None = None, clock: str = "real") -> None:
        self.session = Session(device, clock=clock, settings=settings, collector=collector)
        self.seed, self.meta = seed, dict(meta or {})

    def run(self, workload: str | Workload, steps: int) -> RunResult:
        w = get_workload(workload) if isinstance(workload, str) else workload
        g = w.build(1, 1, 0)
        sess = self.session
        order = [i for ph in (0, 1, 2) for i in np.flatnonzero(g.phase == ph)]
        for _ in range(steps):
            with sess.step(samples=w.samples_per_step, tokens=w.tokens_per_step):
                for i in order:
                    if g.unit[i] == LINK:
                        continue  # one rank: no peers to communicate with
                    sess.op(g.name[i], UNIT_NAMES[g.unit[i]], float(g.flops[i]),
                            float(g.bytes[i]), (int(g.sig[i]), int(g.inner[i])),
                            bool(g.small[i]))
                    if g.sync[i]:
                        sess.item()
        prof = sess.profile
        res = RunResult(w.name, 1, (1, 1, 1), np.array(sess.steps_ns)[:, None],
                        np.array(sess.host_ns)[:, None], np.zeros((steps, 1)), sess.tasks,
                        sess.s)
        res.meta = {"device": prof.to_meta(), "source": "emulator",
                    "extra": {**self.meta, "workload": w.name, "ranks": 1, "seed": self.seed,
                              "clock": sess.clock, "settings": sess.s.to_meta()}}
        return res

    def close(self, result: RunResult) -> None:
        self.session.collector.close(result.meta)
