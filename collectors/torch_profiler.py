"""PyTorch support for a profiling session: steps, data-loader waits, and the PyTorch profiler.

When the profiled script imports ``torch`` (watched with an import hook, so a script without
torch never pays for importing it), the session gets:

* step boundaries from every optimizer step (``register_optimizer_step_post_hook``), unless
  the script calls ``hermes.step()`` itself or the emulated runtime reports steps;
* ``data_wait`` events around ``DataLoader`` iteration (``_BaseDataLoaderIter.__next__``);
* the PyTorch profiler, driven by the session's detail decision: it starts at the first step
  that wants detail and stops at the first step that does not (``fine``: from the first
  optimizer step to the end, i.e. wait = 1 step; ``auto``: the K triggered steps;
  ``monitor``: never). On stop its Kineto JSON is imported with the ``kineto`` importer,
  moved onto the session's clock (``perf_counter_ns``), given this rank and the step each event
  falls in, and merged into the same trace.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from time import perf_counter_ns
from types import ModuleType
from typing import Any

import numpy as np

from hermes.collectors import pyhooks, torch_facts
from hermes.collectors.torch_facts import Facts, loader_settings

_BASE = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')


class _TorchWatcher(importlib.abc.MetaPathFinder):
    """Runs ``callback(torch)`` right after ``import torch`` has finished."""

    def __init__(self, callback: Any) -> None:
        self.callback = callback

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # one shot; also keeps find_spec below from recursing
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module
        callback = self.callback

        def exec_module(module: ModuleType) -> None:
            original(module)
            callback(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def watch(session: Any) -> None:
    """Attach PyTorch support to ``session`` now (torch imported) or when torch is imported."""
    if "torch" in sys.modules:
        TorchDriver(session, sys.modules["torch"])
    elif importlib.util.find_spec("torch") is not None:
        sys.meta_path.insert(0, _TorchWatcher(lambda torch: TorchDriver(session, torch)))


class TorchDriver:
    """Optimizer steps -> session steps; session detail -> PyTorch profiler on/off."""

    def __init__(self, session: Any, torch: ModuleType) -> None:
        self.session = session
        self.torch = torch
        self.prof: Any = None
        self.warnings: list[str] = []
        self._starts: list[tuple[int, int]] = []  # (step, start ns) while the profiler runs
        self._t_on = 0
        # Wall clock minus the session clock, to put Kineto's epoch timestamps on ours
        # (measured again each time the profiler starts).
        self._wall_minus_perf = wall_minus_perf_ns()
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._hook = register_optimizer_step_post_hook(self._on_optimizer_step)
        self.facts = Facts(torch)
        self._patch_dataloader()
        session.step_listeners.append(self._sync)
        session.close_listeners.append(self._finish)

    # -- steps ----------------------------------------------------------------------------
    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.session.closed:
            if not self.facts.dist:  # the process group exists by the first step
                self.facts.read_dist()
            self.session.step(source="optimizer")

    def _sync(self) -> None:
        """After a step boundary: start/stop the profiler to match the session's decision."""
        if self.session.mode == "monitor":
            return
        if self.session.detail:
            if self.prof is None:
                self._start()
            self._starts.append((self.session.step_no, self.session._step_start))
        elif self.prof is not None:
            self._stop_and_merge()

    def _start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU]
        if self.torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        self.prof = profile(activities=acts, record_shapes=True)
        self.prof.start()
        self._t_on = perf_counter_ns()
        self._wall_minus_perf = wall_minus_perf_ns()

    def _finish(self) -> None:
        self._hook.remove()
        if self.prof is not None:
            self._stop_and_merge()
        extra = dict(self.session.fine.meta.extra)
        if self.warnings:
            extra["torch_warnings"] = self.warnings
        try:
            facts = self.facts.meta()
        except Exception as exc:  # noqa: BLE001 - the trace is worth more than these facts
            self.warnings.append(f"framework facts not recorded: {type(exc).__name__}: {exc}")
            facts = {}
        if facts:
            extra["framework"] = facts["framework"]
            extra["settings"] = {**(extra.get("settings") or {}), **facts["settings"]}
        self.session.fine.meta = self.session.fine.meta.with_(extra=extra)

    def _stop_and_merge(self) -> None:
        prof, self.prof = self.prof, None
        starts, self._starts = self._starts, []
        t_on, t_off = self._t_on, perf_counter_ns()
        prof.stop()
        from hermes.collectors import importers
        from hermes.errors import HermesError
        from hermes.trace.reader import load

        with tempfile.TemporaryDirectory(prefix="hermes-kineto-") as tmp:
            src = Path(tmp) / "kineto.json"
            prof.export_chrome_trace(str(src))
            try:
                result = importers.get("kineto").run([src], Path(tmp) / "kineto.parquet", {})
                events = load(result.out).events
            except HermesError as exc:
                self.warnings.append(f"PyTorch profiler output not merged: {exc.one_line()}")
                return
            base = _base_time_ns(src)
        if events.empty:
            return
        ts = events["ts_ns"].to_numpy(np.int64)
        events["ts_ns"] = ts + _shift(int(ts.min()), base, self._wall_minus_perf, t_on, t_off)
        steps = np.array([s for s, _ in starts] or [self.session.step_no], dtype=np.int64)
        edges = np.array([t for _, t in starts] or [t_on], dtype=np.int64)
        idx = np.searchsorted(edges, events["ts_ns"].to_numpy(np.int64), side="right") - 1
        events["step"] = steps[np.clip(idx, 0, len(steps) - 1)]
        events["rank"] = self.session.rank
        batch = {c: (events[c].astype(object).where(events[c].notna(), None).tolist()
                     if str(events[c].dtype) in ("category", "Int64", "Int32", "string", "str")
                     else events[c].to_numpy())
                 for c in events.columns}
        self.session.on_events(batch)

    # -- data loader ----------------------------------------------------------------------
    def _patch_dataloader(self) -> None:
        try:
            from torch.utils.data import dataloader
        except ImportError:
            return
        cls = dataloader._BaseDataLoaderIter
        if getattr(cls.__next__, "_hermes", False):
            return
        original, init = cls.__next__, cls.__init__

        def __init__(it: Any, loader: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
            init(it, loader, *args, **kwargs)
            try:  # the loader's settings as the script built it (an iterator with
                it._hermes_args = loader_settings(loader)  # __slots__ works them out later)
            except AttributeError:
                pass

        def __next__(it: Any) -> Any:  # noqa: N807 - replaces the dunder of the class
            t0 = perf_counter_ns()
            try:
                return original(it)
            finally:
                args = _loader_args(it)
                facts = torch_facts.current()
                if facts is not None:
                    facts.loader_batch(args)
                pyhooks.note_data_wait("DataLoader.__next__", t0, perf_counter_ns() - t0,
                                       args)

        __next__._hermes = True  # type: ignore[attr-defined]
        cls.__next__ = __next__
        cls.__init__ = functools.wraps(init)(__init__)


def _loader_args(it: Any) -> str | None:
    """The DataLoader's configuration (workers, pinned memory, prefetch) as a JSON object, worked
    out once per iterator: the io analysis and the rules start from what the run used."""
    cached = getattr(it, "_hermes_args", None)
    if cached is None:
        conf = {"num_workers": getattr(it, "_num_workers", None),
                "pin_memory": getattr(it, "_pin_memory", None),
                "prefetch_factor": getattr(it, "_prefetch_factor", None)}
        cached = json.dumps({k: v for k, v in conf.items()
                             if isinstance(v, (bool, int)) and not isinstance(v, float)})
        try:
            it._hermes_args = cached
        except AttributeError:  # an iterator with __slots__: work it out each time
            pass
    return cached


def wall_minus_perf_ns(samples: int = 9) -> int:
    """The wall clock (``time.time_ns``) minus the session clock (``perf_counter_ns``), in ns.

    One reading of each clock is off by however long the process was descheduled between the
    two calls (milliseconds on a loaded machine: longer than a small model's step, so operators
    landed in the wrong steps). Each sample brackets a wall reading between two session
    readings; the tightest bracket is the one least disturbed, and its midpoint is taken.
    """
    best_width, best = None, 0
    for _ in range(max(1, samples)):
        before = perf_counter_ns()
        wall = time.time_ns()
        after = perf_counter_ns()
        if best_width is None or after - before < best_width:
            best_width, best = after - before, wall - (before + after) // 2
    return best


def _base_time_ns(path: Path) -> int | None:
    """Kineto's ``baseTimeNanoseconds`` (epoch ns of ts = 0), read from the file's ends."""
    with open(path, "rb") as fh:
        head = fh.read(8192)
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - 8192))
        tail = fh.read()
    m = _BASE.search(head) or _BASE.search(tail)
    return int(m.group(1)) if m else None


def _shift(first_ts: int, base: int | None, wall_minus_perf: int, t_on: int, t_off: int) -> int:
    """ns to add to imported timestamps to put them on the session clock.

    The importer may keep Kineto's ``ts`` (relative to ``baseTimeNanoseconds``), add the base
    (epoch ns), or rebase to zero; take the reading that lands the first event inside the
    window the profiler was on (1 s slack), else align the first event with the start.
    """
    slack = 1_000_000_000
    candidates = [-wall_minus_perf]
    if base is not None:
        candidates.insert(0, base - wall_minus_perf)
    for shift in candidates:
        if t_on - slack <= first_ts + shift <= t_off + slack:
            return shift
    return t_on - first_ts
