"""Is a file an Nsight Systems SQLite export? Answered from its content, cheaply: the SQLite
header's magic, then the names of its tables (read through ``sqlite3`` in read-only mode). A
database is an Nsight export when it holds ``StringIds`` and at least one of the tables every
Nsight export version writes for a GPU or NVTX capture (``CUPTI_ACTIVITY_KIND_KERNEL``,
``NVTX_EVENTS``, ``TARGET_INFO_GPU``, ...). No file name or suffix is consulted.

A ``.nsys-rep`` report (Nsight's own binary format, undocumented) is recognized by its
suffix: the importer exports it with ``nsys`` first, or names the command to run.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SQLITE_MAGIC = b"SQLite format 3\x00"
#: tables of which an Nsight export holds at least one (beside ``StringIds``)
NSIGHT_TABLES = frozenset({
    "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
    "NVTX_EVENTS", "TARGET_INFO_GPU", "TARGET_INFO_CUDA_DEVICE", "TARGET_INFO_SESSION_START_TIME",
    "OSRT_API", "META_DATA_CAPTURE",
})


def is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def connect(path: Path, any_thread: bool = False) -> sqlite3.Connection:
    """A read-only connection (``mode=ro``: the export is never written, nor a journal);
    ``any_thread``: one a thread opens for itself, closed by another when the export is."""
    return sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True,
                           check_same_thread=not any_thread)


def table_names(path: Path) -> set[str]:
    """The tables of a SQLite file; empty when it is not one or cannot be read."""
    try:
        con = connect(path)
    except sqlite3.Error:
        return set()
    try:
        rows = con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    except sqlite3.Error:
        return set()
    finally:
        con.close()
    return {r[0] for r in rows}


def is_export(path: Path) -> bool:
    """A SQLite file holding Nsight Systems' tables."""
    if not path.is_file() or not is_sqlite(path):
        return False
    names = table_names(path)
    return "StringIds" in names and bool(names & NSIGHT_TABLES)


def detect(path: Path) -> bool:
    """An Nsight Systems SQLite export, or a report the importer exports first."""
    return is_export(path) or is_report(path)


def is_report(path: Path) -> bool:
    """An Nsight Systems report (``.nsys-rep``/``.qdrep``): by its suffix, since its container
    format is not documented; never a SQLite file."""
    return path.is_file() and path.suffix in (".nsys-rep", ".qdrep") and not is_sqlite(path)


def explain(path: Path) -> str | None:
    """A SQLite database that is not an Nsight export is named (a ``.sqlite`` of another
    tool is a common wrong guess)."""
    if path.is_file() and is_sqlite(path) and not is_export(path):
        return "a SQLite database without Nsight Systems' tables (StringIds, CUPTI_*, NVTX_*)"
    return None
