"""The wall-minus-session clock offset that puts the PyTorch profiler's events on Hermes's clock."""

from __future__ import annotations

import time

from collectors import torch_profiler

OFFSET = 1_700_000_000_000_000_000  # the true wall minus perf_counter, ns


def _clocks(monkeypatch, perf: list[int], wall: list[int]) -> None:
    perf_it, wall_it = iter(perf), iter(wall)
    monkeypatch.setattr(torch_profiler, "perf_counter_ns", lambda: next(perf_it))
    monkeypatch.setattr(time, "time_ns", lambda: next(wall_it))


def test_a_reading_split_by_a_deschedule_is_not_the_one_taken(monkeypatch) -> None:
    # first sample: the process is descheduled 5 ms after reading the wall clock (a single
    # wall-then-perf reading is then 5 ms off, more than a small model's whole step);
    # second sample: both clocks read within 20 ns
    _clocks(monkeypatch, perf=[100, 5_000_100, 6_000_000, 6_000_020],
            wall=[OFFSET + 100, OFFSET + 6_000_010])
    assert torch_profiler.wall_minus_perf_ns(samples=2) == OFFSET


def test_the_tightest_bracket_wins_whatever_its_place(monkeypatch) -> None:
    # three samples, widths 400, 40, 4000 ns; the wall read in the middle of each bracket but
    # for the last, read at its start (what a preemption right after it looks like)
    _clocks(monkeypatch, perf=[0, 400, 1_000, 1_040, 2_000, 6_000],
            wall=[OFFSET + 200 + 150, OFFSET + 1_020, OFFSET + 2_000])
    assert torch_profiler.wall_minus_perf_ns(samples=3) == OFFSET
