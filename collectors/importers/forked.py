"""A profiler file imported into memory in a forked process, while this one loads the analysis.

``hermes analyze FILE.json.gz`` spends about as long importing pandas and the analyzers as it
does parsing a 200k-event Kineto file (docs/benchmarks.md), and neither needs the other: the parse
needs numpy, pyarrow and msgspec only. :func:`start` forks a child that imports the file into an
Arrow table (``MemoryWriter(arrow=True)``: no pandas) and writes it to a temporary file as Arrow
IPC; the parent goes on with its imports on the other core, then :meth:`Pending.result` waits for
the child to say on a pipe that all of it is written (not for the child's exit, which frees its
memory meanwhile), maps the file (no copy, no pipe to drain while the child waits on it) and
makes the table the :class:`hermes.trace.Trace` an in-process import gives (same frame, same
categories, same metadata: ``hermes.trace.memory.from_table``). The file is removed from its
folder as soon as it is made (both processes hold it open), so nothing is left behind however
they end.

The child reports nothing but its table (and the one byte saying it is written). Whatever goes
wrong in it (a malformed file, a crash, a kill) ends it with a non-zero status before that byte,
and :meth:`Pending.result` returns None: the caller then
imports in this process, which raises the one-line error the file deserves, exactly as without
the fork. The modules the import needs (numpy, pyarrow, the importer's) are imported before the
fork, once for both processes. :func:`start` forks only where that is safe and can pay: Linux,
two or more usable CPUs, no other thread in this process (a fork copies only the calling
thread), an importer that imports into memory; ``HERMES_FORKED_IMPORT=0`` turns it off.
"""

from __future__ import annotations

import functools
import gc
import importlib
import os
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO

from hermes.collectors.importers.child import (  # noqa: F401 - MAGIC: what tests write
    MAGIC,
    Pending,
    fork_child,
    write_out,
)
from hermes.collectors.importers.child import usable_cpus as _cpus  # (tests replace it here)

#: set to "0" to import in this process (no fork)
ENV = "HERMES_FORKED_IMPORT"


def can_fork() -> bool:
    """Forking pays and is safe here: Linux, >= 2 usable CPUs, this thread alone, not
    turned off by :data:`ENV`."""
    if os.environ.get(ENV, "1") == "0" or not sys.platform.startswith("linux"):
        return False
    return threading.active_count() == 1 and _cpus() >= 2


#: an import started before the command line was read (``hermes.commands._launch``): the
#: file's (device, inode) and the child, until :func:`start` of the same file takes it
_early: tuple[tuple[int, int], Pending] | None = None


def _file_id(src: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(src)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def start(src: Path, early: bool = False) -> Pending | None:
    """Begin importing profiler file ``src`` into memory in a forked child; None where that is
    not done (:func:`can_fork`, or no importer of ``src`` imports into memory): import it in
    this process then. ``early``: started before the command line is fully read; kept for the
    next :func:`start` of the same file, which returns it (one of another file is ended:
    :func:`cancel_early`)."""
    global _early
    from hermes.collectors import importers

    if _early is not None and not early:
        kept = _early
        if kept[0] == _file_id(src):
            _early = None
            return kept[1]
        cancel_early()
    if not can_fork() or not src.is_file():
        return None
    imp = importers.detect(src)
    if imp is None or not imp.in_memory:
        return None
    imp = importers.get(imp.name)
    for mod in ("pyarrow", "pyarrow.ipc", *imp.modules):  # both processes need them: once
        importlib.import_module(mod)
    try:
        imp.prepare()
    except Exception:  # noqa: BLE001 - each process meets it again where it reports it
        pass
    # what lives now (the modules) moves out of the collector's reach: a collection in either
    # process would otherwise write to every object's header, copying each page both share
    gc.freeze()
    pending = fork_child(functools.partial(_run_child, imp, src))
    if pending is None:
        return None
    if early:
        ident = _file_id(src)
        if ident is None:  # gone meanwhile: the child fails, nothing to keep
            pending.cancel()
            return None
        cancel_early()
        _early = (ident, pending)
    return pending


def cancel_early() -> None:
    """End an import started early that no command took (the command line asked for
    something else, or failed before the import was needed)."""
    global _early
    kept, _early = _early, None
    if kept is not None:
        kept[1].cancel()


def _run_child(imp: Any, src: Path, fd: int, written: int) -> None:
    _child(imp, src, fd, written)  # (looked up here: tests replace it)


def _child(imp: Any, src: Path, fd: int, written: int = -1) -> None:
    """Import ``src`` with ``imp`` into Arrow and write it to ``fd`` (a temporary file) as an
    Arrow IPC stream (:func:`write_out`). The importer may fork helper processes of its own
    to share the parse (the Kineto importer's ``halves``) where three or more CPUs are usable:
    on two, the parent's own imports take the other one (a helper measured no faster there:
    docs/benchmarks.md)."""
    gc.enable()  # off in a console run while its modules load (``commands._util.hold_gc``)
    options: dict[str, Any] = {"in_memory": "arrow"}
    if _cpus() < 3:  # the parent loads the analysis on the other CPU meanwhile
        options["helpers"] = 0

    def write(fh: BinaryIO) -> None:
        import pyarrow as pa

        table = imp.run([src], src.with_name(src.name + ".parquet"), options).trace
        with pa.ipc.new_stream(fh, table.schema) as stream:
            stream.write_table(table)

    write_out(fd, written, write)
