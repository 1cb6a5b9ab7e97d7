"""Python-side instrumentation: user regions, GC pauses, data-loader waits.

These hooks record into the *active recorder* (the running ``hermes.profile`` session, see
``hermes.collectors.api``), a module-level slot so that the cost with no session is one global
read. A recorder has:

* ``detail`` (bool): whether the current step is captured in detail — regions, GC pauses and
  data waits become events only then (the monitor still gets the per-step GC and data-wait
  totals every step);
* ``record(kind, name, ts_ns, dur_ns, args)``: buffer one host event of the current step;
* ``gc_ns`` / ``data_wait_ns``: per-step totals in ns, and ``gc_count`` (collections), read
  and reset by the monitor.

Times are ``time.perf_counter_ns()`` (CLOCK_MONOTONIC), the clock the session measures steps on.
"""

from __future__ import annotations

import functools
import gc
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from time import perf_counter_ns
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class Recorder(Protocol):
    detail: bool
    gc_ns: int
    gc_count: int
    data_wait_ns: int

    def record(self, kind: str, name: str, ts_ns: int, dur_ns: int,
               args: str | None = None) -> None: ...


_active: Recorder | None = None


def activate(recorder: Recorder | None) -> None:
    """Make ``recorder`` the target of all hooks (None: hooks record nothing)."""
    global _active
    _active = recorder
    if recorder is not None:
        _install_gc()


def active() -> Recorder | None:
    return _active


class region:  # noqa: N801 - used like a function: hermes.region("name")
    """A named range, like an NVTX range: ``with hermes.region("fwd"):`` or ``@hermes.region()``.

    Recorded as a ``marker`` event on the calling thread's lane when the current step is
    captured in detail; costs two clock reads otherwise.
    """

    __slots__ = ("name", "_t0")

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self._t0 = 0

    def __enter__(self) -> region:
        self._t0 = perf_counter_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        rec = _active
        if rec is not None and rec.detail:
            rec.record("marker", self.name or "region", self._t0, perf_counter_ns() - self._t0)

    def __call__(self, fn: F) -> F:
        name = self.name or getattr(fn, "__qualname__", "region")

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with region(name):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


# -- GC pauses ----------------------------------------------------------------------------
_gc_start: dict[int, int] = {}
_gc_installed = False


def _gc_callback(phase: str, info: dict[str, Any]) -> None:
    # gc.callbacks run on the thread that triggered the collection; key the start by thread.
    tid = threading.get_ident()
    if phase == "start":
        _gc_start[tid] = perf_counter_ns()
        return
    t0 = _gc_start.pop(tid, None)
    rec = _active
    if t0 is None or rec is None:
        return
    dur = perf_counter_ns() - t0
    rec.gc_ns += dur
    rec.gc_count += 1
    if rec.detail:
        rec.record("gc", f"gc gen{info.get('generation', '?')}", t0, dur,
                   json.dumps({"generation": info.get("generation"),
                               "collected": info.get("collected"),
                               "uncollectable": info.get("uncollectable")}))


def _install_gc() -> None:
    global _gc_installed
    if not _gc_installed:
        gc.callbacks.append(_gc_callback)
        _gc_installed = True


# -- data-loader waits --------------------------------------------------------------------
def loader_waits(iterable: Iterable[T], name: str = "next batch") -> Iterator[T]:
    """Yield from ``iterable``, timing each fetch as a ``data_wait`` (training loop blocked).

    ``for batch in hermes.collectors.pyhooks.loader_waits(loader): ...``; PyTorch DataLoaders
    are timed automatically under ``hermes profile``.
    """
    it = iter(iterable)
    while True:
        t0 = perf_counter_ns()
        try:
            item = next(it)
        except StopIteration:
            return
        note_data_wait(name, t0, perf_counter_ns() - t0)
        yield item


def note_data_wait(name: str, t0: int, dur: int, args: str | None = None) -> None:
    """Add one data wait of ``dur`` ns that started at ``t0`` to the active recorder (``args``:
    the loader's configuration as a JSON object, e.g. ``{"num_workers": 0}``)."""
    rec = _active
    if rec is None:
        return
    rec.data_wait_ns += dur
    if rec.detail:
        rec.record("data_wait", name, t0, dur, args)
