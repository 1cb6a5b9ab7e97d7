"""A forked child that does some work and hands its output back through a file.

:func:`fork_child` forks; the child runs a body that ends with :func:`write_out`: a magic
line and its output, written to a temporary file already removed from its folder (both
processes hold it open, so nothing is left behind however they end), then one byte on a pipe
once all of it is written. :class:`Pending` is the parent's end: :meth:`Pending.output` waits
for that byte (not for the child's exit, which frees its memory meanwhile) and maps or opens the
file; a child that fails says nothing and exits non-zero, and the parent then does the work
itself. Used by the forked import of ``hermes analyze`` (``forked``) and the Kineto importer's
helper for a big file's second half (``kineto.halves``). Imports nothing of the importers: both
import it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from typing import Any, BinaryIO


def usable_cpus() -> int:
    """The CPUs this process may run on (1 where the platform does not say)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return 1


#: the first line of a child's output (what follows is the child's: Arrow IPC here)
MAGIC = b"HERMES-ARROW\n"
#: what the child writes to its pipe once all of its output is in the file
_WRITTEN = b"\x01"


class Pending:
    """A forked child's work under way: :meth:`output` waits for its output (:meth:`result`:
    the forked import's trace), :meth:`done` tells without waiting, :meth:`cancel` ends it."""

    def __init__(self, pid: int, fd: int, ready: int = -1) -> None:
        self.pid = pid
        #: the child's output: a temporary file, removed from its folder at once (nothing is
        #: left behind however this process ends), read through this descriptor
        self.fd = fd
        #: a pipe's reading end: the child writes :data:`_WRITTEN` to it once all of its output
        #: is in the file, then exits; it reads as ended (EOF) at once if the child dies first.
        #: The trace is read on that byte, without waiting for the child's exit (freeing its
        #: memory)
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
        :data:`MAGIC`: mapped (the buffers read from it stay mapped: no copy), or with
        ``mapped=False`` opened for reading (what is read is copied: memory bounded by what is
        held); None when the child ended without (its descriptors are closed either way)."""
        import pyarrow as pa

        try:
            if self._wait_written():
                path = f"/proc/self/fd/{self.fd}"
                src = pa.memory_map(path) if mapped else pa.OSFile(path)
                if src.read(len(MAGIC)) == MAGIC:
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
    """A forked child's end: :data:`MAGIC` and ``write(fh)`` to its output ``fd``, then, once
    all of it is written, :data:`_WRITTEN` on the pipe ``written`` (the parent reads it then)
    and exit 0; exit non-zero, having said nothing, on any failure. Nothing of the parent's
    (atexit handlers, buffered output) runs here."""
    code = 1
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC)
            write(fh)
        if written >= 0:
            os.write(written, _WRITTEN)
        code = 0
    except BaseException:  # noqa: BLE001 - any failure: the parent does the work instead
        code = 1
    finally:
        os._exit(code)
