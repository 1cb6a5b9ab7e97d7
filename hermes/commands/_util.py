"""Helpers shared by CLI commands: progress bars, JSON output, safe file output."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermes.errors import OutputError


def is_tty() -> bool:
    return sys.stderr.isatty() and os.environ.get("HERMES_NO_PROGRESS") is None


@contextlib.contextmanager
def progress(description: str, total: float | None = None) -> Iterator[Any]:
    """A progress bar on stderr when it is a terminal; silent when piped.

    Yields an object with ``advance(n)`` and ``update(completed=...)``.
    """
    if not is_tty():
        yield _NoProgress()
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    cols = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn()]
    with Progress(*cols, transient=True, console=_stderr_console()) as prog:
        task = prog.add_task(description, total=total)
        yield _RichProgress(prog, task)


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


class _NoProgress:
    def advance(self, n: float = 1) -> None:
        pass

    def update(self, **kwargs: Any) -> None:
        pass


class _RichProgress:
    def __init__(self, prog: Any, task: Any) -> None:
        self.prog, self.task = prog, task

    def advance(self, n: float = 1) -> None:
        self.prog.advance(self.task, n)

    def update(self, **kwargs: Any) -> None:
        self.prog.update(self.task, **kwargs)


def check_output_path(out: Path) -> None:
    """Fail early (exit 2) when ``out`` cannot be written: missing parent, not writable."""
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.exists():
        raise OutputError("output directory does not exist", path=parent,
                          hint="create it first or choose another --out")
    if not os.access(parent, os.W_OK):
        raise OutputError("output directory is not writable", path=parent)
    if out.is_dir() and out.suffix:
        raise OutputError("output path is a directory", path=out)


def write_text_atomic(path: Path, text: str) -> None:
    """Write a text file under a temporary name, then rename it into place."""
    check_output_path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        from hermes.trace.writer import _publish  # normal permissions, then rename
        _publish(Path(tmp), path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"


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
        yield src
    elif save is not None:
        check_output_path(save)
        yield import_trace(src, save)
    else:
        with trace_paths([src]) as paths:  # imported into a temporary directory
            yield paths[0]
