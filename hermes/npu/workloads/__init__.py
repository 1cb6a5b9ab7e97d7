"""The workload zoo: operator graphs of real models, looked up by the names users type.

``WORKLOADS`` is a :class:`~hermes.registry.Registry` of :class:`Workload`; ``get(name)`` raises
a ``UsageError`` listing the valid names. A workload builds the graph of one rank's pipeline
stage for a parallel layout (``build(tp, pp, stage)``) and says what a step consumes (samples,
tokens, bytes per sample, CPU processing per sample). Shapes, FLOPs and bytes come from the
models' published architectures (layers generated programmatically in ``models.py``).
"""

from __future__ import annotations

from hermes.npu.workloads.models import ZOO
from hermes.npu.workloads.workload import Workload
from hermes.registry import Registry

WORKLOADS: Registry[Workload] = Registry("workload")
for _w in ZOO:
    WORKLOADS.add(_w.name, _w)


def get(name: str) -> Workload:
    return WORKLOADS.get(name)


def names() -> list[str]:
    return WORKLOADS.names()


__all__ = ["WORKLOADS", "Workload", "get", "names"]
