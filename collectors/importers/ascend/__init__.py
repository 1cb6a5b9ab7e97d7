"""Ascend PyTorch profiler (torch_npu) and msprof-analyze importer.

Modules: ``detect`` (by file and directory name; light), ``importer`` (discovery, merging, the
run), one parser per file kind (``trace_view``, ``csv_files``, ``comm``) and ``common``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes.collectors.importers.ascend.detect import detect
from hermes.collectors.importers.base import Importer, ImportResult


def run(sources: list[Path], out: Path, options: dict[str, Any]) -> ImportResult:
    # imported on use: the parsers need pandas, which detection and --help do not
    from hermes.collectors.importers.ascend.importer import run as run_import

    return run_import(sources, out, options)


IMPORTER = Importer(
    name="ascend",
    description="Ascend PyTorch profiler (torch_npu *_ascend_pt, trace_view.json, "
                "kernel_details.csv) and msprof-analyze cluster output",
    patterns=("*_ascend_pt", "ASCEND_PROFILER_OUTPUT", "trace_view*.json",
              "kernel_details*.csv", "communication*.json", "cluster_communication*.json",
              "step_trace_time*.csv", "cluster_step_trace_time*.csv"),
    detect=detect, run=run)
