"""Importers of other profilers' output into the Hermes trace format.

A registry keyed by name (``IMPORTERS``). Each importer module registers one
:class:`Importer`; ``hermes import`` picks one by ``--from NAME`` or by asking each importer's
``detect`` whether it recognizes the source. An importer is a plain function from source paths
to a written Hermes trace; it never fails on an event kind it does not know (it keeps it as kind
``other`` and counts it), and rejects malformed input with an ``ImportFormatError`` naming the
file, the position and what was expected.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes.errors import UsageError


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


@dataclass(frozen=True)
class Importer:
    name: str
    description: str
    #: True when this importer recognizes the source path (a file or directory).
    detect: Callable[[Path], bool]
    #: run(sources, out, options) -> ImportResult; writes the trace at ``out``.
    run: Callable[[list[Path], Path, dict[str, Any]], ImportResult]


IMPORTERS: dict[str, Importer] = {}

#: Modules that register importers; imported on first use of the registry.
_MODULES = ("hermes.collectors.importers.kineto", "hermes.collectors.importers.ascend")


def register(importer: Importer) -> Importer:
    IMPORTERS[importer.name] = importer
    return importer


def _load(mod: str) -> None:
    try:
        importlib.import_module(mod)
    except ModuleNotFoundError as exc:  # an importer not built yet in this tree
        if exc.name != mod:
            raise


def _load_all() -> None:
    for mod in _MODULES:
        _load(mod)


def _module_of(name: str) -> str:
    return f"hermes.collectors.importers.{name}"


def get(name: str) -> Importer:
    if name not in IMPORTERS and _module_of(name) in _MODULES:
        _load(_module_of(name))  # only the one asked for (the Ascend one imports pandas)
    if name not in IMPORTERS:
        _load_all()
    try:
        return IMPORTERS[name]
    except KeyError:
        raise UsageError(f"unknown importer {name!r}",
                         hint=f"valid: {', '.join(sorted(IMPORTERS)) or 'none'}") from None


def detect(path: Path) -> Importer | None:
    """The first importer (in ``_MODULES`` order) that recognizes ``path``.

    Importer modules are loaded one at a time, so detecting a Kineto file never imports the
    others (and their heavier dependencies).
    """
    seen: set[str] = set()
    for mod in _MODULES:
        _load(mod)
        for name in [n for n in IMPORTERS if n not in seen]:
            seen.add(name)
            if IMPORTERS[name].detect(path):
                return IMPORTERS[name]
    for name, imp in IMPORTERS.items():  # registered by other means
        if name not in seen and imp.detect(path):
            return imp
    return None


def available() -> list[str]:
    _load_all()
    return sorted(IMPORTERS)
