"""``hermes query`` / ``hermes.query``: read-only, bounded, one-line errors, three formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes import query as q
from hermes.collectors.importers.nsys import synthetic as syn
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("q")
    src = syn.write(tmp / "s.sqlite", 12, processes=1, steps=3, nccl_every=0, memcpy_every=0)
    out = tmp / "t.parquet"
    code, _, err = run_cli("import", str(src), "--out", str(out))
    assert code == 0, err
    return out


def test_library_call_answers(trace: Path) -> None:
    t = q.query(trace, "SELECT kind, count(*) AS n FROM events GROUP BY kind ORDER BY kind")
    assert t.to_pylist() == [{"kind": "host_op", "n": 12}, {"kind": "kernel", "n": 12},
                             {"kind": "launch", "n": 12}, {"kind": "step", "n": 3}]
    t = q.query(trace, "SELECT ts_ns FROM events WHERE kind = 'kernel' ORDER BY ts_ns", limit=2)
    assert t.column("ts_ns").to_pylist() == [syn.T0, syn.T0 + syn.PERIOD]


@pytest.mark.parametrize("sql,what", [
    ("INSERT INTO events SELECT * FROM events", "INSERT refused"),
    ("DELETE FROM events", "DELETE refused"),
    ("CREATE TABLE x AS SELECT 1", "CREATE refused"),
    ("COPY (SELECT * FROM events) TO '{out}'", "COPY refused"),
    ("ATTACH '{out}' AS db", "ATTACH refused"),
    ("SET enable_external_access = true", "SET refused"),
    ("SELECT 1; DROP TABLE events", "one statement at a time"),
    ("SELECT * FROM read_csv('{src}')", "file system operations are disabled"),
])
def test_writes_and_file_access_refused(trace: Path, tmp_path: Path, sql: str, what: str
                                        ) -> None:
    out = tmp_path / "leak.csv"
    code, stdout, err = run_cli("query", str(trace),
                                sql.format(out=out, src=Path(__file__)))
    assert code == 2 and what in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and stdout == ""


def test_sql_error_names_the_position(trace: Path) -> None:
    code, _, err = run_cli("query", str(trace), "SELECT name FORM events")
    assert code == 2 and "SQL line 1, column" in err and "syntax error" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run_cli("query", str(trace), "SELECT name FROM events\nWHERE  nme = 1")
    assert code == 2 and "SQL line 2, column 8: Binder Error" in err
    assert 'Candidate bindings: "name"' in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli("query", str(trace), "SELECT * FROM evnts")
    assert code == 2 and "evnts" in err and "events" in err


def test_limit_default_and_note(trace: Path) -> None:
    code, out, err = run_cli("query", str(trace), "SELECT ts_ns FROM events", "--limit", "5",
                             "--format", "csv")
    assert code == 0 and out.strip().splitlines()[0] == "ts_ns"
    assert len(out.strip().splitlines()) == 1 + 5 and "first 5 rows" in err
    code, out, err = run_cli("query", str(trace), "SELECT ts_ns FROM events", "--limit", "0",
                             "--format", "csv")
    assert len(out.strip().splitlines()) == 1 + 39 and err == ""


def test_formats(trace: Path) -> None:
    sql = ("SELECT name, count(*) AS n, sum(dur_ns) AS total_ns FROM events "
           "WHERE kind = 'kernel' GROUP BY name ORDER BY name")
    code, out, _ = run_cli("query", str(trace), sql, "--format", "json")
    assert code == 0
    assert json.loads(out) == [{"name": "ELEMENTWISE", "n": 6, "total_ns": 6 * syn.KERNEL_NS},
                               {"name": "GEMM", "n": 6, "total_ns": 6 * syn.KERNEL_NS}]
    code, out, _ = run_cli("query", str(trace), sql, "--format", "csv")
    assert out.strip().splitlines() == ["name,n,total_ns", "ELEMENTWISE,6,18000",
                                        "GEMM,6,18000"]
    code, out, _ = run_cli("query", str(trace), sql)
    lines = out.strip().splitlines()
    assert lines[0].split() == ["name", "n", "total_ns"] and lines[2].split() == [
        "ELEMENTWISE", "6", "18000"]
    code, _, err = run_cli("query", str(trace), sql, "--format", "xml")
    assert code == 2 and "--format" in err


def test_profiler_output_is_imported_first(tmp_path: Path) -> None:
    src = syn.write(tmp_path / "s.sqlite", 3, steps=1, nccl_every=0, memcpy_every=0)
    code, out, err = run_cli("query", str(src), "SELECT count(*) AS n FROM events "
                             "WHERE kind = 'kernel'", "--format", "json")
    assert code == 0, err
    assert json.loads(out) == [{"n": 3}]


def test_args_are_json(trace: Path) -> None:
    t = q.query(trace, "SELECT DISTINCT args->>'$.grid[0]' AS gx, "
                       "json_extract(args, '$.block[0]')::INT AS bx "
                       "FROM events WHERE kind = 'kernel'")
    assert t.to_pylist() == [{"gx": "128", "bx": 256}]


def test_concurrent_queries_do_not_cross(trace: Path, tmp_path: Path) -> None:
    """Issue 38 item 4: calls on two traces from 16 threads at once (each its own DuckDB
    connection) each answer their own trace, the same as alone."""
    from concurrent.futures import ThreadPoolExecutor

    other_src = syn.write(tmp_path / "o.sqlite", 7, processes=1, steps=2, nccl_every=0,
                          memcpy_every=0)
    other = tmp_path / "o.parquet"
    code, _, err = run_cli("import", str(other_src), "--out", str(other))
    assert code == 0, err
    sql = "SELECT kind, count(*) AS n, sum(dur_ns) AS d FROM events GROUP BY kind ORDER BY kind"
    alone = {p: q.query(p, sql).to_pylist() for p in (trace, other)}
    assert alone[trace] != alone[other]  # (the two traces differ: a crossed answer shows)
    jobs = [trace, other] * 8
    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(lambda p: q.query(p, sql).to_pylist(), jobs))
    assert got == [alone[p] for p in jobs]
