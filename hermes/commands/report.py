"""``hermes report TRACE``: the self-contained HTML report of a trace or of profiler output."""

from __future__ import annotations

from pathlib import Path

import typer

from hermes.commands._util import check_output_path, progress, write_text_atomic
from hermes.commands.analyze import (
    ALLOW_MISSING_HELP,
    DEVICE_HELP,
    SAVE_HELP,
    TRACE_HELP,
    exit_code,
    sources,
)


def _open(path: Path) -> None:
    import webbrowser

    webbrowser.open(path.resolve().as_uri())


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report_cmd(
        traces: list[Path] = typer.Argument(..., help=TRACE_HELP, metavar="TRACE..."),
        out: Path = typer.Option(Path("report.html"), "--out", "-o",
                                 help="The HTML file to write (one file, opens offline)."),
        open_it: bool = typer.Option(False, "--open", help="Open the report in a browser."),
        top: int = typer.Option(10, "--top", help="Findings shown with their evidence."),
        workers: int = typer.Option(0, "--workers", "-j",
                                    help="Analyze ranks in this many processes (0: in-process)."),
        keep_warmup: bool = typer.Option(False, "--keep-warmup",
                                         help="Analyze a warm-up first step too."),
        save_trace: Path | None = typer.Option(None, "--save-trace", help=SAVE_HELP),
        allow_missing: bool = typer.Option(False, "--allow-missing", help=ALLOW_MISSING_HELP),
        device: str | None = typer.Option(None, "--device", help=DEVICE_HELP),
    ) -> int:
        """Write one HTML file with the verdict, findings and recommendations, step breakdown,
        an aggregated timeline with the critical path, roofline, sortable kernel and operator
        tables, and the I/O, CPU, communication, cluster and memory views. plotly.js is
        embedded: the file opens offline.

        Example: hermes report trace.pt.trace.json.gz --out report.html --open

        Example: hermes report rank0.pt.trace.json rank1.pt.trace.json --out report.html
        """
        from hermes.pipeline import analyze_and_advise
        from hermes.report import render
        from hermes.report.timeline import columns
        from hermes.trace import load

        check_output_path(out, [*traces, *([save_trace] if save_trace else [])])
        with sources(traces, save_trace) as path:
            with progress("analyzing ranks") as bar:
                analysis, advice = analyze_and_advise(
                    path, workers=workers, keep_warmup=keep_warmup, device=device,
                    progress=lambda done, total: bar.update(completed=done, total=total))
            with progress("rendering"):
                events = load(path, columns=columns(), skip=analysis.unread_files)
                html = render("html", analysis, advice, top, trace=events)
        write_text_atomic(out, html)
        typer.echo(f"wrote {out} ({len(html.encode()) / 1e6:.1f} MB)")
        if open_it:
            _open(out)
        return exit_code(analysis, allow_missing)
