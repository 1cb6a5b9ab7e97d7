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
  own (readers read it in place of the missing ``out``) until the clean close writes ``out``.

Beside the segments, a progress file per rank (``.rank-00003.progress``, ``.seg.progress``)
holds the number of the last step the rank completed, rewritten in place (a store into a
shared mapping of the file: in the page cache, no system call; a line with the record's
CRC-32 after it, so a record a death cut short is never read) at every step that its journal
entry does not count already (each entry carries the count: the record is stored at a
checkpoint, and at every step while nothing is journaled), so a reader of what a killed run
left can say how far it got (:func:`interrupted`, ``hermes/trace/progress.py``). The writer holds an advisory lock (``flock``) on it while it runs: the
kernel drops it when the process dies, however it dies, so a reader tells a run still
writing from one that was killed, and a second run aimed at the same rank of the same output
is refused (:class:`hermes.errors.OutputError`) instead of mixing its steps with the first's.
Between checkpoints each completed step's new events go to the rank's journal
(``.rank-00003.journal``, :mod:`hermes.trace.journal`, :meth:`SegmentedTraceWriter.journal`),
so a run that dies keeps every completed step: the first reader turns the journal into the
segment the next checkpoint would have written. A clean close merges the segments, then
removes them, the journal and the progress file.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hermes.errors import OutputError
from hermes.trace.journal import JournalWriter, read
from hermes.trace.journal import held as _holder
from hermes.trace.meta import TraceMeta
from hermes.trace.progress import (  # noqa: F401 - (readers import them from here)
    RECORD_BYTES,
    busy,
    interrupted,
    interrupted_note,
    progress_dir,
    record_line,
    record_of,
)
from hermes.trace.writer import DEFAULT_ROW_GROUP_ROWS, TraceWriter, by_rank, to_table

#: rows a rank keeps as Python lists (:meth:`SegmentedTraceWriter.write_rows`) before they
#: become an Arrow table in its open segment (bounded memory)
ROWS_LIMIT = 16384
Rows = dict[str, list[Any]]


class SegmentedTraceWriter:
    """Crash-safe trace writer: segments published at checkpoints, merged on close."""

    def __init__(self, path: str | os.PathLike[str], meta: TraceMeta | None = None,
                 row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, journal: bool = True) -> None:
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
        self._progress: dict[int | None, int] = {}  # key -> fd of its locked progress file
        self._records: dict[int | None, mmap.mmap] = {}  # key -> its progress file, mapped
        self._pid = os.getpid()
        self._steps: dict[int | None, int] = {}
        self._last: dict[int | None, int] = {}  # key -> the last step it completed
        #: journal each completed step (:meth:`journal`); off after a failed write
        self.journaling = journal
        self._journals: dict[int | None, JournalWriter] = {}
        self._seg_no: dict[int | None, int] = {}  # key -> number of its open segment
        self._new: dict[int | None, list[pa.Table]] = {}  # tables not journaled yet
        self._rows: dict[int | None, Rows] = {}  # rows not in the open segment yet
        self._rows_journaled: dict[int | None, int] = {}
        # rows as tuples (write_records): key -> (columns, rows), and those not journaled
        self._recs: dict[int | None, tuple[tuple[str, ...], list[tuple[Any, ...]]]] = {}
        self._recs_new: dict[int | None, list[tuple[Any, ...]]] = {}

    def _journal_path(self, key: int | None) -> Path:
        return self.seg_dir / f".{self._stem(key)}.journal"

    def _progress_path(self, key: int | None) -> Path:
        return self.seg_dir / f".{self._stem(key)}.progress"

    def claim(self, key: int | None) -> int:
        """Lock ``key``'s progress file (created if need be) for this process; an
        :class:`OutputError` when another live run holds it or a killed run's saved steps
        are there (they would be mixed with this run's)."""
        fd = self._progress.get(key)
        if fd is not None:
            return fd
        path = self._progress_path(key)
        left = path.exists() and _holder(path) is None and (
            _segments_of(self.seg_dir, key) or _journaled(self._journal_path(key)))
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise OutputError(f"another run is writing {self._stem(key)} here (pid "
                              f"{record_of(path).get('pid', '?')})", path=self.seg_dir,
                              hint="give each run its own --out") from None
        if left:
            os.close(fd)
            raise OutputError(f"holds the saved steps of an interrupted run "
                              f"({self._stem(key)}, pid {record_of(path).get('pid', '?')})",
                              path=self.seg_dir, hint="analyze them, move them away or "
                                                      "give this run another --out")
        self._progress[key] = fd
        self._pid = os.getpid()
        if self.journaling and key not in self._journals:  # (mapped now, not in a step)
            with contextlib.suppress(OSError):  # (tried again at the first entry)
                self._journals[key] = JournalWriter(self._journal_path(key))
        with contextlib.suppress(OSError, ValueError):  # a full disk must not stop the job
            os.posix_fallocate(fd, 0, _RECORD_BYTES)  # (its block reserved: no SIGBUS)
            os.ftruncate(fd, _RECORD_BYTES)
            self._records[key] = mmap.mmap(fd, _RECORD_BYTES)
        self.progress(key, -1)
        return fd

    def progress(self, key: int | None, step: int, store: bool = True) -> None:
        """Note that ``key`` (a rank; any for a single file) completed step ``step``; -1:
        only claim it (:meth:`claim`). ``store=False``: only counted, when the caller
        journals the step next (:meth:`journal`: its entry carries the count; a checkpoint
        or a failed journal stores the record)."""
        key = None if self.single else key
        rec = self._records.get(key)
        if rec is None and key not in self._progress:
            self.claim(key)
            rec = self._records.get(key)
        self._steps[key] = self._steps.get(key, 0) + (step >= 0)
        self._last[key] = step
        if store:
            self._store(key, rec)

    def _store(self, key: int | None, rec: mmap.mmap | None) -> None:
        """``key``'s progress record, as counted, into its file."""
        line = record_line(key, self._pid, self._steps.get(key, 0), self._last.get(key, -1))
        if rec is not None:
            rec[0:_RECORD_BYTES] = line
        else:  # (not mapped: the file system refused) one write
            with contextlib.suppress(OSError):
                os.pwrite(self._progress[key], line, 0)

    def _store_progress(self) -> None:
        """Every claimed key's progress record, as counted (see :meth:`progress`)."""
        for key in self._progress:
            self._store(key, self._records.get(key))

    def _release(self, remove: bool) -> None:
        for rec in self._records.values():
            with contextlib.suppress(OSError, BufferError):
                rec.close()
        self._records.clear()
        for key, fd in self._progress.items():
            if remove:
                with contextlib.suppress(OSError):
                    self._progress_path(key).unlink()
            with contextlib.suppress(OSError):
                os.close(fd)
        self._progress.clear()

    def _stem(self, key: int | None) -> str:
        return "seg" if key is None else f"rank-{key:05d}"

    def _final(self, key: int | None) -> Path:
        return self.path if key is None else self.path / f"rank-{key:05d}.parquet"

    def _meta(self, key: int | None) -> TraceMeta:
        return self.meta if key is None else self.meta.with_(ranks=(key,))

    def _segment_no(self, key: int | None) -> int:
        """The number of ``key``'s next segment (reserved: its journal names it before the
        segment's writer is opened)."""
        no = self._seg_no.get(key)
        if no is None:
            self._count += 1
            no = self._seg_no[key] = self._count
        return no

    def _writer(self, key: int | None) -> TraceWriter:
        w = self._open.get(key)
        if w is None:
            # the pid keeps a restarted job from renaming over an earlier run's segments
            seg = self.seg_dir / (f"{self._stem(key)}.seg-{os.getpid()}-"
                                  f"{self._segment_no(key):05d}.parquet")
            w = TraceWriter(seg, self._meta(key), self.row_group_rows)
            self._open[key] = w
        return w

    def write(self, batch: Mapping[str, Any] | pa.Table | Any) -> None:
        table = to_table(batch)
        if table.num_rows == 0:
            return
        for key, part in ([(None, table)] if self.single else by_rank(table)):
            self.claim(key)
            self._writer(key).write(part)
            if self.journaling:
                self._new.setdefault(key, []).append(part)

    def write_rows(self, rows: Rows) -> None:
        """Rows as Python lists (trace-schema columns: the monitor's, a session's own), kept
        so until the next checkpoint (one Arrow table then, not one per step) or until a
        rank holds :data:`ROWS_LIMIT`; journaled by :meth:`journal` meanwhile."""
        n = min((len(v) for v in rows.values()), default=0)
        if n == 0:
            return
        ranks = rows["rank"]
        first = ranks[0]
        if self.single or ranks.count(first) >= n:
            parts = [(None if self.single else first, rows)]
        else:  # rows of several ranks (one process emulating many): a few rows per step
            idx: dict[int, list[int]] = {}
            for i, r in enumerate(ranks[:n]):
                idx.setdefault(r, []).append(i)
            parts = [(r, {c: [v[i] for i in ix] for c, v in rows.items()})
                     for r, ix in sorted(idx.items())]
        for key, part in parts:
            self.claim(key)
            pend = self._rows.get(key)
            if pend is None:
                self._rows[key] = {c: list(v[:n]) for c, v in part.items()}
            else:
                _extend(pend, part)
            if len(self._rows[key]["rank"]) >= ROWS_LIMIT:
                self._spill(key)

    def write_records(self, columns: tuple[str, ...], records: list[tuple[Any, ...]]) -> None:
        """Rows as tuples (``columns``, the first ``rank``): :meth:`write_rows` without a
        list per column, each step's few rows (a session's own) a tuple each. The list is
        kept (the caller hands it over)."""
        if not records:
            return
        key = None if self.single else records[0][0]
        if not self.single and any(r[0] != key for r in records):  # several ranks
            by: dict[int, list[tuple[Any, ...]]] = {}
            for r in records:
                by.setdefault(r[0], []).append(r)
            for rows in by.values():
                self.write_records(columns, rows)
            return
        if key not in self._progress:
            self.claim(key)
        pend = self._recs.get(key)
        if pend is not None and pend[0] != columns:  # (the pending ones to the segment first)
            self._spill_records(key)
            pend = None
        if pend is None:
            self._recs[key] = (columns, list(records))
        else:
            pend[1].extend(records)
        if self.journaling:
            new = self._recs_new.get(key)
            if new is None:
                self._recs_new[key] = records
            else:
                new.extend(records)
        if len(self._recs[key][1]) >= ROWS_LIMIT:
            self._spill_records(key)

    def _spill_records(self, key: int | None) -> None:
        """:meth:`_spill` of ``key``'s pending tuples."""
        got = self._recs.pop(key, None)
        fresh = self._recs_new.pop(key, ())
        if not got:
            return
        columns, recs = got
        done = len(recs) - len(fresh)
        w = self._writer(key)
        if done:
            w.write(to_table(_columns(columns, recs[:done])))
        if len(recs) > done:
            table = to_table(_columns(columns, recs[done:]))
            w.write(table)
            if self.journaling:
                self._new.setdefault(key, []).append(table)

    def _spill(self, key: int | None) -> None:
        """``key``'s pending rows into its open segment; those not journaled yet also go to
        its next journal entry (as a table)."""
        rows = self._rows.pop(key, None)
        done = self._rows_journaled.pop(key, 0)
        if not rows:
            return
        n = len(rows["rank"])
        w = self._writer(key)
        if done:
            w.write(to_table({c: v[:done] for c, v in rows.items()}))
        if n > done:
            table = to_table({c: v[done:] for c, v in rows.items()} if done else rows)
            w.write(table)
            if self.journaling:
                self._new.setdefault(key, []).append(table)

    def journal(self, step: int) -> None:
        """Journal what every rank wrote since its last entry (``step``: the step that just
        completed), so that a death before the next checkpoint keeps it. An
        :class:`OutputError` when the journal cannot be written (journaling stops)."""
        if not self.journaling:
            self._store_progress()
            return
        if not self._new and not self._rows:  # (a session's step: its own rows only)
            keys = list(self._recs_new)
        else:
            keys = [k for k in dict.fromkeys([*self._new, *self._rows, *self._recs_new])
                    if self._new.get(k) or k in self._recs_new or
                    len(self._rows.get(k, {}).get("rank", ())) > self._rows_journaled.get(k, 0)]
        for key in self._progress:  # (a rank with no entry this step: its record)
            if key not in keys:
                self._store(key, self._records.get(key))
        try:
            for key in keys:
                self._journal_key(key, step)
        except OSError as exc:
            self.journaling = False
            self._drop_journals(remove=True)
            self._store_progress()  # (the counts the journal would have carried)
            raise OutputError(f"cannot write the step journal: {exc.strerror or exc}",
                              path=self.seg_dir) from None

    def _journal_key(self, key: int | None, step: int) -> None:
        j = self._journals.get(key)
        if j is None:
            j = self._journals[key] = JournalWriter(self._journal_path(key))
        rows = self._rows.get(key)
        if rows is not None:
            done = self._rows_journaled.get(key, 0)
            self._rows_journaled[key] = len(rows["rank"])
            if done:
                rows = {c: v[done:] for c, v in rows.items()}
            if not rows["rank"]:
                rows = None
        recs = self._recs_new.pop(key, None)
        no = self._seg_no.get(key)
        j.append(self._segment_no(key) if no is None else no, lambda: self._meta(key).to_kv(),
                 step, self._new.pop(key, ()), rows,
                 (self._recs[key][0], recs) if recs else None, self._steps.get(key, 0))

    def _drop_journals(self, remove: bool) -> None:
        for j in self._journals.values():
            j.close(remove)
        self._journals.clear()

    def checkpoint(self, meta: TraceMeta | None = None) -> None:
        """Publish everything written since the last checkpoint as complete segment files
        (the journal's entries are redundant then: the next one starts it over)."""
        if meta is not None:
            self.meta = meta
        self._store_progress()
        for key in list(self._rows):
            self._spill(key)
        for key in list(self._recs):
            self._spill_records(key)
        self._new.clear()
        for key, w in list(self._open.items()):
            w.close(self._meta(key))
            self._segments.setdefault(key, []).append(w.path)
        self._open.clear()
        self._seg_no.clear()

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
        self._drop_journals(remove=True)  # (before the lock goes: a reader never sees one)
        self._release(remove=True)
        if self.single:
            shutil.rmtree(self.seg_dir, ignore_errors=True)
        self._closed = True
        return self.path

    def abort(self) -> None:
        """Drop the open (unpublished) segments; published ones stay, as after a crash."""
        for w in self._open.values():
            w.abort()
        self._open.clear()
        self._rows.clear()
        self._recs.clear()
        self._recs_new.clear()
        self._new.clear()
        self._drop_journals(remove=True)  # what it journaled was dropped with them
        self._release(remove=False)
        self._closed = True


_RECORD_BYTES = RECORD_BYTES


def _columns(columns: tuple[str, ...], recs: list[tuple[Any, ...]]) -> Rows:
    return dict(zip(columns, map(list, zip(*recs, strict=True)), strict=True))


def _extend(pend: Rows, part: Rows) -> None:
    """``part``'s rows after ``pend``'s; a column one of them lacks is null there."""
    had = len(pend["rank"])
    n = min(len(v) for v in part.values())
    for c, v in part.items():
        col = pend.get(c)
        if col is None:
            col = pend[c] = [None] * had
        col.extend(v[:n] if len(v) > n else v)
    for col in pend.values():
        if len(col) < had + n:
            col.extend([None] * (had + n - len(col)))


def _journaled(journal: Path) -> bool:
    """Whether a journal holds a step (one is mapped from the start: empty until then)."""
    got = read(journal) if journal.exists() else None
    return got is not None and bool(got.steps)


def _segments_of(d: Path, key: int | None) -> list[Path]:
    stem = "seg" if key is None else f"rank-{key:05d}"
    return sorted(d.glob(f"{stem}.seg-*.parquet"))
