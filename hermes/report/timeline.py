"""The HTML report's timeline, aggregated: each lane's busy time binned into fixed time buckets.

A browser cannot draw a million rectangles, and a report must stay small whatever the trace's
size, so every (rank, lane) becomes one row of ``BUCKETS`` numbers: the mean number of events
running in that bucket (1.0 = busy all the time). The sum is exact for overlapping events: the
busy time before a point ``x`` is ``sum(min(x, end) - start)`` over events that started before
it, computed for all bucket edges at once from sorted starts and ends and their cumulative sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hermes.trace.schema import DEVICE_LANES, NOT_WORK_KINDS

#: Time buckets per lane: enough to see steps and gaps, ~20 kB of figures per 8 lanes.
BUCKETS = 600
#: Lanes drawn at most; the busiest are kept (a trace with thousands of threads stays readable).
MAX_LANES = 160
_COLUMNS = ["rank", "lane", "lane_kind", "kind", "ts_ns", "dur_ns"]


@dataclass
class Timeline:
    """Rows of the heatmap: ``labels[i]`` is the lane of ``busy[i]`` (buckets of ``width_ms``)."""

    labels: list[str]
    ranks: list[int]
    busy: np.ndarray  # (lanes, buckets) mean concurrency per bucket
    t0_ns: int
    width_ms: float
    events: int
    lanes_dropped: int

    @property
    def x_ms(self) -> np.ndarray:
        return (np.arange(self.busy.shape[1]) + 0.5) * self.width_ms


def columns() -> list[str]:
    """The trace columns the HTML report reads from events (load only these): the timeline's,
    and ``value`` for counters such as the loader's queue depth."""
    return [*_COLUMNS, "value"]


def _occupancy(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Mean concurrency of intervals ``[start, end)`` in each bucket between ``edges``."""
    s = np.sort(start)
    e = np.sort(end)
    cs = np.concatenate([[0.0], np.cumsum(s)])
    ce = np.concatenate([[0.0], np.cumsum(e)])
    ns = np.searchsorted(s, edges, side="left")
    ne = np.searchsorted(e, edges, side="left")
    # busy time before each edge: started intervals run up to the edge, ended ones to their end
    busy = (ns * edges - cs[ns]) - (ne * edges - ce[ne])
    return np.diff(busy) / np.diff(edges)


def aggregate(events: pd.DataFrame, buckets: int = BUCKETS) -> Timeline | None:
    """The binned timeline of ``events`` (a trace's event table), or None without timed work."""
    if not len(events):
        return None
    work = ~events["kind"].astype(object).isin(NOT_WORK_KINDS).to_numpy()
    ev = events.loc[work & (events["dur_ns"].to_numpy() > 0), _COLUMNS]
    if not len(ev):
        return None
    ts = ev["ts_ns"].to_numpy(np.int64)
    t0 = int(ts.min())
    start = (ts - t0).astype(np.float64)
    end = start + ev["dur_ns"].to_numpy(np.float64)
    span = max(float(end.max()), 1.0)
    edges = np.linspace(0.0, span, buckets + 1)
    lane_kind = ev["lane_kind"].astype(object).to_numpy()
    keys = pd.DataFrame({"rank": ev["rank"].to_numpy(np.int64),
                         "device": np.isin(lane_kind, DEVICE_LANES),
                         "lane": ev["lane"].astype(str).to_numpy()})
    codes, uniq = pd.factorize(pd.MultiIndex.from_frame(keys), sort=True)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniq) + 1))
    rows, labels, ranks, totals = [], [], [], []
    for i, (rank, device, lane) in enumerate(uniq):
        idx = order[bounds[i]:bounds[i + 1]]
        rows.append(_occupancy(start[idx], end[idx], edges))
        labels.append(f"r{rank} {'device' if device else 'host'} · {lane}")
        ranks.append(int(rank))
        totals.append(float((end[idx] - start[idx]).sum()))
    busy = np.vstack(rows)
    dropped = 0
    if len(rows) > MAX_LANES:
        keep = np.sort(np.argsort(totals)[::-1][:MAX_LANES])
        dropped = len(rows) - MAX_LANES
        busy = busy[keep]
        labels = [labels[k] for k in keep]
        ranks = [ranks[k] for k in keep]
    return Timeline(labels=labels, ranks=ranks, busy=busy, t0_ns=t0,
                    width_ms=span / buckets / 1e6, events=int(len(ev)), lanes_dropped=dropped)


def critical_path_bars(tables: dict[str, pd.DataFrame], windows: pd.DataFrame, rank: int,
                       t0_ns: int) -> list[dict[str, Any]]:
    """Plotly bar traces: each step of ``rank`` as wide as the step, split into the critical
    path's components (ms), on the timeline's time axis."""
    cp = tables.get("critical_path.per_step")
    if cp is None or not len(cp) or windows is None or not len(windows):
        return []
    cp = cp[cp["rank"] == rank].merge(windows[windows["rank"] == rank][["step", "start_ns"]],
                                      on="step", how="inner")
    if not len(cp):
        return []
    x = ((cp["start_ns"] - t0_ns) + cp["dur_ns"] / 2).to_numpy(np.float64) / 1e6
    width = cp["dur_ns"].to_numpy(np.float64) / 1e6
    parts = (("computation_ns", "computation"), ("communication_ns", "communication"),
             ("host_ns", "host"), ("io_ns", "io"), ("other_ns", "gaps"))
    out = []
    for col, label in parts:
        if col not in cp.columns:
            continue
        share = cp[col].to_numpy(np.float64) / np.maximum(cp["length_ns"].to_numpy(np.float64), 1)
        out.append({"type": "bar", "x": np.round(x, 4).tolist(), "y": np.round(share * 100, 2)
                    .tolist(), "width": np.round(width, 4).tolist(), "name": f"path: {label}",
                    "yaxis": "y2", "xaxis": "x",
                    "hovertemplate": f"step critical path: {label} %{{y:.1f}}%<extra></extra>"})
    return out
