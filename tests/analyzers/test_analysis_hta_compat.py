"""HTA-compatible figures: HTA 0.5's definitions on tiny traces, computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.common.hta_compat import (
    KERNEL_TYPES,
    figures_of,
    gpu_events,
    hta_figures,
    kernel_type_codes_at,
    kernel_types,
)
from hermes.analyzers.common.names import codes_in, isin
from tests.tracegen import ev, events

US = 1000  # HTA rounds times to whole microseconds: the hand-made traces are in us


def frame(*rows):
    df = pd.DataFrame(events(*rows))
    df["ts_ns"] *= US
    df["dur_ns"] *= US
    for c in ("corr_id", "stream"):
        if c not in df.columns:
            df[c] = pd.array([None] * len(df), dtype="Int64")
    return df


def test_kernel_types_follow_hta_regexes():
    df = frame(ev("kernel", "void gemm<float>", 0, 1, stream=7),
               ev("kernel", "ncclDevKernel_AllReduce_Sum", 0, 1, stream=7),
               ev("memcpy_h2d", "Memcpy HtoD (Pageable -> Device)", 0, 1, stream=7),
               ev("memset", "Memset (Device)", 0, 1, stream=7),
               ev("kernel", "fooMemcpyKernel", 0, 1, stream=7),   # HTA: .*Memcpy -> other
               ev("kernel", "cudaStreamSyncKernel", 0, 1, stream=7),  # .*Sync -> other
               ev("collective", "allreduce", 0, 1, stream=7))     # our kind -> communication
    assert kernel_types(df).tolist() == ["computation", "communication", "memory", "memory",
                                         "other", "other", "communication"]


# time     0   10   20   30   40   50   60        100
# gemm     [===)
# memcpy        [===)
# Stream Sync             [===)          (stream 7: HTA counts it as busy, type other)
# Event Sync                   [=====================)  (no stream: not a GPU event)
# fooMemcpyKernel                   [===)  (other)
# ProfilerStep#1 annotation on the device lane: not a GPU event
TRACE = (
    ev("kernel", "gemm", 0, 10, stream=7),
    ev("memcpy_h2d", "Memcpy HtoD", 10, 10, stream=7),
    ev("sync", "Stream Sync", 30, 10, stream=7, lane_kind="device"),
    ev("sync", "Event Sync", 40, 60, lane_kind="device"),
    ev("kernel", "fooMemcpyKernel", 50, 10, stream=7),
    ev("step", "ProfilerStep#1", 0, 100, lane_kind="device"),
    ev("step", "ProfilerStep#1", 0, 100),
)


def test_temporal_breakdown_by_hand():
    assert len(gpu_events(frame(*TRACE))) == 4
    f = hta_figures(frame(*TRACE))
    # span [0, 60) = 60; busy 40 -> idle 20; compute (gemm) 10; non-compute 60-10-20 = 30
    assert (f.kernel_time_ns, f.idle_ns, f.compute_ns, f.non_compute_ns) == (
        60 * US, 20 * US, 10 * US, 30 * US)
    assert (f.idle_pct, f.compute_pct, f.non_compute_pct) == pytest.approx((100 / 3, 50 / 3, 50))
    assert f.comm_comp_overlap_pct != f.comm_comp_overlap_pct  # NaN: no communication


def test_last_profiler_step_dropped_with_two_or_more_steps():
    rows = (ev("step", "ProfilerStep#1", 0, 100), ev("step", "ProfilerStep#2", 100, 100),
            # the device-side annotation of step 2 starts later: HTA takes the latest start
            ev("step", "ProfilerStep#2", 130, 60, lane_kind="device"),
            ev("launch", "cudaLaunchKernel", 10, 5, corr_id=1),
            ev("launch", "cudaLaunchKernel", 125, 2, corr_id=2),
            ev("launch", "cudaLaunchKernel", 140, 2, corr_id=3),
            ev("kernel", "a", 20, 40, corr_id=1, stream=7),
            ev("kernel", "b", 130, 10, corr_id=2, stream=7),   # launched 125 < 130: kept
            ev("kernel", "c", 150, 10, corr_id=3, stream=7),   # launched 140 >= 130: dropped
            ev("kernel", "orphan", 70, 10, corr_id=99, stream=7))  # no launch: dropped
    f = hta_figures(frame(*rows))
    # kept a [20,60) and b [130,140): span 120, busy 50, idle 70
    assert (f.kernel_time_ns, f.idle_ns, f.compute_ns) == (120 * US, 70 * US, 50 * US)
    one = hta_figures(frame(*rows[:1], *rows[3:]))   # one step name: nothing dropped
    assert (one.kernel_time_ns, one.compute_ns) == (140 * US, 70 * US)


def test_comm_comp_overlap_is_share_of_communication_time():
    f = hta_figures(frame(ev("kernel", "gemm", 0, 100, stream=7),
                          ev("kernel", "ncclKernel_x", 50, 100, stream=8),
                          ev("kernel", "ncclKernel_y", 200, 50, stream=8)))
    # comm union 150, overlapped with compute [50,100) = 50
    assert f.comm_comp_overlap_pct == pytest.approx(100 / 3)


def test_empty_trace():
    f = hta_figures(frame(ev("host_op", "x", 0, 5)))
    assert f.kernel_time_ns == 0 and f.idle_pct != f.idle_pct


def test_hta_time_grid_rounds_start_up_and_end_down():
    df = frame(ev("kernel", "a", 0, 10, stream=7), ev("kernel", "b", 20, 10, stream=7))
    # a: [0.4, 10.6) us -> [1, 10); b: [20.2, 29.9) us -> [21, 29). span 28, busy 9 + 8 = 17
    df["ts_ns"] = [400, 20_200]
    df["dur_ns"] = [10_200, 9_700]
    f = hta_figures(df)
    assert (f.kernel_time_ns, f.idle_ns) == (28 * US, 11 * US)
    # a sub-us kernel gets a negative duration on HTA's grid and HTA's merge keeps it
    df2 = frame(ev("kernel", "a", 0, 10, stream=7), ev("kernel", "b", 20, 10, stream=7))
    df2["ts_ns"] = [0, 5_200]
    df2["dur_ns"] = [2_000, 600]   # b: [5.2, 5.8) -> [6, 5): -1 us
    g = hta_figures(df2)
    assert (g.kernel_time_ns, g.compute_ns, g.idle_ns) == (5 * US, 1 * US, 4 * US)


def test_time_grid_replays_hta_float64_parsing_of_epoch_stamps():
    from hermes.analyzers.common.hta_compat import hta_time_grid

    # Kineto text "1712195495505582.988" parses to the float64 ...583.0 (a quarter-us grid at
    # 1.7e15): ceil -> ...583; end 583.0 + 4.928 -> ~587.93 -> floor ...587... as float64 math
    ts = np.array([1712195495505582988, 1712195495505772650, 1661203462982823000, 400])
    dur = np.array([4928, 2752, 5000, 10200])
    s, e = hta_time_grid(ts, dur)
    def us(x):  # the Kineto text of a ns value, parsed like json does
        return float(f"{x // 1000}.{x % 1000:03d}")

    want_s = [math.ceil(us(t)) for t in ts]
    want_e = [math.floor(us(t) + us(d)) for t, d in zip(ts, dur, strict=True)]
    assert s.tolist() == want_s == [1712195495505583, 1712195495505773, 1661203462982823, 1]
    assert e.tolist() == want_e


@pytest.mark.parametrize("values", [("a",), ("a", "c"), ("b", "c", "d", "e", "f"), (), ("z",)])
def test_isin_on_categories_matches_pandas_isin(values):
    # few and many matching categories (direct comparison and table lookup), a missing value
    # (code -1) that matches nothing, a value no row has
    col = pd.Series(pd.Categorical(["a", "b", None, "c", "a", "d", "e", "f"]))
    want = col.astype(object).isin(values).to_numpy(bool)
    assert isin(col, values).tolist() == want.tolist()
    assert isin(col.astype(object), values).tolist() == want.tolist()


def test_codes_in_missing_rows():
    col = pd.Series(pd.Categorical(["a", None, "b", None]))
    assert codes_in(col, [False, True], missing=True).tolist() == [False, True, True, True]
    assert codes_in(col, [True, False]).tolist() == [True, False, False, False]


@pytest.mark.parametrize("n_marked", [0, 1, 12, 13, 25, 30])
@pytest.mark.parametrize("missing", [False, True])
def test_codes_in_each_path_agrees_row_by_row(n_marked, missing):
    # marked codes compared (<= COMPARE_MAX), the unmarked ones compared (the complement: 25 and
    # 30 of 30) and the table lookup (13 of 30: 17 left unmarked), missing rows read either way
    cats = [f"c{i}" for i in range(30)]
    rng = np.random.default_rng(n_marked)
    values = [cats[i] if i >= 0 else None for i in rng.integers(-1, 30, 500)]
    col = pd.Series(pd.Categorical(values, categories=cats))
    marked = set(rng.choice(30, n_marked, replace=False).tolist())
    hit = [i in marked for i in range(30)]
    want = [missing if v is None else int(v[1:]) in marked for v in values]
    assert codes_in(col, hit, missing).tolist() == want


def test_type_codes_give_the_figures_of_the_type_names():
    # kernel_type_codes_at (int8 codes into KERNEL_TYPES) reads as kernel_types_at's strings
    df = frame(ev("kernel", "void gemm<float>", 0, 30, stream=7),
               ev("kernel", "ncclDevKernel_AllReduce_Sum", 20, 30, stream=8),
               ev("memcpy_h2d", "Memcpy HtoD (Pageable -> Device)", 60, 10, stream=7),
               ev("kernel", "fooMemcpyKernel", 80, 5, stream=7))
    rows = np.arange(len(df))
    codes = kernel_type_codes_at(df, rows)
    assert [KERNEL_TYPES[c] for c in codes] == kernel_types(df).tolist()
    s, e = df["ts_ns"].to_numpy(np.int64), (df["ts_ns"] + df["dur_ns"]).to_numpy(np.int64)
    for merging in (False, True):
        f = figures_of(s, e, codes, merging)
        assert f == figures_of(s, e, kernel_types(df), merging)
        # by hand: span 0..85 us, busy 30 + 20 + 10 + 5, gemm 30, comm 30, overlap 20..30
        assert (f.kernel_time_ns, f.idle_ns, f.compute_ns, f.comm_ns, f.overlap_ns) == \
            (85 * US, 20 * US, 30 * US, 30 * US, 10 * US)
