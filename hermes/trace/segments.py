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
holds the number of the last step the rank completed, rewritten in place at every step (a
store into a shared mapping of the file: in the page cache, no system call; a line with the
record's CRC-32 after it, so a record a death cut short is never read), so a reader of what
a killed run left can say how far it got (:func:`interrupted`). The writer holds an advisory lock (``flock``) on it while it runs: the
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
import json
import mmap
import os
import shutil
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hermes.errors import OutputError
from hermes.trace.journal import JournalWriter, journals, recover
from hermes.trace.journal import held as _holder
from hermes.trace.meta import TraceMeta
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
        #: journal each completed step (:meth:`journal`); off after a failed write
        self.journaling = journal
        self._journals: dict[int | None, JournalWriter] = {}
        self._seg_no: dict[int | None, int] = {}  # key -> number of its open segment
        self._new: dict[int | None, list[pa.Table]] = {}  # tables not journaled yet
        self._rows: dict[int | None, Rows] = {}  # rows not in the open segment yet
        self._rows_journaled: dict[int | None, int] = {}

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
            _segments_of(self.seg_dir, key) or (self.seg_dir / f".{self._stem(key)}.journal")
            .exists())
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise OutputError(f"another run is writing {self._stem(key)} here (pid "
                              f"{_record(path).get('pid', '?')})", path=self.seg_dir,
                              hint="give each run its own --out") from None
        if left:
            os.close(fd)
            raise OutputError(f"holds the saved steps of an interrupted run "
                              f"({self._stem(key)}, pid {_record(path).get('pid', '?')})",
                              path=self.seg_dir, hint="analyze them, move them away or "
                                                      "give this run another --out")
        self._progress[key] = fd
        self._pid = os.getpid()
        with contextlib.suppress(OSError, ValueError):  # a full disk must not stop the job
            os.posix_fallocate(fd, 0, _RECORD_BYTES)  # (its block reserved: no SIGBUS)
            os.ftruncate(fd, _RECORD_BYTES)
            self._records[key] = mmap.mmap(fd, _RECORD_BYTES)
        self.progress(key, -1)
        return fd

    def progress(self, key: int | None, step: int) -> None:
        """Note that ``key`` (a rank; any for a single file) completed step ``step``; -1:
        only claim it (:meth:`claim`)."""
        key = None if self.single else key
        rec = self._records.get(key)
        if rec is None and key not in self._progress:
            self.claim(key)
            rec = self._records.get(key)
        steps = self._steps[key] = self._steps.get(key, 0) + (step >= 0)
        text = (f'{{"rank": {"null" if key is None else key}, "pid": {self._pid}, '
                f'"steps": {steps}, "last_step": {step}}}').encode()
        line = b"%s\n%08x\n" % (text, zlib.crc32(text))
        if rec is not None:
            rec[0:_RECORD_BYTES] = line.ljust(_RECORD_BYTES)
        else:  # (not mapped: the file system refused) one write
            with contextlib.suppress(OSError):
                os.pwrite(self._progress[key], line.ljust(_RECORD_BYTES), 0)

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
            return
        keys = [k for k in dict.fromkeys([*self._new, *self._rows])
                if self._new.get(k) or len(self._rows.get(k, {}).get("rank", ())) >
                self._rows_journaled.get(k, 0)]
        try:
            for key in keys:
                self._journal_key(key, step)
        except OSError as exc:
            self.journaling = False
            self._drop_journals(remove=True)
            raise OutputError(f"cannot write the step journal: {exc.strerror or exc}",
                              path=self.seg_dir) from None

    def _journal_key(self, key: int | None, step: int) -> None:
        j = self._journals.get(key)
        if j is None:
            j = self._journals[key] = JournalWriter(self.seg_dir / f".{self._stem(key)}.journal")
        rows = self._rows.get(key)
        done = self._rows_journaled.get(key, 0)
        if rows and done:
            rows = {c: v[done:] for c, v in rows.items()}
        j.append(self._segment_no(key), lambda: self._meta(key).to_kv(), step,
                 self._new.pop(key, ()), rows or None)
        self._rows_journaled[key] = len(self._rows.get(key, {}).get("rank", ()))

    def _drop_journals(self, remove: bool) -> None:
        for j in self._journals.values():
            j.close(remove)
        self._journals.clear()

    def checkpoint(self, meta: TraceMeta | None = None) -> None:
        """Publish everything written since the last checkpoint as complete segment files
        (the journal's entries are redundant then: the next one starts it over)."""
        if meta is not None:
            self.meta = meta
        for key in list(self._rows):
            self._spill(key)
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
        self._new.clear()
        self._drop_journals(remove=True)  # what it journaled was dropped with them
        self._release(remove=False)
        self._closed = True


_RECORD_BYTES = 128


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


def _record(path: Path) -> dict[str, Any]:
    """A progress file's record ({} if unreadable: written by a run that died mid-write, its
    CRC-32 not that of its text)."""
    try:
        text, _, crc = path.read_bytes().partition(b"\n")
        if crc.strip() and crc.split(b"\n", 1)[0] != b"%08x" % zlib.crc32(text):
            return {}
        rec = json.loads(text.decode("utf-8", "replace").strip() or "{}")
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def _segments_of(d: Path, key: int | None) -> list[Path]:
    stem = "seg" if key is None else f"rank-{key:05d}"
    return sorted(d.glob(f"{stem}.seg-*.parquet"))


def progress_dir(path: str | os.PathLike[str]) -> Path | None:
    """Where the progress files of a trace at ``path`` are (the directory, or the
    ``.partial`` directory of a ``.parquet`` path), None when there is none."""
    p = Path(path)
    if p.suffix == ".parquet" or p.is_file():
        part = p.with_name(p.name + ".partial")
        return part if part.is_dir() else None
    return p if p.is_dir() else None


def interrupted(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The ranks of a profiled run at ``path`` that did not close: per rank its ``rank``,
    ``pid``, ``steps`` (completed steps the monitor saw: every one is saved, in segments and
    the journal, unless a write failed) and ``running`` (the writer is alive)."""
    d = progress_dir(path)
    if d is None:
        return []
    out = []
    for f in sorted(d.glob(".*.progress")):
        rec = _record(f)
        out.append({"rank": rec.get("rank"), "pid": rec.get("pid"),
                    "steps": rec.get("steps"), "running": bool(_holder(f))})
    return out


def busy(path: str | os.PathLike[str]) -> str | None:
    """Why a new profiled run must not write to ``path`` (another run is writing there, or
    an interrupted one left its steps), or None."""
    for rec in interrupted(path):
        what = "is being written by a running" if rec["running"] else \
            "holds the saved steps of an interrupted"
        return f"{what} hermes profile run (pid {rec['pid']}, rank {rec['rank']})"
    return None


def interrupted_note(path: str | os.PathLike[str]) -> str | None:
    """One line saying how far an interrupted (or still running) profiled run got, or None
    (a killed run's journals are recovered first: :func:`hermes.trace.journal.recover`)."""
    recs = interrupted(path)
    if not recs:
        return None
    d = progress_dir(path)
    lost = recover(d) if d is not None and journals(d) else []
    running = [r for r in recs if r["running"]]
    reached = ", ".join(f"rank {r['rank'] if r['rank'] is not None else 0} "
                        f"{r['steps']} step(s)" for r in recs[:8])
    more = f" and {len(recs) - 8} more rank(s)" if len(recs) > 8 else ""
    state = "is still running" if running else "was interrupted (killed before it closed)"
    saved = "the trace holds every step saved by then (each one as it completed)" if not lost \
        else (f"the steps journaled since the last save of {len(lost)} rank(s) cannot be read "
              f"here ({lost[0].parent} is not writable: copy it and read the copy)")
    return f"the profiled run {state}; the monitor saw {reached}{more} completed: {saved}"
