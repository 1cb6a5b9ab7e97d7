"""The contract between things that *run* training (the emulated NPU runtime, the Python
instrumentation) and things that *record* it (collectors).

Producers know nothing of Parquet: they call a :class:`Collector`'s hooks with plain columnar
batches whose keys are trace-schema column names (``hermes.trace.schema``). A producer asks
``wants_detail(rank, step)`` before generating fine-grained events for a step, so a monitor-only
collector costs almost nothing and a coarse-to-fine collector can switch detail on and off
between steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

#: A columnar batch of events: column name -> sequence (list or numpy array), equal lengths.
EventBatch = Mapping[str, Sequence[Any]]


@dataclass(frozen=True)
class StepInfo:
    """Cheap per-step facts a producer reports at every step end (the monitor's input)."""

    rank: int
    step: int
    start_ns: int
    end_ns: int
    device_busy_ns: int | None = None
    samples: int | None = None
    tokens: int | None = None
    flops: float | None = None
    comm_bytes: int | None = None
    comm_ns: int | None = None
    queue_depths: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Collector(Protocol):
    def wants_detail(self, rank: int, step: int) -> bool:
        """Whether the producer should emit fine-grained events for this rank and step."""
        ...

    def on_events(self, batch: EventBatch) -> None:
        """Fine-grained events (any kinds, any ranks) in trace-schema columns."""
        ...

    def on_step(self, info: StepInfo) -> None:
        """A step ended on one rank."""
        ...

    def close(self, meta_updates: dict[str, Any] | None = None) -> None:
        """The run ended (normally or not): flush and publish what was recorded."""
        ...


class NullCollector:
    """Records nothing; the baseline for overhead measurements."""

    def wants_detail(self, rank: int, step: int) -> bool:
        return False

    def on_events(self, batch: EventBatch) -> None:
        pass

    def on_step(self, info: StepInfo) -> None:
        pass

    def close(self, meta_updates: dict[str, Any] | None = None) -> None:
        pass


class FanOut:
    """Several collectors behind one (e.g. the monitor plus the fine-grained collector)."""

    def __init__(self, collectors: Sequence[Collector]) -> None:
        self.collectors = list(collectors)

    def wants_detail(self, rank: int, step: int) -> bool:
        return any(c.wants_detail(rank, step) for c in self.collectors)

    def on_events(self, batch: EventBatch) -> None:
        for c in self.collectors:
            c.on_events(batch)

    def on_step(self, info: StepInfo) -> None:
        for c in self.collectors:
            c.on_step(info)

    def close(self, meta_updates: dict[str, Any] | None = None) -> None:
        for c in self.collectors:
            c.close(meta_updates)
