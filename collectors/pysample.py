"""Python time by function and line: a low-overhead sampler of the training thread's stack.

While a ``hermes profile`` session captures a step in detail (``fine`` mode: every step;
``auto``: the triggered windows), a daemon thread reads the main thread's Python stack every
``interval`` (5 ms by default; longer when a sample costs more than :data:`BUDGET` of a
core allows) with ``sys._current_frames()``. Consecutive samples that share
a frame extend one event of it, so the samples become a flame chart: one ``python`` event
per frame activation seen, nested by depth, on the training thread's lane, named as the
PyTorch profiler names its Python frames (``file.py(FIRST_LINE): function``), with ``args``:

* ``source``: ``"hermes.sampler"``; ``samples``: the samples that saw it; ``depth`` (0 is the
  outermost frame of the script);
* ``line``: the line of the function seen in most of those samples (where the time went);
* ``file``: the file's path; ``interval_ns``: the sampling interval.

An event starts halfway between the last sample that did not see its frame and the first
that did, and ends halfway between the last that saw it and the next: the frame began and
ended somewhere in those gaps, so the midpoints are unbiased even when the sampler gets the
interpreter lock late (a pure-Python loop holds it for up to ``sys.getswitchinterval()``). Frames of
Hermes itself and of ``runpy`` are left out, and while the session is inside one of its
hooks (``_in_hook``: a step boundary's bookkeeping) the stack ends at the hook's own frame:
Hermes's time is named as Hermes's (``[hermes] collectors/api.py(...): Recording.step``), and
what it called is left out. The thread never runs Python code of the user's
and takes the GIL once per sample (a stack walk of a few microseconds); between detailed
steps it only wakes to check whether detail is on. Events are handed over on the main thread
(:meth:`drain`, called at each step boundary and at the end), never written from the sampler.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import deque
from pathlib import Path
from time import perf_counter_ns, sleep, thread_time_ns
from typing import Any

DEFAULT_INTERVAL_S = 0.005
#: the sampler's own CPU time is kept under this share of one core: the wait between samples
#: grows to cost / BUDGET when a sample costs more (deep, fast-changing stacks)
BUDGET = 0.02
#: the longest wait between samples, in intervals, whatever a sample costs
MAX_WAIT = 4
#: name prefix of a frame of Hermes's own hooks (the collector's time, not the job's)
OWN = "[hermes] "
MAX_DEPTH = 64
#: frames of these files are Hermes's own or the interpreter's start-up: not the job's time
_SKIP_DIRS = tuple(str(Path(p).resolve()) + os.sep for p in
                   (Path(__file__).parent, Path(__file__).parents[1] / "hermes"))
_SKIP_FILES = ("<frozen runpy>", "runpy.py")


#: code objects that are not the job's though outside Hermes's files: the ``python -c``
#: bootstrap frame Hermes starts a script from (:func:`skip_callers`)
_SKIP_CODES: set[Any] = set()


def skip_callers(frame: Any) -> None:
    """Leave ``frame`` and its callers out of every sample (the frames that start the job)."""
    while frame is not None:
        _SKIP_CODES.add(frame.f_code)
        frame = frame.f_back


def _skipped(code: Any) -> bool:
    name = code.co_filename
    return code in _SKIP_CODES or name.startswith(_SKIP_DIRS) or name.endswith(_SKIP_FILES)


def _short(filename: str) -> str:
    """The name the frame's file goes by: after ``site-packages/``, else relative to the
    working directory when inside it, else the path."""
    cut = filename.rfind("site-packages" + os.sep)
    if cut >= 0:
        return filename[cut + len("site-packages") + 1:]
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel


class _Open:
    """A frame activation seen by consecutive samples."""

    __slots__ = ("code", "frame", "t0", "first", "lines")

    def __init__(self, frame: Any, t0: int, first: int) -> None:
        self.code, self.frame, self.t0, self.first = frame.f_code, frame, t0, first
        self.lines: dict[int, int] = {}  # line -> samples that saw it the innermost frame


def _common(stack: list[_Open], frames: list[Any]) -> int:
    """How many outermost frames of a sample are the open ones (the same frame objects)."""
    same = 0
    for op, fr in zip(stack, frames, strict=False):
        if op.frame is not fr:
            break
        same += 1
    return same


class StackSampler:
    """Samples ``session``'s main thread while ``session.detail`` is on (see the module doc).

    ``session`` needs ``detail``, ``closed`` and ``step_no``; :meth:`drain` returns the
    finished events as ``(name, ts_ns, dur_ns, step, args)`` tuples."""

    def __init__(self, session: Any, interval_s: float = DEFAULT_INTERVAL_S,
                 idle_s: float = 0.02) -> None:
        self.session = session
        self.interval_s = max(0.0005, float(interval_s))
        self.interval_ns = int(self.interval_s * 1e9)
        self.max_wait_s = self.interval_s * MAX_WAIT
        self.idle_s = max(self.interval_s, idle_s)
        self.samples = 0
        self.busy_ns = 0  # the sampler thread's CPU time (its cost to the job)
        self._tid = threading.main_thread().ident
        self._done: deque[tuple[Any, int, int, int, tuple[int, int, int]]] = deque()
        self._names: dict[Any, str] = {}
        self._skip: dict[Any, bool] = {}  # code object -> a frame of Hermes's own
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by :meth:`poke`: detail may have turned on
        self._last_boundary = 0  # the last step boundary frames were cut at
        self._ids: dict[int, int] = {}  # id of an open frame -> its depth
        self._top: Any = None  # the innermost frame of the last sample (held: ids stay apart)
        self._hook = False
        self.error: str | None = None  # why sampling stopped early (an exception), if it did
        self._cost_ns = 0.0  # running mean CPU cost of a sample (sets the wait: BUDGET)
        self._thread = threading.Thread(target=self._run, name="hermes-stack-sampler",
                                        daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Detail may have turned on (a step boundary): look now, not at the next idle poll."""
        self._wake.set()

    def stop(self) -> None:
        """Stop sampling; the frames still open are closed now."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=1.0)

    def summary(self) -> dict[str, Any]:
        """The sampler's counters for the trace's metadata (``collector.python_sampler``)."""
        out: dict[str, Any] = {"interval_ns": self.interval_ns, "samples": self.samples,
                               "busy_ns": self.busy_ns}
        if self.error:
            out["error"] = self.error
        return out

    def stopped(self) -> str:
        """One line: why sampling stopped early, and what that leaves unnamed."""
        return (f"the Python stack sampler stopped after {self.samples} samples "
                f"({self.error}); Python time after that is not named by function")

    def drain(self) -> list[tuple[str, int, int, int, str]]:
        """The events finished since the last call (main thread), as ``(name, ts_ns, dur_ns,
        step, args JSON)``."""
        out = []
        while self._done:
            code, t0, dur, step, (n, depth, line) = self._done.popleft()
            out.append((self._name(code), t0, dur, step,
                        json.dumps({"source": "hermes.sampler", "samples": n, "depth": depth,
                                    "line": line, "file": code.co_filename,
                                    "interval_ns": self.interval_ns})))
        return out

    # -- the sampling thread ----------------------------------------------------------
    def _run(self) -> None:
        try:
            self._sample()
        except Exception as exc:  # noqa: BLE001 - the job goes on; the trace says why
            # a sampler that died must not leave "unattributed" Python time unexplained:
            # the session reports the error in the trace's metadata and in one warning
            self.error = f"{type(exc).__name__}: {exc}"
            self._top = None

    def _sample(self) -> None:
        stack: list[_Open] = []
        step = -1
        prev = 0  # the previous sample's time (0: none in this detailed stretch)
        while not self._stop.is_set():
            s = self.session
            if s.closed or not s.detail:
                if stack:  # detail ended: at the step boundary when one passed
                    now = perf_counter_ns()
                    end = (prev + now) // 2 if prev else now
                    cut = getattr(s, "_step_start", None)
                    if s.step_no != step and isinstance(cut, int) and \
                            self._last_boundary <= cut <= now:
                        end = self._last_boundary = cut
                    self._close(stack, 0, end, step)
                prev = 0
                self._wake.wait(self.idle_s)
                self._wake.clear()
                continue
            if prev:  # (time.sleep: cheaper than an Event's timed wait, in C)
                sleep(min(max(self.interval_s, self._cost_ns / BUDGET / 1e9), self.max_wait_s))
                if self._stop.is_set():
                    break
            if s.closed or not s.detail:
                continue
            cpu0 = thread_time_ns()
            t0 = perf_counter_ns()
            top = sys._current_frames().get(self._tid)
            hook = bool(getattr(s, "_in_hook", False))
            mid = (prev + t0) // 2 if prev else t0
            if s.step_no != step:  # a new step: its frames are its own events
                same, new = self._diff(stack, top, hook)
                step = self._new_step(stack, [op.frame for op in stack[:same]] + new, step, s,
                                      prev, t0, mid)
            elif top is not self._top or hook != self._hook:
                # (the same innermost frame object is the same stack: its callers are fixed)
                same, new = self._diff(stack, top, hook)
                self._close(stack, same, mid, step)
                self._open(stack, new, mid)
            self._top, self._hook = top, hook
            if stack:
                inner = stack[-1]
                line = inner.frame.f_lineno or 0
                inner.lines[line] = inner.lines.get(line, 0) + 1
            prev = t0
            self.samples += 1
            cost = thread_time_ns() - cpu0
            self.busy_ns += cost
            # a running mean of the last few (one slow sample -- a hook, a page fault -- must
            # not stop sampling: clipped, and the wait capped at MAX_WAIT intervals)
            self._cost_ns += (min(cost, self.interval_ns * BUDGET * MAX_WAIT) - self._cost_ns) / 8
        self._close(stack, 0, prev or perf_counter_ns(), step)
        self._top = None

    def _diff(self, stack: list[_Open], top: Any, hook: bool) -> tuple[int, list[Any]]:
        """(how many open frames the sample ``top`` still runs, its frames below them,
        outermost first): walked from the innermost frame up to the first open one only."""
        if hook:
            frames = self._frames(top)
            same = _common(stack, frames)
            return same, frames[same:]
        skip, ids = self._skip, self._ids
        new: list[Any] = []
        same = 0
        fr = top
        while fr is not None:
            d = ids.get(id(fr))
            if d is not None and d < len(stack) and stack[d].frame is fr:
                same = d + 1
                break
            code = fr.f_code
            hide = skip.get(code)
            if hide is None:
                hide = skip[code] = _skipped(code)
            if not hide:
                new.append(fr)
            fr = fr.f_back
        new.reverse()
        return same, new[:max(0, MAX_DEPTH - same)]

    def _open(self, stack: list[_Open], frames: list[Any], t0: int) -> None:
        for fr in frames:
            self._ids[id(fr)] = len(stack)
            stack.append(_Open(fr, t0, self.samples))

    def _frames(self, frame: Any) -> list[Any]:
        """The job's frames of a stack, outermost first."""
        walk = []
        skip = self._skip
        while frame is not None:
            code = frame.f_code
            hide = skip.get(code)
            if hide is None:
                hide = skip[code] = _skipped(code)
            walk.append((frame, hide))
            frame = frame.f_back
        walk.reverse()  # outermost first
        if getattr(self.session, "_in_hook", False):
            # Hermes's own work (a step boundary's bookkeeping, merging a capture): the job's
            # frames down to the first Hermes frame it called (kept: Hermes's own time goes
            # by Hermes's name, not the caller's), nothing Hermes called
            seen = False
            for i, (fr, hide) in enumerate(walk):
                if hide and seen:
                    del walk[i + 1:]
                    walk[i] = (fr, False)
                    break
                seen |= not hide
        return [fr for fr, hide in walk if not hide][:MAX_DEPTH]

    def _new_step(self, stack: list[_Open], frames: list[Any], step: int, s: Any, prev: int,
                  t0: int, mid: int) -> int:
        """A step boundary passed since the last sample: the frames open then end at the
        boundary (the session's ``_step_start``), and this sample's frames are the new step's
        from the boundary on -- those still running go on, and a training loop starts its
        next iteration right at the step's end (the sampler, waiting for the interpreter
        lock, sees it late). Returns the new step."""
        b = getattr(s, "_step_start", None)
        # (the boundary may precede the previous sample: the step ends when the hook is
        # entered, the step number changes when its bookkeeping is done)
        if not isinstance(b, int) or not self._last_boundary <= b <= t0:
            b = mid
        self._last_boundary = b
        self._close(stack, 0, b, step)
        self._open(stack, frames, b)
        return int(s.step_no)

    def _close(self, stack: list[_Open], keep: int, now: int, step: int) -> None:
        """Frames ``stack[keep:]`` ended at ``now``: their events, outermost first (a caller
        and its callee cut at the same instants nest in that order)."""
        for depth in range(keep, len(stack)):
            op = stack[depth]
            # the line where it spent its own time, else where it called the next frame
            line = max(op.lines, key=op.lines.__getitem__) if op.lines else \
                (op.frame.f_lineno or 0)
            self._done.append((op.code, min(op.t0, now), max(0, now - op.t0), step,
                               (max(1, self.samples - op.first), depth, line)))
            self._ids.pop(id(op.frame), None)
            op.frame = None  # drop the reference: the frame's locals are freed with it
        del stack[keep:]

    def _name(self, code: Any) -> str:
        """``file.py(FIRST_LINE): qualified name``; a frame of Hermes's own (a hook the job
        called) is prefixed :data:`OWN` so that analyses tell the collector's time apart."""
        name = self._names.get(code)
        if name is None:
            qual = getattr(code, "co_qualname", code.co_name)
            own = OWN if self._skip.get(code) else ""
            name = self._names[code] = (f"{own}{_short(code.co_filename)}"
                                        f"({code.co_firstlineno}): {qual}")
        return name
