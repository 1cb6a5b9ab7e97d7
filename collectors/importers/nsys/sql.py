"""Reading an Nsight Systems export: which tables and columns it has, its strings, and its big
tables in chunks of rows as Arrow tables.

The export's schema differs between Nsight versions, so nothing is assumed: :class:`Export`
lists the tables and their columns once, and each reader asks for the columns it needs and
says what it skips.

Big tables (kernels, runtime calls: millions of rows) are streamed through ADBC's SQLite
driver, which turns rows into Arrow record batches in C (no Python object per value; ~5x
the standard library's cursor), ``CHUNK_ROWS`` rows at a time: memory is bounded by the
chunk, whatever the export's size. Small tables (processes, strings, enums) are read with
the standard library's ``sqlite3``. Both connections are read-only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hermes.collectors.importers.nsys.detect import connect
from hermes.errors import ImportFormatError

#: rows per chunk of a big table
CHUNK_ROWS = 128 * 1024


class Export:
    """One export: its tables (name -> column names, in table order) and its strings."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.con = connect(path)
            names = [r[0] for r in self.con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
            self.tables: dict[str, list[str]] = {
                t: [r[1] for r in self.con.execute(f"PRAGMA table_info({quote(t)})")]
                for t in names}
        except sqlite3.Error as exc:
            raise ImportFormatError(f"cannot read the SQLite export: {exc}", path=path,
                                    hint="the file is damaged or not an Nsight export"
                                    ) from None
        self._strings: tuple[np.ndarray, list[str]] | None = None
        self._adbc_con: Any = None

    def close(self) -> None:
        self.con.close()
        if self._adbc_con is not None:
            self._adbc_con.close()
            self._adbc_con = None

    def has(self, table: str, *columns: str) -> bool:
        cols = self.tables.get(table)
        return cols is not None and all(c in cols for c in columns)

    def missing(self, table: str, columns: Sequence[str]) -> list[str]:
        cols = self.tables.get(table, [])
        return [c for c in columns if c not in cols]

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        """A small query's rows (enum tables, processes, thread names, device info)."""
        try:
            return self.con.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise ImportFormatError(f"cannot read the export ({exc})", path=self.path,
                                    where=sql[:80]) from None

    # -- strings -------------------------------------------------------------------------
    def strings(self) -> tuple[np.ndarray, list[str]]:
        """``StringIds`` as (sorted ids, values in the same order)."""
        if self._strings is None:
            if self.has("StringIds", "id", "value"):
                rows = self.rows("SELECT id, value FROM StringIds ORDER BY id")
            else:
                rows = []
            ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
            values = [r[1] if isinstance(r[1], str) else str(r[1]) for r in rows]
            self._strings = (ids, values)
        return self._strings

    def string(self, sid: int | None) -> str | None:
        ids, values = self.strings()
        if sid is None or not len(ids):
            return None
        i = int(np.searchsorted(ids, sid))
        return values[i] if i < len(ids) and ids[i] == sid else None

    def string_codes(self, sid: np.ndarray) -> np.ndarray:
        """The index into ``strings()[1]`` of each id; -1 where an id is not in StringIds."""
        ids, _ = self.strings()
        if not len(ids):
            return np.full(len(sid), -1, np.int64)
        pos = np.minimum(np.searchsorted(ids, sid), len(ids) - 1)
        return np.where(ids[pos] == sid, pos, -1)

    def filled(self, table: str, columns: Sequence[str]) -> list[str]:
        """The ``columns`` of ``table`` that some row fills (one scan for all of them)."""
        present = [c for c in columns if self.has(table, c)]
        if not present:
            return []
        probe = ", ".join(f"max({quote(c)} IS NOT NULL)" for c in present)
        row = self.rows(f"SELECT {probe} FROM {quote(table)}")[0]
        return [c for c, hit in zip(present, row, strict=True) if hit]

    def size(self, table: str) -> int:
        """About how many rows ``table`` has, without counting them (its rowid span)."""
        lo, hi = self.rows(f"SELECT min(rowid), max(rowid) FROM {quote(table)}")[0]
        return 0 if lo is None else int(hi) - int(lo) + 1

    # -- big tables ----------------------------------------------------------------------
    def count(self, table: str) -> int:
        return int(self.rows(f"SELECT count(*) FROM {quote(table)}")[0][0])

    def chunks(self, table: str, exprs: dict[str, str], where: str = "",
               chunk_rows: int | None = None, source: str | None = None
               ) -> Iterator[pa.Table]:
        """``table``'s rows, ``chunk_rows`` at a time, as Arrow tables with one column per
        entry of ``exprs`` (name -> SQL expression: int64, or string where declared with
        :func:`text`). ``source``: a subquery to read instead of the table itself."""
        if not exprs:
            return
        chunk_rows = chunk_rows or CHUNK_ROWS
        # a text column is never NULL: ADBC's driver types a column by its first batch, and
        # one of NULLs reads as integers, so a later text would not fit ('' stands for none)
        cols = ", ".join((f"coalesce({sql_of(e)}, '')" if is_text(e) else sql_of(e)) +
                         f" AS {quote(n)}" for n, e in exprs.items())
        sql = f"SELECT {cols} FROM {source or quote(table)}" + \
            (f" WHERE {where}" if where else "")
        types = [pa.string() if is_text(e) else pa.int64() for e in exprs.values()]
        import adbc_driver_manager

        try:
            with self._adbc().cursor() as cur:
                cur.adbc_statement.set_options(
                    **{"adbc.sqlite.query.batch_rows": str(int(chunk_rows))})
                cur.execute(sql)
                reader = cur.fetch_record_batch()
                for i, b in enumerate(reader):
                    if b.num_rows:
                        yield self._typed(b, list(exprs), types, table, i * chunk_rows)
        except (adbc_driver_manager.Error, pa.ArrowException, OSError) as exc:
            # (a row the driver cannot convert surfaces from Arrow's stream reader)
            msg = " ".join(str(exc).split("query:")[0].split())[:200]
            raise ImportFormatError(f"cannot read {table} ({msg})", path=self.path,
                                    hint="the file is damaged or not an Nsight export"
                                    ) from None

    def _adbc(self) -> Any:
        if self._adbc_con is None:
            import adbc_driver_sqlite.dbapi

            uri = f"file:{self.path.resolve()}?mode=ro"
            self._adbc_con = adbc_driver_sqlite.dbapi.connect(uri)
        return self._adbc_con

    def _typed(self, b: pa.RecordBatch, names: list[str], types: list[pa.DataType],
               table: str, row: int) -> pa.Table:
        arrays = []
        for name, arr, typ in zip(names, b.columns, types, strict=True):
            if arr.type != typ:
                try:
                    arr = arr.cast(typ, safe=True)
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                    raise ImportFormatError(
                        f"{table} holds {arr.type} values where integers belong",
                        path=self.path, where=f"{name}, rows from {row}",
                        hint="the file is damaged") from None
            arrays.append(arr)
        return pa.Table.from_arrays(arrays, names=names)


#: marks an expression as text: ``text(expr)``
_TEXT = "\x00text:"


def text(expr: str) -> str:
    """Declare ``expr`` a text column for :meth:`Export.chunks`."""
    return _TEXT + expr


def is_text(expr: str) -> bool:
    return expr.startswith(_TEXT)


def sql_of(expr: str) -> str:
    return expr[len(_TEXT):] if is_text(expr) else expr


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
