"""Importers of other profilers' output into the Hermes trace format.

One :class:`~hermes.registry.Registry` of :class:`Importer` (``IMPORTERS``). Each importer is a
subpackage declaring its name, description, file patterns, detection and run (its
``IMPORTER``); adding one means its subpackage plus one registration line below. ``hermes
import`` picks one by ``--from NAME`` or by asking each importer's ``detect`` whether it
recognizes the source, and reads its help, choices and hints from the registry. An importer
never fails on an event kind it does not know (it keeps it as kind ``other`` and counts it),
and rejects malformed input with an ``ImportFormatError`` naming the file, the position and
what was expected. The subpackages' ``__init__`` stay light (no numpy/pandas): their heavy
modules load when an import runs.
"""

from __future__ import annotations

from pathlib import Path

from hermes.collectors.importers import ascend, kineto, nsys
from hermes.collectors.importers.base import Importer, ImportResult
from hermes.registry import Registry

__all__ = ["IMPORTERS", "Importer", "ImportResult", "available", "detect", "explain", "get",
           "patterns", "register"]

IMPORTERS: Registry[Importer] = Registry("importer")
# detection asks them in this order: Kineto first (it reads the file's text, Ascend only names)
IMPORTERS.add(kineto.IMPORTER.name, kineto.IMPORTER)
IMPORTERS.add(ascend.IMPORTER.name, ascend.IMPORTER)
IMPORTERS.add(nsys.IMPORTER.name, nsys.IMPORTER)


def register(importer: Importer) -> Importer:
    """Register an importer from outside this package (a plugin, a test)."""
    return IMPORTERS.add(importer.name, importer)


def get(name: str, *, flag: str | None = None) -> Importer:
    """The importer called ``name``; an unknown name is a UsageError listing the valid ones."""
    return IMPORTERS.get(name, flag=flag)


def detect(path: Path) -> Importer | None:
    """The first importer (in registration order) that recognizes ``path``."""
    return next((imp for imp in IMPORTERS.values() if imp.detect(path)), None)


def explain(path: Path) -> str | None:
    """What a source no importer recognizes is, when some importer knows (else None)."""
    return next((why for imp in IMPORTERS.values() if (why := imp.explain(path))), None)


def available() -> list[str]:
    return IMPORTERS.names()


def patterns() -> list[str]:
    """Every importer's file patterns, in registration order, without repeats."""
    return list(dict.fromkeys(p for imp in IMPORTERS.values() for p in imp.patterns))
