"""Step windows: the time span of each training step of one rank, and the step of each event.

``step_windows(events) -> DataFrame[step, start_ns, end_ns, dur_ns]`` (one row per step, sorted
by ``start_ns``; times in ns on the rank's clock). Where the windows come from, first match wins:

1. host-lane ``step`` events (``ProfilerStep#N`` on the training thread, ``hermes.step()``);
2. device-lane ``step`` events (e.g. Kineto's ``ProfilerStep#N`` GPU annotations);
3. one window spanning the whole trace (first event start to last event end), step ``-1``.

Several step events with the same step number (e.g. on two host threads) merge into one window
from the earliest start to the latest end. The step number is the event's ``step`` column when
set, else the trailing integer of its name (``ProfilerStep#12`` -> 12), else its ordinal.

``in_step(events, windows)`` gives the step of each event by its *start* time (vectorized with
``searchsorted``); events starting outside every window get ``<NA>``.

**Coarse-to-fine traces** (``hermes profile --mode auto``): the monitor writes a ``step`` event
for every step, the fine collector the detail of a few. ``detailed(events, windows, meta)`` marks
the windows captured in detail: in a trace whose metadata says ``collector.mode == "auto"``,
the steps it lists (``collector.detailed_steps``), else the windows some work event (not
step/marker/counter/other) overlaps; in any other trace every window. ``fine_windows`` keeps
those: the breakdown and the cause analyzers use them (a monitored-only step has no recorded
work: it is not free time), while step-time statistics and fluctuation use every window.

``split_by_windows(start, end, windows)`` cuts intervals at window borders and clips them.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pandas as pd

WINDOW_COLUMNS = ("step", "start_ns", "end_ns", "dur_ns")
#: Lane of the step events that carry a vendor's step summary in their args (the Ascend
#: importer's ``step_trace_time`` rows: ``computing_ns``, ``free_ns``, ...).
SUMMARY_LANE = "step trace"


def empty_windows() -> pd.DataFrame:
    return pd.DataFrame({c: np.empty(0, np.int64) for c in WINDOW_COLUMNS})


def _step_numbers(rows: pd.DataFrame) -> np.ndarray:
    """Step number per step event: the ``step`` column, else the name's trailing integer,
    else the event's ordinal among the step events (sorted by start)."""
    n = len(rows)
    nums = pd.Series(np.full(n, np.nan), index=rows.index)
    if "step" in rows.columns:
        nums = pd.to_numeric(rows["step"], errors="coerce").astype("float64")
    if nums.isna().any() and "name" in rows.columns:
        from_name = pd.to_numeric(
            rows["name"].astype(str).str.extract(r"(\d+)\s*$", expand=False), errors="coerce")
        nums = nums.fillna(from_name)
    if nums.isna().any():
        order = np.argsort(rows["ts_ns"].to_numpy(np.int64), kind="stable")
        ordinal = np.empty(n, np.float64)
        ordinal[order] = np.arange(n)
        nums = nums.fillna(pd.Series(ordinal, index=rows.index))
    return nums.to_numpy(np.int64)


def _windows_of(rows: pd.DataFrame) -> pd.DataFrame:
    """One window per step number: earliest start to latest end, sorted by (start, step)."""
    start = rows["ts_ns"].to_numpy(np.int64)
    end = start + rows["dur_ns"].to_numpy(np.int64)
    steps, inv = np.unique(_step_numbers(rows), return_inverse=True)
    lo = np.full(steps.size, np.iinfo(np.int64).max, np.int64)
    hi = np.full(steps.size, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(lo, inv, start)
    np.maximum.at(hi, inv, end)
    o = np.lexsort((steps, lo))
    return pd.DataFrame({"step": steps[o], "start_ns": lo[o], "end_ns": hi[o],
                         "dur_ns": hi[o] - lo[o]})


#: The last few (events, windows) computed: every analyzer of a rank asks for the same events'
#: windows, so they are found once per events frame (keyed by the frame's identity, its length
#: and its columns; analyzers never modify their input events in place).
_CACHE: list[tuple[weakref.ref[pd.DataFrame], tuple[Any, ...], pd.DataFrame]] = []
_CACHE_SIZE = 4


def step_windows(events: pd.DataFrame) -> pd.DataFrame:
    """One row per step: ``step``, ``start_ns``, ``end_ns``, ``dur_ns`` (int64 ns)."""
    if events is None or len(events) == 0:
        return empty_windows()
    key = (len(events), tuple(events.columns))
    for ref, k, w in _CACHE:
        if ref() is events and k == key:
            return w.copy()
    w = _step_windows(events)
    try:
        _CACHE.insert(0, (weakref.ref(events), key, w))
    except TypeError:  # not weak-referenceable: not cached
        return w
    del _CACHE[_CACHE_SIZE:]
    return w.copy()


def summary_rows(events: pd.DataFrame) -> np.ndarray:
    """Positions of the step events on :data:`SUMMARY_LANE` (a categorical compare: no args
    read, so a big trace without such steps costs nothing)."""
    if len(events) == 0 or "lane" not in events.columns:
        return np.empty(0, np.int64)
    return np.flatnonzero(_is(events["lane"], SUMMARY_LANE) & _is(events["kind"], "step"))


def _is(col: pd.Series, value: str) -> np.ndarray:
    """Mask of ``col == value``; a categorical by its codes (no per-event string work)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        hit = np.flatnonzero(np.asarray(col.dtype.categories == value, bool))
        codes = col.array.codes
        return codes == hit[0] if hit.size else np.zeros(codes.size, bool)
    return col.isin((value,)).to_numpy(bool)


def _rows(events: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """The columns a window is made of (start, duration, step, name) of the rows ``mask``:
    not a copy of every column of the events."""
    cols = [c for c in ("ts_ns", "dur_ns", "step", "name") if c in events.columns]
    return pd.DataFrame({c: events[c].array[mask] for c in cols},
                        index=events.index[mask])


def _step_windows(events: pd.DataFrame) -> pd.DataFrame:
    is_step = _is(events["kind"], "step") & (events["dur_ns"].to_numpy(np.int64) > 0)
    host = is_step & _is(events["lane_kind"], "host")
    if host.any():
        return _windows_of(_rows(events, host))
    if is_step.any():
        return _windows_of(_rows(events, is_step))
    ts = events["ts_ns"].to_numpy(np.int64)
    end = ts + events["dur_ns"].to_numpy(np.int64)
    start, stop = int(ts.min()), int(end.max())
    return pd.DataFrame({"step": [-1], "start_ns": [start], "end_ns": [stop],
                         "dur_ns": [stop - start]}).astype(np.int64)


def _work_mask(events: pd.DataFrame) -> np.ndarray:
    # categorical columns compare by code: no per-event string work on big traces
    return ~events["kind"].isin(("step", "marker", "counter", "other")).to_numpy(bool)


def detailed(events: pd.DataFrame, windows: pd.DataFrame, meta: Any = None) -> np.ndarray:
    """Mask of the windows captured in detail (see the module docstring); all True unless the
    trace says it is coarse-to-fine (``collector.mode == "auto"``): a step of an ordinary trace
    with nothing recorded in it is idle time, not a step the profiler skipped."""
    n = len(windows)
    collector = dict(getattr(meta, "collector", {}) or {})
    if n == 0 or collector.get("mode") != "auto":
        return np.ones(n, bool)
    listed = collector.get("detailed_steps")
    if isinstance(listed, (list, tuple)) and listed:
        return np.isin(windows["step"].to_numpy(np.int64), np.asarray(listed, np.int64))
    # no list recorded: the windows that some work event overlaps
    from hermes.analyzers.common import intervals as iv

    work = _work_mask(events) if len(events) else np.zeros(0, bool)
    ts = events["ts_ns"].to_numpy(np.int64)[work] if len(events) else np.empty(0, np.int64)
    te = ts + (events["dur_ns"].to_numpy(np.int64)[work] if len(events) else 0)
    has = iv.overlap_per_interval(windows["start_ns"].to_numpy(np.int64),
                                  windows["end_ns"].to_numpy(np.int64),
                                  iv.union(ts, np.maximum(te, ts + 1))) > 0
    # nothing detailed at all (a monitor-only run): analyse what there is, every window
    return has if has.any() else np.ones(n, bool)


def fine_windows(events: pd.DataFrame, meta: Any = None) -> pd.DataFrame:
    """The step windows captured in detail (all of them for a trace without coarse steps)."""
    w = step_windows(events)
    return w[detailed(events, w, meta)].reset_index(drop=True)


def window_note(windows: pd.DataFrame) -> str:
    """How the windows were found, in words, for evidence and reports."""
    if len(windows) == 1 and int(windows["step"].iloc[0]) == -1:
        return ("no training steps in the trace (no ProfilerStep / hermes.step): the whole "
                "profiling window is analysed as one step")
    return f"{len(windows)} step(s)"


def in_step(events: pd.DataFrame, windows: pd.DataFrame) -> pd.Series:
    """Step of each event by its start time (``Int64``, ``<NA>`` outside every window).

    Windows are assumed not to overlap; if they do, an event goes to the latest window that
    started at or before it and still contains it.
    """
    if len(events) == 0 or len(windows) == 0:
        return pd.Series(pd.array([pd.NA] * len(events), dtype="Int64"), index=events.index)
    w = windows.sort_values("start_ns", kind="stable")
    ws = w["start_ns"].to_numpy(np.int64)
    we = w["end_ns"].to_numpy(np.int64)
    steps = w["step"].to_numpy(np.int64)
    ts = events["ts_ns"].to_numpy(np.int64)
    k = np.searchsorted(ws, ts, side="right") - 1
    kk = np.maximum(k, 0)
    inside = (k >= 0) & (ts < we[kk])
    out = pd.array(np.where(inside, steps[kk], 0), dtype="Int64")
    out[~inside] = pd.NA
    return pd.Series(out, index=events.index)


def split_by_windows(start: np.ndarray, end: np.ndarray, windows: pd.DataFrame
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Intervals cut at window borders and clipped to the windows (which must not overlap).

    Returns (start, end, window index, source interval index); parts outside every window are
    dropped. Vectorized: an interval spanning k windows is repeated k times (k is 1 almost
    always), so the cost is linear in the number of intervals."""
    ws = windows["start_ns"].to_numpy(np.int64)
    we = windows["end_ns"].to_numpy(np.int64)
    s = np.asarray(start, np.int64)
    e = np.asarray(end, np.int64)
    if s.size == 0 or ws.size == 0:
        z = np.empty(0, np.int64)
        return z, z, z, z
    o = np.argsort(ws, kind="stable")
    ws, we = ws[o], we[o]
    lo = np.searchsorted(we, s, side="right")   # first window ending after the start
    hi = np.searchsorted(ws, e, side="left")    # windows starting before the end
    n = np.maximum(hi - lo, 0)
    src = np.repeat(np.arange(s.size), n)
    win = np.repeat(lo, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    cs = np.maximum(s[src], ws[win])
    ce = np.minimum(e[src], we[win])
    keep = ce > cs
    return cs[keep], ce[keep], o[win[keep]], src[keep]


#: The first step is a warm-up outlier (compilation, allocator and cache warm-up, lazy loading)
#: when it lasts over this many times the median of the others, in a trace of at least
#: ``WARMUP_MIN_STEPS`` steps; the analysis then leaves it out (``--keep-warmup`` keeps it).
WARMUP_FACTOR = 10.0
WARMUP_MIN_STEPS = 3


def drop_warmup(events: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float] | None]:
    """``(events, info)``: without the first step when it is a warm-up outlier (events that end
    by the start of the second step; events reaching past it are kept and clipped to steps by
    the analyzers), and what was left out; ``(events, None)`` when the first step is not one."""
    w = step_windows(events)
    if len(w) < WARMUP_MIN_STEPS:
        return events, None
    w = w.sort_values("start_ns", kind="stable")
    d = w["dur_ns"].to_numpy(np.int64)
    med = float(np.median(d[1:]))
    if med <= 0 or d[0] <= WARMUP_FACTOR * med:
        return events, None
    cut = int(w["start_ns"].iloc[1])
    end = events["ts_ns"].to_numpy(np.int64) + events["dur_ns"].to_numpy(np.int64)
    keep = end > cut
    info = {"step": int(w["step"].iloc[0]), "dur_ms": round(d[0] / 1e6, 3),
            "median_ms": round(med / 1e6, 3), "factor": round(d[0] / med, 1),
            "events_left_out": int((~keep).sum())}
    return events[keep].reset_index(drop=True), info
