"""What every importer is: a name, what it reads, how it recognizes a source, how it runs.

Kept apart from the package's ``__init__`` so the importers' own modules import these types
without importing the registry (and through it every other importer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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
