"""The fine-grained collector: records every event a producer emits into a Hermes trace.

It implements the :class:`hermes.hooks.Collector` protocol. Events arrive as columnar batches
in trace-schema column names and are streamed to ``hermes.trace.open_writer(path)`` (``*.parquet``
-> one file, any other path -> a directory of per-rank files). Trace metadata is the ``meta``
given at construction, updated by ``close(meta_updates)``: keys naming a ``TraceMeta`` field
replace it (``extra`` and ``collector`` are merged key by key); other keys land in ``extra``.

Which steps get detail is chosen by ``ranks`` / ``steps`` (None = all); the collector records
which (rank, step) pairs it asked detail for and stores them as ``collector.detailed_steps``.
Its own cost is measured: the time spent inside ``on_events`` (buffering and writing row
groups) over the wall time since construction is written as ``collector.overhead_pct`` and
``collector.events`` counts what was written, when ``measure_overhead=True`` (a caller that
measures a wider scope, such as a ``hermes.profile`` session, passes its own figure).
``drop_kinds`` leaves producer rows of those kinds out (a session drops the runtime's own
``step`` rows: its monitor writes one per step); :meth:`record` writes the caller's own rows
unfiltered.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from hermes.hooks import EventBatch, StepInfo
from hermes.trace.meta import TraceMeta
from hermes.trace.segments import SegmentedTraceWriter
from hermes.trace.writer import (
    DEFAULT_ROW_GROUP_ROWS,
    RankedTraceWriter,
    TraceWriter,
    open_writer,
    to_table,
)

_META_FIELDS = frozenset(f.name for f in fields(TraceMeta))
_MERGED = ("extra", "collector", "device", "import_summary")


class FineCollector:
    """Write all events of the selected ranks and steps to a trace at ``path``."""

    mode = "fine"

    def __init__(self, path: str | os.PathLike[str], meta: TraceMeta | None = None, *,
                 ranks: Iterable[int] | None = None, steps: Iterable[int] | None = None,
                 row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
                 measure_overhead: bool = False, drop_kinds: Iterable[str] = (),
                 replace: bool = True, segmented: bool = False, journal: bool = True) -> None:
        self.path = Path(path)
        self.measure_overhead = measure_overhead
        self.drop_kinds = tuple(drop_kinds)
        self.meta = meta or TraceMeta(source="emulator")
        self.ranks = None if ranks is None else frozenset(int(r) for r in ranks)
        self.steps = None if steps is None else frozenset(int(s) for s in steps)
        # segmented: published piecewise at checkpoints, so a killed process keeps its trace
        self._writer: TraceWriter | RankedTraceWriter | SegmentedTraceWriter = (
            SegmentedTraceWriter(self.path, self.meta, row_group_rows, journal) if segmented
            else open_writer(self.path, self.meta, row_group_rows, replace=replace))
        self._segmented = isinstance(self._writer, SegmentedTraceWriter)
        self._detailed: set[tuple[int, int]] = set()
        self.steps_seen = 0
        self.events_written = 0
        self.closed = False
        self.busy_ns = 0  # time spent in this collector's hooks (its measured overhead)
        self._t_start = time.perf_counter_ns()

    # -- Collector protocol -------------------------------------------------------------
    def wants_detail(self, rank: int, step: int) -> bool:
        ok = (self.ranks is None or rank in self.ranks) and \
             (self.steps is None or step in self.steps)
        if ok:
            self._detailed.add((int(rank), int(step)))
        return ok

    def on_events(self, batch: EventBatch) -> None:
        """A producer's events (rows of a kind in ``drop_kinds`` are left out)."""
        self.record(batch, producer=True)

    def record(self, batch: EventBatch, producer: bool = False) -> None:
        """Write rows; ``producer=False``: the caller's own rows, never filtered."""
        n = len(next(iter(batch.values()))) if batch else 0
        if n == 0:
            return
        t0 = time.perf_counter_ns()
        table = to_table(batch)
        if producer and self.drop_kinds:
            table = self._drop(table)
        self._writer.write(table)
        self.events_written += table.num_rows
        self.busy_ns += time.perf_counter_ns() - t0

    def record_rows(self, rows: dict[str, list[Any]]) -> None:
        """The caller's own rows as Python lists (a segmented writer keeps them so until its
        next checkpoint, journaling them meanwhile: one Arrow table per checkpoint)."""
        if not isinstance(self._writer, SegmentedTraceWriter):
            self.record(rows)
            return
        t0 = time.perf_counter_ns()
        self._writer.write_rows(rows)
        self.events_written += min((len(v) for v in rows.values()), default=0)
        self.busy_ns += time.perf_counter_ns() - t0

    def record_records(self, columns: tuple[str, ...], records: list[tuple[Any, ...]]) -> None:
        """The caller's own rows as tuples (``columns``; the list is handed over): journaled
        as they are by a segmented writer, one Arrow table per checkpoint."""
        if not records:
            return
        if not self._segmented:
            self.record(dict(zip(columns, map(list, zip(*records, strict=True)), strict=True)))
            return
        self._writer.write_records(columns, records)  # type: ignore[union-attr]
        self.events_written += len(records)  # (a session measures its own time: not timed)

    def _drop(self, table: pa.Table) -> pa.Table:
        """Rows whose kind is in ``drop_kinds`` removed (compared on dictionary indices)."""
        kind = table.column("kind").combine_chunks()
        drop = [i for i, k in enumerate(kind.dictionary.to_pylist()) if k in self.drop_kinds]
        if not drop:
            return table
        return table.filter(pc.invert(pc.is_in(kind.indices, pa.array(drop, pa.int32()))))

    def on_step(self, info: StepInfo) -> None:
        self.steps_seen += 1

    def progress(self, rank: int, step: int, store: bool = True) -> None:
        """Note that ``rank`` completed step ``step`` (segmented writers: a progress file a
        reader of a killed run's segments finds; see ``hermes.trace.segments``; ``store``
        False: counted by the step's journal entry, :meth:`journal` next)."""
        if self._segmented and not self.closed:
            self._writer.progress(rank, step, store)  # type: ignore[union-attr]

    def journal(self, step: int) -> None:
        """Journal what was recorded since the last step (segmented writers: see
        ``hermes.trace.journal``), so a death before the next checkpoint keeps it."""
        if self._segmented and not self.closed:
            self._writer.journal(step)  # type: ignore[union-attr]

    def checkpoint(self) -> None:
        """Publish what was recorded so far (segmented writers only; others write on close)."""
        if isinstance(self._writer, SegmentedTraceWriter) and not self.closed:
            self._writer.checkpoint(self._merged_meta({}))

    def close(self, meta_updates: dict[str, Any] | None = None) -> Path:
        """Flush and publish the trace (atomically); returns its path. Idempotent."""
        if self.closed:
            return self.path
        t0 = time.perf_counter_ns()
        self.meta = self._merged_meta(meta_updates or {})
        self.busy_ns += time.perf_counter_ns() - t0
        if self.measure_overhead:
            wall = max(1, time.perf_counter_ns() - self._t_start)
            collector = dict(self.meta.collector)
            collector.setdefault("overhead_pct", round(100.0 * self.busy_ns / wall, 4))
            collector.setdefault("events", self.events_written)
            self.meta = self.meta.with_(collector=collector)
        self.closed = True
        return self._writer.close(self.meta)

    def abort(self) -> None:
        """Drop what was written; the output path is left as it was."""
        if not self.closed:
            self._writer.abort()
            self.closed = True

    # -- helpers ------------------------------------------------------------------------
    def detailed_steps(self) -> list[int]:
        return sorted({s for _, s in self._detailed})

    def _merged_meta(self, updates: dict[str, Any]) -> TraceMeta:
        changes: dict[str, Any] = {}
        extra = dict(self.meta.extra)
        for key, value in updates.items():
            if key in _MERGED and isinstance(value, dict):
                merged = dict(getattr(self.meta, key))
                merged.update(value)
                if key == "extra":
                    extra.update(value)
                else:
                    changes[key] = merged
            elif key in _META_FIELDS and key != "extra":
                changes[key] = tuple(value) if key == "ranks" else value
            else:
                extra[key] = value
        collector = dict(changes.get("collector", self.meta.collector))
        collector.setdefault("mode", self.mode)
        collector.setdefault("detailed_steps", self.detailed_steps())
        changes["collector"] = collector
        changes["extra"] = extra
        return self.meta.with_(**changes)

    def __enter__(self) -> FineCollector:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
