"""The Python API: ``hermes.profile``, ``hermes.step``, ``hermes.region``.

::

    with hermes.profile(out="trace_dir", mode="auto"):
        for batch in loader:
            with hermes.region("forward"):
                ...
            hermes.step(samples=len(batch))

A :class:`Recording` is one process's recording: the monitor (always), the coarse-to-fine trigger
(``auto``: slow steps, ``SIGUSR1``, a trigger file; ``fine``: every step) and the fine-grained
collector, which owns the output file. The session is itself a ``hermes.hooks.Collector``, so
the emulated runtime and the PyTorch hooks report into it like any producer.

Step boundaries come from one source per session, the first that reports: ``hermes.step()``
(user), a producer's ``on_step`` (the emulated runtime), or PyTorch optimizer steps.
Output: ``out`` ending in ``.parquet`` -> one file; any other path -> a directory with one
``rank-NNNNN.parquet`` per rank (torchrun-style ``RANK``/``WORLD_SIZE`` are read from the
environment). The file is published (temp then rename) on exit, on an exception, on SIGINT,
SIGTERM and SIGABRT, with every step completed so far; completed steps are saved every
``flush_seconds`` or further apart (``collectors/saves.py``: saves are kept under 0.2 % of the
job's time), each step in between goes to a journal (``hermes.trace.journal``): a SIGKILL or
a segfault loses no completed step. Each step's number is kept in a progress file that tells
readers how far it got.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from time import perf_counter_ns
from types import FrameType
from typing import Any

from hermes.collectors import pyhooks, pysample
from hermes.collectors.auto import DEFAULT_WINDOW, AutoTrigger
from hermes.collectors.envvars import env_int
from hermes.collectors.fine import FineCollector
from hermes.collectors.monitor import COLUMNS, Monitor
from hermes.collectors.saves import SaveSchedule
from hermes.errors import HermesError, OutputError, UsageError
from hermes.hooks import Collector, EventBatch, NullCollector, StepInfo
from hermes.trace.meta import TraceMeta

MODES = {
    "monitor": "per-step figures only (always-on cost)",
    "fine": "every event of every step",
    "auto": "monitor always; fine-grained capture for K steps after a slow step or on demand",
}
region = pyhooks.region
_MAX_BUFFER = 16384  # host events held before an early flush (bounded memory)


def on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def warn(message: str) -> None:
    """One line on stderr from inside the profiled process (never an exception there)."""
    with contextlib.suppress(OSError, ValueError):
        print(f"hermes: warning: {message}", file=sys.stderr, flush=True)


class Recording:
    """One process's profiling session (a ``Collector``); use through :func:`profile`."""

    def __init__(self, out: str | os.PathLike[str] | None = None, mode: str = "auto", *,
                 window: int = DEFAULT_WINDOW, rank: int | None = None,
                 world_size: int | None = None, device: str | None = None,
                 peak_flops: float | None = None, trigger_file: str | os.PathLike[str] | None
                 = None, trigger_signal: int | None = signal.SIGUSR1,
                 handle_signals: bool = True, z_threshold: float = 3.5,
                 min_ratio: float = 1.5, flush_steps: int = 64, flush_seconds: float = 1.0,
                 extra: dict[str, Any] | None = None,
                 sample_interval: float | None = pysample.DEFAULT_INTERVAL_S) -> None:
        if mode not in MODES:
            raise UsageError(f"unknown mode {mode!r}", hint=f"valid: {', '.join(MODES)}")
        if window < 1:
            raise UsageError(f"window must be >= 1, got {window}")
        self.mode = mode
        self.rank = env_int("RANK", 0) if rank is None else int(rank)
        self.world_size = env_int("WORLD_SIZE", 1, lo=1) if world_size is None \
            else int(world_size)
        self.out = Path(out if out is not None else "hermes-trace")
        if self.out.suffix == ".parquet" and self.world_size > 1:
            raise UsageError("a multi-rank job needs a directory, not one .parquet file",
                             where=str(self.out), hint="pass --out DIR")
        run_id = os.environ.get("TORCHELASTIC_RUN_ID")  # shared by a torchrun job's ranks
        meta = TraceMeta(source="profile", extra={"world_size": self.world_size,
                                                  "pid": os.getpid(),
                                                  **({"run_id": run_id} if run_id else {}),
                                                  **(extra or {})})
        if device:
            from hermes import devices

            prof = devices.get(device)
            meta = meta.with_(device=prof.to_meta())
            if peak_flops is None:
                peak_flops = max(prof.peak_flops.values(), default=None)
        self._make_out_dir()
        # Producers' own step events are dropped: the monitor writes one per step, all steps.
        # segmented: completed steps are published as they finish (every ``flush_seconds``),
        # so a job killed by SIGKILL or abort() keeps its trace; the job's other ranks write
        # their own files into the same directory
        self.fine = FineCollector(self.out, meta, drop_kinds=("step",), replace=False,
                                  segmented=True, journal=flush_seconds > 0)  # (0: saves only)
        self.fine.progress(self.rank, -1)  # claims the rank: a second run here is refused
        self.saves = SaveSchedule(flush_seconds)
        self._journaling = True  # each step between two checkpoints (off once a write fails)
        self.monitor = Monitor(self._sink, peak_flops=peak_flops, z_threshold=z_threshold,
                               min_ratio=min_ratio, flush_steps=flush_steps)
        self.trigger: AutoTrigger | None = None
        if mode != "monitor":
            on_main = threading.current_thread() is threading.main_thread()
            self.trigger = AutoTrigger(
                window, always=(mode == "fine"), trigger_file=trigger_file,
                signum=trigger_signal if (mode == "auto" and on_main) else None)
            self.monitor.on_slow.append(self.trigger.on_slow)
        # Recorder state read by the Python hooks (pyhooks.Recorder).
        self.detail = False
        self.gc_ns = 0
        self.gc_count = 0
        self.data_wait_ns = 0
        self.lane = f"thread {threading.get_native_id()}"
        self.step_no = 0
        self.step_source: str | None = None
        self.closed = False
        self.path: Path | None = None
        self._host: list[tuple[Any, ...]] = []  # host rows (COLUMNS) not in the trace yet
        self._host_steps = 0
        self._shift_ns: int | None = None  # perf_counter_ns - runtime clock, once known
        self._events_entry: int | None = None  # first on_events since the last step
        self._asked_at: tuple[int, int] | None = None  # (step, perf ns) of wants_detail
        self._shift_lo: int | None = None
        self._shift_hi: int | None = None
        self.flush_steps = max(1, flush_steps)
        self._busy_ns = 0
        self._plain = [0, 0]  # hook ns and steps of this rank's steps not captured in detail
        self._in_hook = False
        self._pending_signal: int | None = None
        self._old_handlers: dict[int, Any] = {}
        #: Called after each of this rank's step boundaries / first thing in close (the
        #: PyTorch profiler driver starts, stops and merges its capture there).
        self.step_listeners: list[Callable[[], None]] = []
        self.close_listeners: list[Callable[[], None]] = []
        self._t_start = perf_counter_ns()
        self._step_start = self._t_start
        self.record("marker", "hermes.session_start", self._t_start, 0,
                    json.dumps({"argv": sys.argv, "mode": mode, "world_size": self.world_size}))
        self.detail = self.wants_detail(self.rank, self.step_no)
        # fine / auto: the training thread's Python stack, sampled while a step is detailed
        self.sampler = pysample.StackSampler(self, sample_interval) \
            if mode != "monitor" and sample_interval and on_main_thread() else None
        if handle_signals:
            self._install_signals()
        pyhooks.activate(self)
        atexit.register(self.close_quietly)

    def _make_out_dir(self) -> None:
        target = self.out.parent if self.out.suffix == ".parquet" else self.out
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot create output directory: {exc.strerror}",
                              path=target) from None
        if not os.access(target, os.W_OK):
            raise OutputError("output directory is not writable", path=target,
                              hint="choose another --out")

    # -- Collector protocol (the emulated runtime and other producers call these) -------
    def wants_detail(self, rank: int, step: int) -> bool:
        if rank == self.rank:
            self._asked_at = (step, perf_counter_ns())
        if self.trigger is None or self.closed:
            return False
        return self.trigger.wants_detail(rank, step) and self.fine.wants_detail(rank, step)

    def on_events(self, batch: EventBatch) -> None:
        if self.mode == "monitor" or self.closed:
            return
        t0 = perf_counter_ns()
        if self._events_entry is None:
            self._events_entry = t0
        self._in_hook = True
        try:
            self.fine.on_events(batch)
        finally:
            self._leave_hook(t0)

    def on_step(self, info: StepInfo, source: str = "runtime") -> None:
        if self.closed:
            return
        if self.step_source is None:
            self.step_source = source
        elif source != self.step_source:
            return  # another source owns the step boundaries
        t0 = perf_counter_ns()
        self._in_hook = True
        try:
            rank, x = info.rank, info.extra
            trigger = self.trigger
            # a step captured in detail: kept out of the detector (capture slowed it)
            detailed = (trigger is not None and trigger.wants_detail(rank, info.step)) or \
                bool(x and x.get("detailed"))
            if rank == self.rank:  # the Python hooks' totals of the step, unless given
                gc = (x.get("gc_ns", self.gc_ns), x.get("gc_count", self.gc_count),
                      x.get("data_wait_ns", self.data_wait_ns)) if x else \
                    (self.gc_ns, self.gc_count, self.data_wait_ns)
                self.gc_ns = self.data_wait_ns = self.gc_count = 0
                self.monitor.step(info, detailed, gc[0], gc[1], gc[2])
                # how far the run got, even if it dies (counted by the journal entry next)
                self.fine.progress(rank, info.step, not self._journaling)
            else:
                self.monitor.step(info, detailed, x.get("gc_ns"), x.get("gc_count"),
                                  x.get("data_wait_ns"))
            self._host_steps += 1
            if self._host_steps >= self.flush_steps:  # batched: one table per many steps
                self._flush_host()
            if source == "runtime" and rank == self.rank:  # (before a checkpoint writes
                self._learn_shift(info, t0)  # host rows: they go out on the runtime's clock)
            if self.saves.due(t0):  # saved every flush_seconds or more, journaled in between
                self._checkpoint(t0)
            elif self._journaling:
                self._journal(info.step)
            if trigger is not None:
                trigger.step_ended(info.step)
            self._events_entry = None
            if rank == self.rank:
                self.step_no = info.step + 1
                self._step_start = info.end_ns
                self.detail = self.wants_detail(rank, self.step_no)
                if self.sampler is not None:
                    self._drain_samples()
                for listener in self.step_listeners:
                    listener()
                if not (detailed or self.detail):  # (the monitor's cost: auto's outside
                    # its detail windows, the boundaries that start one included in those)
                    self._plain[0] += perf_counter_ns() - t0
                    self._plain[1] += 1
        finally:
            self._leave_hook(t0)

    def _learn_shift(self, info: StepInfo, now: int) -> None:
        """Bound ``perf_counter_ns - runtime clock`` from this step's report.

        A runtime may count time from its own origin (the emulator's real clock: ns since it
        started). It asked ``wants_detail`` just before taking the step's start (a lower
        bound, tight) and reported the end before we heard of it (an upper bound, loose by
        its own bookkeeping). The tightest lower bound wins while it stays below the upper.
        """
        upper = min(now, self._events_entry or now) - int(info.end_ns)
        self._shift_hi = upper if self._shift_hi is None else min(self._shift_hi, upper)
        asked = self._asked_at
        if asked is not None and asked[0] == info.step:
            lower = asked[1] - int(info.start_ns)
            self._shift_lo = lower if self._shift_lo is None else max(self._shift_lo, lower)
        lo, hi = self._shift_lo, self._shift_hi
        self._shift_ns = lo if lo is not None and lo <= hi else hi

    def close(self, meta_updates: dict[str, Any] | None = None) -> Path | None:
        """Flush everything and publish the trace. Idempotent; returns the trace path."""
        if self.closed:
            return self.path
        t0 = perf_counter_ns()
        for listener in self.close_listeners:
            listener()
        self.closed = True
        if self.sampler is not None:
            self.sampler.stop()
            self._drain_samples()
        pyhooks.activate(None)
        self._restore_signals()
        if self.trigger is not None:
            self.trigger.close()
        self._flush_host()
        self.monitor.close()
        # overhead_pct: time inside the hooks while the job ran, over the job's wall time (the
        # per-step cost); the one-off final flush and publish are reported apart.
        wall = max(1, t0 - self._t_start)
        collector = {"mode": self.mode, "overhead_pct": round(100.0 * self._busy_ns / wall, 4),
                     "collector_ns": self._busy_ns, "wall_ns": wall,
                     "plain_ns": self._plain[0], "plain_steps": self._plain[1],
                     "flush_ns": perf_counter_ns() - t0, "steps": self.monitor.steps_seen,
                     "window": self.trigger.window if self.trigger else None,
                     "requests": self.trigger.requests if self.trigger else [],
                     **self.monitor.summary()}
        if self.sampler is not None:
            collector["python_sampler"] = self.sampler.summary()
            if self.sampler.error:
                warn(f"rank {self.rank}: {self.sampler.stopped()}")
        updates = dict(meta_updates or {})
        collector.update(updates.pop("collector", {}) or {})
        updates["collector"] = collector
        self.path = self.fine.close(updates)
        atexit.unregister(self.close_quietly)
        return self.path

    def close_quietly(self, meta_updates: dict[str, Any] | None = None) -> Path | None:
        """:meth:`close` for the end of the user's process: a failure to publish (output
        directory removed, disk full) is one warning, never a traceback or a changed exit
        status of the job."""
        try:
            return self.close(meta_updates)
        except Exception as exc:  # noqa: BLE001 - the job's outcome is not ours to change
            msg = exc.one_line() if isinstance(exc, HermesError) else f"{type(exc).__name__}: {exc}"
            warn(f"the trace could not be saved: {msg}")
            return None

    # -- the Python step marker and host events ---------------------------------------
    def step(self, *, samples: int | None = None, tokens: int | None = None,
             flops: float | None = None, source: str = "user", **extra: Any) -> int:
        """End the current step now and start the next; returns the number of the next step."""
        now = perf_counter_ns()
        info = StepInfo(self.rank, self.step_no, self._step_start, now, samples=samples,
                        tokens=tokens, flops=flops, extra=extra)
        self.on_step(info, source=source)
        return self.step_no

    def record(self, kind: str, name: str, ts_ns: int, dur_ns: int,
               args: str | None = None) -> None:
        lane = self.lane if threading.current_thread() is threading.main_thread() \
            else f"thread {threading.get_native_id()}"
        self._host.append((self.rank, lane, "host", kind, name, ts_ns, dur_ns, self.step_no,
                           None, None, None, args))
        if len(self._host) >= _MAX_BUFFER:
            self._flush_host()

    def _drain_samples(self) -> None:
        """The stack sampler's finished ``python`` events into this step's host rows (main
        thread only: the sampler never touches the buffers)."""
        if self.sampler is None:
            return
        if self.detail:
            self.sampler.poke()
        self._host += [(self.rank, self.lane, "host", "python", name, ts, dur, step, None,
                        None, None, args) for name, ts, dur, step, args in self.sampler.drain()]

    def _flush_host(self) -> None:
        """The host rows and the monitor's, as tuples, into the trace (journaled from there)."""
        self._host_steps = 0
        rows = self.monitor.take()
        if self._host:
            host, self._host = self._host, []
            if self._shift_ns:  # (on the runtime's clock)
                host = [(*r[:5], r[5] - self._shift_ns, *r[6:]) for r in host]
            rows += host
        self.fine.record_records(COLUMNS, rows)

    def _journal(self, step: int) -> None:
        """This step's rows (the monitor's, the host's) and events into the journal: a death
        before the next checkpoint keeps them (one warning and no more journal if it fails)."""
        try:
            self._flush_host()
            self.fine.journal(step)
        except (HermesError, OSError) as exc:
            self._journaling = False
            msg = exc.one_line() if isinstance(exc, HermesError) else str(exc)
            warn(f"cannot journal the steps ({msg}); a crash loses those since the last save")

    def _checkpoint(self, now: int) -> None:
        """Publish every completed step to disk (a segment file each rank): what a SIGKILL
        leaves is a valid trace. Failing to write (the directory removed, disk full) is one
        warning: the user's job goes on, unrecorded."""
        self.saves.started(now)
        try:
            self._flush_host()
            self.fine.checkpoint()
            self.saves.saved(now, perf_counter_ns())
        except (HermesError, OSError) as exc:
            msg = exc.one_line() if isinstance(exc, HermesError) else str(exc)
            warn(f"cannot save the trace so far ({msg}); the job continues")
            self.saves.stop()  # once: do not retry every step
            self._journaling = False  # (a journal is only emptied by checkpoints)

    def _sink(self, batch: EventBatch) -> None:
        self.fine.record_rows(batch)

    # -- signals: publish on SIGTERM, never in the middle of a hook ---------------------
    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        # SIGABRT from outside (kill -ABRT) is caught; os.abort() in C never returns to a
        # Python handler: what it leaves is what the checkpoints saved
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGABRT):
            current = signal.getsignal(signum)
            if signum == signal.SIGINT and current is not signal.default_int_handler:
                continue  # the script handles Ctrl-C itself: leave it alone
            if signum != signal.SIGINT and current not in (signal.SIG_DFL, None):
                continue
            self._old_handlers[signum] = current
            signal.signal(signum, self._on_signal)

    def _restore_signals(self) -> None:
        for signum, handler in self._old_handlers.items():
            try:
                if signal.getsignal(signum) == self._on_signal:
                    signal.signal(signum, handler)
            except (ValueError, TypeError):
                pass
        self._old_handlers.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._in_hook:
            self._pending_signal = signum  # finish the hook first, then act
            return
        self._act_on_signal(signum)

    def _act_on_signal(self, signum: int) -> None:
        if signum == signal.SIGINT:
            raise KeyboardInterrupt  # as Python would; the with-block / launcher publishes
        self.close_quietly({"extra": {"ended_by": signal.Signals(signum).name}})
        # Die of the same signal so the exit status tells the parent what happened.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def _leave_hook(self, t0: int) -> None:
        self._in_hook = False
        self._busy_ns += perf_counter_ns() - t0
        if self._pending_signal is not None:
            signum, self._pending_signal = self._pending_signal, None
            self._act_on_signal(signum)

    # -- context manager ------------------------------------------------------------------
    def __enter__(self) -> Recording:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        extra = {}
        if exc_type is not None and exc_type is not SystemExit:
            extra = {"extra": {"ended_by": getattr(exc_type, "__name__", str(exc_type))}}
        self.close(extra)
        global _current
        if _current is self:
            _current = None


_current: Recording | None = None


def profile(out: str | os.PathLike[str] | None = None, mode: str = "auto",
            **options: Any) -> Recording:
    """Start profiling this process; use as ``with hermes.profile(out=..., mode=...):``.

    ``mode``: ``monitor`` | ``fine`` | ``auto`` (see :data:`MODES`); ``window`` (K): steps
    captured after a trigger; ``device``: a device profile name for MFU; other options as
    :class:`Recording`. Only one session per process may be active.
    """
    global _current
    if _current is not None and not _current.closed:
        raise UsageError("a hermes.profile session is already active in this process")
    try:
        _current = Recording(out, mode, **options)
    except HermesError:
        raise
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot start profiling: {exc}") from None
    return _current


def current() -> Recording | None:
    """The active session, or None."""
    return _current if _current is not None and not _current.closed else None


def collector() -> Collector:
    """The collector a producer should report to: the active session, else a NullCollector.

    ``hermes.npu.real.Session(collector=hermes.collectors.api.collector())`` records into
    ``hermes profile``'s trace when profiled and costs nothing when not.
    """
    return current() or NullCollector()


def step(samples: int | None = None, tokens: int | None = None, flops: float | None = None,
         **extra: Any) -> int:
    """Mark the end of a training step (and the start of the next). No-op without a session.

    ``samples``/``tokens``/``flops`` of the step give throughput, TFLOP/s and MFU.
    Returns the number of the step that starts now (-1 without a session).
    """
    s = current()
    if s is None:
        return -1
    return s.step(samples=samples, tokens=tokens, flops=flops, **extra)


__all__ = ["MODES", "Recording", "collector", "current", "profile", "region", "step"]
