"""Streaming trace writer with bounded memory.

Rows are buffered up to ``row_group_rows`` and flushed as one Parquet row group (zstd). The
output is written under a temporary name in the target directory and renamed into place on
:meth:`TraceWriter.close`, so a reader never sees a partial file and a failed write leaves the
previous file (if any) untouched.

Only the dictionary-typed columns (lane, kind, name, ...) are dictionary-encoded in Parquet:
high-cardinality columns such as ``args`` would fill a dictionary page, then fall back to plain
encoding after the work is done (measured: 25 % slower and 25 % larger on a Kineto import).
``threaded=True`` encodes and compresses row groups on a background thread (Arrow releases the
GIL there), overlapping them with whatever produces the next rows; at most two row groups wait.

Usage::

    with TraceWriter("run.parquet", TraceMeta(source="emulator")) as w:
        w.write({"rank": [0], "lane": ["thread 1"], ...})
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from hermes.errors import OutputError, TraceFormatError
from hermes.trace.meta import TraceMeta
from hermes.trace.readable import readable
from hermes.trace.schema import COLUMNS, arrow_schema

if TYPE_CHECKING:  # imported where a file is written: an in-memory import never needs it
    import pyarrow.parquet as pq

DEFAULT_ROW_GROUP_ROWS = 256 * 1024
#: Columns Parquet dictionary-encodes: the ones the schema stores as dictionaries.
DICTIONARY_COLUMNS: list[str] = [c.name for c in COLUMNS if pa.types.is_dictionary(c.type)]


def to_table(columns: Mapping[str, Any] | pa.Table | Any) -> pa.Table:
    """Coerce a batch of events into a table of exactly the v1 schema.

    Accepts a mapping of column name -> sequence/array, a pyarrow Table or a pandas DataFrame.
    Missing nullable columns become nulls; a missing required column is an error.
    """
    if isinstance(columns, pa.Table):
        table = columns
        get = table.column
        names = set(table.column_names)
        n = table.num_rows
    else:
        if hasattr(columns, "to_dict") and hasattr(columns, "columns"):  # pandas DataFrame
            table = pa.Table.from_pandas(columns, preserve_index=False)
            get = table.column
            names = set(table.column_names)
            n = table.num_rows
        else:
            mapping = dict(columns)
            names = set(mapping)
            lengths = {len(v) for v in mapping.values()}
            if len(lengths) > 1:
                raise TraceFormatError(f"columns have different lengths {sorted(lengths)}")
            n = lengths.pop() if lengths else 0

            def get(name: str) -> Any:
                return mapping[name]

    arrays = []
    for col in COLUMNS:
        if col.name not in names:
            if not col.nullable:
                raise TraceFormatError(f"required column {col.name!r} is missing")
            arrays.append(pa.nulls(n, type=col.type))
            continue
        arrays.append(_as_array(get(col.name), col.type, col.name))
    return pa.Table.from_arrays(arrays, schema=arrow_schema())


def _as_array(values: Any, typ: pa.DataType, name: str) -> pa.Array | pa.ChunkedArray:
    try:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if isinstance(values, pa.Array):
            if values.type == typ:
                return values
            if pa.types.is_dictionary(typ):
                if pa.types.is_dictionary(values.type):
                    values = values.cast(pa.string())
                return values.cast(pa.string()).dictionary_encode().cast(typ)
            return values.cast(typ)
        if pa.types.is_dictionary(typ):
            arr = pa.array(values if not isinstance(values, np.ndarray) else values.tolist(),
                           type=pa.string(), from_pandas=True)
            return arr.dictionary_encode().cast(typ)
        if isinstance(values, np.ndarray) and values.dtype.kind == "f" and pa.types.is_integer(typ):
            mask = np.isnan(values)
            return pa.array(np.where(mask, 0, values).astype(np.int64), mask=mask).cast(typ)
        return pa.array(values, type=typ, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
        raise TraceFormatError(f"column {name!r} cannot be stored as {typ}: {exc}") from None


def _ranks(table: pa.Table) -> set[int]:
    """The distinct ranks of a table (numpy on the int32 buffers: a Kineto import otherwise
    never imports pyarrow.compute)."""
    out: set[int] = set()
    for chunk in table.column("rank").chunks:
        if chunk.null_count:
            import pyarrow.compute as pc

            out.update(r for r in pc.unique(chunk).to_pylist() if r is not None)
            continue
        values = np.frombuffer(chunk.buffers()[1], np.int32, chunk.offset + len(chunk))
        values = values[chunk.offset:]
        if len(values):
            lo, hi = int(values.min()), int(values.max())
            # one rank per batch is the rule (an importer's, a collector's): no sort for it
            out.update((lo,) if lo == hi else np.unique(values, return_index=True)[0].tolist())
    return out


def by_rank(table: pa.Table) -> Iterator[tuple[int, pa.Table]]:
    """(rank, that rank's rows) for every rank in ``table``, in rank order (no copy for one)."""
    import pyarrow.compute as pc

    ranks = sorted(_ranks(table))
    for r in ranks:
        yield int(r), (table.filter(pc.equal(table.column("rank"), r)) if len(ranks) > 1
                       else table)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def publish(tmp: Path, final: Path) -> None:
    """Give the temp file normal permissions (mkstemp makes it 0600) and rename it into place."""
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, final)


class BatchWriter:
    """What every trace writer does with a batch: note its ranks, buffer it and flush a row
    group's worth (``_flush``: the writer's own)."""

    row_group_rows: int
    _buffer: list[pa.Table]
    _buffered: int
    _ranks: set[int]
    repairs: dict[str, int]

    def write(self, batch: Mapping[str, Any] | pa.Table | Any) -> None:
        table = to_table(batch)
        if table.num_rows == 0:
            return
        table = self._readable(table)
        self._ranks.update(_ranks(table))
        self._buffer.append(table)
        self._buffered += table.num_rows
        if self._buffered >= self.row_group_rows:
            self._flush()

    def _flush(self) -> None:
        raise TypeError(f"{type(self).__name__} defines no _flush")

    def _readable(self, table: pa.Table) -> pa.Table:
        """``table`` as a reader can read it back (``hermes.trace.readable``); what was
        changed is counted in ``self.repairs``, stored by close as ``extra.repaired``."""
        return readable(table, self.repairs)


class TraceWriter(BatchWriter):
    """Write one Parquet trace file, streamed in row groups, atomically published on close."""

    def __init__(self, path: str | os.PathLike[str], meta: TraceMeta | None = None,
                 row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, threaded: bool = False) -> None:
        self.path = Path(path)
        self.meta = meta or TraceMeta()
        self.row_group_rows = int(row_group_rows)
        parent = self.path.parent
        if not parent.is_dir():
            raise OutputError("output directory does not exist", path=parent,
                              hint="create it first or choose another --out")
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=parent)
        except OSError as exc:
            raise OutputError(f"cannot write here: {exc.strerror}", path=parent) from None
        os.close(fd)
        self._tmp = Path(tmp)
        import pyarrow.parquet as pq

        self._writer: pq.ParquetWriter | None = pq.ParquetWriter(
            self._tmp, arrow_schema(self.meta.to_kv()), compression="zstd",
            use_dictionary=DICTIONARY_COLUMNS)
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self.rows_written = 0
        self._ranks: set[int] = set()
        self.repairs: dict[str, int] = {}
        self._closed = False
        self._queue: queue.Queue[pa.Table | None] | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        if threaded:
            self._queue = queue.Queue(maxsize=2)
            self._thread = threading.Thread(target=self._drain, name="hermes-trace-writer",
                                            daemon=True)
            self._thread.start()

    def _drain(self) -> None:
        """Background thread: write queued tables until None arrives."""
        assert self._queue is not None
        while True:
            table = self._queue.get()
            if table is None:
                return
            if self._error is not None:
                continue  # keep draining so the producer never blocks
            try:
                self._write_group(table)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                self._error = exc

    def _write_group(self, table: pa.Table) -> None:
        assert self._writer is not None
        try:
            self._writer.write_table(table, row_group_size=max(self.row_group_rows, 1))
        except OSError as exc:  # disk full, file too large, directory removed
            raise OutputError(f"cannot write: {exc.strerror or exc}; any previous file is "
                              "unchanged", path=self.path,
                              hint="free space, fix permissions or choose another --out") from None

    def _check(self) -> None:
        if self._error is not None:
            exc, self._error = self._error, None
            raise exc

    def _stop_thread(self) -> None:
        if self._thread is not None and self._queue is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _flush(self) -> None:
        self._check()
        if not self._buffer or self._writer is None:
            return
        table = pa.concat_tables(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        self._buffer.clear()
        self._buffered = 0
        if self._queue is not None:
            self._queue.put(table)
        else:
            self._write_group(table)
        self.rows_written += table.num_rows

    def close(self, meta: TraceMeta | None = None) -> Path:
        """Flush, write the final metadata and rename the file into place."""
        if self._closed:
            return self.path
        if meta is not None:
            self.meta = meta
        self._flush()
        self._stop_thread()
        self._check()
        final = self.meta
        if not final.ranks:
            final = final.with_(ranks=tuple(sorted(self._ranks)))
        if self.repairs:
            final = final.with_(extra={**final.extra, "repaired": dict(self.repairs)})
        assert self._writer is not None
        try:
            self._writer.add_key_value_metadata(final.to_kv())
            self._writer.close()
            self._writer = None
            publish(self._tmp, self.path)
        except OSError as exc:
            self.abort()
            raise OutputError(f"cannot write: {exc.strerror}; nothing was written and any "
                              "previous file is unchanged", path=self.path,
                              hint="free space, fix permissions or choose another --out") from None
        self._closed = True
        return self.path

    def abort(self) -> None:
        """Drop everything written so far; the target path is left as it was."""
        if self._closed:
            return
        self._buffer.clear()
        self._stop_thread()
        self._error = None
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - the temp file is removed either way
                pass
            self._writer = None
        self._tmp.unlink(missing_ok=True)
        self._closed = True

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def is_trace_file_name(name: str) -> bool:
    return name.endswith(".parquet") or name.startswith(".")


def check_trace_destination(out: Path, force: bool = False) -> None:
    """Refuse to replace a non-empty directory that is not a Hermes trace (exit 2) unless
    ``force``: a trace written to a directory replaces the whole directory."""
    if out.suffix == ".parquet" or not out.is_dir() or force:
        return
    try:
        foreign = sorted(e.name for e in os.scandir(out) if not is_trace_file_name(e.name))
    except OSError as exc:
        raise OutputError(f"cannot read the output directory: {exc.strerror}", path=out) from None
    if foreign:
        raise OutputError(f"output directory is not a Hermes trace (holds {foreign[0]!r}"
                          f"{f' and {len(foreign) - 1} more' if len(foreign) > 1 else ''}); "
                          "writing the trace would replace it", path=out,
                          hint="choose another --out, or pass --force to replace it")


def _swap_in(tmp_dir: Path, final: Path) -> None:
    """Replace directory ``final`` by ``tmp_dir`` (two renames: old aside, new in, old gone),
    so a reader never sees old rank files beside new ones."""
    old: Path | None = None
    if final.is_dir() and not final.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old-", dir=final.parent))
        os.rename(final, old / "d")
    elif final.exists() or final.is_symlink():
        final.unlink()
    try:
        os.rename(tmp_dir, final)
    except OSError:
        if old is not None:  # put the previous trace back
            os.rename(old / "d", final)
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class RankedTraceWriter:
    """Write a trace as a directory of per-rank files (``rank-00000.parquet``, ...).

    With ``replace=True`` (the default) the ranks are written into a temporary sibling
    directory that replaces ``directory`` as a whole on close, so an import into an existing
    trace directory never leaves old ranks beside new ones and a failure leaves the previous
    trace untouched. ``replace=False`` adds this process's ranks to a shared directory (each
    rank's file still appears atomically): several processes of one profiled job do that.
    """

    def __init__(self, directory: str | os.PathLike[str], meta: TraceMeta | None = None,
                 row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, threaded: bool = False,
                 replace: bool = True) -> None:
        self.directory = Path(directory)
        self.meta = meta or TraceMeta()
        self.row_group_rows = row_group_rows
        self.threaded = threaded
        if self.directory.exists() and not self.directory.is_dir():
            raise OutputError("exists and is not a directory", path=self.directory)
        if not self.directory.parent.is_dir():
            raise OutputError("output directory does not exist", path=self.directory.parent,
                              hint="create it first or choose another --out")
        self._created = not self.directory.exists()
        self._tmp_dir: Path | None = None
        try:
            if replace:
                self._tmp_dir = Path(tempfile.mkdtemp(prefix=f".{self.directory.name}.",
                                                      suffix=".tmp", dir=self.directory.parent))
            else:
                self.directory.mkdir(exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot write here: {exc.strerror}",
                              path=self.directory.parent) from None
        self._writers: dict[int, TraceWriter] = {}

    def rank_path(self, rank: int) -> Path:
        base = self._tmp_dir if self._tmp_dir is not None else self.directory
        return base / f"rank-{int(rank):05d}.parquet"

    def writer(self, rank: int) -> TraceWriter:
        w = self._writers.get(rank)
        if w is None:
            w = TraceWriter(self.rank_path(rank), self.meta.with_(ranks=(int(rank),)),
                            self.row_group_rows, threaded=self.threaded)
            self._writers[rank] = w
        return w

    def write(self, batch: Mapping[str, Any] | pa.Table | Any) -> None:
        for r, part in by_rank(to_table(batch)):
            self.writer(r).write(part)

    def close(self, meta: TraceMeta | None = None) -> Path:
        if meta is not None:
            self.meta = meta
        try:
            for rank, w in sorted(self._writers.items()):
                w.close(self.meta.with_(ranks=(rank,)))
            if self._tmp_dir is not None:
                _swap_in(self._tmp_dir, self.directory)
                self._tmp_dir = None
        except OSError as exc:
            self.abort()
            raise OutputError(f"cannot write: {exc.strerror}; the previous output (if any) is "
                              "unchanged", path=self.directory) from None
        except BaseException:
            self.abort()
            raise
        return self.directory

    def abort(self) -> None:
        for w in self._writers.values():
            w.abort()
        if self._tmp_dir is not None:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
            self._tmp_dir = None
        elif self._created:
            try:
                self.directory.rmdir()
            except OSError:
                pass

    def __enter__(self) -> RankedTraceWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def open_writer(path: str | os.PathLike[str], meta: TraceMeta | None = None,
                row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
                threaded: bool = False, replace: bool = True) -> TraceWriter | RankedTraceWriter:
    """A single-file writer for ``*.parquet`` paths, a per-rank directory writer otherwise
    (``replace``: the directory is replaced as a whole on close; see RankedTraceWriter)."""
    p = Path(path)
    if p.suffix == ".parquet":
        if p.is_dir():
            raise OutputError("output path is a directory", path=p,
                              hint="name a file, or remove the directory")
        return TraceWriter(p, meta, row_group_rows, threaded=threaded)
    return RankedTraceWriter(p, meta, row_group_rows, threaded=threaded, replace=replace)


def write_trace(path: str | os.PathLike[str], events: Any, meta: TraceMeta | None = None) -> Path:
    """Write a whole table of events at once (tests, importers of small files)."""
    w = open_writer(path, meta)
    try:
        w.write(events)
    except BaseException:
        w.abort()
        raise
    return w.close()
