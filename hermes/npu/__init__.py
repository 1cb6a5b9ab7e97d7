"""The emulated Ascend-like NPU runtime (device cost model + host software stack).

``Runtime(device, ranks=, settings=, collector=, seed=).run(workload, steps)`` emulates a
workload of the zoo (``hermes.npu.workloads``) on the virtual clock; ``hermes.npu.real`` runs
a step-by-step loop whose host side is real Python timed on the wall clock;
``hermes.npu.emulate`` plans a run from names and picks the clock. The caller hands in the
collector (``hermes.hooks.Collector``): this package imports no collector.
"""

from __future__ import annotations

from hermes.npu.result import RunResult
from hermes.npu.runtime import Runtime
from hermes.npu.settings import Settings

__all__ = ["RunResult", "Runtime", "Settings"]
