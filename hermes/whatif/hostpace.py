"""Host calls back at their usual pace: what stopping competing processes (CPU contention) and
quieting host logging (a verbose environment) do to a step graph.

Both are measured the way the ``cpu`` analyzer finds them (docs/analysis/cpu.md): the median
host launch call against the device profile's launch latency (``launch_latency_s``). The two
slow a host call differently, so they are undone differently:

* **contention** time-slices the CPU: every host call of the training process runs slower by
  the same factor, ``observed / expected``; stopping the competition scales the CPU work of
  the loop's host lanes (dispatch, GC, compilation) by ``expected / observed``. Calls that wait
  (syncs, data waits) are not CPU work and keep their time; the loader's workers are not
  scaled (their pace is the data-loading transforms').
* **verbose logging** adds a fixed cost to every host call (a log line each): quieting it takes
  ``observed - expected`` off every dispatch call (infer-shape, tiling, allocation, launch,
  runtime, Python), not below zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hermes.whatif.facts import duration, kinds
from hermes.whatif.fusion import DISPATCH_KINDS
from hermes.whatif.replay import Change, StepGraph

#: host work a loaded CPU slows: dispatch, garbage collection, compilation
CPU_KINDS = (*DISPATCH_KINDS, "gc", "compile")


def launch_latency_ns(params: Mapping[str, Any]) -> float:
    """The device's launch latency (ns): the trace's device record, else the device profile
    its name matches (0: not known)."""
    dev = params.get("device") or {}
    v = dev.get("launch_latency_s")
    if isinstance(v, (int, float)) and v > 0:
        return float(v) * 1e9
    from hermes import devices

    for key in ("name", "display_name"):
        prof = devices.match(str(dev.get(key) or ""))
        lat = getattr(prof, "fields", {}).get("launch_latency_s") if prof is not None else None
        if isinstance(lat, (int, float)) and lat > 0:
            return float(lat) * 1e9
    return 0.0


def _loop_host(sg: StepGraph) -> np.ndarray:
    """Events on the training loop's host lanes (not the loader's)."""
    return sg.info["host"].to_numpy(bool) & ~sg.info["loader"].to_numpy(bool)


def launch_median_ns(sg: StepGraph) -> float:
    """Median duration (ns) of the loop's host launch calls (0: none)."""
    m = _loop_host(sg) & (kinds(sg) == "launch")
    return float(np.median(duration(sg)[m])) if m.any() else 0.0


def missing(sg: StepGraph, params: Mapping[str, Any]) -> str | None:
    """Why the trace cannot say how fast host calls would run (None: it can)."""
    observed = launch_median_ns(sg)
    if observed <= 0:
        return "the trace records no host launch calls"
    expected = launch_latency_ns(params)
    if expected <= 0:
        return "the device profile gives no launch latency"
    if observed <= expected:
        return "host launches already run at the device profile's launch latency"
    return None


def uncontended(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """The loop's host CPU work (:data:`CPU_KINDS`) x ``expected / observed`` launch time."""
    f = launch_latency_ns(params) / launch_median_ns(sg)
    ch.scale[_loop_host(sg) & np.isin(kinds(sg), CPU_KINDS)] *= min(f, 1.0)


def quiet_logging(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Every dispatch call of the loop ``observed - expected`` launch time shorter (>= 0)."""
    excess = max(launch_median_ns(sg) - launch_latency_ns(params), 0.0)
    sel = _loop_host(sg) & np.isin(kinds(sg), DISPATCH_KINDS)
    dur = np.maximum(duration(sg)[sel], 1.0)
    ch.scale[sel] *= np.clip((dur - excess) / dur, 0.0, 1.0)
