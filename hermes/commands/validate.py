"""``hermes validate PATH``: check a trace and summarize it; ``hermes validate --analysis FILE``:
self-check an analysis document (``hermes.check.selfcheck``)."""

from __future__ import annotations

from pathlib import Path

import typer

from hermes.commands._util import dumps

#: ``--strict`` by default: analyses carry ``verdict.explained`` and ``run_kind`` (issue 32).
REQUIRE_EXPLAINED = True


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


def _fmt_violations(path: Path, bad: list) -> str:
    if not bad:
        return f"analysis: {path}\nconsistent: every self-check passed"
    lines = [f"analysis: {path}"] + [f"  {v.check}: {v.where}: {v.what}" for v in bad]
    lines.append(f"INCONSISTENT: {len(bad)} violation(s)")
    return "\n".join(lines)


def _validate_analysis(path: Path, fmt: str, strict: bool) -> int:
    from hermes.check.selfcheck import load_document, self_check

    bad = self_check(load_document(path), require_explained=strict)
    if fmt == "json":
        typer.echo(dumps({"path": str(path), "ok": not bad,
                          "violations": [v.to_dict() for v in bad]}), nl=False)
    else:
        typer.echo(_fmt_violations(path, bad))
    return 1 if bad else 0


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate_cmd(
        path: Path | None = typer.Argument(
            None, help="Trace file (.parquet) or directory of per-rank files."),
        analysis: Path | None = typer.Option(
            None, "--analysis", metavar="FILE",
            help="Self-check an analysis instead: the JSON `hermes analyze --format json` "
                 "writes (docs/analysis/selfcheck.md)."),
        fmt: str = typer.Option("text", "--format", "-f", help="Output format: text or json."),
        as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
        strict: bool = typer.Option(
            REQUIRE_EXPLAINED, "--strict/--no-strict",
            help="With --analysis: whether a document without verdict.explained or run_kind "
                 "(one written before they existed) is a violation."),
    ) -> int:
        """Check a Hermes trace (version, columns, types, durations, correlation ids) and
        print a summary: ranks, events per kind, time span, steps. With --analysis FILE,
        self-check an analysis instead: breakdown parts sum to 100 %, no finding's share above
        its category's, no speed-up above 1 / (1 - share), every finding names events, the
        explained share reported (FILE: from hermes analyze TRACE --format json --out FILE).
        Exit 0: valid; 1: problems listed; 2: unreadable input.

        Example: hermes validate run.parquet

        Example: hermes validate --analysis analysis.json
        """
        from hermes.errors import UsageError

        if fmt not in ("text", "json"):
            raise UsageError(f"unknown --format {fmt!r}", hint="formats: text, json")
        fmt = "json" if as_json else fmt
        if analysis is not None:
            if path is not None:
                raise UsageError(f"give a trace PATH or --analysis FILE, not both ({path})")
            return _validate_analysis(analysis, fmt, strict)
        if path is None:
            raise UsageError("missing PATH", hint="hermes validate TRACE, or hermes validate "
                             "--analysis ANALYSIS.json")
        from hermes.trace.validate import validate

        report = validate(path)
        if fmt == "json":
            typer.echo(dumps({"path": str(path), "ok": report.ok, "errors": report.errors,
                              "summary": report.summary}), nl=False)
        else:
            typer.echo(_fmt_summary(path, report.summary))
            for e in report.errors:
                typer.echo(f"error: {e}", err=True)
            typer.echo("valid" if report.ok else f"INVALID: {len(report.errors)} problem(s)")
        return 0 if report.ok else 1
