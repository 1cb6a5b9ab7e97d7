"""Nsight Systems importer: the SQLite export of a report (``nsys export --type sqlite
report.nsys-rep``, or ``nsys profile --export=sqlite``); a ``.nsys-rep`` is exported first.

Modules: ``detect`` (SQLite magic and Nsight's tables; light, runs for every source),
``sql`` (the export's tables and columns, chunked reads), ``context`` (processes -> ranks,
lanes, steps, correlations), one mapping per kind of table (``gpu``, ``host``, ``nvtx``),
``info`` (GPUs, versions, tables not read), ``report`` (``nsys export``), ``importer`` (the
run) and ``synthetic`` (exports in the real schema for tests and the benchmark).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes.collectors.importers.base import Importer, ImportResult
from hermes.collectors.importers.nsys.detect import detect, explain


def run(sources: list[Path], out: Path, options: dict[str, Any]) -> ImportResult:
    # imported on use: numpy/pyarrow are not needed to detect or to list importers
    from hermes.collectors.importers.nsys.importer import run as run_import

    return run_import(sources, out, options)


def _device_profiles() -> None:
    from hermes import devices

    devices.profiles()


IMPORTER = Importer(
    name="nsys",
    description="Nsight Systems SQLite export (nsys export --type sqlite report.nsys-rep) "
                "or the .nsys-rep itself (exported with nsys when it is on PATH)",
    patterns=("*.sqlite", "*.nsys-rep", "*.qdrep"),
    detect=detect, run=run, explain=explain, in_memory=True,
    modules=("hermes.collectors.importers.nsys.importer", "hermes.devices"),
    prepare=_device_profiles)
