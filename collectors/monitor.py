"""The lightweight monitor: a few rows per step, cheap enough to leave on for a whole job.

Input: :class:`hermes.hooks.StepInfo` at every step end (the Collector protocol's ``on_step``).
Output, in trace-schema columns, handed to ``sink(batch)`` every ``flush_steps`` steps and at
``close``:

* one ``step`` event per (rank, step): ``ts_ns``/``dur_ns`` = the step's wall time, ``flops``
  and ``bytes`` (communication bytes) when the producer knows them;
* ``counter`` samples on lane ``monitor`` at the step's end, one per known figure (names and
  units in :data:`COUNTERS`): device busy %, samples/s, tokens/s, TFLOP/s, MFU, communication
  bandwidth, host CPU %, host RSS, GC pause time, and one ``queue.<name>`` per data queue;
* a ``marker`` named ``hermes.slow_step`` for every step the detector flags.

Slow-step detection is Hermes's two stages: (1) against the job's own history, a robust z-score
``0.6745 * (t - median) / MAD`` of the step time over the last ``window`` steps of the same rank
(MAD: median absolute deviation; the 0.6745 makes it comparable to a normal z-score), gated by a
minimum relative slowdown so that a job with near-constant step times does not flag noise;
(2) within a communication domain, the slowest rank of a step (:func:`slowest_ranks`, also run
on a finished trace when ranks were separate processes).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hermes.hooks import EventBatch, StepInfo
from hermes.trace.journal_rows import ROW_COLUMNS

#: Counter name -> unit (stored in ``args.unit``).
COUNTERS: dict[str, str] = {
    "device_busy_pct": "%",
    "samples_per_s": "1/s",
    "tokens_per_s": "1/s",
    "tflops": "TFLOP/s",
    "mfu_pct": "%",
    "comm_bw_GBps": "GB/s",
    "host_cpu_pct": "%",
    "host_rss_bytes": "B",
    "gc_ms": "ms",
    "gc_collections": "1",
    "data_wait_ms": "ms",
}
_ARGS = {name: json.dumps({"unit": unit, "source": "monitor"}) for name, unit in COUNTERS.items()}
_QUEUE_ARGS = json.dumps({"unit": "items", "source": "monitor"})
_STEP_LANE = "steps"
#: the columns of the monitor's rows (and of a session's own: ``collectors/api.py``), those
#: the journal stores in its binary row format
COLUMNS = ROW_COLUMNS
_COUNTER_LANE = "monitor"


@dataclass(frozen=True)
class SlowStep:
    """A step flagged by the detector. ``z`` is the robust z-score; ``ratio`` = t / median."""

    rank: int
    step: int
    dur_ns: int
    z: float
    ratio: float
    reason: str = "history"


class HostSampler:
    """Host CPU % (this process, 100 = one core: its CPU time over the wall time since the
    last sample) and RSS (``/proc/self/statm``, kept open: one ``pread``; psutil where there
    is no /proc); None where unavailable.

    Read at most every ``interval_s`` (a step can be shorter): between reads :meth:`sample`
    returns (None, None) and no counter row is written.
    """

    def __init__(self, interval_s: float = 0.2) -> None:
        self.interval_ns = int(interval_s * 1e9)
        self.next_ns = 0  #: when the next sample is due (before: :meth:`sample` reads none)
        self._cpu, self._wall = time.process_time_ns(), time.perf_counter_ns()
        self._statm: int | None = None
        self._proc: Any = None
        try:
            self._statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
            self._page = os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, AttributeError):
            try:
                import psutil

                self._proc = psutil.Process()
            except Exception:  # noqa: BLE001 - psutil missing: RSS is not sampled
                self._proc = None

    def sample(self, now_ns: int) -> tuple[float | None, float | None]:
        if now_ns < self.next_ns:
            return None, None
        self.next_ns = now_ns + self.interval_ns
        cpu, wall = time.process_time_ns(), time.perf_counter_ns()
        pct = 100.0 * (cpu - self._cpu) / (wall - self._wall) if wall > self._wall else None
        self._cpu, self._wall = cpu, wall
        try:
            if self._statm is not None:
                return pct, float(int(os.pread(self._statm, 64, 0).split()[1]) * self._page)
            return pct, float(self._proc.memory_info().rss) if self._proc is not None else None
        except Exception:  # noqa: BLE001 - the process table can vanish at shutdown
            return pct, None

    def close(self) -> None:
        if self._statm is not None:
            with contextlib.suppress(OSError):
                os.close(self._statm)
            self._statm = None
            self._proc = None


class Monitor:
    """Always-on per-step monitor and stage-1 slow-step detector (a ``Collector``).

    ``peak_flops`` (FLOP/s of the whole device) turns known step FLOPs into MFU;
    ``on_slow`` callbacks receive each :class:`SlowStep` (the coarse-to-fine trigger listens).
    ``StepInfo.extra`` may carry ``gc_ns``, ``gc_count`` and ``data_wait_ns`` (per-step totals
    from the Python hooks), which become the ``gc_ms``, ``gc_collections`` and
    ``data_wait_ms`` counters, and
    ``detailed=True`` for a step captured in detail, which the detector skips. ``domains``
    (rank -> communication domain) groups ranks for stage 2 (:meth:`summary`).
    """

    mode = "monitor"

    def __init__(self, sink: Callable[[EventBatch], None], *, peak_flops: float | None = None,
                 window: int = 100, min_history: int = 8, z_threshold: float = 3.5,
                 min_ratio: float = 1.5, flush_steps: int = 64,
                 host_stats: bool = True, domains: Mapping[int, str] | None = None) -> None:
        self.sink = sink
        self.peak_flops = peak_flops
        self.window = window
        self.min_history = min_history
        self.z_threshold = z_threshold
        self.min_ratio = min_ratio
        self.flush_steps = max(1, flush_steps)
        self.on_slow: list[Callable[[SlowStep], None]] = []
        self.slow_steps: list[SlowStep] = []
        self.steps_seen = 0
        self._host = HostSampler() if host_stats else None
        self._history: dict[int, deque[int]] = {}
        # (median, scale) per rank, refreshed every ``refresh`` steps: the history moves
        # slowly, and two medians per step would cost more than the rest of the monitor.
        self._stats: dict[int, tuple[float, float, int]] = {}
        self.refresh = 8
        self._rows: list[tuple[Any, ...]] = []  # one tuple a row (COLUMNS), since the last take
        self._pending_steps = 0
        self._closed = False
        self._durs: list[tuple[int, int, int]] = []  # (rank, step, dur) for stage 2
        self.domains = domains

    # -- Collector protocol ---------------------------------------------------------------
    def wants_detail(self, rank: int, step: int) -> bool:
        return False

    def on_events(self, batch: EventBatch) -> None:
        """The monitor records no fine-grained events."""

    def on_step(self, info: StepInfo) -> None:
        x = info.extra
        self.step(info, bool(x.get("detailed")), x.get("gc_ns"), x.get("gc_count"),
                  x.get("data_wait_ns"))

    def step(self, info: StepInfo, detailed: bool = False, gc_ns: int | None = None,
             gc_count: int | None = None, data_wait_ns: int | None = None) -> None:
        """:meth:`on_step` with the figures of ``info.extra`` given apart (a session's own
        step: no dictionary built for them)."""
        rank, step, start = info.rank, info.step, int(info.start_ns)
        end = int(info.end_ns)
        dur = end - start if end > start else 0
        rows = self._rows
        rows.append((rank, _STEP_LANE, "host", "step", "step", start, dur, step, info.flops,
                     info.comm_bytes, None, None))
        self._counters(info, dur, end, rows)
        host = self._host
        if host is not None and (now := time.perf_counter_ns()) >= host.next_ns:
            cpu, rss = host.sample(now)
            if cpu is not None:
                rows.append((rank, _COUNTER_LANE, "counter", "counter", "host_cpu_pct", end, 0,
                             step, None, None, cpu, _ARGS["host_cpu_pct"]))
            if rss is not None:
                rows.append((rank, _COUNTER_LANE, "counter", "counter", "host_rss_bytes", end,
                             0, step, None, None, rss, _ARGS["host_rss_bytes"]))
        if gc_ns:
            rows.append((rank, _COUNTER_LANE, "counter", "counter", "gc_ms", end, 0, step, None,
                         None, gc_ns / 1e6, _ARGS["gc_ms"]))
        if data_wait_ns:
            rows.append((rank, _COUNTER_LANE, "counter", "counter", "data_wait_ms", end, 0,
                         step, None, None, data_wait_ns / 1e6, _ARGS["data_wait_ms"]))
        if gc_count:
            rows.append((rank, _COUNTER_LANE, "counter", "counter", "gc_collections", end, 0,
                         step, None, None, float(gc_count), _ARGS["gc_collections"]))
        for qname, depth in info.queue_depths.items():
            rows.append((rank, _COUNTER_LANE, "counter", "counter", f"queue.{qname}", end, 0,
                         step, None, None, float(depth), _QUEUE_ARGS))
        # A step captured in detail runs slower because of the capture: judging it (or
        # keeping it as history) would let capture trigger more capture.
        slow = None if detailed else self._detect(rank, step, dur)
        self.steps_seen += 1
        self._durs.append((rank, step, dur))
        self._pending_steps += 1
        if slow is not None:
            self.slow_steps.append(slow)
            rows.append((rank, _STEP_LANE, "host", "marker", "hermes.slow_step", start, dur,
                         step, None, None, slow.z,
                         json.dumps({"z": round(slow.z, 3), "ratio": round(slow.ratio, 3),
                                     "reason": slow.reason})))
            for cb in self.on_slow:
                cb(slow)
        if self._pending_steps >= self.flush_steps:
            self.flush()

    def close(self, meta_updates: dict[str, Any] | None = None) -> None:
        if not self._closed:
            self.flush()
            self._closed = True
            if self._host is not None:
                self._host.close()

    # -- helpers ------------------------------------------------------------------------
    def flush(self) -> None:
        """Hand the buffered rows to the sink, as columns (bounded memory; called every
        ``flush_steps``)."""
        rows = self.take()
        if rows:
            self.sink(dict(zip(COLUMNS, map(list, zip(*rows, strict=True)), strict=True)))

    def take(self) -> list[tuple[Any, ...]]:
        """The rows buffered since the last :meth:`take` or :meth:`flush`, one tuple each
        (:data:`COLUMNS`), handed over instead of to the sink."""
        rows, self._rows = self._rows, []
        self._pending_steps = 0
        return rows

    def summary(self, top: int = 20) -> dict[str, Any]:
        """What goes into ``TraceMeta.collector``: stage 1's flagged steps and, when this
        process saw several ranks, stage 2's suspects (slowest rank of a domain and step,
        the ``top`` largest ratios)."""
        out: dict[str, Any] = {"slow_steps": [
            {"rank": s.rank, "step": s.step, "z": round(s.z, 3), "ratio": round(s.ratio, 3)}
            for s in self.slow_steps]}
        if len({r for r, _, _ in self._durs[:4096]}) > 1:
            steps = pd.DataFrame(self._durs, columns=["rank", "step", "dur_ns"])
            sus = slowest_ranks(steps, self.domains)
            sus = sus[sus["suspect"]].nlargest(top, "ratio")
            out["slow_ranks"] = [{"domain": str(d), "step": int(st), "rank": int(r),
                                  "ratio": round(float(x), 3)}
                                 for d, st, r, x in sus[["domain", "step", "rank", "ratio"]]
                                 .itertuples(index=False)]
        return out

    def _counters(self, info: StepInfo, dur: int, end: int, rows: list[Any]) -> None:
        """The step's rates the producer gave the figures of (the time ones if ``dur`` > 0)."""
        rank, step = info.rank, info.step
        figures: list[tuple[str, float]] = []
        secs = dur / 1e9
        if info.device_busy_ns is not None and dur:
            figures.append(("device_busy_pct", 100.0 * info.device_busy_ns / dur))
        if info.samples is not None and dur:
            figures.append(("samples_per_s", info.samples / secs))
        if info.tokens is not None and dur:
            figures.append(("tokens_per_s", info.tokens / secs))
        if info.flops is not None and dur:
            figures.append(("tflops", info.flops / secs / 1e12))
            if self.peak_flops:
                figures.append(("mfu_pct", 100.0 * info.flops / secs / self.peak_flops))
        if info.comm_bytes is not None and info.comm_ns:
            figures.append(("comm_bw_GBps", info.comm_bytes / info.comm_ns))  # B/ns == GB/s
        for name, value in figures:
            rows.append((rank, _COUNTER_LANE, "counter", "counter", name, end, 0, step, None,
                         None, float(value), _ARGS[name]))

    def _detect(self, rank: int, step: int, dur: int) -> SlowStep | None:
        hist = self._history.get(rank)
        if hist is None:
            hist = self._history[rank] = deque(maxlen=self.window)
        slow = None
        if len(hist) >= self.min_history:
            med, scale, age = self._stats.get(rank, (0.0, 0.0, self.refresh))
            if age >= self.refresh:
                med, scale = median_scale_of(hist)
                age = 0
            self._stats[rank] = (med, scale, age + 1)
            z = 0.6745 * (dur - med) / scale
            ratio = dur / med if med > 0 else float("inf")
            if z > self.z_threshold and ratio >= self.min_ratio:
                slow = SlowStep(rank, step, dur, z, ratio)
        if slow is None:
            # A flagged step stays out of the history so one outlier cannot mask the next.
            hist.append(dur)
        return slow



def robust_z(history: np.ndarray, value: float) -> tuple[float, float]:
    """Robust z-score of ``value`` against ``history`` and its ratio to the history's median.

    A zero MAD (identical history) is replaced by 1 % of the median, so a constant history
    flags any step more than ~5 % slower instead of dividing by zero.
    """
    med, scale = median_scale(history)
    return 0.6745 * (value - med) / scale, (value / med if med > 0 else float("inf"))


def median_scale(history: np.ndarray) -> tuple[float, float]:
    """Median and MAD (floored at 1 % of the median and at 1) of a history."""
    med = float(np.median(history))
    mad = float(np.median(np.abs(history - med)))
    return med, max(mad, 0.01 * abs(med), 1.0)


def median_scale_of(history: Iterable[int]) -> tuple[float, float]:
    """:func:`median_scale` of a short history of ints, in Python: (sorting 100 ints costs
    less than numpy's median does to start)."""
    xs = sorted(history)
    med = _mid(xs)
    mad = _mid(sorted([abs(x - med) for x in xs]))
    return med, max(mad, 0.01 * abs(med), 1.0)


def _mid(xs: list[Any]) -> float:
    n = len(xs)
    return float(xs[n // 2]) if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def slowest_ranks(steps: pd.DataFrame, domains: Mapping[int, str] | None = None,
                  min_ratio: float = 1.1) -> pd.DataFrame:
    """Stage 2: per (communication domain, step), the slowest rank and how much slower it was.

    ``steps``: rows with ``rank``, ``step``, ``dur_ns`` (the ``step`` events of a trace).
    ``domains``: rank -> domain name (default: all ranks in one domain ``"world"``).
    Returns columns ``domain, step, rank, dur_ns, median_ns, ratio, suspect`` (one row per
    domain and step; ``suspect`` when ``ratio >= min_ratio`` and the domain has > 1 rank).
    """
    cols = ["domain", "step", "rank", "dur_ns", "median_ns", "ratio", "suspect"]
    if steps.empty:
        return pd.DataFrame({c: [] for c in cols})
    df = steps[["rank", "step", "dur_ns"]].copy()
    df["rank"] = df["rank"].astype("int64")
    df["step"] = df["step"].astype("int64")
    df["dur_ns"] = df["dur_ns"].astype("int64")
    df["domain"] = df["rank"].map(dict(domains)) if domains else "world"
    df["domain"] = df["domain"].fillna("world")
    g = df.groupby(["domain", "step"], sort=True)
    med = g["dur_ns"].transform("median")
    n = g["dur_ns"].transform("size")
    idx = g["dur_ns"].idxmax()
    out = df.loc[idx, ["domain", "step", "rank", "dur_ns"]].copy()
    out["median_ns"] = med.loc[idx].to_numpy()
    out["ratio"] = out["dur_ns"] / out["median_ns"].where(out["median_ns"] > 0)
    out["suspect"] = (out["ratio"] >= min_ratio) & (n.loc[idx].to_numpy() > 1)
    return out[cols].reset_index(drop=True)


def now_ns() -> int:
    """The clock steps are measured on (CLOCK_MONOTONIC via ``perf_counter_ns``), in ns."""
    return time.perf_counter_ns()
