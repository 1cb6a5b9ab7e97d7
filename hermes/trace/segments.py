"""A trace written as it is recorded, in segments that each survive the process's death.

A profiled job can be killed (SIGKILL, ``os.abort()``, a segfault) at any moment; a Parquet
file is only readable once its footer is written, so a single file kept open for the whole
run would be lost with it. :class:`SegmentedTraceWriter` therefore publishes what was recorded
so far as a small complete Parquet file at each :meth:`~SegmentedTraceWriter.checkpoint`
(temp name, then rename: each segment is valid on its own), and on a clean :meth:`close`
merges the segments into the usual trace and removes them.

Where segments live, so that what a crash leaves is itself a valid trace:

- ``out`` a directory: ``out/rank-00003.seg-PID-00001.parquet`` beside the final
  ``rank-00003.parquet`` files (the reader reads every ``*.parquet`` of the directory);
- ``out`` a ``.parquet`` file: ``out.partial/seg.seg-PID-00001.parquet``, a trace directory of its
  own (``hermes validate run.parquet.partial``) until the clean close writes ``out``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hermes.errors import OutputError
from hermes.trace.meta import TraceMeta
from hermes.trace.writer import DEFAULT_ROW_GROUP_ROWS, TraceWriter, by_rank, to_table


class SegmentedTraceWriter:
    """Crash-safe trace writer: segments published at checkpoints, merged on close."""

    def __init__(self, path: str | os.PathLike[str], meta: TraceMeta | None = None,
                 row_group_rows: int = DEFAULT_ROW_GROUP_ROWS) -> None:
        self.path = Path(path)
        self.meta = meta or TraceMeta()
        self.row_group_rows = row_group_rows
        self.single = self.path.suffix == ".parquet"
        self.seg_dir = self.path.with_name(self.path.name + ".partial") if self.single \
            else self.path
        try:
            self.seg_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot create the output directory: {exc.strerror}",
                              path=self.seg_dir) from None
        self._open: dict[int | None, TraceWriter] = {}
        self._segments: dict[int | None, list[Path]] = {}
        self._count = 0
        self._closed = False

    def _stem(self, key: int | None) -> str:
        return "seg" if key is None else f"rank-{key:05d}"

    def _final(self, key: int | None) -> Path:
        return self.path if key is None else self.path / f"rank-{key:05d}.parquet"

    def _meta(self, key: int | None) -> TraceMeta:
        return self.meta if key is None else self.meta.with_(ranks=(key,))

    def _writer(self, key: int | None) -> TraceWriter:
        w = self._open.get(key)
        if w is None:
            self._count += 1
            # the pid keeps a restarted job from renaming over an earlier run's segments
            seg = self.seg_dir / f"{self._stem(key)}.seg-{os.getpid()}-{self._count:05d}.parquet"
            w = TraceWriter(seg, self._meta(key), self.row_group_rows)
            self._open[key] = w
        return w

    def write(self, batch: Mapping[str, Any] | pa.Table | Any) -> None:
        table = to_table(batch)
        if table.num_rows == 0:
            return
        if self.single:
            self._writer(None).write(table)
            return
        for r, part in by_rank(table):
            self._writer(r).write(part)

    def checkpoint(self, meta: TraceMeta | None = None) -> None:
        """Publish everything written since the last checkpoint as complete segment files."""
        if meta is not None:
            self.meta = meta
        for key, w in list(self._open.items()):
            w.close(self._meta(key))
            self._segments.setdefault(key, []).append(w.path)
        self._open.clear()

    def close(self, meta: TraceMeta | None = None) -> Path:
        """Merge the segments into the final trace (atomically), then remove them."""
        if self._closed:
            return self.path
        self.checkpoint(meta)
        if not self._segments and self.single:  # nothing recorded: an empty trace, as before
            TraceWriter(self.path, self.meta, self.row_group_rows).close(self.meta)
        for key, segs in self._segments.items():
            final = TraceWriter(self._final(key), self._meta(key), self.row_group_rows)
            try:
                for seg in segs:
                    for batch in pq.ParquetFile(seg).iter_batches():
                        final.write(pa.Table.from_batches([batch]))
                final.close(self._meta(key))
            except BaseException:
                final.abort()
                raise
            for seg in segs:  # only once the merged file is in place
                with contextlib.suppress(OSError):
                    seg.unlink()
        if self.single:
            shutil.rmtree(self.seg_dir, ignore_errors=True)
        self._closed = True
        return self.path

    def abort(self) -> None:
        """Drop the open (unpublished) segments; published ones stay, as after a crash."""
        for w in self._open.values():
            w.abort()
        self._open.clear()
        self._closed = True
