"""When a profiling session saves its completed steps as a segment (``hermes.trace.segments``).

A save comes every ``flush_seconds`` (``hermes profile --flush-every``), the first one
``flush_seconds`` after the session starts, or further apart where saving would cost more
than :data:`SAVE_BUDGET` of the job's time: a segment is a complete Parquet file, ~3-6 ms even
for a few rows, so one a second alone is 0.5 % of a monitored job's time. The wait after a
save that took ``c`` is ``max(flush_seconds, c / SAVE_BUDGET)``, at most :data:`SAVE_STRETCH`
times ``flush_seconds``. Nothing is lost by the wait: each step in between, the first ones
included, goes to the journal (``hermes.trace.journal``), which a reader of a killed run
replays. ``flush_seconds`` 0 (a segment per step) is kept as asked.
"""

from __future__ import annotations

from time import perf_counter_ns

#: saves of the completed steps take at most this share of the job's time ...
SAVE_BUDGET = 0.002
#: ... stretching the wait between two up to this many times ``flush_seconds``
SAVE_STRETCH = 10


class SaveSchedule:
    """``due(now)``: whether a step that ended at ``now`` is saved; ``saved(start, end)``
    after each save; ``stop()`` after a save failed (no more tries)."""

    def __init__(self, flush_seconds: float) -> None:
        self.flush_ns = int(max(0.0, float(flush_seconds)) * 1e9)
        self.saves = 0
        self.last_ns = perf_counter_ns()
        self.gap_ns: float = self.flush_ns

    def due(self, now: int) -> bool:
        return now - self.last_ns >= self.gap_ns

    def started(self, now: int) -> None:
        self.saves += 1
        self.last_ns = now

    def saved(self, start: int, end: int) -> None:
        """A save that ran from ``start`` to ``end`` (ns) sets the wait to the next."""
        if self.flush_ns > 0:
            self.gap_ns = min(max(self.flush_ns, (end - start) / SAVE_BUDGET),
                              SAVE_STRETCH * self.flush_ns)

    def stop(self) -> None:
        self.gap_ns = float("inf")
