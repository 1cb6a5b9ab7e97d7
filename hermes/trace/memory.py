"""An in-memory trace writer: the :class:`Trace` that ``TraceWriter`` + ``load`` would give, with
no file written or read.

``hermes analyze FILE.json.gz`` imports the file and analyzes it in one process; writing the
trace to Parquet and reading it back only to hand the events to the analysis is work the
analysis does not need. :class:`MemoryWriter` takes the same batches as
:class:`hermes.trace.writer.TraceWriter` (``write(columns)``, ``close(meta)``, ``abort()``) and
``trace`` is then exactly the frame ``hermes.trace.load`` gives of the file that writer would have
written: same columns, dtypes, values and categorical categories *in the same order*.

The order of a categorical's categories is what the Parquet round trip makes it (it decides
group order in the analyzers, so it must not change). The writer buffers batches and writes each
flush as row groups of ``row_group_rows`` rows; per row group and column, Parquet keeps the first
batch's Arrow dictionary whole (unused values included) and appends the values of the other
batches in order of first appearance; the reader unifies the row groups' dictionaries in order.
:func:`stored_categories` replays exactly that per distinct value, never per event.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from hermes.trace.arrowbuf import dictionary, valid
from hermes.trace.meta import TraceMeta
from hermes.trace.schema import COLUMNS, arrow_schema
from hermes.trace.writer import DEFAULT_ROW_GROUP_ROWS, BatchWriter

_DICT_COLUMNS = [c.name for c in COLUMNS if pa.types.is_dictionary(c.type)]


class MemoryWriter(BatchWriter):
    """``TraceWriter``'s interface, kept in memory; ``close`` builds :attr:`trace`."""

    def __init__(self, meta: TraceMeta | None = None,
                 row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, arrow: bool = False) -> None:
        self.meta = meta or TraceMeta()
        #: ``close`` leaves the trace as Arrow (:func:`from_table` makes it the Trace), so an
        #: import that hands it on (a forked one) never imports pandas
        self.arrow = arrow
        self._first_kv = self.meta.to_kv()  # what TraceWriter stores in the Arrow schema
        self.row_group_rows = max(int(row_group_rows), 1)
        self._buffer: list[pa.Table] = []
        #: row counts of the row groups TraceWriter would write, in order
        self._groups: list[int] = []
        self._buffered = 0
        self._ranks: set[int] = set()
        self.repairs: dict[str, int] = {}
        self.trace: Any = None

    def _flush(self) -> None:
        """TraceWriter's flush: the buffered rows as row groups of ``row_group_rows`` (the
        batches themselves stay in ``_buffer`` until :meth:`close`)."""
        full, rest = divmod(self._buffered, self.row_group_rows)
        self._groups += [self.row_group_rows] * full + ([rest] if rest else [])
        self._buffered = 0

    def close(self, meta: TraceMeta | None = None) -> Any:
        """The trace as ``hermes.trace.load`` would read it (also kept in :attr:`trace`); with
        ``arrow``, the Arrow table :func:`from_table` makes that trace of (the metadata in its
        schema, as in the file)."""
        if meta is not None:
            self.meta = meta
        self._flush()
        final = self.meta if self.meta.ranks else self.meta.with_(ranks=tuple(sorted(self._ranks)))
        if self.repairs:
            final = final.with_(extra={**final.extra, "repaired": dict(self.repairs)})
        kv = dict(self._first_kv)  # the file's key-value metadata wins over the schema's
        kv.update(final.to_kv())
        table = as_stored(self._buffer, self._groups).replace_schema_metadata(kv)
        self._buffer = []
        self.trace = table if self.arrow else from_table(table)
        return self.trace

    def abort(self) -> None:
        self._buffer = []
        self.trace = None


def from_table(table: pa.Table) -> Any:
    """The :class:`Trace` of a table :meth:`MemoryWriter.close` left as Arrow (its buffers are
    freed column by column while converting: ``table`` must not be used afterwards)."""
    from hermes.trace.reader import Trace, table_to_pandas

    kv = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    return Trace(events=table_to_pandas(table.replace_schema_metadata(None), destroy=True),
                 meta=TraceMeta.from_kv(kv))


def as_stored(tables: list[pa.Table], groups: list[int]) -> pa.Table:
    """``tables`` (v1 schema) as one table whose dictionary columns hold the dictionaries the
    Parquet round trip gives (:func:`stored_categories`), one chunk per column."""
    schema = arrow_schema()
    if not tables:
        return schema.empty_table()
    whole = pa.concat_tables(tables)
    arrays = []
    for name in schema.names:
        col = whole.column(name)
        if name in _DICT_COLUMNS:
            arrays.append(_recode(col, groups))
        else:
            arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=schema)


def stored_categories(col: pa.ChunkedArray, groups: list[int]) -> list[str]:
    """The dictionary a Parquet round trip gives ``col`` written as row groups of ``groups``
    rows: per row group the dictionary of its first chunk, whole, then the values the other
    chunks use in order of first appearance; row groups unified in order."""
    out: dict[str, None] = {}
    chunks = [c for c in col.chunks if len(c)]
    ci, off = 0, 0  # current chunk, and rows of it already in earlier row groups
    for size in groups:
        first = True
        left = size
        while left > 0 and ci < len(chunks):
            chunk = chunks[ci]
            take = min(left, len(chunk) - off)
            if first:
                out.update(dict.fromkeys(chunk.dictionary.to_pylist()))
                first = False
            else:
                out.update(dict.fromkeys(_used_in_order(chunk.slice(off, take))))
            left -= take
            off += take
            if off == len(chunk):
                ci, off = ci + 1, 0
    return list(out)


def _used_in_order(arr: pa.DictionaryArray) -> list[str]:
    """The dictionary values ``arr`` uses, in order of first appearance (nulls skipped)."""
    idx = _codes(arr)
    if arr.null_count:
        idx = idx[valid(arr)]
    if not len(idx):
        return []
    uniq, first = np.unique(idx, return_index=True)
    codes = uniq[np.argsort(first, kind="stable")]
    values = arr.dictionary.to_pylist()
    return [values[c] for c in codes.tolist()]


def _codes(arr: pa.DictionaryArray) -> np.ndarray:
    """The int32 indices of ``arr`` (any value under a null), zero-copy."""
    ind = arr.indices
    return np.frombuffer(ind.buffers()[1], np.int32, ind.offset + len(ind))[ind.offset:]




def _recode(col: pa.ChunkedArray, groups: list[int]) -> pa.DictionaryArray:
    """``col`` as one dictionary array over :func:`stored_categories`."""
    cats = stored_categories(col, groups)
    pos = {v: i for i, v in enumerate(cats)}
    codes: list[np.ndarray] = []
    valids: list[np.ndarray] = []
    nulls = col.null_count > 0
    for chunk in col.chunks:
        remap = np.array([pos.get(v, 0) for v in chunk.dictionary.to_pylist()], np.int32)
        idx = _codes(chunk)
        if not len(remap):
            codes.append(np.zeros(len(chunk), np.int32))
        elif chunk.null_count:  # any value may lie under a null: read valid rows only
            codes.append(remap[np.where(valid(chunk), idx, 0)])
        else:
            codes.append(remap[idx])
        if nulls:
            valids.append(valid(chunk))
    code = np.concatenate(codes) if codes else np.zeros(0, np.int32)
    mask = ~np.concatenate(valids) if nulls else None
    return dictionary(code, cats, mask)
