"""``hermes export PATH --format chrome --out trace.json[.gz]``: a trace for Perfetto / Chrome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hermes.errors import UsageError

if TYPE_CHECKING:
    from hermes.trace.chrome import ExportStats


@dataclass(frozen=True)
class ExportFormat:
    """An output format: what it is and the function that writes it (path, out, on_rows)."""

    name: str
    description: str
    write: Callable[[Path, Path, Callable[[int], None]], ExportStats]


def _chrome(path: Path, out: Path, on_rows: Callable[[int], None]) -> ExportStats:
    from hermes.trace.chrome import export_chrome

    return export_chrome(path, out, on_rows=on_rows)


#: Valid ``--format`` values. ``perfetto`` is an alias: the Perfetto UI opens the same JSON.
FORMATS: dict[str, ExportFormat] = {
    "chrome": ExportFormat("chrome", "Chrome trace-event JSON (chrome://tracing, Perfetto UI)",
                           _chrome),
    "perfetto": ExportFormat("perfetto", "alias of chrome", _chrome),
}


def get_format(name: str) -> ExportFormat:
    fmt = FORMATS.get(name.lower())
    if fmt is None:
        raise UsageError(f"unknown export format {name!r}", where="--format",
                         hint=f"valid formats: {', '.join(FORMATS)}")
    return fmt


def _total_rows(path: Path) -> int | None:
    """Events in the trace from the Parquet footers (for the progress bar); None if unknown."""
    import pyarrow.parquet as pq

    from hermes.trace.reader import trace_files

    try:
        return sum(pq.ParquetFile(f).metadata.num_rows for f in trace_files(path))
    except Exception:  # the export itself reports a bad file with its own message
        return None


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export_cmd(
        path: Annotated[Path, typer.Argument(
            help="Trace file (.parquet) or directory of per-rank files.")],
        out: Annotated[Path, typer.Option(
            "--out", "-o", help="Output file; a name ending in .gz is gzip-compressed.")],
        fmt: Annotated[str, typer.Option(
            "--format", "-f", help=f"Output format: {', '.join(FORMATS)}.")] = "chrome",
    ) -> int:
        """Export a Hermes trace as Chrome trace-event JSON, to open in the Perfetto UI
        (ui.perfetto.dev) or chrome://tracing: one process per rank, one track per host thread,
        device stream, copy engine, link or loader worker, and flow arrows from each host launch
        to its device tasks. Times are microseconds, exact to the nanosecond.

        Example: hermes export run.parquet --format chrome --out run.json.gz
        """
        from hermes.commands._util import check_output_path, progress, shown

        exporter = get_format(fmt)
        check_output_path(out, [path], file_only=True)
        with progress(f"exporting {path.name}", total=_total_rows(path)) as bar:
            stats = exporter.write(path, out, bar.advance)
        typer.echo(f"wrote {shown(out)}: {stats.events:,} events, {stats.flows:,} flows, "
                   f"{len(stats.ranks)} rank(s), {stats.tracks} tracks")
        return 0
