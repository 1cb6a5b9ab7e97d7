"""Device cost model and in-order stream timing.

A task's duration is a roofline per compute unit::

    dur = max(flops / peak[unit], bytes / hbm_bw) / efficiency

with efficiency factors for shape affinity (Cube inner axis not a multiple of 256), AI CPU
fallback (the AI CPU's peak instead of the AI Core's) and the clock frequency (a slow node runs
at a fraction of its clock). TransData conversions of private formats are separate Vector
tasks. All durations are in nanoseconds (float64 arrays; rounded when events are emitted).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hermes.devices import DeviceProfile
from hermes.npu.graph import AI_CPU, CUBE, LINK, VECTOR, Graph

#: Cube efficiency when the matmul inner axis is not a multiple of 256 (padding + extra passes).
MISALIGNED_EFF = 0.6
CUBE_ALIGN = 256
#: Fixed cost of an AI CPU task (scheduling on the control CPU cores, data staging), seconds.
AI_CPU_TASK_S = 4.0e-5


@dataclass(frozen=True)
class UnitPeaks:
    """FLOP/s per graph unit code on one device (GPUs map Cube -> SMs, AI CPU -> vector)."""

    cube: float
    vector: float
    ai_cpu: float
    hbm_Bps: float
    ai_cpu_task_s: float = AI_CPU_TASK_S   # fixed cost of an AI CPU task (0 without one)

    @classmethod
    def of(cls, p: DeviceProfile) -> UnitPeaks:
        pf = p.peak_flops
        cube = pf.get("cube", pf.get("sm", 1e14))
        vector = pf.get("vector", cube / 16)
        # where the profile has figures measured on the real device (H100 calibration), the
        # achievable matmul rate and HBM bandwidth replace the data-sheet peaks
        measured = p.fields.get("measured", {})
        cube = measured.get("matmul_bf16_flops", cube)
        hbm = measured.get("hbm_bw_Bps", p.hbm_bw_Bps)
        if "ai_cpu" in pf:
            return cls(cube, vector, pf["ai_cpu"], hbm)
        # no AI CPU (GPUs): operators Ascend would run there run as ordinary vector kernels
        return cls(cube, vector, vector, hbm, 0.0)

    def array(self) -> np.ndarray:
        out = np.full(4, np.inf)
        out[CUBE], out[VECTOR], out[AI_CPU] = self.cube, self.vector, self.ai_cpu
        return out


def task_durations(g: Graph, peaks: UnitPeaks, *, flops: np.ndarray, nbytes: np.ndarray,
                   unit: np.ndarray, aligned: bool) -> np.ndarray:
    """Roofline duration (ns) of every compute task of ``g``; 0 for communication ops."""
    peak = peaks.array()[unit]
    dur = np.maximum(flops / peak, nbytes / peaks.hbm_Bps)
    if not aligned:
        bad = (unit == CUBE) & (g.inner > 0) & (g.inner % CUBE_ALIGN != 0)
        dur = np.where(bad, dur / MISALIGNED_EFF, dur)
    dur = np.where(unit == AI_CPU, dur + peaks.ai_cpu_task_s, dur)
    dur = np.where(unit == LINK, 0.0, dur)
    return dur * 1e9


def in_order(arrival: np.ndarray, dur: np.ndarray, free_at: np.ndarray | float) -> np.ndarray:
    """Start times of tasks on one in-order queue, vectorized over the last axis.

    Task i starts at max(arrival[i], end of task i-1); the queue is free from ``free_at``.
    With C the inclusive cumulative duration, end[i] = C[i] + max_{j<=i}(a[j] - C[j-1]),
    a running maximum instead of a Python loop. Shapes: (..., n) -> (..., n).
    """
    if arrival.shape[-1] == 0:
        return arrival.copy()
    a = np.maximum(arrival, np.asarray(free_at, dtype=np.float64)[..., None]
                   if np.ndim(free_at) else free_at)
    c = np.cumsum(dur, axis=-1)
    c_prev = c - dur
    end = c + np.maximum.accumulate(a - c_prev, axis=-1)
    return end - dur
