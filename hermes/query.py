"""Read-only SQL over a trace and its analysis: ``hermes.query(trace, sql)``, ``hermes query``.

DuckDB runs the SQL in an in-memory database that holds nothing but the tables below,
registered from Arrow: ``events`` (the trace's rows, one per event, in the trace format's
columns; ``args`` is JSON text: ``args->>'$.grid[0]'``) and the analysis tables, computed
only when the SQL names one (``breakdown``, ``steps``, ``kernels``, ``operators``,
``collectives``, ``findings``, and every analyzer table as ``<analyzer>_<table>``, e.g.
``cpu_per_step``). Once they are registered, external access (files, extensions, network)
is switched off and the configuration locked, and only one ``SELECT`` (or ``EXPLAIN``) is
run: any statement that would write (``INSERT``, ``COPY ... TO``, ``ATTACH``, ``SET``...) is
refused before it runs. ``docs/query.md`` lists the tables, columns and units.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from hermes.errors import HermesError, UsageError

#: rows returned when no limit is given (the CLI's --limit default)
DEFAULT_LIMIT = 1000
#: statement types that only read
READ_ONLY = ("SELECT", "EXPLAIN")


class QueryError(HermesError):
    """The SQL is not valid, names an unknown table or column, or would write."""


class Source:
    """A trace (path or :class:`hermes.Trace`) and, on first use, its events as Arrow and
    its analysis."""

    def __init__(self, trace: Any, analysis: Any = None) -> None:
        self.trace = trace
        self._events: pa.Table | None = None
        self._analysis = analysis

    def events(self) -> pa.Table:
        if self._events is None:
            self._events = _plain(_events_of(self.trace))
        return self._events

    def analysis(self) -> Any:
        if self._analysis is None:
            from hermes.pipeline import analyze

            self._analysis = analyze(self.trace)
        return self._analysis

    def analysis_table(self, key: str) -> pa.Table:
        tables = self.analysis().tables
        if key not in tables:
            return pa.table({})
        return _from_pandas(tables[key])


def _events_of(trace: Any) -> pa.Table:
    from hermes.trace.reader import Trace, load_table

    if isinstance(trace, Trace):
        return pa.Table.from_pandas(trace.events, preserve_index=False)
    return load_table(trace)[0]


def _plain(table: pa.Table) -> pa.Table:
    """Dictionary columns as plain strings (DuckDB reads them as VARCHAR either way)."""
    cols = [col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col
            for col in table.columns]
    return pa.Table.from_arrays(cols, names=table.column_names)


def _from_pandas(df: Any) -> pa.Table:
    """An analysis DataFrame as Arrow; columns of Python objects (lists, dicts) as JSON."""
    import json

    df = df.reset_index(drop=True)
    for c in df.columns:
        if df[c].dtype == object and df[c].map(lambda v: isinstance(v, list | dict | tuple)
                                               ).any():
            df[c] = df[c].map(lambda v: json.dumps(v, default=str))
    return _plain(pa.Table.from_pandas(df, preserve_index=False))


@dataclass(frozen=True)
class TableSpec:
    name: str
    description: str
    build: Callable[[Source], pa.Table]
    analysis: bool = True


def _findings(src: Source) -> pa.Table:
    import json

    rows = [{"id": f.id, "category": f.category, "cause": f.cause, "severity": f.severity,
             "time_share": float(f.time_share), "summary": f.summary,
             "ranks": json.dumps(list(f.ranks)), "steps": json.dumps(list(f.steps)),
             "evidence": json.dumps(dict(f.evidence), default=str)}
            for f in src.analysis().findings]
    schema = pa.schema([("id", pa.string()), ("category", pa.string()), ("cause", pa.string()),
                        ("severity", pa.string()), ("time_share", pa.float64()),
                        ("summary", pa.string()), ("ranks", pa.string()),
                        ("steps", pa.string()), ("evidence", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema)


def _operators(src: Source) -> pa.Table:
    """Host operators per rank: count and inclusive time (the trace's host_op events)."""
    import pyarrow.compute as pc

    ev = src.events()
    ops = ev.filter(pc.equal(ev.column("kind"), "host_op")).select(["rank", "name", "dur_ns"])
    agg = ops.group_by(["rank", "name"]).aggregate(
        [("dur_ns", "count"), ("dur_ns", "sum"), ("dur_ns", "mean"), ("dur_ns", "max")])
    agg = agg.rename_columns({"dur_ns_count": "count", "dur_ns_sum": "total_ns",
                              "dur_ns_mean": "mean_ns", "dur_ns_max": "max_ns"})
    return agg.select(["rank", "name", "count", "total_ns", "mean_ns", "max_ns"])


def _analysis(key: str) -> Callable[[Source], pa.Table]:
    return lambda src: src.analysis_table(key)


#: the named tables (the registry: a new table is one entry)
TABLES: dict[str, TableSpec] = {t.name: t for t in (
    TableSpec("events", "one row per event, the trace format's columns",
              lambda src: src.events(), analysis=False),
    TableSpec("breakdown", "per rank and step: the five-part time partition (ns and %)",
              _analysis("overlap.per_step")),
    TableSpec("steps", "per rank and step: the step window", _analysis("steps.windows")),
    TableSpec("kernels", "per rank and kernel name: count, total/mean/max time, family, bound",
              _analysis("computation.kernels")),
    TableSpec("operators", "per rank and host operator: count, total/mean/max inclusive time",
              _operators, analysis=False),
    TableSpec("collectives", "per rank and collective: group, seq, op, bytes, wait, bandwidth",
              _analysis("communication.collectives")),
    TableSpec("findings", "the diagnosed causes, ranked: id, severity, time share, summary",
              _findings),
)}


def _analysis_names(sql_tables: set[str], src: Source) -> dict[str, str]:
    """``<analyzer>_<table>`` names the SQL uses -> the analysis table key."""
    wanted = {t for t in sql_tables if t not in TABLES and "_" in t}
    if not wanted:
        return {}
    keys = {k.replace(".", "_"): k for k in src.analysis().tables.keys()}
    return {t: keys[t] for t in wanted if t in keys}


def analysis_table_names(analysis: Any) -> list[str]:
    """Every analyzer table as the SQL names it (``cpu_per_step``)."""
    return sorted(k.replace(".", "_") for k in analysis.tables.keys())


def _tables_in(sql: str) -> set[str]:
    import duckdb

    try:
        return {t.lower() for t in duckdb.get_table_names(sql)}
    except duckdb.Error as exc:
        raise _sql_error(exc) from None


def _check_read_only(con: Any, sql: str) -> None:
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise _sql_error(exc) from None
    if len(statements) != 1:
        raise QueryError(f"one statement at a time ({len(statements)} given)", where="SQL")
    kind = statements[0].type.name
    if kind not in READ_ONLY:
        raise QueryError(f"{kind} refused: queries are read-only (SELECT or EXPLAIN)",
                         where="SQL", hint="the trace and files are never written")


def _sql_error(exc: Exception, shift: int = 0) -> QueryError:
    """One line: the DuckDB message, and the line and column it points at (``shift``: the
    characters put before the statement's first line when it was run)."""
    text = str(exc)
    lines = text.splitlines()
    head = lines[0] if lines else type(exc).__name__
    where = "SQL"
    for i, ln in enumerate(lines):
        m = re.match(r"LINE (\d+): ", ln)
        if m and i + 1 < len(lines) and "^" in lines[i + 1]:
            col = lines[i + 1].index("^") - len(m.group(0)) + 1
            if m.group(1) == "1":
                col -= shift
            where = f"SQL line {m.group(1)}, column {max(col, 1)}"
            break
    hint = lines[1].strip() if len(lines) > 1 and lines[1].startswith(
        "Candidate bindings") else None
    if "does not exist" in head and "Table" in head:
        hint = (f"tables: {', '.join(TABLES)}, and the analyzer tables "
                "(hermes query TRACE --tables)")
    return QueryError(head, where=where, hint=hint)


def connect(src: Source, sql: str) -> Any:
    """A locked, read-only DuckDB connection holding the tables ``sql`` names."""
    import duckdb

    con = duckdb.connect(":memory:")
    _check_read_only(con, sql)
    wanted = _tables_in(sql)
    extra = _analysis_names(wanted, src)
    for name in sorted(wanted):
        if name in TABLES:
            con.register(name, TABLES[name].build(src))
        elif name in extra:
            con.register(name, src.analysis_table(extra[name]))
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def query(trace: Any, sql: str, limit: int | None = None, analysis: Any = None
          ) -> pa.Table:
    """Run read-only ``sql`` over ``trace`` (a trace path or :class:`hermes.Trace`); the
    result as an Arrow table of at most ``limit`` rows (None: all). ``analysis``: the
    trace's :class:`Analysis`, when the caller has it (else computed if the SQL needs it).

    Example: ``hermes.query("run.parquet", "SELECT name, sum(dur_ns) FROM events WHERE
    kind = 'kernel' GROUP BY name ORDER BY 2 DESC LIMIT 5")``
    """
    return run(Source(trace, analysis), sql, limit)[0]


def run(src: Source, sql: str, limit: int | None = None) -> tuple[pa.Table, bool]:
    """The result (at most ``limit`` rows) and whether rows were left out."""
    import duckdb

    if not sql.strip():
        raise UsageError("empty SQL", where="SQL", hint='e.g. "SELECT count(*) FROM events"')
    con = connect(src, sql)
    try:
        reader = con.sql(sql).to_arrow_reader(64 * 1024)
        batches, n, more = [], 0, False
        for b in reader:
            if limit is not None and n + b.num_rows > limit:
                batches.append(b.slice(0, limit - n))
                more = True
                break
            batches.append(b)
            n += b.num_rows
        table = pa.Table.from_batches(batches, schema=reader.schema)
    except duckdb.Error as exc:
        raise _sql_error(*_positioned(con, sql, exc)) from None
    finally:
        con.close()
    return table, more


def _positioned(con: Any, sql: str, exc: Exception) -> tuple[Exception, int]:
    """The error as DuckDB's prepared-statement path words it, which names the line and
    column (the relation API's message leaves them out), and how many characters the
    statement was shifted on its first line; the original when it does not fail the same
    way there."""
    import duckdb

    if "LINE " in str(exc):
        return exc, 0
    prefix = "PREPARE hermes_q AS "
    try:
        con.execute(prefix + sql)
    except duckdb.Error as again:
        if type(again) is type(exc):
            return again, len(prefix)
    return exc, 0


def source(path: Path) -> Source:
    """A :class:`Source` for a trace path (a Hermes trace; profiler output is imported by
    the caller first)."""
    return Source(path)
