"""Helpers shared by CLI commands: progress bars, JSON output, safe file output."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hermes.errors import OutputError, UsageError


def is_tty() -> bool:
    return sys.stderr.isatty() and os.environ.get("HERMES_NO_PROGRESS") is None


@contextlib.contextmanager
def progress(description: str, total: float | None = None, thread: bool = True
             ) -> Iterator[Any]:
    """A progress bar on stderr when it is a terminal; silent when piped.

    Yields an object with ``advance(n)`` and ``update(completed=...)``. ``thread=False``: no
    refreshing thread (the bar is drawn on updates, at most 10 times a second), for work that
    updates it often and may fork a helper process meanwhile (a fork copies only the calling
    thread, so the Kineto importer forks none while another thread runs: ``kineto.halves``).
    """
    if not is_tty():
        yield _NoProgress()
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    cols = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn()]
    with Progress(*cols, transient=True, console=_stderr_console(),
                  auto_refresh=thread) as prog:
        task = prog.add_task(description, total=total)
        yield _RichProgress(prog, task, refresh=not thread)


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


class _NoProgress:
    def advance(self, n: float = 1) -> None:
        pass

    def update(self, **kwargs: Any) -> None:
        pass


class _RichProgress:
    def __init__(self, prog: Any, task: Any, refresh: bool = False) -> None:
        self.prog, self.task = prog, task
        self._refresh = refresh  # no refreshing thread: draw on updates
        self._drawn = 0.0

    def advance(self, n: float = 1) -> None:
        self.prog.advance(self.task, n)
        self._draw()

    def update(self, **kwargs: Any) -> None:
        self.prog.update(self.task, **kwargs)
        self._draw()

    def _draw(self) -> None:
        if self._refresh and (now := time.monotonic()) - self._drawn >= 0.1:
            self._drawn = now
            self.prog.refresh()


def check_output_path(out: Path, inputs: Iterable[Path] = (), flag: str = "--out",
                      file_only: bool = False) -> None:
    """Fail early (exit 2) when ``out`` cannot be written or would destroy an input.

    Refused: a missing or unwritable parent, a directory where a file is written
    (``file_only``, or a name with a suffix), and any output that resolves to one of
    ``inputs`` (same file through symlinks or hard links), lies inside an input directory or
    contains an input (replacing the directory would delete it). Every command with an output
    calls this one helper, so no command can replace the data it reads.
    """
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.exists():
        raise OutputError("output directory does not exist", path=parent,
                          hint="create it first or choose another --out")
    if not parent.is_dir():
        raise OutputError("output's parent is not a directory", path=parent, where=flag)
    if not os.access(parent, os.W_OK):
        raise OutputError("output directory is not writable", path=parent)
    if out.exists() and not (out.is_file() or out.is_dir()):  # /dev/full, a FIFO, a socket
        raise OutputError("output path is a device, FIFO or socket; an atomic write would "
                          "replace it", path=out, where=flag, hint="write to a regular file")
    if out.is_dir() and (out.suffix or file_only):
        raise OutputError("output path is a directory", path=out, where=flag,
                          hint="name a file, or remove the directory")
    refuse_input_overlap(out, inputs, flag)


def refuse_input_overlap(out: Path, inputs: Iterable[Path], flag: str = "--out") -> None:
    """Refuse an output that is, holds or lies inside one of ``inputs``."""
    target = Path(os.path.realpath(out))
    for src in inputs:
        real = Path(os.path.realpath(src))
        same = target == real or _samefile(out, src)
        if same or target in real.parents or (real.is_dir() and real in target.parents):
            what = "is" if same else ("contains" if target in real.parents else "lies inside")
            raise UsageError(f"output would overwrite an input: it {what} "
                             f"{shown(src)!r}", path=out, where=flag,
                             hint="choose another output path")


def _samefile(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def write_text_atomic(path: Path, text: str) -> None:
    """Write a text file under a temporary name, then rename it into place.

    Any OS failure (disk full, file too large, permission denied, the directory removed
    meanwhile) is one :class:`OutputError`; the temp file is removed and a previous file at
    ``path`` is left as it was.
    """
    check_output_path(path)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                                   dir=path.parent or ".")
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(text)
        from hermes.trace.writer import publish  # normal permissions, then rename
        publish(Path(tmp), path)
    except OSError as exc:
        raise os_error(exc, path) from None
    finally:
        if tmp is not None and os.path.lexists(tmp):
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def os_error(exc: OSError, path: Path) -> OutputError:
    """An OS failure while writing ``path`` as one line: what happened, nothing left behind."""
    reason = exc.strerror or type(exc).__name__
    return OutputError(f"cannot write: {reason}; nothing was written and any previous file "
                       "is unchanged", path=path, hint="free space, fix permissions or choose "
                                                       "another --out")


def shown(path: object) -> str:
    """A path for a message: bytes of a non-UTF-8 name escaped, never an encoding error."""
    return os.fsdecode(str(path)).encode("utf-8", "backslashreplace").decode("utf-8")


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"


#: Profiler files up to this many bytes of JSON are imported in memory (:func:`hermes_source`);
#: bigger ones go through a temporary Parquet, whose events are let go once analyzed.
IN_MEMORY_MAX_BYTES = 256 * 2**20


def json_bytes(src: Path) -> int:
    """About how many bytes of text ``src`` holds: its size, or for a ``.gz`` the size its
    trailer records (modulo 4 GiB) but at least 4x the compressed size (JSON text compresses
    far more than 4x, so a wrapped trailer still reads as big)."""
    size = src.stat().st_size
    if src.suffix != ".gz" or size < 18:
        return size
    try:
        with open(src, "rb") as fh:
            fh.seek(-4, os.SEEK_END)
            isize = int.from_bytes(fh.read(4), "little")
    except OSError:
        return 4 * size
    return max(isize, 4 * size)


def in_memory_source(src: Path, save: Path | None = None) -> bool:
    """Whether :func:`hermes_source` imports ``src`` into memory (when an importer can)."""
    return save is None and src.is_file() and src.suffix != ".parquet" \
        and json_bytes(src) <= IN_MEMORY_MAX_BYTES


#: whether :func:`hold_gc` turned the garbage collector off (and :func:`release_gc` has not
#: turned it back on)
_gc_held = False


def hold_gc() -> None:
    """Turn the cyclic garbage collector off while a console run loads its modules
    (``hermes.commands._launch``); a no-op where it is off already (the caller's choice)."""
    global _gc_held
    if gc.isenabled():
        gc.disable()
        _gc_held = True


def release_gc() -> None:
    """Turn the collector :func:`hold_gc` turned off back on, the objects made until now
    frozen first (``gc.freeze``: never traversed again; the modules' objects live until exit).
    A no-op unless :func:`hold_gc` turned it off."""
    global _gc_held
    if _gc_held:
        _gc_held = False
        gc.freeze()
        gc.enable()


#: pyarrow's choice of allocator (``jemalloc``, ``mimalloc``, ``system``), read once
ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


def use_system_allocator() -> None:
    """Have pyarrow allocate from the C library's malloc (its ``system`` pool) in this process
    and the children it forks, instead of its own mimalloc arenas, unless the user chose with
    ``ARROW_DEFAULT_MEMORY_POOL``. Arrow buffers then come from the same heap as numpy's and
    pandas', which reuses what the other frees (``keep_freed_memory``); with two allocators each
    keeps its own freed memory: `hermes analyze` of the shared real traces peaked 19-21 % higher
    (mtia 0.376 -> 0.304 GiB, xdit_sd_3.5 0.463 -> 0.367), at the same speed
    (docs/benchmarks.md). Arrow reads the variable once, at its first allocation: it is set for
    that moment only, so no process Hermes starts later (a profiled script) inherits it."""
    if ARROW_POOL_ENV in os.environ:
        return
    os.environ[ARROW_POOL_ENV] = "system"
    try:
        import pyarrow as pa

        pa.default_memory_pool()  # (Arrow's C++ default pool is chosen here, once)
    except ImportError:
        pass
    finally:
        os.environ.pop(ARROW_POOL_ENV, None)


def keep_freed_memory(limit: int = IN_MEMORY_MAX_BYTES) -> None:
    """Have glibc's malloc keep freed memory for reuse in this process (and a child it forks):
    blocks under 32 MiB from the heap instead of fresh mappings, and up to ``limit`` bytes of
    freed heap kept instead of returned at once (``mallopt`` M_MMAP_THRESHOLD and
    M_TRIM_THRESHOLD). An analysis allocates and frees the same event-sized arrays over and over;
    by default each big one is a new mapping whose pages fault in again (docs/benchmarks.md has
    the page faults and system time saved). For a trace analyzed in memory
    only: a big rank returns its memory explicitly (``analyzers.run.release_memory``). A no-op
    where the C library is not glibc."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 * 2**20)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, int(limit))  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):  # not glibc (macOS, musl)
        pass


def start_source(src: Path, save: Path | None = None, early: bool = False) -> Any:
    """Start importing ``src`` in a forked process now, when :func:`hermes_source` would import
    it into memory, for :func:`hermes_source` to take (``started``) once the caller has loaded
    what analyzes it (``hermes.collectors.importers.forked``); None where that is not done.
    Call it before the heavy imports (pandas, the analyzers): they are what it overlaps. A trace
    analyzed in memory also gets :func:`keep_freed_memory`, forked or not. ``early``: started
    by the console script before the CLI read its arguments (``commands._launch``); the
    command's own call then takes it."""
    if not in_memory_source(src, save):
        return None
    keep_freed_memory()
    from hermes.collectors.importers import forked

    return forked.start(src, early=early)


@contextlib.contextmanager
def hermes_source(src: Path, save: Path | None = None, started: Any = None) -> Iterator[Any]:
    """:func:`hermes_trace`, except that a single profiler file whose importer can
    (Kineto JSON) is imported straight into a :class:`hermes.Trace` in this process, with no
    Parquet written and read back (unless ``save`` asks to keep it), when it holds at most
    :data:`IN_MEMORY_MAX_BYTES` of text. A bigger file goes through a temporary Parquet: the
    caller then holds a path, and each rank's events, loaded column by column, are let go once
    analyzed instead of held with the import's leftovers for the whole run (1 GB of Kineto
    JSON: peak RSS ~2.6 -> ~1.9 GiB, for a Parquet write and read of a few seconds).
    ``started``: that import already under way in a forked process (:func:`start_source`); if
    it failed, the file is imported here (which reports what is wrong with it)."""
    release_gc()  # what analyzes the trace is loaded: the console run's start-up is over
    if in_memory_source(src, save):
        trace = started.result() if started is not None else None
        if trace is None:
            from hermes.diff.runs import import_in_memory

            trace = import_in_memory(src)
        if trace is not None:
            yield trace
            return
    with hermes_trace(src, save) as path:
        yield path


@contextlib.contextmanager
def hermes_trace(src: Path, save: Path | None = None) -> Iterator[Path]:
    """A Hermes trace for ``src``: ``src`` itself when it is one, else the profiler output it
    holds (Kineto JSON/.gz, Ascend output) imported in this process, into ``save`` when given
    (kept) or a temporary directory removed on exit. The importing is
    :func:`hermes.diff.runs.import_trace`, the one caller of the importer registry outside
    ``hermes import``."""
    from hermes.diff.runs import import_trace, is_hermes_trace, trace_paths
    from hermes.errors import ImportFormatError

    if not src.exists():
        raise ImportFormatError("no such file or directory", path=src)
    if is_hermes_trace(src):
        if save is not None:
            raise OutputError("--save-trace keeps an imported trace; this is a Hermes trace "
                              "already", path=src)
        from hermes.trace.segments import interrupted_note

        note = interrupted_note(src)  # what a killed profiled run left: how far it got
        if note:
            print(f"hermes: note: {note}", file=sys.stderr)
        yield src
    elif save is not None:
        check_output_path(save, [src], flag="--save-trace")
        yield import_trace(src, save)
    else:
        with trace_paths([src]) as paths:  # imported into a temporary directory
            yield paths[0]
