"""Streaming reader of Kineto (PyTorch profiler) JSON: header, chunks of typed events, trailer.

A Kineto file is one JSON object whose ``traceEvents`` array holds every event. Decoding it
whole would hold every event in memory at once, so the array is cut into chunks of complete
events at ``}, {`` boundaries and each chunk is decoded by msgspec into small typed structs
whose ``ts``/``dur``/``args`` stay raw JSON text (decoded later, vectorized, per chunk). A cut
that falls inside a string or a nested object always makes the chunk invalid JSON *at its very
end*, so such a cut is recognized and the chunk simply extended to the next boundary; an error
earlier in the chunk is a real defect of the file and is reported with its byte offset.

Timestamps stay raw here; ``times`` converts them to exact integer nanoseconds.
"""

from __future__ import annotations

import gzip
import os
import queue
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from hermes.collectors.importers.kineto.detect import MAX_HEADER, is_gz
from hermes.collectors.importers.kineto.events import (
    BOTH_FLOAT,
    EVENTS,
    KNOWN_CATEGORIES,
    KNOWN_PHASES,
    TEXT,
    Event,
    names_mode,
    time_mode,
)
from hermes.errors import ImportFormatError

try:  # ISA-L's inflate: the same gzip stream, faster (docs/benchmarks.md)
    from isal import igzip as _gzip
    from isal.isal_zlib import error as _InflateError
except ImportError:  # pragma: no cover - a platform without its wheel: the standard library's
    _gzip = gzip  # type: ignore[no-redef]
    _InflateError = zlib.error  # type: ignore[misc]

#: Bytes of JSON text per decoded chunk (bounds memory; ~10k events of pretty-printed Kineto;
#: measured ~4 % faster than 4 MB: the chunk's objects stay in cache between passes).
CHUNK_BYTES = 2 * 1024 * 1024
#: Decompressed bytes per read of the background reader thread, and how many reads it may run
#: ahead of the decoder (zlib releases the GIL, so decompression overlaps decoding).
READ_BYTES = 2 * 1024 * 1024
_READ_AHEAD = 4
#: Where a chunk is cut: the first event boundary in the last this-many bytes of the text read.
_CUT_WINDOW = 64 * 1024
#: The most JSON text one event (or the gap between two) may span. Text without an event
#: boundary accumulates until a cut is found; past this it is refused (bounded memory and
#: time for a gzip member inflating to gigabytes of whitespace or one huge name). Real Kineto
#: events are kilobytes; ``hermes import --max-bytes`` raises the limit.
MAX_EVENT_BYTES = 64 * 1024 * 1024
_ANY = msgspec.json.Decoder()
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_ARRAY_END = re.compile(rb"\}\s*\]")
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BYTE_POS = re.compile(r"\(byte (\d+)\)")


@dataclass
class Chunk:
    events: list[Event]
    first_index: int  # index of the first event in the file's traceEvents array
    byte_offset: int  # offset of the chunk's text in the (decompressed) file
    #: the ``[...]`` text the events were decoded from, while some of their times are doubles
    text: bytes | None = None
    reader: KinetoFile | None = None

    def exact(self, mode: int) -> Chunk:
        """The same chunk read again with times as ``mode`` says; the file's later chunks
        are read so too (a file whose start times a double cannot hold exactly, such as
        epoch-scale ones, goes on with ``DUR_FLOAT``)."""
        assert self.text is not None
        names = KNOWN_PHASES
        if self.reader is not None:
            self.reader.time_mode = min(self.reader.time_mode, mode)
            names = self.reader.names_mode
        events = EVENTS.decode(self.text, mode, names)
        text = self.text if time_mode(events) != TEXT else None
        return Chunk(events, self.first_index, self.byte_offset, text, self.reader)


@dataclass
class KinetoFile:
    """An open Kineto file: ``header`` (every top-level key but traceEvents) and ``chunks()``."""

    path: Path
    header: dict[str, Any] = field(default_factory=dict)
    #: how ts/dur are decoded: doubles until a chunk cannot be (see ``Chunk.exact``)
    time_mode: int = BOTH_FLOAT
    #: how phases and categories are decoded: Literals until a chunk holds another name
    names_mode: int = KNOWN_CATEGORIES
    _text: bytes | None = None  # the last text decoded with some times as doubles
    _stream: BinaryIO | None = None
    _raw: BinaryIO | None = None
    _buf: bytes = b""
    _offset: int = 0  # decompressed offset of _buf[0]
    _prefix: bytes = b""
    _decoded: int = 0  # decompressed bytes read so far
    _blocks_read: int = 0  # blocks (``READ_BYTES`` each but the last) read so far
    _pos: int = 0  # compressed bytes read so far, as of the last block read
    _blocks: queue.Queue | None = None
    _pump: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    max_event_bytes: int = MAX_EVENT_BYTES

    @property
    def offset(self) -> int:
        """The decompressed offset of the text after the events read so far."""
        return self._offset

    def compressed_pos(self) -> int:
        """Bytes of the file on disk consumed so far (for progress and error positions).

        The reading thread records it after each block: asking the file here would wait for
        the lock that thread holds while it reads and decompresses."""
        return self._pos

    def _tell(self) -> int:
        try:
            return self._raw.tell() if self._raw is not None else 0
        except (OSError, ValueError):
            return 0

    # -- low level ----------------------------------------------------------------------
    def _pump_blocks(self) -> None:
        """Background thread: read (and decompress) blocks into the queue; b"" at the end,
        an exception object if reading fails."""
        assert self._stream is not None and self._blocks is not None
        while not self._stop.is_set():
            try:
                block = self._stream.read(READ_BYTES)
            except BaseException as exc:  # noqa: BLE001 - handed to the reading thread
                self._pos = self._tell()
                self._blocks.put(exc)
                return
            self._pos = self._tell()
            self._blocks.put(block)
            if not block:
                return

    def _read(self) -> bytes:
        assert self._blocks is not None
        item = self._blocks.get()
        if isinstance(item, bytes):
            self._decoded += len(item)
            self._blocks_read += bool(item)
            if not item:
                self._blocks.put(item)  # stay at the end for later reads
            return item
        self._blocks.put(item)
        if isinstance(item, EOFError):
            raise ImportFormatError("truncated gzip: the compressed stream ends early",
                                    path=self.path,
                                    where=f"compressed byte {self.compressed_pos()}",
                                    hint="the file was cut short; copy it again") from None
        if isinstance(item, (gzip.BadGzipFile, zlib.error, _InflateError, OSError)):
            # the same words whichever inflater read it (zlib's and ISA-L's differ)
            why = str(item)
            if isinstance(item, (zlib.error, _InflateError)):
                why = "the compressed data is corrupt"
            elif "CRC check" in why:
                why = "the data fails its CRC check: corrupt"
            raise ImportFormatError(f"cannot decompress: {why}", path=self.path,
                                    hint="expected a gzip-compressed Kineto JSON trace") from None
        raise item

    def open(self) -> KinetoFile:
        try:
            self._raw = open(self.path, "rb")  # noqa: SIM115 - closed in close()
        except OSError as exc:
            raise ImportFormatError(f"cannot read: {exc.strerror}", path=self.path) from None
        self._stream = _gzip.GzipFile(fileobj=self._raw) if is_gz(self.path) else self._raw
        self._start_pump()
        try:
            self._find_events_array()
        except BaseException:
            self.close()
            raise
        return self

    def identity(self) -> tuple[int, ...] | None:
        """(device, inode, size, modification ns) of the open file: another reader of the
        same path reads the same bytes only where its file's identity is this one."""
        try:
            st = os.fstat(self._raw.fileno()) if self._raw is not None else None
        except (OSError, ValueError):
            return None
        return None if st is None else (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _start_pump(self) -> None:
        self._blocks = queue.Queue(maxsize=_READ_AHEAD)
        self._stop.clear()
        self._pump = threading.Thread(target=self._pump_blocks, name="hermes-kineto-read",
                                      daemon=True)
        self._pump.start()

    def _stop_pump(self) -> None:
        self._stop.set()
        if self._pump is not None and self._blocks is not None:
            while self._pump.is_alive():  # unblock a reader waiting on a full queue
                try:
                    self._blocks.get(timeout=0.05)
                except queue.Empty:
                    pass
            self._pump.join()
        self._pump = None

    def close(self) -> None:
        self._stop_pump()
        for s in (self._stream, self._raw):
            if s is not None:
                s.close()
        self._stream = self._raw = None

    def _find_events_array(self) -> None:
        buf = b""
        while True:
            m = _KEY.search(buf)
            if m:
                break
            block = self._read()
            if not block:
                if not buf.strip():
                    raise ImportFormatError("empty file", path=self.path,
                                            hint="expected a PyTorch profiler JSON trace")
                raise ImportFormatError('not a Kineto trace: no "traceEvents" array',
                                        path=self.path, where="byte 0",
                                        hint="expected the JSON written by the PyTorch profiler "
                                             "(export_chrome_trace / tensorboard_trace_handler)")
            buf += block
            if len(buf) > MAX_HEADER:
                raise ImportFormatError('not a Kineto trace: no "traceEvents" array in the first '
                                        f"{MAX_HEADER >> 20} MB", path=self.path)
        prefix = buf[:m.start()].strip()
        if not prefix.startswith(b"{"):
            raise ImportFormatError("not a Kineto trace: expected a JSON object", path=self.path,
                                    where="byte 0")
        self._prefix = prefix
        self._buf = buf[m.end():]
        self._offset = m.end()

    # -- chunks -------------------------------------------------------------------------
    def chunks(self, progress: Callable[[int], None] | None = None, split: int | None = None,
               at_split: Callable[[], bool] | None = None) -> Iterator[Chunk]:
        """Yield the events in chunks of about CHUNK_BYTES; fills ``header`` when done.

        The text read so far is a list of blocks; a chunk is cut at the first ``}, {`` in the
        last ``_CUT_WINDOW`` bytes of the last block (anywhere in it if there is none), and its
        events are decoded from one join of ``[``, the blocks and ``]`` (one copy of the text).

        ``split``: once a chunk ends in block ``split`` of the text (blocks of
        ``READ_BYTES``, counted from the file's start; :meth:`skip_to_block` of the same block
        begins there in another reader), ``at_split()`` says whether to stop there (the rest is
        read elsewhere; ``header`` stays empty) or go on.
        """
        index = 0
        eof = False
        parts: list[bytes] = [self._buf] if self._buf else []
        have = len(self._buf)
        need_more = False
        while True:
            while not eof and (have < CHUNK_BYTES or need_more):
                block = self._read()
                if not block:
                    eof = True
                    break
                parts.append(block)
                have += len(block)
                need_more = False
            if progress is not None:
                progress(self.compressed_pos())
            if eof:
                rest = b"".join(parts)
                events, trailer = self._final(rest, index)
                if events:
                    yield self._chunk(events, index)
                self._parse_header(trailer)
                return
            block = parts[-1]
            cut = self._cut(parts, index)
            if cut is None:  # no complete event boundary yet: read on
                if have > self.max_event_bytes:
                    raise ImportFormatError(
                        f"one event spans more than {self.max_event_bytes >> 20} MiB of JSON "
                        "text (a huge name or a run of whitespace)", path=self.path,
                        where=f"decompressed byte {self._offset}",
                        hint="raise the limit with --max-bytes if the file is genuine")
                parts = [b"".join(parts)]
                need_more = True
                continue
            events, rest = cut
            index += len(events)
            yield self._chunk(events, index - len(events))
            del events  # let the chunk's events go before the next one is decoded
            self._offset += have - len(rest)
            parts = [rest] if rest else []
            have = len(rest)
            if split is not None and self._blocks_read - 1 >= split:
                # this chunk ended in block ``split`` where the helper begins (not if the
                # boundary it took is inside a string, nor, having found none there, later:
                # then the helper's part is not used, and this reader reads on)
                start = _first_cut(block)
                at = self._blocks_read - 1 == split and start is not None and \
                    self._offset == self._decoded - len(block) + start
                split = None
                if at and at_split is not None and at_split():
                    return

    def skip_to_block(self, block: int) -> int | None:
        """Begin where :meth:`chunks`, reading the file from its start, ends the chunk it cuts
        in block ``block`` of the text (blocks of ``READ_BYTES``, counted from the file's
        start): at the first boundary (``}, {``) in the block's last ``_CUT_WINDOW`` bytes, or
        anywhere in it if there is none there; the text before is read and dropped. From there
        on, this reader cuts the same chunks that reader does: a helper's part of the file
        (``halves``) is read just as one process reads it. The decompressed offset where the
        events after it begin (:attr:`offset`), or None where the text has no such block or
        the block no boundary. (Whether the boundary is one, not text inside a string, only
        the reader of the events before it can tell, by decoding them; so does ``halves``.)"""
        if self._blocks_read > block:  # read while looking for the events array
            return None
        if self._stream is self._raw and self._raw is not None and block > self._blocks_read:
            # plain text: its blocks are where the file's bytes are; go there, read none before
            self._stop_pump()
            self._raw.seek(block * READ_BYTES)
            self._blocks_read, self._decoded = block, block * READ_BYTES
            self._start_pump()
        last = b""
        while self._blocks_read <= block:
            last = self._read()
            if not last:
                return None
        start = _first_cut(last)
        if start is None:
            return None
        self._buf = last[start:]
        self._offset = self._decoded - len(last) + start
        return self._offset

    def _chunk(self, events: list[Event], index: int) -> Chunk:
        text, self._text = self._text, None
        return Chunk(events, index, self._offset, text, self)

    def _decode(self, text: bytes) -> list[Event]:
        events = EVENTS.decode(text, self.time_mode, self.names_mode)
        self._text = text if time_mode(events) != TEXT else None
        if events:
            self.names_mode = min(self.names_mode, names_mode(events))
        return events

    def _cut(self, parts: list[bytes], index: int) -> tuple[list[Event], bytes] | None:
        """Decode the events before the last usable boundary of ``parts[-1]``; (events, text
        after the boundary), or None when the last part holds no boundary that decodes."""
        last = parts[-1]
        m = _BOUNDARY.search(last, max(0, len(last) - _CUT_WINDOW))
        if m is None:
            m = _BOUNDARY.search(last)
        view = memoryview(last)
        while m is not None:
            text = [*parts[:-1], view[:m.start() + 1]]
            events = self._try_decode(text, index, final=False)
            if events is not None:
                return events, last[m.end() - 1:]
            m = _BOUNDARY.search(last, m.end())  # the cut fell inside a string: try the next
        return None

    def _try_decode(self, text: bytes | list[bytes | memoryview], index: int,
                    final: bool) -> list[Event] | None:
        pieces = [text] if isinstance(text, bytes) else text
        length = sum(len(t) for t in pieces)
        try:
            return self._decode(b"".join([b"[", *pieces, b"]"]))
        except msgspec.ValidationError as exc:
            raise self._validation_error(exc, index) from None
        except msgspec.DecodeError as exc:
            pos = _error_pos(exc)
            if not final and (pos is None or pos >= length):
                return None
            where = f"byte {self._offset + pos - 1}" if pos is not None else \
                f"bytes {self._offset}-{self._offset + length}"
            raise ImportFormatError(f"malformed JSON in traceEvents ({_msg(exc)})",
                                    path=self.path, where=where,
                                    hint="expected a complete PyTorch profiler trace") from None

    def _final(self, rest: bytes, index: int) -> tuple[list[Event], bytes]:
        """Split the last piece into its events and the text after the array (trailer)."""
        # the array ends with the last event's '}' and then ']'; try such places from the end
        if rest.lstrip().startswith(b"]"):  # an empty array
            return [], rest[rest.index(b"]") + 1:]
        ends = [m.end() for m in _ARRAY_END.finditer(rest)]
        for end in reversed(ends[-64:]):
            try:
                return self._decode(b"[" + rest[:end]), rest[end:]
            except msgspec.ValidationError as exc:
                raise self._validation_error(exc, index) from None
            except msgspec.DecodeError:
                continue
        # no closing bracket works: report where decoding the remainder fails
        self._try_decode(rest.rstrip().rstrip(b"}").rstrip().rstrip(b"]"), index, final=True)
        raise ImportFormatError("truncated trace: the traceEvents array is never closed",
                                path=self.path, where=f"byte {self._offset + len(rest)}",
                                hint="the file was cut short; copy it again")

    def _parse_header(self, trailer: bytes) -> None:
        head = self._prefix.rstrip().rstrip(b",").rstrip()  # '{' or '{ "k": v, ...'
        tail = trailer.strip()  # '}' or ', "k": v ... }'
        if tail.startswith(b","):
            tail = tail[1:].lstrip()
        if head == b"{" or tail == b"}":
            joined = head + tail
        else:
            joined = head + b", " + tail
        try:
            obj = _ANY.decode(joined)
        except (msgspec.DecodeError, UnicodeDecodeError):  # a key not UTF-8 raises the latter
            raise ImportFormatError("malformed JSON around the traceEvents array",
                                    path=self.path, where=f"after byte {self._offset}",
                                    hint="expected '{..., \"traceEvents\": [...], ...}'") from None
        if not isinstance(obj, dict):
            raise ImportFormatError("not a Kineto trace: expected a JSON object", path=self.path)
        self.header = obj

    def _validation_error(self, exc: msgspec.ValidationError, index: int) -> ImportFormatError:
        msg = str(exc)
        m = re.search(r"\$\[(\d+)\]", msg)
        where = f"event {index + int(m.group(1))}" if m else f"events from {index}"
        return ImportFormatError(f"unexpected event field: {msg}", path=self.path, where=where,
                                 hint="expected Chrome-trace events with ph, name, ts, dur")


def _first_cut(block: bytes) -> int | None:
    """Where, in a block of text, the events after the first boundary :meth:`KinetoFile.chunks`
    tries there begin (its ``{``): the first ``}, {`` in the block's last ``_CUT_WINDOW`` bytes,
    else the first anywhere in it; None where it holds none."""
    m = _BOUNDARY.search(block, max(0, len(block) - _CUT_WINDOW)) or _BOUNDARY.search(block)
    return None if m is None else m.end() - 1


def _error_pos(exc: Exception) -> int | None:
    m = _BYTE_POS.search(str(exc))
    return int(m.group(1)) if m else None


def _msg(exc: Exception) -> str:
    return _BYTE_POS.sub("", str(exc)).replace("\n", " ").strip()
