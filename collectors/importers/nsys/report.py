"""A ``.nsys-rep`` report given directly: exported to SQLite with ``nsys export`` when ``nsys``
is on PATH (into a temporary folder, removed after the import), else one clear error with
the command to run."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from hermes.errors import ImportFormatError


def export_command(report: Path, out: Path) -> list[str]:
    return ["nsys", "export", "--type", "sqlite", "--output", str(out), str(report)]


def to_sqlite(report: Path, folder: Path) -> Path:
    """Export ``report`` into ``folder``; the SQLite file's path."""
    target = folder / (report.stem + ".sqlite")
    nsys = shutil.which("nsys")
    if nsys is None:
        cmd = shlex.join(export_command(report, report.with_suffix(".sqlite")))
        raise ImportFormatError("an Nsight Systems report, and nsys is not on PATH to export "
                                "it", path=report,
                                hint=f"export it to SQLite, then import that: {cmd}")
    cmd = export_command(report, target)
    cmd[0] = nsys
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ImportFormatError(f"cannot run nsys export: {exc.strerror}", path=report
                                ) from None
    if done.returncode != 0 or not target.is_file():
        lines = [ln for ln in (done.stderr or done.stdout or "").splitlines() if ln.strip()]
        why = lines[-1].strip()[:200] if lines else f"exit code {done.returncode}"
        again = shlex.join(export_command(report, report.with_suffix(".sqlite")))
        raise ImportFormatError(f"nsys export failed: {why}", path=report,
                                hint=f"run it yourself: {again}")
    return target
