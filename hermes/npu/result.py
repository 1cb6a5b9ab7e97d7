"""What a run returns, whichever clock ran it (``runtime.Runtime`` or ``real.RealRuntime``).

A leaf module of its own so that both runtimes build it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hermes.npu.settings import Settings


@dataclass
class RunResult:
    """Per-step figures of a run (arrays over steps x ranks, ns) and the settings used."""

    workload: str
    ranks: int
    layout: tuple[int, int, int]
    step_ns: np.ndarray
    host_ns: np.ndarray        # host busy time per step (sum of host stage costs)
    device_busy_ns: np.ndarray
    device_tasks: int
    settings: Settings
    comm_ns: np.ndarray | None = None   # time in collectives per step (wait + transmit)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def median_step_ms(self) -> float:
        return float(np.median(self.step_ns)) / 1e6
