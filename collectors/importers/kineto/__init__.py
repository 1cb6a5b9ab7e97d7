"""PyTorch profiler (Kineto) JSON importer: ``.json`` / ``.json.gz``, one file per rank.

Modules: ``detect`` (is it Kineto? light, runs for every source), ``reader`` (streaming JSON
chunks), ``times`` (exact µs -> ns), ``mapping`` and ``args`` (categories and names -> kinds),
``chunk`` (phase 1: a chunk -> an intermediate Arrow batch), ``finish`` and ``importer``
(phase 2 and the run); ``hermes.trace.arrowbuf`` builds their Arrow arrays without pandas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes.collectors.importers.base import Importer, ImportResult
from hermes.collectors.importers.kineto.detect import detect, explain


def run(sources: list[Path], out: Path, options: dict[str, Any]) -> ImportResult:
    # imported on use: numpy/pyarrow/msgspec are not needed to detect or to list importers
    from hermes.collectors.importers.kineto.importer import run as run_import

    return run_import(sources, out, options)


def _device_profiles() -> None:
    """The device profiles read (a file's device is matched against them; the analyzers'
    roofline matches it again)."""
    from hermes import devices

    devices.profiles()


IMPORTER = Importer(
    name="kineto",
    description="PyTorch profiler (Kineto) JSON trace, .json or .json.gz, one per rank",
    patterns=("*.json", "*.json.gz"),
    detect=detect, run=run, explain=explain, in_memory=True,
    modules=("hermes.collectors.importers.kineto.importer", "hermes.devices"),
    prepare=_device_profiles)
