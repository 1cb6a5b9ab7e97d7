"""Reading an Nsight Systems export: which tables and columns it has, its strings, and its big
tables in chunks of rows as Arrow tables.

The export's schema differs between Nsight versions, so nothing is assumed: :class:`Export`
lists the tables and their columns once, and each reader asks for the columns it needs and
says what it skips.

Big tables (kernels, runtime calls, NVTX: millions of rows) are streamed through the
compiled reader ``_scan`` (``_scan.c``: ``sqlite3_step`` into Arrow-shaped buffers, every
column's type given, the GIL released, so the next chunk is read while the importer maps
this one), ``CHUNK_ROWS`` rows at a time: memory is bounded by the chunk, whatever the
export's size. Where ``_scan`` was not built (no C compiler or no SQLite header) ADBC's
SQLite driver gives the same chunks, slower. Small tables (processes, strings, enums) are
read with the standard library's ``sqlite3``. Every connection is read-only.
"""

from __future__ import annotations

import functools
import queue
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hermes.collectors.importers.nsys.detect import connect
from hermes.errors import ImportFormatError


@functools.cache
def scanner() -> Any:
    """The compiled reader (``_scan``, built by setup.py), None where it was not built: ADBC's
    driver reads instead. (Imported here, not at the top: the package imports this
    module.)"""
    try:
        from hermes.collectors.importers.nsys import _scan
    except ImportError:  # a build without a C compiler or SQLite's header
        return None
    return _scan


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
        self._lock = threading.Lock()
        self._own = threading.get_ident()
        self._cons: dict[int, sqlite3.Connection] = {self._own: self.con}
        self._readers: list[ReadAhead] = []

    def close(self) -> None:
        for reader in self._readers:
            reader.close()
        self._readers.clear()
        with self._lock:
            for con in self._cons.values():
                con.close()
            self._cons.clear()
        if self._adbc_con is not None:
            self._adbc_con.close()
            self._adbc_con = None

    def _con(self) -> sqlite3.Connection:
        """This thread's connection (SQLite serializes the statements of one connection;
        the importer's first queries run on threads of their own, each on its own)."""
        me = threading.get_ident()
        with self._lock:
            con = self._cons.get(me)
        if con is None:
            con = connect(self.path, any_thread=True)
            with self._lock:
                self._cons[me] = con
        return con

    def has(self, table: str, *columns: str) -> bool:
        cols = self.tables.get(table)
        return cols is not None and all(c in cols for c in columns)

    def missing(self, table: str, columns: Sequence[str]) -> list[str]:
        cols = self.tables.get(table, [])
        return [c for c in columns if c not in cols]

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple]:
        """A small query's rows (enum tables, processes, thread names, device info)."""
        try:
            return self._con().execute(sql, params).fetchall()
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
        """About how many rows ``table`` has, without counting them (its rowid span; each
        bound alone, so SQLite reads it off the b-tree's ends instead of scanning)."""
        t = quote(table)
        lo, hi = self.rows(f"SELECT (SELECT min(rowid) FROM {t}), (SELECT max(rowid) FROM {t})"
                           )[0]
        return 0 if lo is None else int(hi) - int(lo) + 1

    # -- big tables ----------------------------------------------------------------------
    def count(self, table: str) -> int:
        return int(self.rows(f"SELECT count(*) FROM {quote(table)}")[0][0])

    def chunks(self, table: str, exprs: dict[str, str], where: str = "",
               chunk_rows: int | None = None, source: str | None = None
               ) -> Iterator[pa.Table]:
        """``table``'s rows, ``chunk_rows`` at a time, as Arrow tables with one column per
        entry of ``exprs`` (name -> SQL expression: int64, or string where declared with
        :func:`text`). ``source``: a subquery to read instead of the table itself.

        The reading starts at once, on a thread of its own (in C, the GIL released), and
        goes on while the caller works: at most ``READ_AHEAD`` chunks wait, so memory stays
        bounded by the chunk size. ``close`` stops what is still reading."""
        if not exprs:
            return iter(())
        chunk_rows = chunk_rows or CHUNK_ROWS
        # a text column is never NULL ('' stands for none): ADBC's driver types a column by
        # its first batch, and one of NULLs reads as integers, so a later text would not fit
        cols = ", ".join((f"coalesce({sql_of(e)}, '')" if is_text(e) else sql_of(e)) +
                         f" AS {quote(n)}" for n, e in exprs.items())
        sql = f"SELECT {cols} FROM {source or quote(table)}" + \
            (f" WHERE {where}" if where else "")
        names = list(exprs)
        texts = [is_text(e) for e in exprs.values()]
        if scanner() is None:
            return self._adbc_chunks(sql, names, texts, table, chunk_rows)
        # an expression read under several names (a column and its args key) is read once
        distinct: dict[str, int] = {}
        of = [distinct.setdefault(e, len(distinct)) for e in exprs.values()]
        sql = "SELECT " + ", ".join(
            (f"coalesce({sql_of(e)}, '')" if is_text(e) else sql_of(e)) + f" AS c{i}"
            for e, i in distinct.items()) + f" FROM {source or quote(table)}" + \
            (f" WHERE {where}" if where else "")
        reader = ReadAhead(self._scan_chunks(sql, names, of, [is_text(e) for e in distinct],
                                             table, chunk_rows))
        self._readers.append(reader)
        return reader

    def _scan_chunks(self, sql: str, names: list[str], of: list[int], texts: list[bool],
                     table: str, chunk_rows: int) -> Iterator[pa.Table]:
        """The chunks of ``sql``'s columns (``texts``: which are text), each name taking
        column ``of[i]``."""
        scan_mod = scanner()
        try:
            scan = scan_mod.Scan(str(self.path.resolve()), sql,
                              "".join("t" if t else "i" for t in texts))
        except scan_mod.ScanError as exc:
            raise ImportFormatError(f"cannot read {table} ({exc})", path=self.path,
                                    hint="the file is damaged or not an Nsight export"
                                    ) from None
        try:
            while True:
                try:
                    got = scan.fetch(chunk_rows)
                except scan_mod.ScanError as exc:
                    what, row, col = exc.args
                    if col < 0:
                        raise ImportFormatError(
                            f"cannot read {table} ({what})", path=self.path,
                            where=f"row {row + 1:,}",
                            hint="the file is damaged or not an Nsight export") from None
                    raise ImportFormatError(
                        f"{table} holds {what} values where integers belong", path=self.path,
                        where=f"{names[of.index(col)]}, row {row + 1:,}",
                        hint="the file is damaged"
                    ) from None
                if got is None:
                    return
                n, bufs = got
                arrays = [_text_array(n, *b) if t else _int_array(n, *b)
                          for b, t in zip(bufs, texts, strict=True)]
                yield pa.Table.from_arrays([arrays[i] for i in of], names=names)
        finally:
            scan.close()

    def _adbc_chunks(self, sql: str, names: list[str], texts: list[bool], table: str,
                     chunk_rows: int) -> Iterator[pa.Table]:
        """The same chunks through ADBC's SQLite driver, where ``scanner`` (``_scan``) was
        not built."""
        import adbc_driver_manager

        types = [pa.string() if t else pa.int64() for t in texts]
        try:
            with self._adbc().cursor() as cur:
                cur.adbc_statement.set_options(
                    **{"adbc.sqlite.query.batch_rows": str(int(chunk_rows))})
                cur.execute(sql)
                reader = cur.fetch_record_batch()
                for i, b in enumerate(reader):
                    if b.num_rows:
                        yield self._typed(b, names, types, table, i * chunk_rows)
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
                        path=self.path, where=f"{name}, rows from {row + 1:,}",
                        hint="the file is damaged") from None
            arrays.append(arr)
        return pa.Table.from_arrays(arrays, names=names)


#: chunks read ahead of the one being worked on
READ_AHEAD = 2


class ReadAhead:
    """The chunks of ``chunks``, produced on a thread of its own (started at once) up to
    ``READ_AHEAD`` ahead of the consumer; an error there is raised to the consumer, at the
    chunk where it stopped; ``close`` (or the end) stops the thread."""

    def __init__(self, chunks: Iterator[pa.Table]) -> None:
        self._chunks = chunks
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(READ_AHEAD)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._produce, name="hermes-nsys-read",
                                        daemon=True)
        self._thread.start()

    def _put(self, item: tuple[str, Any]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        item: tuple[str, Any] = ("end", None)
        try:
            for chunk in self._chunks:
                if not self._put(("chunk", chunk)):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            item = ("error", exc)
        finally:
            self._chunks.close()  # type: ignore[attr-defined]
        self._put(item)

    def __iter__(self) -> ReadAhead:
        return self

    def __next__(self) -> pa.Table:
        if self._done:
            raise StopIteration
        what, value = self._queue.get()
        if what == "chunk":
            return value
        self.close()
        if what == "error":
            raise value
        raise StopIteration

    def close(self) -> None:
        self._done = True
        self._stop.set()
        self._thread.join()


def _int_array(n: int, values: bytes, validity: bytes | None) -> pa.Array:
    return pa.Array.from_buffers(pa.int64(), n, [
        None if validity is None else pa.py_buffer(validity), pa.py_buffer(values)])


def _text_array(n: int, offsets: bytes, data: bytes, validity: bytes | None,
                bad: int) -> pa.Array:
    bufs = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(offsets),
            pa.py_buffer(data)]
    if bad:  # bytes that are not UTF-8 (SQLite stores what it is given): replaced, kept
        raw = pa.Array.from_buffers(pa.large_binary(), n, bufs)
        return pa.array([None if b is None else b.decode("utf-8", "replace")
                         for b in raw.to_pylist()], pa.string())
    return pa.Array.from_buffers(pa.large_string(), n, bufs).cast(pa.string())


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
