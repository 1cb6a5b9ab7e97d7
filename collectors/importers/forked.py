"""A profiler file imported into memory in a forked process, while this one loads the analysis.

``hermes analyze FILE.json.gz`` spends about as long importing pandas and the analyzers (~0.4 s)
as it does parsing a 200k-event Kineto file (~0.45 s), and neither needs the other: the parse
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

import contextlib
import functools
import gc
import importlib
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

#: set to "0" to import in this process (no fork)
ENV = "HERMES_FORKED_IMPORT"
_MAGIC = b"HERMES-ARROW\n"
#: what the child writes to its pipe once all of its output is in the file
_WRITTEN = b"\x01"


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return 1


def can_fork() -> bool:
    """Forking pays and is safe here: Linux, >= 2 usable CPUs, this thread alone, not
    turned off by :data:`ENV`."""
    if os.environ.get(ENV, "1") == "0" or not sys.platform.startswith("linux"):
        return False
    return threading.active_count() == 1 and _cpus() >= 2


class Pending:
    """A forked import under way; :meth:`result` waits for it, :meth:`cancel` ends it."""

    def __init__(self, pid: int, fd: int, ready: int = -1) -> None:
        self.pid = pid
        #: the child's output: a temporary file, removed from its folder at once (nothing is
        #: left behind however this process ends), read through this descriptor
        self.fd = fd
        #: a pipe's reading end: the child writes :data:`_WRITTEN` to it once all of its output
        #: is in the file, then exits; it reads as ended (EOF) at once if the child dies first.
        #: The trace is read on that byte, without waiting for the child's exit (freeing its
        #: memory: ~10 ms for a 200k-event trace's)
        self.ready = ready
        self._status: int | None = None  # the child's wait status, once :meth:`done` saw it end
        self._written = False  # the child said it wrote all of its output

    def result(self) -> Any:
        """The imported :class:`hermes.trace.Trace`, or None when the child failed (import in
        this process then: it gives the error, or the trace if the child was only killed)."""
        import pyarrow as pa

        from hermes.trace.memory import from_table

        table = None
        try:
            src = self.output()
            if src is not None:
                table = pa.ipc.open_stream(src).read_all()
        except (OSError, pa.ArrowInvalid):
            table = None
        return from_table(table) if table is not None else None

    def output(self, mapped: bool = True) -> Any:
        """Wait until the child has written all of its output, then its file, positioned after
        :data:`_MAGIC`: mapped (the buffers read from it stay mapped: no copy), or with
        ``mapped=False`` opened for reading (what is read is copied: memory bounded by what is
        held); None when the child ended without (its descriptors are closed either way)."""
        import pyarrow as pa

        try:
            if self._wait_written():
                path = f"/proc/self/fd/{self.fd}"
                src = pa.memory_map(path) if mapped else pa.OSFile(path)
                if src.read(len(_MAGIC)) == _MAGIC:
                    return src
        except (OSError, pa.ArrowInvalid):
            pass
        finally:
            self._close()
        return None

    def done(self) -> bool:
        """Whether the child has written its output or ended (without waiting for it)."""
        if not self.pid or self._written or self._status is not None:
            return True
        if self.ready >= 0:
            import select

            with contextlib.suppress(OSError, ValueError):
                if select.select([self.ready], [], [], 0)[0]:
                    return True
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, -1
        if pid:
            self._status = status
        return bool(pid)

    def cancel(self) -> None:
        """End the child if it still runs (the caller no longer needs its trace)."""
        if self.pid:
            # (once reaped, its pid may be another process's; once it has written all of
            # its output, it exits by itself)
            if self._status is None and not self._written:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, 9)
            self._reap()
        self._close()

    def _close(self) -> None:
        for name in ("fd", "ready"):
            fd = getattr(self, name)
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, -1)

    def _wait_written(self) -> bool:
        """Wait until the child has written all of its output (True) or ended without (False:
        it is reaped then). A child without the pipe is waited for: its exit code 0 says it."""
        if self.ready >= 0 and self.pid and self._status is None:
            try:
                got = os.read(self.ready, 1)
            except OSError:
                got = b""
            if got == _WRITTEN:
                self._written = True
                return True
        return self._reap() == 0

    def _reap(self) -> int:
        """Wait for the child to end: its exit code (negative: the signal that ended it)."""
        if not self.pid:
            return -1
        try:
            status = self._status if self._status is not None else os.waitpid(self.pid, 0)[1]
            code = os.waitstatus_to_exitcode(status) if status >= 0 else -1
        except ChildProcessError:
            code = -1
        self.pid = 0
        return code


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


def fork_child(body: Callable[[int, int], None]) -> Pending | None:
    """Fork a child that runs ``body(fd, written)``, which must end the process: ``fd`` is its
    output, a temporary file already removed from its folder (both processes hold it open);
    ``written``, a pipe to write :data:`_WRITTEN` to once all of the output is in the file
    (:func:`write_out` does both). None where no child could be made (no temporary file, no
    descriptor or process to spare): do the work in this process then. The child closes what
    it inherited of its own parent's (a child of a child: a helper of the forked import)."""
    global _held
    try:
        fd, path = tempfile.mkstemp(prefix="hermes-import-", suffix=".arrows")
    except OSError:  # no room or no right in the temporary folder
        return None
    os.unlink(path)
    try:
        ready, written = os.pipe()
    except OSError:  # no descriptor to spare
        os.close(fd)
        return None
    try:
        pid = os.fork()
    except OSError:  # no process to spare
        for f in (fd, ready, written):
            os.close(f)
        return None
    if pid == 0:  # the child: never returns
        os.close(ready)
        for f in _held:  # its parent's output and pipe: theirs to end, not this child's
            with contextlib.suppress(OSError):
                os.close(f)
        _held = (fd, written)
        try:
            body(fd, written)
        finally:
            os._exit(1)
    os.close(written)
    return Pending(pid, fd, ready)


#: in a forked child, its output and pipe (:func:`fork_child`)
_held: tuple[int, ...] = ()


def write_out(fd: int, written: int, write: Callable[[BinaryIO], None]) -> None:
    """A forked child's end: :data:`_MAGIC` and ``write(fh)`` to its output ``fd``, then, once
    all of it is written, :data:`_WRITTEN` on the pipe ``written`` (the parent reads it then)
    and exit 0; exit non-zero, having said nothing, on any failure. Nothing of the parent's
    (atexit handlers, buffered output) runs here."""
    code = 1
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_MAGIC)
            write(fh)
        if written >= 0:
            os.write(written, _WRITTEN)
        code = 0
    except BaseException:  # noqa: BLE001 - any failure: the parent does the work instead
        code = 1
    finally:
        os._exit(code)


def _run_child(imp: Any, src: Path, fd: int, written: int) -> None:
    _child(imp, src, fd, written)  # (looked up here: tests replace it)


def _child(imp: Any, src: Path, fd: int, written: int = -1) -> None:
    """Import ``src`` with ``imp`` into Arrow and write it to ``fd`` (a temporary file) as an
    Arrow IPC stream (:func:`write_out`). The importer may fork helper processes of its own
    to share the parse (the Kineto importer's ``halves``) where three or more CPUs are usable:
    on two, the parent's own imports take the other one (a helper measured no faster there:
    200k events, 1.074 vs 1.070 s, 10 alternated runs)."""
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
