"""Step windows and in_step: tiny traces, windows computed by hand."""

from __future__ import annotations

import pandas as pd

from hermes.analyzers.common.steps import in_step, step_windows
from tests.tracegen import ev, events


def df(*rows):
    return pd.DataFrame(events(*rows))


def test_host_step_events_win_over_device_ones():
    t = df(ev("step", "ProfilerStep#3", 100, 50),
           ev("step", "ProfilerStep#4", 150, 70),
           ev("step", "ProfilerStep#3", 90, 200, lane_kind="device"),
           ev("kernel", "k", 120, 10))
    w = step_windows(t)
    assert w.to_dict("list") == {"step": [3, 4], "start_ns": [100, 150], "end_ns": [150, 220],
                                 "dur_ns": [50, 70]}


def test_device_step_events_when_no_host_ones_and_step_column_wins_over_name():
    t = df(ev("step", "iteration", 10, 5, lane_kind="device", step=7),
           ev("step", "iteration", 0, 10, lane_kind="device", step=6))
    w = step_windows(t)
    assert w["step"].tolist() == [6, 7]
    assert w["start_ns"].tolist() == [0, 10]
    assert w["dur_ns"].tolist() == [10, 5]


def test_same_step_on_two_threads_merges_and_unnamed_steps_get_ordinals():
    t = df(ev("step", "ProfilerStep#1", 0, 10, lane="thread 1"),
           ev("step", "ProfilerStep#1", 5, 10, lane="thread 2"))
    assert step_windows(t).to_dict("list") == {"step": [1], "start_ns": [0], "end_ns": [15],
                                               "dur_ns": [15]}
    u = df(ev("step", "step", 50, 10), ev("step", "step", 0, 10))
    assert step_windows(u)["step"].tolist() == [0, 1]


def test_no_step_events_gives_one_window_over_the_trace_and_empty_gives_none():
    t = df(ev("kernel", "a", 10, 5), ev("host_op", "b", 3, 4))
    assert step_windows(t).to_dict("list") == {"step": [-1], "start_ns": [3], "end_ns": [15],
                                               "dur_ns": [12]}
    assert step_windows(t.iloc[:0]).empty
    assert in_step(t.iloc[:0], step_windows(t)).empty


def test_in_step_by_start_time():
    t = df(ev("step", "ProfilerStep#1", 0, 100), ev("step", "ProfilerStep#2", 100, 100),
           ev("kernel", "a", 99, 50), ev("kernel", "b", 100, 1), ev("kernel", "c", 250, 1),
           ev("host_op", "d", -5, 1))
    got = in_step(t, step_windows(t))
    assert list(got.astype(object).where(got.notna(), None)) == [1, 2, 1, 2, None, None]
