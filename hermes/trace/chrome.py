"""Export a Hermes trace as Chrome trace-event JSON (chrome://tracing, Perfetto UI legacy JSON).

``export_chrome(path, out)`` streams a trace (one Parquet file or a per-rank directory) into one
JSON object ``{"displayTimeUnit", "otherData", "traceEvents": [...]}``:

* one process per rank (``pid`` = rank) with ``process_name`` "rank N" and
  ``process_sort_index``; one track per lane (``tid`` = 1, 2, ... per rank, ordered host threads,
  device streams, copy engines, links, loader workers, counters, then by lane name with numbers
  compared as numbers), named by ``thread_name`` and ordered by ``thread_sort_index``;
* complete events ``ph: "X"`` (``cat`` = kind; ``args`` = the non-null typed columns followed by
  the keys of the ``args`` JSON column); zero-duration markers as thread-scoped instants
  ``ph: "i"``; counter samples as ``ph: "C"`` with ``args: {"value": v}`` (samples without a
  value are left out: a counter needs a number);
* flow arrows ``cat: "ac2g"`` (as Kineto writes them): for each (rank, corr_id) with a host event
  and device-side event(s) in the same file, one ``s`` on the host event (the launch when
  there are several) and one ``f`` (``bp: "e"``) on each device-side event; flow ids are
  unique per (rank, corr_id).

Times: ``ts``/``dur`` are microseconds written as exact decimal text from integer nanoseconds
(``1234567`` ns -> ``1234.567``), never through a float. When the metadata has
``clock_offsets_ns`` they are added, so every rank is on rank 0's clock. Nothing else is added:
the Kineto importer keeps Kineto's own clock (``ts_ns`` = source ``ts`` x 1000, exactly), so a
Kineto -> Hermes -> Chrome round trip restores the source's ``ts`` values; the file's
``baseTimeNanoseconds`` (kept in ``extra.kineto``) is not applied, as Kineto's JSON does not
apply it either.

Memory: events are formatted one record batch (at most ``BATCH_ROWS`` rows) at a time with
vectorized Arrow string kernels, and the bytes of the formatted batch are written directly; only
the lanes (pass 1) and the correlated events of the current file (for flows: a few integers
per event) are held across batches. Output goes to a temp file renamed into place at the end, so
a failed export leaves no partial file and does not touch an existing one. A name ending in
``.gz`` is gzip-compressed.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hermes.errors import OutputError, TraceFormatError
from hermes.trace.chrome_text import FLOW_FIELDS, codes, format_batch, format_flows, mask_of
from hermes.trace.meta import TraceMeta
from hermes.trace.reader import check_columns, conform, open_parquet, read_meta, trace_files
from hermes.trace.schema import COLUMN_NAMES, DEVICE_LANES
from hermes.trace.textsafe import clean_text, dumps
from hermes.trace.unreadable import UNREADABLE, row_data_error

BATCH_ROWS = 65_536
"""Rows formatted at once; bounds the size of one formatted chunk (~250 B per event)."""

#: Track order within a process: host threads first, counters last.
LANE_ORDER: dict[str, int] = {"host": 0, "device": 1, "copy": 2, "link": 3, "loader": 4,
                              "counter": 5}

_COMPACT = (",", ":")
GZIP_LEVEL = 5  # level 9 costs ~3x the time for a few percent smaller files


@dataclass(frozen=True)
class ExportStats:
    """What an export wrote. ``events``: X/i/C events; ``flows``: s+f pairs (one per device
    event); ``bytes``: size of the output file."""

    path: Path
    ranks: tuple[int, ...]
    tracks: int
    events: int
    flows: int
    bytes: int


# --------------------------------------------------------------------------- reading

def _row_groups(path: str | os.PathLike[str], columns: list[str],
                ) -> Iterator[tuple[Path, TraceMeta, pa.RecordBatch | None]]:
    """Yield (file, meta, batch) per record batch of every row group, in v1 types; a file
    is announced by (file, meta, None) before its batches."""
    for f in trace_files(path):
        pf = open_parquet(f)
        meta = read_meta(f, pf)
        check_columns(f, pf.schema_arrow)
        yield f, meta, None
        present = [c for c in columns if c in pf.schema_arrow.names]
        for batch in _batches(pf, f, present):
            table = conform(pa.Table.from_batches([batch]), columns, f)
            yield from ((f, meta, b) for b in table.to_batches())


def _batches(pf: pq.ParquetFile, f: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """Record batches of at most ``BATCH_ROWS`` rows, decoded one at a time (a row group is
    not decoded whole)."""
    it = pf.iter_batches(batch_size=BATCH_ROWS, columns=columns)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return
        except UNREADABLE as exc:
            raise row_data_error(exc, f) from None
        yield batch


def _natural(name: str) -> tuple[Any, ...]:
    """Sort key comparing ASCII digit runs as numbers ('thread 10' after 'thread 9'); other
    digits ('²', '١') are text: ``int()`` refuses superscripts that ``str.isdigit`` accepts."""
    return tuple(int(t) if t.isascii() and t.isdigit() else t
                 for t in re.split(r"([0-9]+)", name))


def collect_tracks(path: str | os.PathLike[str]) -> dict[tuple[int, str], tuple[int, str]]:
    """Pass 1: {(rank, lane): (tid, lane_kind)} with tids 1.. per rank in display order."""
    seen: dict[tuple[int, str], str] = {}
    for _, _, batch in _row_groups(path, ["rank", "lane", "lane_kind"]):
        if batch is None or batch.num_rows == 0:
            continue
        lane_i, lanes = codes(batch.column(1))
        kind_i, kinds = codes(batch.column(2))
        ranks = batch.column(0).fill_null(0).to_numpy(zero_copy_only=False)
        trip = pd.DataFrame({"r": ranks, "l": lane_i, "k": kind_i}).drop_duplicates()
        for r, li, ki in trip.itertuples(index=False):  # one row per distinct lane
            key = (int(r), str(lanes[li]))
            kind = str(kinds[ki])
            old = seen.get(key)
            if old is None or LANE_ORDER.get(kind, 9) < LANE_ORDER.get(old, 9):
                seen[key] = kind
    order = sorted(seen, key=lambda k: (k[0], LANE_ORDER.get(seen[k], 9), _natural(k[1])))
    tracks: dict[tuple[int, str], tuple[int, str]] = {}
    next_tid: dict[int, int] = {}
    for key in order:
        tid = next_tid.get(key[0], 1)
        next_tid[key[0]] = tid + 1
        tracks[key] = (tid, seen[key])
    return tracks


def _metadata_events(tracks: dict[tuple[int, str], tuple[int, str]]) -> list[str]:
    out: list[str] = []
    for r in sorted({r for r, _ in tracks}):
        out.append(json.dumps({"ph": "M", "name": "process_name", "pid": r, "tid": 0,
                               "args": {"name": f"rank {r}"}}, separators=_COMPACT))
        out.append(json.dumps({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0,
                               "args": {"sort_index": r}}, separators=_COMPACT))
    for (r, lane), (tid, _) in tracks.items():
        out.append(json.dumps({"ph": "M", "name": "thread_name", "pid": r, "tid": tid,
                               "args": {"name": lane}}, ensure_ascii=False,
                              separators=_COMPACT))
        out.append(json.dumps({"ph": "M", "name": "thread_sort_index", "pid": r, "tid": tid,
                               "args": {"sort_index": tid}}, separators=_COMPACT))
    return out


def time_shift(meta: TraceMeta) -> dict[int, int]:
    """Nanoseconds to add per rank to put every rank on rank 0's clock."""
    return {int(r): int(o) for r, o in meta.clock_offsets_ns.items()}


# --------------------------------------------------------------------------- writing

class _JsonArrayWriter:
    """Writes pre-formatted elements (each starting with ",\\n"), dropping the first comma."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.first = True

    def write(self, data: bytes | memoryview) -> None:
        if not len(data):
            return
        if self.first:
            data = data[1:]
            self.first = False
        self.fh.write(data)

    def write_array(self, text: pa.Array) -> None:
        if len(text) == 0:
            return
        _, offsets, values = text.buffers()
        off = np.frombuffer(offsets, dtype=np.int32 if text.type == pa.string() else np.int64)
        start, end = int(off[text.offset]), int(off[text.offset + len(text)])
        self.write(memoryview(values)[start:end])


def _open_out(out: Path) -> tuple[Path, IO[bytes], IO[bytes]]:
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError("output directory does not exist", path=parent,
                          hint="create it first or choose another --out")
    if out.is_dir():
        raise OutputError("output path is a directory", path=out)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise OutputError(f"cannot write here: {exc.strerror}", path=parent) from None
    raw = os.fdopen(fd, "wb", buffering=1 << 20)
    if out.name.endswith(".gz"):
        gz = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL, mtime=0)
        return Path(tmp), raw, cast(IO[bytes], gz)
    return Path(tmp), raw, raw


def export_chrome(path: str | os.PathLike[str], out: str | os.PathLike[str],
                  on_rows: Callable[[int], None] | None = None) -> ExportStats:
    """Write the trace at ``path`` as Chrome trace-event JSON to ``out`` (see module doc).

    ``on_rows(n)`` is called after each batch of ``n`` events (progress reporting)."""
    out = Path(out)
    tracks = collect_tracks(path)
    tmp, raw, fh = _open_out(out)
    try:
        stats = _write(path, tracks, fh, on_rows)
        if fh is not raw:
            fh.close()
        raw.close()
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, out)
    except BaseException as exc:
        try:  # closing flushes, which fails again on a full disk: the temp file goes anyway
            raw.close()
        except OSError:
            pass
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write: {exc.strerror or exc}; nothing was written and "
                              "any previous file is unchanged", path=out,
                              hint="free space or choose another --out") from None
        raise
    return ExportStats(out, tuple(sorted({r for r, _ in tracks})), len(tracks), stats[0],
                       stats[1], out.stat().st_size)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write(path: str | os.PathLike[str], tracks: dict[tuple[int, str], tuple[int, str]],
           fh: IO[bytes], on_rows: Callable[[int], None] | None) -> tuple[int, int]:
    out = _JsonArrayWriter(fh)
    n_events = n_flows = 0
    next_id = 1
    corr: list[dict[str, np.ndarray]] = []
    shift: dict[int, int] = {}

    def flush_flows() -> None:  # flows never cross files: per-rank files hold whole ranks
        nonlocal next_id, n_flows
        chunks, last = format_flows(_concat(corr), next_id, BATCH_ROWS)
        corr.clear()
        n_flows += last - next_id
        next_id = last
        for texts in chunks:
            out.write_array(texts)

    started = False
    for _, meta, batch in _row_groups(path, list(COLUMN_NAMES)):
        if batch is None:  # a new file
            flush_flows()
            if not started:
                fh.write(_header(meta, path))
                out.write(",\n".join([""] + _metadata_events(tracks)).encode())
                started = True
            shift = time_shift(meta)
            continue
        ranks = batch.column(0).fill_null(0).to_numpy(zero_copy_only=False)
        lane_i, lanes = codes(batch.column(1))
        tids = np.zeros(len(ranks), np.int64)
        ts = batch.column(5).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        for r in np.unique(ranks):  # a handful of ranks per batch; lanes via a lookup table
            mask = ranks == r
            lut = np.array([tracks.get((int(r), str(n)), (0, ""))[0] for n in lanes], np.int64)
            tids[mask] = lut[lane_i[mask]]
            ts[mask] = _shifted(ts[mask], shift.get(int(r), 0), int(r))
        text = format_batch(batch, tids, ts)
        out.write_array(text)
        n_events += len(text)
        corr.append(_correlated(batch, ranks, tids, ts))
        if on_rows is not None:
            on_rows(batch.num_rows)
    flush_flows()
    fh.write(b"\n]}\n")
    return n_events, n_flows


def _shifted(ts: np.ndarray, offset: int, rank: int) -> np.ndarray:
    """``ts + offset`` (rank ``rank``'s clock offset), refused where it leaves int64."""
    if not offset:
        return ts
    out = ts + np.int64(offset)
    over = (out < ts) if offset > 0 else (out > ts)
    if over.any():
        raise TraceFormatError(
            f"rank {rank}: an event at ts_ns={int(ts[over][0])} plus the clock offset "
            f"{offset} ns of metadata clock_offsets_ns lies beyond the int64 nanosecond range",
            hint="the clock offsets do not belong to these timestamps")
    return out


def _header(meta: TraceMeta, path: str | os.PathLike[str]) -> bytes:
    other = {"hermes_source": meta.source, "hermes_trace": clean_text(os.fsdecode(path)),
             "schema_version": meta.schema_version, "device": meta.device.get("name"),
             "clock_offsets_ns": {str(k): v for k, v in meta.clock_offsets_ns.items()}}
    return ('{"displayTimeUnit":"ns","otherData":'
            + dumps(other, separators=_COMPACT)
            + ',"traceEvents":[').encode()


def _correlated(batch: pa.RecordBatch, ranks: np.ndarray, tids: np.ndarray,
                ts: np.ndarray) -> dict[str, np.ndarray]:
    """The events of a batch that can start or end a flow (see ``FLOW_FIELDS``)."""
    names = batch.schema.names
    corr = batch.column(names.index("corr_id"))
    lane_kind, kind = batch.column(names.index("lane_kind")), batch.column(names.index("kind"))
    host = mask_of(lane_kind, "host")
    device = np.zeros_like(host)
    for lk in DEVICE_LANES:
        device |= mask_of(lane_kind, lk)
    keep = pc.is_valid(corr).to_numpy(zero_copy_only=False) & (host | device)
    keep &= ~mask_of(kind, "counter")
    cols = {"rank": ranks, "corr_id": corr.fill_null(0).to_numpy(zero_copy_only=False),
            "host": host, "launch": mask_of(kind, "launch"), "ts_ns": ts, "tid": tids}
    return {k: cols[k][keep].astype(t) for k, t in FLOW_FIELDS.items()}


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, t)
            for k, t in FLOW_FIELDS.items()}
