"""When a session saves its completed steps (collectors/saves.py), by hand."""

from __future__ import annotations

import pytest

from hermes.collectors.saves import SAVE_BUDGET, SAVE_STRETCH, SaveSchedule

S = 1_000_000_000  # 1 s in ns


def test_the_first_save_waits_flush_seconds_and_a_cheap_save_keeps_them() -> None:
    s = SaveSchedule(1.0)  # (the steps before the first save are journaled)
    assert not s.due(s.last_ns) and not s.due(s.last_ns + S - 1) and s.due(s.last_ns + S)
    s.started(10 * S)
    s.saved(10 * S, 10 * S + 1_000_000)  # 1 ms: 1 ms / 0.002 = 0.5 s < 1 s
    assert not s.due(10 * S + S - 1)
    assert s.due(11 * S)


def test_a_costly_save_waits_so_that_saves_stay_in_budget() -> None:
    s = SaveSchedule(1.0)
    s.started(0)
    s.saved(0, 6_000_000)  # 6 ms: the next one 6 ms / 0.002 = 3 s later
    assert SAVE_BUDGET == 0.002
    assert s.gap_ns == pytest.approx(3 * S)
    assert not s.due(3 * S - 1) and s.due(3 * S)


def test_the_stretch_is_bounded() -> None:
    s = SaveSchedule(1.0)
    s.started(0)
    s.saved(0, S)  # a 1 s save would ask for 500 s
    assert s.gap_ns == SAVE_STRETCH * S


def test_a_save_per_step_stays_so_and_a_stopped_schedule_never_saves_again() -> None:
    s = SaveSchedule(0)
    assert s.due(s.last_ns)  # the first step too
    s.started(0)
    s.saved(0, 50_000_000)
    assert s.due(1)
    s.stop()
    assert not s.due(10**18)
