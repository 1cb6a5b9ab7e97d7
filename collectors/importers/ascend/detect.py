"""Which paths are Ascend profiler output: by file and directory name only, so detection
never imports pandas (the parsers do)."""

from __future__ import annotations

import re
from pathlib import Path

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"


#: File kind -> file-name pattern (matched against the lower-cased name).
FILE_KINDS: dict[str, str] = {
    "trace_view": r"trace_view.*\.json",
    "kernel_details": r"kernel_details.*\.csv",
    "communication": r"(cluster_)?communication(?!_matrix).*\.json",
    "step_trace": r"(cluster_)?step_trace_time.*\.csv",
    "op_statistic": r"op_statistic.*\.csv",
    "communication_matrix": r"(cluster_)?communication_matrix.*\.json",
}


def file_kind(path: Path) -> str | None:
    name = path.name.lower()
    for kind, pattern in FILE_KINDS.items():
        if re.fullmatch(pattern, name):
            return kind
    return None


def is_profile_dir(path: Path) -> bool:
    return path.name.endswith("_ascend_pt") or path.name == OUTPUT_DIR


def detect(path: Path) -> bool:
    """A ``*_ascend_pt`` / ``ASCEND_PROFILER_OUTPUT`` directory, a directory holding them or
    Ascend files, or one of the Ascend files by name."""
    path = Path(path)
    if path.is_file():
        return file_kind(path) is not None
    if not path.is_dir():
        return False
    if is_profile_dir(path):
        return True
    try:
        return any(is_profile_dir(p) or (p.is_file() and file_kind(p) is not None)
                   for p in path.iterdir())
    except OSError:
        return False
