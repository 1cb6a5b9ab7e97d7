"""Time spans of events as interval unions: the events' own spans, step windows, device-idle
time, per-step sums, top names by time and the training loop's data waits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common import intervals as iv
from hermes.analyzers.common.names import desc_order, is_, name_matches
from hermes.analyzers.engine.base import RankContext
from hermes.trace.schema import DEVICE_LANES, NOT_WORK_KINDS

TOP_N = 10


#: PyTorch's DataLoader iterator (Kineto user annotation ``enumerate(DataLoader)#...__next__``).
DATA_WAIT_NAME = r"DataLoader.*__next__|_next_data\b"


def spans(events: pd.DataFrame, mask: np.ndarray | None = None) -> iv.Union:
    """Union of the events' [ts, ts + dur) (those selected by ``mask``)."""
    if mask is not None and not mask.any():
        return iv.EMPTY
    s = events["ts_ns"].to_numpy(np.int64)
    d = events["dur_ns"].to_numpy(np.int64)
    if mask is not None:  # (the rows selected first: no end computed for the others)
        s, d = s[mask], d[mask]
    return iv.union(s, s + d)


def windows_union(windows: pd.DataFrame) -> iv.Union:
    return iv.union(windows["start_ns"].to_numpy(np.int64), windows["end_ns"].to_numpy(np.int64))


def device_idle(ctx: RankContext, windows: pd.DataFrame) -> iv.Union:
    """Device-idle time inside the step windows (overlap's ``device_idle`` table when present)."""
    ov = ctx.results.get("overlap")
    if ov is not None and "device_idle" in ov.tables:
        t = ov.tables["device_idle"]
        return iv.union(t["start_ns"].to_numpy(np.int64), t["end_ns"].to_numpy(np.int64))
    ev = ctx.events
    dev = is_(ev, "lane_kind", *DEVICE_LANES) & ~is_(ev, "kind", *NOT_WORK_KINDS)
    return iv.subtract(windows_union(windows), spans(ev, dev))


def per_step_ns(u: iv.Union, windows: pd.DataFrame) -> np.ndarray:
    return iv.overlap_per_interval(windows["start_ns"].to_numpy(np.int64),
                                   windows["end_ns"].to_numpy(np.int64), u)


def top_names(events: pd.DataFrame, mask: np.ndarray, n: int = TOP_N,
              weights: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Top event names by total duration (or by ``weights``, one per event, e.g. self time):
    ``[{name, time_ns, count}]``."""
    if not mask.any():
        return []
    w = (events["dur_ns"].to_numpy(np.int64) if weights is None else weights)[mask]
    names = events["name"]
    if isinstance(names.dtype, pd.CategoricalDtype) and w.dtype.kind in "iu":
        # summed per category code, then by text (as the per-row strings would group): no
        # string per event
        code = names.array.codes[mask].astype(np.int64)
        keep = code >= 0  # a missing name is no group (as the strings' groupby drops it)
        order = np.argsort(code[keep], kind="stable")
        code, w = code[keep][order], w[keep][order].astype(np.int64)
        if code.size == 0:
            return []
        first = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
        text = np.array([str(c) for c in names.dtype.categories.tolist()], dtype=object)
        keys, sums = text[code[first]], np.add.reduceat(w, first)
        counts = np.diff(np.r_[first, len(code)])
        if len(set(keys.tolist())) == keys.size:  # (distinct texts: the groups as they are)
            # = the groupby by name (sorted names), then sort_values("sum", ascending=False)
            # (pandas' quicksort: desc_order) and head(n), without the frames
            by_name = np.argsort(keys, kind="stable")
            top = by_name[desc_order(sums[by_name], kind="quicksort")[:n]]
            return [{"name": str(keys[i]), "time_ns": int(sums[i]), "count": int(counts[i])}
                    for i in top]
        sub = pd.DataFrame({"name": keys, "sum": sums, "count": counts})
        g = sub.groupby("name")[["sum", "count"]].sum()
    else:
        sub = pd.DataFrame({"name": names[mask].astype(str).to_numpy(), "dur_ns": w})
        g = sub.groupby("name", observed=True)["dur_ns"].agg(["sum", "count"])
    g = g.sort_values("sum", ascending=False).head(n)
    return [{"name": str(k), "time_ns": int(r["sum"]), "count": int(r["count"])}
            for k, r in g.iterrows()]


def data_wait_mask(events: pd.DataFrame) -> np.ndarray:
    """Host-lane data waits: ``data_wait`` events and DataLoader ``__next__`` ranges."""
    if len(events) == 0:
        return np.zeros(0, bool)
    host = is_(events, "lane_kind", "host")
    return host & (is_(events, "kind", "data_wait") | name_matches(events["name"],
                                                                       DATA_WAIT_NAME))
