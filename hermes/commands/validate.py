"""``hermes validate PATH``: check a trace and summarize it."""

from __future__ import annotations

from pathlib import Path

import typer

from hermes.commands._util import dumps


def _fmt_summary(path: Path, s: dict) -> str:
    span_ms = s.get("span_ns", 0) / 1e6
    lines = [
        f"trace: {path}",
        f"  source: {s.get('source')}   files: {s.get('files')}   events: {s['events']:,}",
        f"  ranks: {len(s['ranks'])} ({_ranges(s['ranks'])})",
        f"  time span: {span_ms:,.3f} ms",
    ]
    st = s.get("steps", {})
    if st.get("count"):
        lines.append(f"  steps: {st['count']} (median {st['median_ms']:.3f} ms, "
                     f"min {st['min_ms']:.3f}, max {st['max_ms']:.3f})")
    else:
        lines.append("  steps: none marked")
    if s.get("interrupted_note"):
        lines.append(f"  note: {s['interrupted_note']}")
    for key, n in sorted(s.get("repaired", {}).items()):
        lines.append(f"  repaired when written: {n:,} value(s) ({key}; docs/trace-format.md)")
    lines.append("  events per kind:")
    for kind, n in sorted(s.get("kinds", {}).items(), key=lambda kv: -kv[1]):
        lines.append(f"    {kind:<14} {n:>12,}")
    return "\n".join(lines)


def _ranges(ranks: list[int]) -> str:
    if not ranks:
        return "-"
    out, start, prev = [], ranks[0], ranks[0]
    for r in ranks[1:] + [None]:  # type: ignore[list-item]
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(out)


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate_cmd(
        path: Path = typer.Argument(
            ..., help="Trace file (.parquet) or directory of per-rank files."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> int:
        """Check a Hermes trace (version, columns, types, durations, correlation ids) and
        print a summary: ranks, events per kind, time span, steps.

        Example: hermes validate run.parquet
        """
        from hermes.trace.validate import validate

        report = validate(path)
        if as_json:
            typer.echo(dumps({"path": str(path), "ok": report.ok, "errors": report.errors,
                              "summary": report.summary}), nl=False)
        else:
            typer.echo(_fmt_summary(path, report.summary))
            for e in report.errors:
                typer.echo(f"error: {e}", err=True)
            typer.echo("valid" if report.ok else f"INVALID: {len(report.errors)} problem(s)")
        return 0 if report.ok else 1
