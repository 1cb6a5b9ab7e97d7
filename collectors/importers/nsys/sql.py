"""Reading an Nsight Systems export: which tables and columns it has, its strings, and its big
tables in chunks of rows as Arrow tables.

The export's schema differs between Nsight versions, so nothing is assumed: :class:`Export`
lists the tables and their columns once, and each reader asks for the columns it needs and
says what it skips.

Big tables (kernels, runtime calls: millions of rows) are read in rowid ranges. SQLite itself
formats a chunk's rows as CSV text (``group_concat(printf(...))``: no Python object per value)
and Arrow's CSV reader parses it; both release the GIL, so a few threads, each with its own
read-only connection, read ranges side by side. Memory is bounded by the chunk size times
the threads, whatever the export's size. Values are integers or JSON text built by SQLite's
``printf``: a NULL integer becomes an empty CSV field, read as null.
"""

from __future__ import annotations

import io
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

from hermes.collectors.importers.nsys.detect import connect
from hermes.errors import ImportFormatError

#: rows per chunk of a big table (a chunk is ~100 bytes of CSV per row)
CHUNK_ROWS = 128 * 1024
#: threads reading chunks side by side (SQLite and Arrow's CSV parser release the GIL)
THREADS = max(1, min(4, os.cpu_count() or 1))


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
        self._local = threading.local()

    def close(self) -> None:
        self.con.close()

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

    # -- big tables ----------------------------------------------------------------------
    def count(self, table: str) -> int:
        return int(self.rows(f"SELECT count(*) FROM {quote(table)}")[0][0])

    def chunks(self, table: str, exprs: dict[str, str], where: str = "",
               chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.Table]:
        """``table``'s rows in rowid order, ``chunk_rows`` at a time, as Arrow tables with one
        column per entry of ``exprs`` (name -> SQL expression: an integer, or text that
        ``printf`` builds). Integer columns are int64, text columns strings."""
        if not exprs:
            return
        rng = self.rows(f"SELECT min(rowid), max(rowid) FROM {quote(table)}")[0]
        if rng[0] is None:
            return
        lo, hi = int(rng[0]), int(rng[1])
        starts = range(lo, hi + 1, chunk_rows)
        names = list(exprs)
        fields = ",".join(_csv_field(e) for e in exprs.values())
        fmt = ",".join("%s" if not _is_text(e) else '"%s"' for e in exprs.values())
        cond = f" AND ({where})" if where else ""
        sql = (f"SELECT group_concat(printf('{fmt}',{fields}), char(10)) "
               f"FROM {quote(table)} WHERE rowid >= ? AND rowid < ?{cond}")
        types = {n: (pa.string() if _is_text(e) else pa.int64()) for n, e in exprs.items()}
        with ThreadPoolExecutor(THREADS) as pool:
            pending: list[Future[pa.Table | None]] = []
            it = iter(starts)
            for s in it:
                pending.append(pool.submit(self._read, sql, s, s + chunk_rows, names, types))
                if len(pending) >= 2 * THREADS:
                    break
            while pending:
                table_ = pending.pop(0).result()
                nxt = next(it, None)
                if nxt is not None:
                    pending.append(pool.submit(self._read, sql, nxt, nxt + chunk_rows, names,
                                               types))
                if table_ is not None and table_.num_rows:
                    yield table_

    def _connection(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = connect(self.path)
        return con

    def _read(self, sql: str, lo: int, hi: int, names: list[str],
              types: dict[str, pa.DataType]) -> pa.Table | None:
        import pyarrow.csv as pcsv

        try:
            (text,) = self._connection().execute(sql, (lo, hi)).fetchone()
        except sqlite3.Error as exc:
            raise ImportFormatError(f"cannot read the export ({exc})", path=self.path,
                                    where=f"rows {lo}..{hi - 1}") from None
        if not text:
            return None
        try:
            return pcsv.read_csv(
                io.BytesIO(text.encode("utf-8", "surrogatepass")),
                read_options=pcsv.ReadOptions(column_names=names, block_size=1 << 26),
                parse_options=pcsv.ParseOptions(newlines_in_values=False),
                convert_options=pcsv.ConvertOptions(column_types=types,
                                                    strings_can_be_null=False))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            msg = " ".join(str(exc).split())[:160]
            raise ImportFormatError(f"a value is not what its column holds ({msg})",
                                    path=self.path, where=f"rows {lo}..{hi - 1}",
                                    hint="the file is damaged") from None


#: marks an expression as text (JSON built by printf): ``text(expr)``
_TEXT = "\x00text:"


def text(expr: str) -> str:
    """Declare ``expr`` a text column for :meth:`Export.chunks` (quoted in the CSV)."""
    return _TEXT + expr


def _is_text(expr: str) -> bool:
    return expr.startswith(_TEXT)


def _csv_field(expr: str) -> str:
    if _is_text(expr):
        # CSV quoting: double quotes doubled; a newline would end the row: replaced
        inner = expr[len(_TEXT):]
        return f"replace(replace({inner}, '\"', '\"\"'), char(10), ' ')"
    return expr


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
