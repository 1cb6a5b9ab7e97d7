"""Read Hermes traces: one Parquet file, or a directory of per-rank files.

``load(path, columns=..., ranks=...)`` returns a :class:`Trace`: a pandas DataFrame of events
(dictionary columns as categoricals, nullable integers as pandas' ``Int64``/``Int32``) plus the
trace metadata. Older schema versions load with missing columns filled with nulls.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hermes.errors import TraceFormatError
from hermes.trace.args import ROW, SOURCE, FileArgs
from hermes.trace.meta import TraceMeta
from hermes.trace.schema import COLUMN_NAMES, COLUMNS, REQUIRED, SCHEMA_VERSION, arrow_schema
from hermes.trace.unreadable import UNREADABLE, row_data_error

if TYPE_CHECKING:  # imported where a file is opened: an in-memory trace never needs it
    import pyarrow.parquet as pq

_PANDAS_TYPES = {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype()}
_NON_NULL_INT = {c.name for c in COLUMNS if not c.nullable and pa.types.is_integer(c.type)}


@dataclass
class Trace:
    """Events of one trace (all or some ranks) and its metadata."""

    events: pd.DataFrame
    meta: TraceMeta
    path: Path | None = None

    @property
    def ranks(self) -> list[int]:
        if "rank" not in self.events.columns or self.events.empty:
            return list(self.meta.ranks)
        return sorted(int(r) for r in self.events["rank"].unique())

    def rank(self, rank: int) -> pd.DataFrame:
        return self.events[self.events["rank"] == rank]

    def __len__(self) -> int:
        return len(self.events)


_T = TypeVar("_T")
#: a segment of ``hermes.trace.segments`` (``rank-00003.seg-PID-00001.parquet``)
_SEGMENT = re.compile(r"^(?P<stem>.+)\.seg-\d+-\d+\.parquet$")


def superseded(files: list[Path]) -> list[Path]:
    """``files`` without the segments whose merged rank file is among them: a clean close
    publishes the merged file, then removes its segments; a reader listing between the two
    reads each step once."""
    names = {f.name for f in files}
    out = []
    for f in files:
        m = _SEGMENT.match(f.name)
        if m is None or f"{m.group('stem')}.parquet" not in names:
            out.append(f)
    return out


def trace_files(path: str | os.PathLike[str]) -> list[Path]:
    """The Parquet files that make up a trace (one file, or ``*.parquet`` in a directory)."""
    p = Path(path)
    if p.is_dir():
        recover_steps(p)
        # segments a clean close merged, seen before it removed them, are read once (merged)
        files = superseded(sorted(f for f in p.glob("*.parquet") if not f.name.startswith(".")))
        odd = [f for f in files if not f.is_file()]
        if any(not os.path.lexists(f) for f in odd):  # merged and removed since listed
            raise TraceChanged("the trace changed while it was read (a file was removed)",
                               path=p, hint="read it again")
        if odd:  # a FIFO would block, a directory cannot be read
            raise TraceFormatError("not a regular file (a directory, FIFO or device)",
                                   path=odd[0], hint="remove it from the trace directory")
        if not files:
            raise TraceFormatError("directory holds no *.parquet trace files", path=p,
                                   hint="point at a trace written by hermes import/emulate/profile")
        return files
    if not p.exists():
        partial = p.with_name(p.name + ".partial")
        if partial.is_dir():  # hermes profile was killed before it could merge its segments
            raise TraceFormatError("no such file: the profiled run was interrupted", path=p,
                                   hint=f"its completed steps are in {partial}")
        raise TraceFormatError("no such file or directory", path=p)
    if p.is_dir():  # created since it was looked at (a profiled run starting)
        return trace_files(p)
    if not p.is_file():  # opening a FIFO would block until a writer comes
        raise TraceFormatError("not a regular file (a FIFO, socket or device)", path=p,
                               hint="point at a .parquet trace file")
    return [p]


def recover_steps(directory: Path) -> list[Path]:
    """Turn the step journals a killed profiled run left in ``directory`` into the segments
    their next checkpoint would have written (``hermes.trace.journal``: every completed step
    loads, none twice); the journals that could not be (a read-only directory). A journal
    whose writer is alive is left alone: a reader of a running job reads its checkpoints."""
    if not any(directory.glob(".*.journal")):
        return []
    from hermes.trace.journal import recover

    return recover(directory)


class TraceChanged(TraceFormatError):
    """A segment listed a moment ago is gone: its run closed and merged it meanwhile. Reading
    the trace again reads the merged file (:func:`reread` does)."""


def reread(read: Callable[[], _T], tries: int = 32) -> _T:
    """``read()``, again while the trace changes under it (a profiled run merging: at most
    once per rank that closes meanwhile)."""
    for _ in range(tries - 1):
        try:
            return read()
        except TraceChanged:
            continue
    return read()


def open_parquet(f: Path) -> pq.ParquetFile:
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(f)
    except FileNotFoundError:
        m = _SEGMENT.match(f.name)
        if m is not None and (f.parent / f"{m.group('stem')}.parquet").exists():
            raise TraceChanged("the trace changed while it was read (its run merged its "
                               "segments)", path=f, hint="read it again") from None
        raise TraceFormatError("no such file (removed while the trace was read)", path=f,
                               hint="read it again once its writer is done") from None
    except UNREADABLE as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TraceFormatError(f"not a readable Parquet file ({msg})", path=f,
                               hint="the file may be truncated; re-create it") from None


def read_meta(f: Path, pf: pq.ParquetFile | None = None) -> TraceMeta:
    pf = pf or open_parquet(f)
    # The writer adds the final metadata at close, so the file-level key-value metadata
    # wins over the (earlier) copy embedded in the serialized Arrow schema.
    raw = dict(pf.schema_arrow.metadata or {})
    raw.update(pf.metadata.metadata or {})
    kv = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in raw.items()
          if k != b"ARROW:schema"}
    if "hermes.schema_version" not in kv:
        raise TraceFormatError("Parquet file without Hermes metadata (no hermes.schema_version)",
                               path=f, hint="import the source with `hermes import` first")
    try:
        meta = TraceMeta.from_kv(kv)
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:  # version "abc"
        raise TraceFormatError(f"invalid Hermes metadata ({exc})", path=f,
                               hint="re-create the trace with hermes") from None
    if meta.schema_version > SCHEMA_VERSION:
        raise TraceFormatError(
            f"trace format version {meta.schema_version} is newer than this Hermes reads "
            f"({SCHEMA_VERSION})", path=f, hint="upgrade hermes-profiler")
    if meta.schema_version < 1:
        raise TraceFormatError(f"invalid hermes.schema_version {meta.schema_version}", path=f)
    return meta


def read_ranks(f: Path) -> tuple[int, ...]:
    """The ranks a file's footer lists (``hermes.ranks``), without parsing the rest of its
    metadata (a footer can carry every rank's clock offsets); () when it lists none. Invalid
    metadata raises as :func:`read_meta` does."""
    pf = open_parquet(f)
    kv = pf.metadata.metadata or {}
    raw = kv.get(b"hermes.ranks") or (pf.schema_arrow.metadata or {}).get(b"hermes.ranks")
    if b"hermes.schema_version" not in kv and \
            b"hermes.schema_version" not in (pf.schema_arrow.metadata or {}):
        return read_meta(f, pf).ranks  # (raises the reader's error)
    if raw is None:
        return ()
    try:
        return TraceMeta.from_kv({"hermes.schema_version": "1",
                                  "hermes.ranks": raw.decode(errors="replace")}).ranks
    except (ValueError, TypeError, AttributeError, RecursionError):
        return read_meta(f, pf).ranks  # (raises the reader's error)


def check_columns(f: Path, schema: pa.Schema) -> None:
    names = set(schema.names)
    missing = [c.name for c in COLUMNS if not c.nullable and c.name not in names]
    if missing:
        raise TraceFormatError(f"missing required column(s) {', '.join(missing)}", path=f)


def _files(path: str | os.PathLike[str], skip: Collection[str] = ()) -> list[Path]:
    """:func:`trace_files` of ``path`` but those of a directory named in ``skip`` (files the
    caller knows cannot be read: the analysis lists them in ``missing_ranks``)."""
    files = trace_files(path)
    kept = [f for f in files if f.name not in skip] if skip and Path(path).is_dir() else files
    if not kept:
        raise TraceFormatError("every file of the trace directory is one that cannot be read",
                               path=path, hint="re-create the trace")
    return kept


def iter_tables(path: str | os.PathLike[str], columns: Sequence[str] | None = None,
                ranks: Iterable[int] | None = None, skip: Collection[str] = ()
                ) -> Iterator[tuple[pa.Table, TraceMeta, Path]]:
    """Yield (table, meta, file) per file, projected and rank-filtered, in v1 schema order;
    ``skip``: names of a directory's files to leave out (:func:`_files`)."""
    want = list(columns) if columns is not None else list(COLUMN_NAMES)
    unknown = [c for c in want if c not in COLUMN_NAMES]
    if unknown:
        raise TraceFormatError(f"unknown column(s) {', '.join(unknown)}",
                               hint=f"valid columns: {', '.join(COLUMN_NAMES)}")
    rank_set = None if ranks is None else {int(r) for r in ranks}
    for f in _files(path, skip):
        pf = open_parquet(f)
        meta = read_meta(f, pf)
        check_columns(f, pf.schema_arrow)
        if rank_set is not None and meta.ranks and not rank_set.intersection(meta.ranks):
            continue
        present = [c for c in want if c in pf.schema_arrow.names]
        read_cols = list(dict.fromkeys(present + (["rank"] if rank_set is not None else [])))
        try:
            table = pf.read(columns=read_cols)
        except UNREADABLE as exc:
            raise row_data_error(exc, f) from None
        if rank_set is not None and not (meta.ranks and rank_set.issuperset(meta.ranks)):
            # the footer does not vouch that every row is wanted: filter, unless all are
            mask = pc.is_in(table.column("rank"), value_set=pa.array(sorted(rank_set),
                                                                           pa.int32()))
            if pc.sum(mask).as_py() != table.num_rows:  # (a filter copies every column)
                table = table.filter(mask)
        yield conform(table, want, f), meta, f


def conform(table: pa.Table, want: Sequence[str], f: Path) -> pa.Table:
    """``table`` projected to ``want`` in v1 types: columns an older version did not write
    become nulls; a column of another type is cast or rejected; a required column with nulls
    is rejected (the file was not written by a Hermes writer)."""
    full = arrow_schema()
    arrays = []
    for name in want:
        typ = full.field(name).type
        if name in table.column_names:
            col = table.column(name)
            if col.type != typ:
                try:
                    col = col.cast(typ)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    raise TraceFormatError(
                        f"column {name!r} has type {col.type}, expected {typ}",
                        path=f) from None
            if col.null_count and name in REQUIRED:
                raise TraceFormatError(f"required column {name!r} has {col.null_count} null "
                                       "value(s)", path=f,
                                       hint="re-create the trace with hermes") from None
            arrays.append(col)
        else:  # written by an older version: fill with nulls
            arrays.append(pa.nulls(table.num_rows, type=typ))
    return pa.Table.from_arrays(arrays, names=list(want))


def load_table(path: str | os.PathLike[str], columns: Sequence[str] | None = None,
               ranks: Iterable[int] | None = None, skip: Collection[str] = ()
               ) -> tuple[pa.Table, TraceMeta]:
    tables, metas = [], []
    for table, meta, _ in iter_tables(path, columns, ranks, skip):
        tables.append(table)
        metas.append(meta)
    if not metas:  # rank filter excluded everything
        want = list(columns) if columns is not None else list(COLUMN_NAMES)
        schema = arrow_schema()
        empty = pa.Table.from_arrays([pa.array([], schema.field(c).type) for c in want],
                                     names=want)
        return empty, read_meta(_files(path, skip)[0])
    return pa.concat_tables(tables), TraceMeta.merge(metas)


def table_to_pandas(table: pa.Table, destroy: bool = False) -> pd.DataFrame:
    """Events as pandas (dictionary columns as categoricals, nullable ints as ``Int64``/
    ``Int32``, required ints as numpy). ``destroy``: free the table's buffers column by column
    while converting (lower peak memory; ``table`` must not be used afterwards). Columns are
    kept as separate blocks (no consolidation copy)."""
    names = table.column_names
    # nullable ints holding nulls: made here (pandas' own conversion goes chunk by chunk and
    # takes twice as long on a 10M-event column); the rest by pyarrow
    masked = {n: table.column(n) for n in names if table.column(n).null_count and
              table.schema.field(n).type in _PANDAS_TYPES}
    if masked:
        table = table.drop_columns(list(masked))
    df = table.to_pandas(types_mapper=_PANDAS_TYPES.get, split_blocks=True,
                         self_destruct=destroy)
    for n, col in masked.items():
        df.insert(names.index(n), n, _masked_ints(col))
    del masked
    for name in _NON_NULL_INT & set(df.columns):  # required ints: plain numpy int64/int32
        col = df[name]
        # no nulls (checked on reading): the masked array's data is the column, no copy
        df[name] = col.array.to_numpy() if isinstance(col.dtype, pd.api.extensions.
                                                      ExtensionDtype) else col
    return df


def _masked_ints(col: pa.ChunkedArray) -> pd.api.extensions.ExtensionArray:
    """A nullable int column (int64 or int32) as pandas' ``Int64``/``Int32`` array, nulls
    masked (their values 0)."""
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    values = arr.fill_null(0).to_numpy(zero_copy_only=False)
    return pd.arrays.IntegerArray(values, arr.is_null().to_numpy(zero_copy_only=False))


def load(path: str | os.PathLike[str], columns: Sequence[str] | None = None,
         ranks: Iterable[int] | None = None, lazy_args: bool = False,
         skip: Collection[str] = ()) -> Trace:
    """Load a Hermes trace (file or per-rank directory) as a :class:`Trace`.

    ``columns`` projects (only those columns are read); ``ranks`` keeps only those ranks
    (per-rank files of other ranks are not opened beyond their footer). ``lazy_args``: a
    single file's ``args`` stay in the file, read on demand through
    :func:`hermes.trace.args.args_of` (the frame gets its ``_row`` column instead); a
    directory of several files loads them as usual. ``skip``: names of a directory's files to
    leave out, ones the caller knows cannot be read (``Analysis.missing_ranks``' files).
    """
    return reread(lambda: _load(path, columns, ranks, lazy_args, skip))


def _load(path: str | os.PathLike[str], columns: Sequence[str] | None,
          ranks: Iterable[int] | None, lazy_args: bool, skip: Collection[str]) -> Trace:
    files = _files(path, skip)
    if len(files) == 1 and (columns is None or len(columns)):
        df, meta = _load_file(files[0], columns, ranks, lazy_args)
        if df is not None:
            return Trace(events=df, meta=meta, path=Path(path))
    table, meta = load_table(path, columns, ranks, skip)
    return Trace(events=table_to_pandas(table, destroy=True), meta=meta, path=Path(path))


def _load_file(f: Path, columns: Sequence[str] | None, ranks: Iterable[int] | None,
               lazy_args: bool = False) -> tuple[pd.DataFrame | None, TraceMeta]:
    """One file loaded column by column: each column is read, rank-filtered, conformed and
    converted to pandas before the next is read, so the Arrow copy of the whole table never
    exists beside the DataFrame (peak memory about the DataFrame's size). The same frame as
    ``table_to_pandas(load_table(...))``; None when the footer's rank list excludes every
    wanted rank (the general path builds the empty frame)."""
    want = list(columns) if columns is not None else list(COLUMN_NAMES)
    unknown = [c for c in want if c not in COLUMN_NAMES]
    if unknown:
        raise TraceFormatError(f"unknown column(s) {', '.join(unknown)}",
                               hint=f"valid columns: {', '.join(COLUMN_NAMES)}")
    pf = open_parquet(f)
    meta = read_meta(f, pf)
    check_columns(f, pf.schema_arrow)
    rank_set = None if ranks is None else {int(r) for r in ranks}
    if rank_set is not None and meta.ranks and not rank_set.intersection(meta.ranks):
        return None, meta

    def read(name: str) -> pa.Table:
        try:
            return pf.read(columns=[name])
        except UNREADABLE as exc:
            raise row_data_error(exc, f) from None

    mask = None
    if rank_set is not None and not rank_set.issuperset(meta.ranks or ()):
        mask = pc.is_in(read("rank").column("rank"),
                        value_set=pa.array(sorted(rank_set), pa.int32()))
        if pc.sum(mask).as_py() == len(mask):
            mask = None
    nrows = pf.metadata.num_rows if mask is None else int(pc.sum(mask).as_py() or 0)
    names = set(pf.schema_arrow.names)
    full = arrow_schema()
    cols: dict[str, pd.Series] = {}
    lazy = lazy_args and "args" in names and "args" in want
    for name in want:
        if lazy and name == "args":
            continue
        if name in names:
            t = read(name)
            if mask is not None:
                t = t.filter(mask)
        else:  # written by an older version: nulls (conform's rule)
            t = pa.Table.from_arrays([pa.nulls(nrows, full.field(name).type)], names=[name])
        cols[name] = table_to_pandas(conform(t, [name], f), destroy=True)[name]
        del t
    if lazy:
        rows = np.arange(pf.metadata.num_rows) if mask is None else \
            np.flatnonzero(np.asarray(mask.to_numpy(), bool))
        # int32 while the file's row numbers fit (10M events: 40 MB less)
        cols[ROW] = pd.Series(rows.astype(np.int32 if pf.metadata.num_rows < 2**31
                                          else np.int64))
    df = pd.DataFrame(cols, copy=False)
    if lazy:
        df.attrs[SOURCE] = FileArgs(f)
    return df, meta
