"""What the ``fluctuation`` analyzer knows of a spike beyond its own events.

A coarse-to-fine run (``hermes profile --mode auto``) records most steps with the monitor
only: a step event and the monitor's counters (host CPU %, RSS, GC and data-wait time). A slow
step is over before the trigger fires, so it is typically *monitored only*, while the K steps
after it are captured in detail. Three helpers:

* :func:`detailed` -- which step windows were captured in detail (hold events other than
  steps, counters and markers): a spike's components are compared with normal steps of the
  same kind, never a detailed spike with monitored-only normals (which record no host work);
* :func:`captured_after` -- the steps the trigger captured right after a spike
  (``collector.requests`` in the trace's metadata: a request whose window starts at the next
  step, or any window that does);
* :func:`monitor_evidence` -- the monitor's counters in the spike steps against their median
  over the normal steps (what the monitor saw when nothing else was recorded).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common.names import is_

#: monitor counters quoted in a spike's evidence (name -> rounding)
COUNTERS = {"host_cpu_pct": 1, "host_rss_bytes": 0, "gc_ms": 3, "gc_collections": 0,
            "data_wait_ms": 3, "samples_per_s": 1}


def detailed(ev: pd.DataFrame, windows: pd.DataFrame) -> np.ndarray:
    """Per window: captured in detail (any event but steps, counters and markers in it)."""
    steps = windows["step"].to_numpy(np.int64)
    if not len(steps) or "step" not in ev.columns:
        return np.zeros(len(steps), bool)
    work = ~is_(ev, "kind", "step", "counter", "marker")
    col = ev["step"]
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        # (a numeric column: its values as floats, no Series of the selected rows)
        v = col.to_numpy(np.float64, na_value=np.nan)[work]
        s = v[~np.isnan(v)].astype(np.int64)
    else:
        s = pd.to_numeric(ev.loc[work, "step"], errors="coerce").dropna().to_numpy(np.int64)
    return np.isin(steps, s)


def captured_after(meta: Any, step: int, detailed_steps: set[int]) -> list[int]:
    """The steps captured in detail right after ``step`` by the trigger (its windows in
    ``collector.requests``), those the trace holds in detail; [] when none followed it."""
    requests = (getattr(meta, "collector", {}) or {}).get("requests") or []
    out: list[int] = []
    for r in requests:
        try:
            lo, hi = int(r["from_step"]), int(r["to_step"])
        except (KeyError, TypeError, ValueError):
            continue
        if lo <= step + 1 <= hi:
            out += [s for s in range(step + 1, hi + 1) if s in detailed_steps]
    return sorted(set(out))


def monitor_evidence(ev: pd.DataFrame, spike_steps: list[int], normal_steps: np.ndarray
                     ) -> dict[str, Any]:
    """``{counter: {"spikes": [value per spike step or None], "median": over normal steps}}``
    for the monitor's counters the trace holds."""
    counter = is_(ev, "kind", "counter") & is_(ev, "name", *COUNTERS)
    if not counter.any() or not spike_steps:
        return {}
    sub = ev.loc[counter, ["name", "step", "value"]].copy()
    sub["name"] = sub["name"].astype(str)
    sub["step"] = pd.to_numeric(sub["step"], errors="coerce")
    sub["value"] = pd.to_numeric(sub["value"], errors="coerce")
    sub = sub.dropna()
    out: dict[str, Any] = {}
    for name, nd in COUNTERS.items():
        per = sub[sub["name"] == name].groupby("step")["value"].mean()
        if per.empty:
            continue
        normal = per[per.index.isin(normal_steps)]
        out[name] = {"spikes": [None if s not in per.index else round(float(per[s]), nd)
                                for s in spike_steps],
                     "median": round(float(normal.median()), nd) if len(normal) else None}
    return out
