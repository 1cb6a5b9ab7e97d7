"""Events' ``args`` on demand: the one accessor analyzers read the args column through.

The ``args`` column (free-form JSON text) is most of a loaded trace's memory (a 1 GB Kineto trace:
477 MiB of its 0.70 GiB Arrow table) while the analyzers read it for a few kinds of rows only.
``hermes.trace.load(path, lazy_args=True)`` (what the analysis executor uses) leaves it in the
Parquet file: the frame gets an integer column :data:`ROW` (each event's row in the file) and its
``attrs`` a :class:`FileArgs` that reads the rows asked for, one row group at a time.

:func:`args_of` is the same call for both kinds of frame: an in-memory trace (small files, the
emulator, tests) keeps its ``args`` column and gets the same values, dtype and index back.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

#: column of a lazily loaded frame: each event's row in its Parquet file
ROW = "_row"
#: key of the frame's ``attrs`` holding the :class:`FileArgs` its rows come from
SOURCE = "hermes.args"
#: decoded row groups a :class:`FileArgs` keeps for the next analyzer's read (bytes of Arrow
#: strings; the first groups read are kept, later ones read each time: analyzers scan the
#: groups in order, where dropping the oldest would make every read a miss)
CACHE_BYTES = 64 * 2**20


class FileArgs:
    """The ``args`` column of one Parquet file, read by row number (row groups that hold none
    of the rows asked for are not read; up to :data:`CACHE_BYTES` of decoded row groups are
    kept, so the analyzers of one rank that read the same groups decode them once). Pickles as
    its path; pandas' attrs propagation (a deep copy per operation) shares it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._pf: Any = None
        self._starts: np.ndarray | None = None
        self._kept: dict[int, pa.ChunkedArray] = {}
        self._kept_bytes = 0
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return FileArgs, (str(self.path),)

    def __deepcopy__(self, memo: dict[int, Any]) -> FileArgs:
        return self

    def _file(self) -> Any:
        with self._lock:  # (two analyzers' threads may open it at once: _pf set last)
            if self._pf is None:
                import pyarrow.parquet as pq

                pf = pq.ParquetFile(self.path)
                md = pf.metadata
                sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
                self._starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
                self._pf = pf
            return self._pf

    def _args(self, pf: Any, g: int) -> pa.ChunkedArray:
        """Row group ``g``'s args as strings, from the kept groups or read (and kept while they
        fit in :data:`CACHE_BYTES`); a page that cannot be read (or args of a type that is no
        text) is the file's TraceFormatError, naming it."""
        with self._lock:  # one reader of the file at a time: a group is decoded once
            col = self._kept.get(g)
            if col is None:
                col = self._read(pf, g)
                if self._kept_bytes + col.nbytes <= CACHE_BYTES:
                    self._kept[g] = col
                    self._kept_bytes += col.nbytes
            return col

    def _read(self, pf: Any, g: int) -> pa.ChunkedArray:
        """Row group ``g``'s args read from the file and cast to strings."""
        from hermes.errors import TraceFormatError
        from hermes.trace.unreadable import UNREADABLE, row_data_error

        try:
            col = pf.read_row_group(g, columns=["args"]).column(0)
        except UNREADABLE as exc:
            raise row_data_error(exc, self.path) from None
        try:
            return col if col.type == pa.string() else col.cast(pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            raise TraceFormatError(f"column 'args' has type {col.type}, expected string",
                                   path=self.path, hint="re-create the trace with hermes"
                                   ) from None

    def take(self, rows: np.ndarray) -> pa.Array:
        """The args (Arrow strings) of file rows ``rows``, in that order."""
        rows = np.asarray(rows, np.int64)
        pf = self._file()
        assert self._starts is not None
        order = np.argsort(rows, kind="stable")
        srt = rows[order]
        cut = np.searchsorted(srt, self._starts)
        pieces = []
        for g in range(len(self._starts) - 1):
            lo, hi = cut[g], cut[g + 1]
            if lo == hi:
                continue
            col = self._args(pf, g)
            pieces.append(col.take(pa.array(srt[lo:hi] - self._starts[g])).combine_chunks())
            del col
        out = pa.concat_arrays(pieces) if pieces else pa.array([], pa.string())
        if srt.size and not (np.diff(rows) >= 0).all():  # back to the order asked for
            inv = np.empty_like(order)
            inv[order] = np.arange(order.size)
            out = out.take(pa.array(inv))
        return out


def has_args(events: pd.DataFrame) -> bool:
    """The frame has args to read: its own column or a file's."""
    return "args" in events.columns or (ROW in events.columns and SOURCE in events.attrs)


def args_of(events: pd.DataFrame, rows: Any = None) -> pd.Series:
    """The ``args`` of ``events``' rows ``rows`` (a boolean mask or positions; None: all),
    indexed by those rows' labels: ``events["args"]`` taken by position when the frame holds
    the column, else read from the frame's file (pyarrow-backed strings, the dtype the column
    has when loaded). All nulls when the frame has no args."""
    pos = np.arange(len(events)) if rows is None else np.asarray(rows)
    if pos.dtype == bool:
        pos = np.flatnonzero(pos)
    index = events.index[pos]
    if "args" in events.columns:
        return events["args"].iloc[pos]
    src = events.attrs.get(SOURCE)
    if src is None or ROW not in events.columns:
        return pd.Series(np.full(pos.size, None, dtype=object), index=index, dtype=object)
    got = src.take(events[ROW].to_numpy(np.int64)[pos])
    # (what the reader's table_to_pandas makes of a string column)
    out = pa.table({"args": got}).to_pandas(split_blocks=True, self_destruct=True)["args"]
    out.index = index
    return out
