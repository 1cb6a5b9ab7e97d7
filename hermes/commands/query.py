"""``hermes query TRACE "SQL"``: read-only SQL over a trace and its analysis (DuckDB)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer

from hermes.commands._util import hermes_trace
from hermes.errors import UsageError

FORMATS = ("table", "csv", "json")
#: widest a column of the text table gets (longer values are cut with '…')
MAX_WIDTH = 60


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6g}"
    return str(v)


def as_table(table: Any) -> str:
    """The rows as an aligned text table (values cut at MAX_WIDTH characters)."""
    names = table.column_names
    rows = [[_cell(v) for v in r.values()] for r in table.to_pylist()]
    cut = [[c if len(c) <= MAX_WIDTH else c[:MAX_WIDTH - 1] + "…" for c in r] for r in rows]
    widths = [max([len(n), *(len(r[i]) for r in cut)]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in cut]
    return "\n".join(lines)


def as_csv(table: Any) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(table.column_names)
    w.writerows([[_cell(v) for v in r.values()] for r in table.to_pylist()])
    return buf.getvalue().rstrip("\n")


def as_json(table: Any) -> str:
    from decimal import Decimal

    def plain(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return None
        if isinstance(v, Decimal):  # DuckDB's sums of BIGINT are HUGEINT (decimal in Arrow)
            return int(v) if v == v.to_integral_value() else float(v)
        if isinstance(v, int | float | str | bool) or v is None:
            return v
        return str(v)  # decimals, timestamps

    rows = [{k: plain(v) for k, v in r.items()} for r in table.to_pylist()]
    return json.dumps(rows, indent=1)


RENDER = {"table": as_table, "csv": as_csv, "json": as_json}


def _tables_help() -> str:
    from hermes.query import TABLES

    return "\n".join(f"{t.name:<12} {t.description}" for t in TABLES.values())


def register(app: typer.Typer) -> None:
    @app.command("query")
    def query_cmd(
        trace: Path = typer.Argument(..., help="A Hermes trace (.parquet or a directory) or "
                                               "profiler output (imported first)."),
        sql: str = typer.Argument(None, help="One SELECT over events and the analysis "
                                             "tables (docs/query.md)."),
        limit: int = typer.Option(1000, "--limit", "-n", min=0,
                                  help="Most rows printed (0: all); a note says when rows "
                                       "were left out."),
        fmt: str = typer.Option("table", "--format", "-f",
                                help=f"Output: {', '.join(FORMATS)}."),
        tables: bool = typer.Option(False, "--tables",
                                    help="List the tables (and the analyzer tables of this "
                                         "trace) instead of running SQL."),
    ) -> int:
        """Run read-only SQL (DuckDB) over a trace: table events (one row per event; args is
        JSON: args->>'$.grid[0]') and the analysis tables breakdown, steps, kernels,
        operators, collectives, findings and every analyzer table as <analyzer>_<table>.
        Statements that write are refused; a SQL error is one line naming its position.

        Example: hermes query run.parquet "SELECT name, count(*) AS n, sum(dur_ns)/1e6 AS ms
        FROM events WHERE kind = 'kernel' GROUP BY name ORDER BY ms DESC LIMIT 10"

        Example: hermes query profile.sqlite "SELECT rank, step, dur_ns FROM steps" --format csv
        """
        from hermes import query as q

        if fmt not in FORMATS:
            raise UsageError(f"unknown format {fmt!r}", where="--format",
                             hint=f"valid: {', '.join(FORMATS)}")
        if not tables and (sql is None or not sql.strip()):
            raise UsageError("no SQL given", where="SQL",
                             hint='e.g. hermes query run.parquet "SELECT count(*) FROM events"'
                                  " (--tables lists the tables)")
        with hermes_trace(trace) as path:
            src = q.source(path)
            if tables:
                typer.echo(_tables_help())
                names = q.analysis_table_names(src.analysis())
                typer.echo("analyzer tables: " + ", ".join(names))
                return 0
            result, more = q.run(src, sql, limit or None)
        typer.echo(RENDER[fmt](result))
        if more:
            typer.echo(f"note: first {limit:,} rows shown; --limit 0 prints all", err=True)
        return 0
