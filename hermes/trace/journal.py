"""A per-rank journal of the steps completed since the last checkpoint, so that a profiled
job killed between two checkpoints (SIGKILL, ``os.abort()``, a segfault) keeps every step.

A checkpoint publishes a rank's events as a Parquet segment (``hermes.trace.segments``),
every ``--flush-every`` seconds or more (``collectors/saves.py``). Between two, each completed
step's new events (what the next checkpoint would write) are stored here, through a shared
mapping of the file (``MAP_SHARED``): a store into it is in the page cache, as a ``write``
would put it, and outlives the process however it dies (not a power loss: nothing is
fsynced), with no system call per step. The file is grown in large chunks, its blocks
reserved (``posix_fallocate``) before they are mapped: a full disk is an ``OSError`` at the
growth, never a ``SIGBUS`` at a store. The first reader after the death (:func:`recover`,
called by ``hermes.trace.reader.trace_files``) turns the journal's complete entries into the
segment the checkpoint would have written, under the same name.

``.rank-00003.journal`` (``.seg.journal`` for a single-file trace), little-endian:

* a header at offset 0, written when a segment starts (the first entry after a checkpoint):
  ``HRMSJNL1`` | pid u64 | segment number u64 | metadata length u64 | the segment's metadata
  (JSON of ``TraceMeta.to_kv()``), zero-padded to 8 bytes (its magic stored last, after
  being zeroed first);
* one entry per completed step: ``HJE1`` | steps u32 (how many the rank completed so far) |
  segment u64 | entry number u64 (1, 2, ...) |
  step i64 | rows length u64 | IPC length u64, then the rows (the session's own rows, not yet
  Arrow: binary rows and JSON, ``hermes.trace.journal_rows``), the Arrow IPC stream of the producers' tables (all-null
  columns left out) and a trailer ``HJC1`` u32 0 | segment u64 | entry number u64, stored
  last;
* after the last entry: zeros, or what earlier segments' entries left there.

The stores of an entry happen in order and a death stops them at one point, so an entry
whose trailer (naming its segment and number) is in place is whole; the first entry that is
not (torn, or a stale one of an earlier segment) ends the read. After a checkpoint the
journal is written over from offset 0: its pages stay mapped and in the page cache. A journal
whose segment is published already (the process died between the checkpoint and the next
entry) is redundant: its steps are read once, from the segment.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import mmap
import os
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from hermes.errors import HermesError
from hermes.trace.journal_rows import ROW_COLUMNS, body_of, rows_of  # noqa: F401
from hermes.trace.meta import TraceMeta

MAGIC = b"HRMSJNL1"
_HEAD = struct.Struct("<8sQQQ")  # magic, pid, segment, metadata length
_ENTRY = struct.Struct("<4sIQQqQQ")  # magic, steps, segment, entry, step, rows len, IPC len
_TRAIL = struct.Struct("<4sIQQ")  # magic, 0, segment, entry
_E, _T = b"HJE1", b"HJC1"
_SLACK = 1 << 16  # IPC bytes beyond the tables' buffers (schema, dictionaries, padding)
_SPARSE_ROWS = 4096  # from this many rows a step's all-null columns are left out (bytes)
_IPC = pa.ipc.IpcWriteOptions()
CHUNK = 1 << 20  # the journal's first size; it doubles when an entry does not fit
_ZEROS = bytes(8)
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # pages mapped at once, not faulted in one by one


def held(path: Path) -> bool | None:
    """True when a live process holds ``path``'s ``flock`` (a profiled run's progress file),
    None when none does (or the file is gone)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return None


class JournalWriter:
    """Append entries to one rank's journal (see the module doc); one process at a time (the
    caller holds the rank's progress-file lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o666)
        self._map: mmap.mmap | None = None
        self.segment: int | None = None
        self.entries = 0
        #: where the next entry goes (the end of the last one)
        self.offset = 0
        self._scratch = pa.allocate_buffer(_SLACK, resizable=True)  # reused: pages stay warm
        self._strings: dict[str, int] = {}  # the segment's strings (binary rows) -> number
        try:
            self._grow(CHUNK)
        except BaseException:
            os.close(self._fd)
            raise

    def _grow(self, need: int) -> None:
        """Map at least ``need`` bytes, doubling, the file's blocks reserved first (an
        ``OSError`` when the disk is full)."""
        size = len(self._map) if self._map is not None else CHUNK
        while size < need:
            size *= 2
        _reserve(self._fd, size)
        new = mmap.mmap(self._fd, size, mmap.MAP_SHARED | _POPULATE,
                        mmap.PROT_READ | mmap.PROT_WRITE)
        if self._map is not None:
            self._map.close()
        self._map = new

    def append(self, segment: int, meta_kv: Callable[[], dict[str, str]], step: int,
               tables: Sequence[pa.Table], rows: dict[str, list[Any]] | None,
               records: tuple[Sequence[str], list[tuple[Any, ...]]] | None = None,
               steps: int = 0) -> None:
        """One completed step's new events (for ``segment``: the segment the next checkpoint
        publishes): producers' ``tables``, the session's ``rows`` (column -> values) and
        ``records`` (columns, a tuple a row); ``steps``: how many the rank completed so far
        (:func:`steps_of`); an ``OSError`` when the journal cannot grow (the disk is
        full)."""
        pos = self.offset
        head = b""
        strings = self._strings
        if segment != self.segment:  # a new segment: the journal starts over at offset 0
            meta = json.dumps(meta_kv(), separators=(",", ":")).encode()
            head = _HEAD.pack(MAGIC, os.getpid(), segment, len(meta)) + meta + \
                b"\0" * (-len(meta) % 8)
            pos, strings = 0, {}
        body, fresh = body_of(rows, records, strings)
        ipc = self._ipc(tables) if tables else b""
        entry = self.entries + 1 if head == b"" else 1
        start = pos + len(head)
        at = start + _ENTRY.size
        end = at + len(body) + len(ipc)
        m = self._map
        if m is None or end + _TRAIL.size > len(m):
            self._grow(end + _TRAIL.size)
            m = self._map
        if head:  # magic zeroed first, stored last: a header cut short is no header
            m[0:8] = _ZEROS
            m[8:start] = head[8:]
            m[0:8] = MAGIC
            self.segment, self.entries = segment, 0
        m[start:at + len(body)] = _ENTRY.pack(_E, steps & 0xFFFFFFFF, segment, entry, step,
                                              len(body), len(ipc)) + body  # (one store)
        if ipc:
            m[end - len(ipc):end] = ipc
        m[end:end + _TRAIL.size] = _TRAIL.pack(_T, 0, segment, entry)  # last: the entry is whole
        self.entries = entry
        self.offset = end + _TRAIL.size
        if fresh:  # (numbered once stored: an entry not written defines none)
            strings.update(fresh)
        self._strings = strings

    def _ipc(self, tables: Sequence[pa.Table]) -> pa.Buffer:
        """The tables as one Arrow IPC stream in the scratch buffer, their all-null columns
        left out (a reader fills them back); a slice of the bytes written (not a memoryview:
        one of a resized buffer keeps its old length)."""
        schema = tables[0].schema
        if sum(t.num_rows for t in tables) >= _SPARSE_ROWS:  # (small: the check costs more)
            keep = [i for i, f in enumerate(schema) if not f.nullable or any(
                t.column(i).null_count < t.num_rows for t in tables)]
            if len(keep) < len(schema.names):
                tables = [t.select(keep) for t in tables]
        need = sum(t.get_total_buffer_size() for t in tables) + _SLACK * len(tables)
        if self._scratch.size < need:
            self._scratch.resize(max(need, 2 * self._scratch.size))
        sink = pa.FixedSizeBufferWriter(self._scratch)
        with pa.ipc.RecordBatchStreamWriter(sink, tables[0].schema, options=_IPC) as w:
            for t in tables:
                w.write_table(t)
        return self._scratch.slice(0, sink.tell())

    def close(self, remove: bool) -> None:
        if self._map is not None:
            with contextlib.suppress(OSError, BufferError):
                self._map.close()
            self._map = None
        with contextlib.suppress(OSError):
            os.close(self._fd)
        if remove:
            with contextlib.suppress(OSError):
                self.path.unlink()


def _reserve(fd: int, size: int) -> None:
    """Give the file ``size`` bytes whose blocks are allocated (a store into a hole of a full
    disk would be a ``SIGBUS``); zeros written where the file system cannot reserve them."""
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
    have = os.fstat(fd).st_size
    while have < size:
        n = min(size - have, CHUNK)
        os.pwrite(fd, bytes(n), have)
        have += n


@dataclass
class Journal:
    """What a journal holds: its header and every complete entry, in order."""

    pid: int
    segment: int
    meta: dict[str, str]
    steps: list[int] = field(default_factory=list)
    tables: list[pa.Table] = field(default_factory=list)
    rows: list[dict[str, list[Any]]] = field(default_factory=list)
    torn: bool = False  # an entry of this segment was cut short (the last one, by a death)
    size: int = 0  # bytes the header and the complete entries take


def read(path: Path) -> Journal | None:
    """The complete entries of the journal at ``path``; None when it holds no valid header
    (empty, or cut short while the header was written: nothing of that segment was journaled
    yet)."""
    try:
        return parse(path.read_bytes())
    except OSError:
        return None


def parse(raw: bytes) -> Journal | None:
    """:func:`read` of a journal's bytes."""
    data = memoryview(raw)
    if len(data) < _HEAD.size:
        return None
    magic, pid, segment, n = _HEAD.unpack_from(data, 0)
    pos = _HEAD.size + n + (-n % 8)
    if magic != MAGIC or pos > len(data):
        return None
    try:
        meta = json.loads(bytes(data[_HEAD.size: _HEAD.size + n]))
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    out = Journal(pid, segment, {str(k): str(v) for k, v in meta.items()})
    strings: list[str] = []  # the segment's, numbered by its entries in turn
    while pos + _ENTRY.size <= len(data):
        magic, _, seg, entry, step, nrows, nipc = _ENTRY.unpack_from(data, pos)
        if magic != _E or seg != segment or entry != len(out.steps) + 1:
            # the end: zeros, a stale entry of an earlier segment, or the start of this
            # segment's next one, cut short
            out.torn = _begun(bytes(data[pos: pos + 4]), seg == segment)
            break
        end = pos + _ENTRY.size + nrows + nipc
        if end + _TRAIL.size > len(data) or _TRAIL.unpack_from(data, end) != (
                _T, 0, segment, entry):
            out.torn = True
            break
        body = bytes(data[pos + _ENTRY.size: pos + _ENTRY.size + nrows])
        try:
            parts, new = rows_of(body, strings)
            table = pa.ipc.open_stream(pa.py_buffer(data[end - nipc: end])).read_all() \
                if nipc else None
        except (ValueError, TypeError, IndexError, struct.error, OSError, pa.ArrowException):
            out.torn = True
            break
        strings += new
        out.steps.append(step)
        out.rows += parts
        if table is not None:
            out.tables.append(table)
        pos = end + _TRAIL.size
    else:  # what is left is shorter than an entry's header: the start of one, cut short?
        out.torn = _begun(bytes(data[pos: pos + 4]), True)
    out.size = pos
    return out


def _begun(magic: bytes, ours: bool) -> bool:
    """Whether the 4 bytes where an entry would start hold the start of one: the entry
    magic cut short (zeros after it), or whole and, ``ours``, of this segment."""
    k = next((i for i, (a, b) in enumerate(zip(magic, _E, strict=False)) if a != b),
             min(len(magic), 4))
    return (k == 4 and ours) or (0 < k < 4 and not any(magic[k:]))


def steps_of(path: Path) -> tuple[int, int] | None:
    """(pid, steps) of the journal's last complete entry: how many steps its writer had
    completed (the progress file is not stored while entries are); None without one. Reads
    the entries' headers and trailers only."""
    try:
        data = memoryview(path.read_bytes())
    except OSError:
        return None
    if len(data) < _HEAD.size:
        return None
    magic, pid, segment, n = _HEAD.unpack_from(data, 0)
    pos, got, entries = _HEAD.size + n + (-n % 8), None, 0
    while magic == MAGIC and pos + _ENTRY.size <= len(data):
        e, steps, seg, entry, _, nrows, nipc = _ENTRY.unpack_from(data, pos)
        end = pos + _ENTRY.size + nrows + nipc
        if e != _E or seg != segment or entry != entries + 1 or end + _TRAIL.size > len(
                data) or _TRAIL.unpack_from(data, end) != (_T, 0, segment, entry):
            break
        got, entries, pos = (pid, steps), entry, end + _TRAIL.size
    return got


RECORD_BYTES = 128


def record_line(rank: int | None, pid: int, steps: int, last_step: int) -> bytes:
    """A progress file's record as stored (``hermes.trace.progress``): its JSON, its CRC-32, padded to :data:`RECORD_BYTES`."""
    text = (f'{{"rank": {"null" if rank is None else rank}, "pid": {pid}, '
            f'"steps": {steps}, "last_step": {last_step}}}').encode()
    return (b"%s\n%08x\n" % (text, zlib.crc32(text))).ljust(RECORD_BYTES)


def keep_count(progress: Path, journal: Path) -> None:
    """Before a dead writer's journal is removed, the count its last entry carries into its
    progress file (where that holds less)."""
    got = steps_of(journal)
    if got is None:
        return
    rec = record_of(progress)
    steps = rec.get("steps")
    if rec.get("pid") not in (None, got[0]) or (isinstance(steps, int) and steps >= got[1]):
        return
    rank = rec.get("rank")
    try:
        fd = os.open(progress, os.O_WRONLY)
    except OSError:
        return
    try:
        os.pwrite(fd, record_line(rank if isinstance(rank, int) else None, got[0], got[1],
                                  rec.get("last_step", -1)), 0)
    except OSError:
        pass
    finally:
        os.close(fd)


def record_of(path: Path) -> dict[str, Any]:
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


def journals(directory: Path) -> list[Path]:
    """The journals in a trace directory (or a ``.partial`` directory)."""
    return sorted(directory.glob(".*.journal"))


def stem_of(journal: Path) -> str:
    """``rank-00003`` of ``.rank-00003.journal``."""
    return journal.name[1: -len(".journal")]


def recover(directory: Path) -> list[Path]:
    """Turn the journals of dead writers in ``directory`` into the segments their next
    checkpoint would have published (temp name, then rename), and remove them; a journal
    whose segment (or merged rank file) is there already is only removed. Returns the
    journals left unrecovered (the directory is not writable): their steps cannot be read."""
    from hermes.trace.writer import TraceWriter, to_table

    left = []
    for j in journals(directory):
        stem = stem_of(j)
        if held(directory / f".{stem}.progress"):
            continue  # its writer is alive: the journal is still being written
        got = read(j)
        if got is not None and got.steps:
            seg = directory / f"{stem}.seg-{got.pid}-{got.segment:05d}.parquet"
            if not seg.exists() and not (directory / f"{stem}.parquet").exists():
                try:
                    meta = TraceMeta.from_kv(got.meta)
                    meta = meta.with_(extra={**meta.extra, "journal_steps": len(got.steps)})
                    w = TraceWriter(seg, meta)
                    try:
                        for t in got.tables:
                            w.write(to_table(t))
                        for r in got.rows:
                            w.write(to_table(r))
                        w.close()
                    except BaseException:
                        w.abort()
                        raise
                except (HermesError, OSError, ValueError, TypeError):
                    left.append(j)
                    continue
        keep_count(directory / f".{stem}.progress", j)  # (how far it got: the journal's)
        with contextlib.suppress(OSError):
            j.unlink()
    return left
