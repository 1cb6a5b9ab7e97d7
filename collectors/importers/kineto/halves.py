"""A big Kineto file's phase 1 in two processes: a forked helper reads the second half.

Phase 1 (chunks of JSON -> intermediate Arrow batches, ``chunk``) is most of an import, and its
chunks need nothing of each other but the few lookups :class:`Side` gathers. Where a core is
free for it (``options["helpers"]``, default :func:`usable`; the forked import of ``hermes
analyze`` only with three or more CPUs), :func:`start` forks a helper that inflates the file up
to about its middle and begins where the reader, reading from the start, ends the chunk it cuts
in that block of text (:meth:`KinetoFile.skip_to_block`): from there on it cuts the very chunks
one process would, into batches and a side of its own. This process reads up to that chunk's
end (``KinetoFile.chunks(split=...)``), then takes the helper's batches and side
(:meth:`Helper.take`, :func:`merge`): the same batches, the same side, as one process reading
the whole file makes, so the trace is the same to the byte.

The helper's work is used only when all of it is there and it began where this process's
events end: a boundary the helper took from text inside a string (which only the reader of
the events before it can tell, by decoding them) begins elsewhere, and whatever goes wrong in
it (a malformed second half, a crash, a kill) leaves this process to read the rest itself,
which reports what is wrong exactly as without a helper. A helper whose parent is gone stops
at its next chunk. Its output is a temporary file removed from its folder at once
(``child.fork_child``).
"""

from __future__ import annotations

import os
import pickle
import stat
import struct
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import pyarrow as pa

from hermes.collectors.importers import child
from hermes.collectors.importers.kineto import reader
from hermes.collectors.importers.kineto.chunk import chunk_to_batch
from hermes.collectors.importers.kineto.detect import is_gz
from hermes.collectors.importers.kineto.reader import KinetoFile
from hermes.collectors.importers.kineto.side import INTERMEDIATE, Side
from hermes.trace.comm_patterns import CommPatterns

#: JSON text (decompressed bytes) below which a file is read by one process: a helper's fork,
#: its inflating of the first half and its output cost more than they save on less
MIN_TEXT_BYTES = 16 * 2**20
#: the share of the text the helper reads (it also inflates the rest; this process also
#: finishes every batch: about an even split of the work)
HELPER_SHARE = 0.5


def text_bytes(path: Path) -> int:
    """The file's JSON text in bytes, as its size tells: a gzip file's trailer says it (modulo
    4 GiB, of the last member only: a guess, which only sets where the split falls); 0 for
    what is not a regular file (a second reader would take a pipe's data from the first)."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # a pipe or device: read once, by one process
            return 0
        size = st.st_size
        if not is_gz(path):
            return size
        with open(path, "rb") as fh:
            fh.seek(-4, os.SEEK_END)
            return int(struct.unpack("<I", fh.read(4))[0])
    except (OSError, struct.error):
        return 0


class Part(NamedTuple):
    """What a helper read: its batches (read from its output as they are asked for), its side,
    and the file's header (from the text after the events array)."""

    batches: Iterable[pa.RecordBatch]
    side: Side
    header: dict[str, Any]


class Helper:
    """A forked helper reading a file's text from the chunk this process's reader ends in
    block ``split`` on (:func:`start`)."""

    def __init__(self, pending: Any, split: int) -> None:
        self.pending = pending
        self.split = split

    def take(self, at: int, mapped: bool = True, ident: tuple[int, ...] | None = None
             ) -> Part | None:
        """Wait for the helper: what it read, or None where it failed or began elsewhere than
        at ``at`` (the offset of the text after this process's events): read the rest here
        then. ``mapped``: its batches stay mapped from its output (no copy: for a trace held
        in memory), else each is read when asked for (memory bounded by one batch)."""
        global merged
        src = self.pending.output(mapped)
        if src is None:
            return None
        try:
            size = src.size()
            src.seek(size - 8)
            (length,) = struct.unpack("<Q", src.read(8))
            src.seek(size - 8 - length)
            began, read, side, header = pickle.loads(src.read(length))
            if began != at or ident is None or read != ident:
                return None
            src.seek(len(child.MAGIC))
            stream = pa.ipc.open_stream(src)
            batches = list(stream) if mapped else stream
        except (OSError, ValueError, EOFError, pickle.UnpicklingError, struct.error,
                pa.ArrowInvalid):
            return None
        merged += 1
        return Part(batches, side, header)

    def cancel(self) -> None:
        self.pending.cancel()


#: parts taken from helpers in this process (tests check that a split was made)
merged = 0


def usable() -> int:
    """Helpers an import in this process may fork: one on a Linux machine with two or more
    usable CPUs, where this thread is the process's only one (a fork copies the calling thread
    alone) and ``HERMES_IMPORT_HELPERS`` is not 0; else none."""
    if os.environ.get(ENV, "1") == "0" or not sys.platform.startswith("linux") or \
            threading.active_count() != 1:
        return 0
    return 1 if child.usable_cpus() >= 2 else 0


#: set to "0" to read every file in one process
ENV = "HERMES_IMPORT_HELPERS"


def start(path: Path, comm: CommPatterns, max_bytes: int) -> Helper | None:
    """Fork a helper for the second half of ``path``'s text, where that pays (at least
    :data:`MIN_TEXT_BYTES` of it) and a process can be forked (this thread is the process's
    only one); None otherwise."""
    size = text_bytes(path)
    if size < MIN_TEXT_BYTES or threading.active_count() != 1:  # a fork copies this thread only
        return None
    blocks = size // reader.READ_BYTES
    split = int(blocks * (1 - HELPER_SHARE))
    if split < 2 or split >= blocks:  # (the first chunk holds the first two blocks)
        return None
    parent = os.getpid()

    def body(fd: int, written: int) -> None:
        child.write_out(fd, written,
                         lambda fh: _second_half(path, split, comm, max_bytes, parent, fh))

    pending = child.fork_child(body)
    return None if pending is None else Helper(pending, split)


def _second_half(path: Path, split: int, comm: CommPatterns, max_bytes: int, parent: int,
                 fh: BinaryIO) -> None:
    """The helper's work: the batches of the events after the chunk the reader ends in block
    ``split`` (:meth:`KinetoFile.skip_to_block`), written to ``fh`` as an Arrow IPC stream as
    they are made, then a pickle of (where they begin, the file's identity, side, header) and
    its length (8 bytes).
    Raises on anything unexpected (the helper then fails)."""
    kf = KinetoFile(path, max_event_bytes=max_bytes).open()
    try:
        began = kf.skip_to_block(split)
        if began is None:
            raise EOFError("no such block, or no event boundary in it")
        side = Side(comm=comm)
        with pa.ipc.new_stream(fh, INTERMEDIATE) as out:
            for chunk in kf.chunks():
                if os.getppid() != parent:  # the reader of the first half is gone
                    raise EOFError("parent gone")
                batch = chunk_to_batch(chunk, side, path)
                if batch is not None:
                    out.write_batch(batch)
                del chunk, batch
        header = kf.header
        read = kf.identity()  # (the file read to its end: unchanged meanwhile if the same)
    finally:
        kf.close()
    side.comm = None  # type: ignore[assignment] # the parent's own, not pickled
    blob = pickle.dumps((began, read, side, header), protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(blob)
    fh.write(struct.pack("<Q", len(blob)))


def _codes_into(into: dict[str, int], other: dict[str, int]) -> np.ndarray:
    """Codes of ``other``'s keys (by its code) in ``into``, new keys added in ``other``'s
    order: as one process seeing ``into``'s keys first and ``other``'s next would number them."""
    out = np.zeros(len(other), np.int64)
    for key, code in other.items():
        out[code] = into.setdefault(key, len(into))
    return out


def _recode(col: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """``col``'s codes (-1: none) through ``codes``."""
    return np.where(col >= 0, codes[np.clip(col, 0, max(len(codes) - 1, 0))], col) \
        if len(codes) else col


def merge(side: Side, later: Side) -> None:
    """Add ``later`` (the side of the events after ``side``'s) to ``side``: what one process
    reading both parts in order would have gathered."""
    lanes = _codes_into(side.lane_codes, later.lane_codes)
    groups = _codes_into(side.groups, later.groups)
    for r in later.rpc:  # (external id, bytes, group, seq, ts, lane)
        r = r.copy()
        r[:, 2] = _recode(r[:, 2], groups)
        r[:, 5] = _recode(r[:, 5], lanes)
        side.rpc.append(r)
    for c in later.colls:  # (row, ts, group, seq, bytes, external id, host lane or -1)
        c = c.copy()
        c[:, 0] += side.rows
        c[:, 2] = _recode(c[:, 2], groups)
        c[:, 6] = _recode(c[:, 6], lanes)
        side.colls.append(c)
    for name in ("host_steps", "dev_steps", "host_corr", "dev_corr"):
        getattr(side, name).extend(getattr(later, name))
    for tid, name in later.thread_names.items():  # the first name of a thread wins
        side.thread_names.setdefault(tid, name)
    side.device_pids |= later.device_pids
    side.by_category.update(later.by_category)
    side.unknown.update(later.unknown)
    side.flows += later.flows
    side.negative_dur += later.negative_dur
    side.rows += later.rows
    if later.ts_min is not None:
        side.ts_min = later.ts_min if side.ts_min is None else min(side.ts_min, later.ts_min)
