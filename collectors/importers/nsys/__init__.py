"""Nsight Systems importer: the SQLite export of a report (``nsys export --type sqlite``).

Modules: ``detect`` (SQLite magic and Nsight's tables; light, runs for every source). This
first version recognizes the exports and names them; the import follows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes.collectors.importers.base import Importer, ImportResult
from hermes.collectors.importers.nsys import detect as _detect
from hermes.errors import ImportFormatError


def explain(path: Path) -> str | None:
    if _detect.detect(path):
        return "an Nsight Systems export (SQLite)"
    return _detect.explain(path)


def run(sources: list[Path], out: Path, options: dict[str, Any]) -> ImportResult:
    raise ImportFormatError("an Nsight Systems export cannot be imported by this version",
                            path=sources[0] if sources else None)


IMPORTER = Importer(
    name="nsys",
    description="Nsight Systems SQLite export (nsys export --type sqlite report.nsys-rep)",
    patterns=("*.sqlite", "*.nsys-rep", "*.qdrep"),
    detect=lambda path: False, run=run, explain=explain)
