"""What every importer is: a name, what it reads, how it recognizes a source, how it runs.

Kept apart from the package's ``__init__`` so the importers' own modules import these types
without importing the registry (and through it every other importer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes.errors import HermesError, ImportFormatError, OutputError


@dataclass(frozen=True)
class ImportResult:
    """What an import wrote: the trace path, event counts and notes for the summary."""

    out: Path
    events: int
    ranks: tuple[int, ...]
    by_kind: dict[str, int] = field(default_factory=dict)
    by_source_category: dict[str, int] = field(default_factory=dict)
    unknown_kept: dict[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    #: the imported :class:`hermes.trace.Trace` when the import ran with option
    #: ``in_memory`` (an importer with ``Importer.in_memory``): nothing written at ``out``;
    #: with ``in_memory="arrow"``, its Arrow table (``hermes.trace.memory.from_table``)
    trace: Any = None


def _guarded_run(run: Callable[[list[Path], Path, dict[str, Any]], ImportResult],
                 files: list[Path], out: Path, options: dict[str, Any]) -> ImportResult:
    """Run an importer; whatever a malformed source makes it raise becomes one error naming the
    source. Importers check the values they know are fragile (times, ids, text) with their
    position; this catches the rest of the class (an overflow, a type no check foresaw) so a
    hostile file is never a traceback."""
    try:
        return run(files, out, options)
    except HermesError as exc:
        if exc.path is None:  # e.g. a value the trace schema cannot store
            exc.path = _culprit(exc, files)
            exc.args = (exc.one_line(),)
        raise
    except OSError as exc:
        if exc.filename is not None:  # reading a source (or a named file) failed
            raise
        # Arrow's write errors name no file: the output or its spool (disk full, too large)
        msg = exc.strerror or " ".join(str(exc).split())[:200]
        raise OutputError(f"cannot write: {msg}; any previous output is unchanged", path=out,
                          hint="free space (the temporary directory too) or choose another "
                               "--out") from None
    except (MemoryError, KeyboardInterrupt):
        raise
    except RecursionError:
        raise ImportFormatError("nested too deeply to read", path=_culprit(None, files),
                                hint="the file is damaged or not a profiler trace") from None
    except Exception as exc:  # noqa: BLE001 - any other failure is a malformed value
        msg = " ".join(str(exc).split())[:200]
        raise ImportFormatError(f"malformed value ({type(exc).__name__}: {msg})",
                                path=_culprit(exc, files),
                                hint="the file is damaged or not a profiler trace") from None


def _culprit(exc: BaseException | None, files: list[Path]) -> str | None:
    """The source being read when ``exc`` was raised: the innermost importer frame holding
    one of ``files`` in a local variable; the only source if there is one."""
    import sys as _sys

    if len(files) == 1:
        return str(files[0])
    wanted = {str(f) for f in files}
    tb = exc.__traceback__ if exc is not None else _sys.exc_info()[2]
    found: str | None = None
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, Path) and str(value) in wanted:
                found = str(value)
        tb = tb.tb_next
    return found or f"one of {len(files)} sources"


def _nothing_to_prepare() -> None:
    return None


def _nothing_to_say(path: Path) -> str | None:
    return None


@dataclass(frozen=True)
class Importer:
    name: str
    #: one line for ``hermes import --help`` and the "expected ..." hint of an unknown source
    description: str
    #: glob patterns of the files (and directories) this importer reads; a directory no
    #: importer claims is expanded to the files matching any importer's patterns
    patterns: tuple[str, ...]
    #: True when this importer recognizes the source path (a file or directory); cheap: it
    #: runs for every source, before any heavy module is imported
    detect: Callable[[Path], bool]
    #: run(sources, out, options) -> ImportResult; writes the trace at ``out``
    run: Callable[[list[Path], Path, dict[str, Any]], ImportResult]
    #: for a source no importer recognizes: what it is, when it is a file this importer's
    #: ecosystem writes that is not something to import (a PyTorch Execution Trace, say)
    explain: Callable[[Path], str | None] = _nothing_to_say
    #: True when ``run`` takes option ``in_memory``: the trace is returned in
    #: ``ImportResult.trace`` (exactly what ``hermes.trace.load`` gives of the file it would
    #: write; as Arrow when the option is ``"arrow"``) and nothing is written
    in_memory: bool = False
    #: the modules ``run`` imports on first use (numpy, pyarrow, its own), for a caller that
    #: runs it in a forked process: imported once before the fork, not in both processes
    modules: tuple[str, ...] = ()
    #: work ``run`` does on every call that the process it is forked from would do too (data
    #: files both read): done once, before the fork, by the same caller
    prepare: Callable[[], None] = _nothing_to_prepare

    def __post_init__(self) -> None:
        # Every caller (import, diff and check of raw profiler output, the PyTorch profiler
        # driver) gets the guard: a malformed source is one error naming it, never a traceback.
        raw = self.run
        if getattr(raw, "_guarded", False):
            return

        def run(files: list[Path], out: Path, options: dict[str, Any]) -> ImportResult:
            return _guarded_run(raw, files, out, options)

        run._guarded = True  # type: ignore[attr-defined]
        object.__setattr__(self, "run", run)
