"""Coarse-to-fine trigger: decides, step by step, whether fine-grained capture is on.

Three ways to switch detail on, each for the next ``window`` steps (K) and then off again:

* the monitor flags a slow step ``s`` -> steps ``s+1 .. s+K`` of every rank are captured
  (the slow step itself is already over when its time is known);
* a signal (``SIGUSR1`` by default) for a job that is already running -> the K steps after the
  step during which the signal arrived;
* a trigger file: when ``trigger_file`` exists it is read (an optional integer = K for this
  request), removed, and the next K steps are captured. It is polled at most every
  ``poll_s`` seconds, so it costs one ``stat`` per poll, not per step.

The decision is a pure function of the requests seen so far: ``wants_detail(rank, step)`` is
True when ``step`` lies in a requested window. ``always=True`` is the ``fine`` mode (every step).
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

DEFAULT_WINDOW = 3
#: The most steps a trigger file may ask for (each captured step's events stay in memory).
MAX_TRIGGER_WINDOW = 100_000


def _warn(message: str) -> None:
    try:
        print(f"hermes: warning: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


class AutoTrigger:
    """Which steps get fine-grained capture. Not a Collector: the session asks it."""

    def __init__(self, window: int = DEFAULT_WINDOW, *, always: bool = False,
                 trigger_file: str | os.PathLike[str] | None = None,
                 signum: int | None = None, poll_s: float = 0.5) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.window = int(window)
        self.always = always
        self.trigger_file = Path(trigger_file) if trigger_file else None
        self._warned = False
        self.poll_s = poll_s
        self.requests: list[dict[str, Any]] = []
        self._until = -1  # last step (inclusive) of the current window
        self._from = 0  # first step of the current window
        self._last_step = -1  # the step most recently seen (started or ended)
        self._pending: int | None = None  # K asked by a signal/file, applied at the next step
        self._next_poll = 0.0
        self._old_handler: Any = None
        self.signum = signum
        if signum is not None:
            self._old_handler = signal.signal(signum, self._on_signal)

    # -- requests ----------------------------------------------------------------------
    def on_slow(self, slow: Any) -> None:
        """Monitor callback: capture the K steps after the flagged one."""
        self._arm(int(slow.step) + 1, self.window, f"slow_step rank {slow.rank}")

    def request(self, window: int | None = None, reason: str = "api") -> None:
        """Capture the next ``window`` (default K) steps, starting at the next step."""
        self._arm(self._last_step + 1, int(window or self.window), reason)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Runs between bytecodes of the main thread: only set a flag, apply at the next step.
        self._pending = self.window

    def _poll_file(self, first: int) -> None:
        now = time.monotonic()
        if now < self._next_poll or self.trigger_file is None:
            return
        self._next_poll = now + self.poll_s
        text = self._read_trigger()
        if text is None:
            return
        try:
            self.trigger_file.unlink()
        except OSError:
            pass
        k = self.window
        if text and text.isascii() and text.isdigit() and 0 < int(text) <= MAX_TRIGGER_WINDOW:
            k = int(text)
        elif text:  # '²', 'abc', 10**30: the default window, said once
            _warn(f"trigger file {self.trigger_file}: {text[:20]!r} is not a step count "
                  f"(1 to {MAX_TRIGGER_WINDOW:,}); capturing {self.window} steps")
        self._arm(first, k, f"trigger file {self.trigger_file}")

    def _read_trigger(self) -> str | None:
        """The trigger file's text, or None when absent. Never raises and never blocks: the
        code runs inside the user's job (a FIFO, a directory, unreadable or undecodable
        content is ignored with one warning)."""
        assert self.trigger_file is not None
        try:
            st = os.stat(self.trigger_file)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            self._warn_once("is not a regular file; ignored")
            return None
        try:
            with open(self.trigger_file, "rb") as fh:
                raw = fh.read(64)
        except OSError as exc:
            self._warn_once(f"cannot be read ({exc.strerror}); ignored")
            return None
        return raw.decode("utf-8", "replace").strip()

    def _warn_once(self, what: str) -> None:
        if not self._warned:
            self._warned = True
            _warn(f"trigger file {self.trigger_file} {what}")

    def _arm(self, first: int, k: int, reason: str) -> None:
        last = first + k - 1
        if first <= self._until:  # overlapping request: extend the current window
            self._until = max(self._until, last)
        else:
            self._from, self._until = first, last
        self.requests.append({"reason": reason, "from_step": first, "to_step": last})

    # -- the decision --------------------------------------------------------------------
    def wants_detail(self, rank: int, step: int) -> bool:
        if step > self._last_step:
            self._last_step = step
            if self._pending is not None:
                k, self._pending = self._pending, None
                self._arm(step, k, "signal")
            if self.trigger_file is not None:
                self._poll_file(step)
        return self.always or self._from <= step <= self._until

    def step_ended(self, step: int) -> None:
        """Let on-demand requests made during ``step`` start at ``step + 1``."""
        if step > self._last_step:
            self._last_step = step

    def close(self) -> None:
        if self.signum is not None and self._old_handler is not None:
            try:
                signal.signal(self.signum, self._old_handler)
            except (ValueError, TypeError):  # not the main thread / handler not restorable
                pass
            self._old_handler = None
