"""Memory of one rank: peak allocated and reserved bytes and their timeline.

Reads the counter samples the Kineto importer makes of PyTorch's ``[memory]`` events
(``profile_memory=True``): kind ``counter`` on lanes ``memory <device> allocated`` and
``memory <device> reserved``, the caching allocator's totals after each allocation or free in
``value`` (bytes). The device reported is the accelerator with the highest allocated peak; host
(``cpu``) samples are used only when the trace has no other. A trace without samples gives an
empty result (no metrics, no table).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hermes.analyzers.engine.base import AnalyzerResult, RankContext, register

TIMELINE_COLUMNS = ["ts_ns", "allocated_bytes", "reserved_bytes"]
_COUNTER = r"^memory (?P<device>\S+) (?P<quantity>allocated|reserved)$"


def _samples(events: pd.DataFrame) -> pd.DataFrame:
    """(device, quantity, ts_ns, value) of the memory counter samples, in time order."""
    if len(events) == 0 or not {"kind", "lane", "ts_ns", "value"} <= set(events.columns):
        # no events, or a caller that loaded only some columns: no samples to read
        return pd.DataFrame(columns=["device", "quantity", "ts_ns", "value"])
    counter = (events["kind"] == "counter").to_numpy(bool)
    lane = events["lane"]
    if isinstance(lane.dtype, pd.CategoricalDtype):  # each lane name read once, by its code
        parts = pd.Series(lane.cat.categories.astype(str)).str.extract(_COUNTER)
        code = lane.cat.codes.to_numpy()[counter]
        device = np.append(parts["device"].to_numpy(object), np.nan)[code]
        quantity = np.append(parts["quantity"].to_numpy(object), np.nan)[code]
    else:
        parts = lane[counter].astype(str).str.extract(_COUNTER)  # counter rows only
        device, quantity = parts["device"].to_numpy(object), parts["quantity"].to_numpy(object)
    ok = pd.notna(device)
    rows = np.flatnonzero(counter)[ok]  # (their times and values only: no copy of the rows)
    out = pd.DataFrame({"device": device[ok], "quantity": quantity[ok],
                        "ts_ns": events["ts_ns"].take(rows).to_numpy(np.int64),
                        "value": events["value"].take(rows).to_numpy(np.float64)})
    return out.sort_values("ts_ns", kind="stable").reset_index(drop=True)


def _timeline(s: pd.DataFrame) -> pd.DataFrame:
    """One row per sample time: allocated and reserved bytes, each carried forward from its
    last sample (both are totals, so the last value holds until the next one)."""
    wide = s.pivot_table(index="ts_ns", columns="quantity", values="value", aggfunc="last")
    wide = wide.reindex(columns=["allocated", "reserved"]).ffill()
    return pd.DataFrame({"ts_ns": wide.index.to_numpy(np.int64),
                         "allocated_bytes": wide["allocated"].to_numpy(np.float64),
                         "reserved_bytes": wide["reserved"].to_numpy(np.float64)})


@register("memory", scope="rank")
def memory(ctx: RankContext) -> AnalyzerResult:
    """Peak allocated / reserved device memory and the memory timeline of one rank."""
    res = AnalyzerResult("memory")
    s = _samples(ctx.events)
    s = s[np.isfinite(s["value"].to_numpy(np.float64))]
    if len(s) == 0:
        return res
    devices = s["device"].unique().tolist()
    accel = [d for d in devices if d != "cpu"] or devices
    s = s[s["device"].isin(accel)]
    alloc_peak = s[s["quantity"] == "allocated"].groupby("device")["value"].max()
    device = str(alloc_peak.idxmax()) if len(alloc_peak) else str(accel[0])
    mine = s[s["device"] == device]
    peak_alloc = mine.loc[mine["quantity"] == "allocated", "value"].max()
    peak_resv = mine.loc[mine["quantity"] == "reserved", "value"].max()
    res.metrics = {
        "device": device,
        "peak_allocated_bytes": None if pd.isna(peak_alloc) else int(peak_alloc),
        "peak_reserved_bytes": None if pd.isna(peak_resv) else int(peak_resv),
        "samples": int(len(mine)),
    }
    res.tables["timeline"] = _timeline(mine)[TIMELINE_COLUMNS]
    return res
