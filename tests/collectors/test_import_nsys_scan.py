"""How the Nsight Systems importer reads an export's rows: the compiled reader (``_scan``) and
ADBC's driver (where ``_scan`` was not built) give the same trace; registered NVTX strings,
emit_nvtx operator texts, bytes that are not UTF-8 and values of the wrong type, by hand."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from hermes.collectors import importers
from hermes.collectors.importers.nsys import nvtx, sql
from hermes.collectors.importers.nsys import synthetic as syn
from hermes.trace import load
from tests.conftest import run_cli

GTID = (1 << 24) | 1  # the synthetic export's first thread


def _events(src: Path, out: Path) -> object:
    importers.get("nsys").run([src], out, {})
    return load(out).events.sort_values(["rank", "ts_ns", "kind", "name"]).reset_index(
        drop=True).astype(str)


@pytest.mark.skipif(sql.scanner() is None, reason="the compiled reader was not built")
def test_adbc_fallback_gives_the_same_trace(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    src = syn.write(tmp_path / "e.sqlite", 40, processes=2, steps=2, nccl_every=5,
                    memcpy_every=10)
    scanned = _events(src, tmp_path / "a.parquet")
    monkeypatch.setattr(sql, "scanner", lambda: None)
    monkeypatch.setattr(sql, "CHUNK_ROWS", 16)
    fallback = _events(src, tmp_path / "b.parquet")
    assert len(scanned) > 100 and scanned.equals(fallback)


def _with_nvtx(tmp_path: Path, rows: list[tuple], strings: list[tuple[int, str]] = ()
               ) -> Path:
    src = syn.write(tmp_path / "n.sqlite", 2, steps=1, nccl_every=0, memcpy_every=0)
    con = sqlite3.connect(src)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", strings)
    con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, textId, globalTid)"
                    " VALUES (?, ?, ?, ?, ?, ?)", [(*r, GTID) for r in rows])
    con.commit()
    con.close()
    return src


def test_registered_strings_name_ranges_ops_and_steps(tmp_path: Path) -> None:
    """textId rows take their StringIds value (the step by its registered text too); a row's
    own text wins over its textId; an id missing from StringIds leaves the name empty."""
    src = _with_nvtx(tmp_path, [
        (10_000, 20_000, 59, None, 900),   # registered: ProfilerStep#7
        (11_000, 12_000, 59, None, 901),   # registered emit_nvtx operator
        (13_000, 14_000, 59, "own", 902),  # own text wins
        (15_000, 16_000, 59, None, 999),   # not in StringIds
    ], [(900, "ProfilerStep#7"), (901, "aten::bmm, seq = 3, op_id = 41"), (902, "other")])
    ev = _events(src, tmp_path / "t.parquet")
    at = ev.set_index(ev["ts_ns"].astype(int))
    assert at.loc[10_000, "kind"] == "step" and at.loc[10_000, "step"] == "7"
    assert at.loc[11_000, "kind"] == "host_op" and at.loc[11_000, "name"] == "aten::bmm"
    assert at.loc[11_000, "external_id"] == "41" and at.loc[11_000, "step"] == "7"
    assert at.loc[13_000, "name"] == "own" and at.loc[13_000, "kind"] == "marker"
    assert at.loc[15_000, "name"] == "" and at.loc[15_000, "kind"] == "marker"


@pytest.mark.parametrize("text,is_op,name,op_id", [
    ("aten::mm, seq = 12, op_id = 40, sizes = [[2, 3]]", True, "aten::mm", 40),
    ("aten::add_, op_id = 7", True, "aten::add_", 7),
    ("aten::relu, seq = 3", True, "aten::relu", -1),
    ("aten::view, seq = 3, op_id = junk", True, "aten::view", -1),
    ("aten::x, seq = 1, op_id = -5", True, "aten::x", -5),
    ("aten::y, op_id = \t +9, sizes = []", True, "aten::y", 9),  # blanks and a sign, as CAST
    ("\u00e9t\u00e9::op, seq = 1, op_id = 3", True, "\u00e9t\u00e9::op", 3),  # bytes, not chars
    ("aten::z, seq = 1, op_id = 1234567890123456789", True, "aten::z", -1),  # > 18 digits
    ("a,, seq = 2, op_id = 8", True, "a,", 8),
    ("a, b, seq = 1, op_id = 2", False, "a, b, seq = 1, op_id = 2", -1),  # first ', ' decides
    (", seq = 1, op_id = 2", False, ", seq = 1, op_id = 2", -1),  # no name
    ("forward", False, "forward", -1),
    ("", False, "", -1),
])
def test_emit_nvtx_operator_texts(text: str, is_op: bool, name: str, op_id: int) -> None:
    got_op, got_name, got_id = nvtx.operators(pa.array([text, "plain"]))
    assert got_op.tolist() == [is_op, False]
    assert got_name.to_pylist() == [name, "plain"] and got_id.tolist() == [op_id, -1]


@pytest.mark.skipif(sql.scanner() is None, reason="the compiled reader was not built")
def test_text_that_is_not_utf8_is_kept_replaced(tmp_path: Path) -> None:
    src = syn.write(tmp_path / "u.sqlite", 2, steps=1, nccl_every=0, memcpy_every=0)
    con = sqlite3.connect(src)
    con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES "
                "(5000, 6000, 59, CAST(X'6162FF63' AS TEXT), ?)", (GTID,))
    con.commit()
    con.close()
    ev = _events(src, tmp_path / "t.parquet")
    assert (ev["name"] == "ab\ufffdc").sum() == 1


@pytest.mark.parametrize("compiled", [True, False])
def test_a_text_where_an_integer_belongs_is_one_line(tmp_path: Path, compiled: bool,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if compiled and sql.scanner() is None:
        pytest.skip("the compiled reader was not built")
    if not compiled:
        monkeypatch.setattr(sql, "scanner", lambda: None)
    src = syn.write(tmp_path / "w.sqlite", 30, steps=1, nccl_every=0, memcpy_every=0)
    con = sqlite3.connect(src)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 'seven' WHERE rowid = 17")
    con.commit()
    con.close()
    code, _, err = run_cli("import", str(src), "--out", str(tmp_path / "x.parquet"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "CUPTI_ACTIVITY_KIND_KERNEL holds string values where integers belong" in err
    assert "stream" in err and (("row 17" in err) if compiled else "rows from" in err)
    assert not (tmp_path / "x.parquet").exists()


def test_step_marker_by_registered_string_found_before_the_pass(tmp_path: Path) -> None:
    """The step windows (read before the main pass) find a registered step text too: an
    operator range inside it takes its step."""
    src = _with_nvtx(tmp_path, [(50_000, 60_000, 59, None, 910),
                                (51_000, 52_000, 59, "aten::mm, seq = 1, op_id = 2", None)],
                     [(910, "train_step_42")])
    ev = _events(src, tmp_path / "t.parquet")
    op = ev[ev["ts_ns"] == "51000"].iloc[0]
    assert op["kind"] == "host_op" and op["step"] == "42"


def test_distinct_rows_by_hand() -> None:
    """Rows (1, NULL, 7), (2, NULL, 7), (1, NULL, 7), (1, 5, 7), (2, NULL, 7): three distinct,
    first seen at rows 0, 1, 3; a wide column (NULL and huge ids) and a constant one."""
    from hermes.collectors.importers.nsys.events import NULL, distinct_rows

    a = np.array([1, 2, 1, 1, 2])
    b = np.array([NULL, NULL, NULL, 5, NULL])
    c = np.full(5, 7)
    first, inverse = distinct_rows([a, b, c], 5)
    assert sorted(first.tolist()) == [0, 1, 3]
    groups = [inverse[0], inverse[1], inverse[0], inverse[3], inverse[1]]
    assert inverse.tolist() == groups and len(set(groups)) == 3
    rng = np.random.default_rng(7)
    cols = [rng.integers(0, 3, 4000), rng.integers(-2**62, 2**62, 4000) % 5 * 2**60,
            rng.integers(0, 2**40, 4000)]  # the last: nearly every row distinct
    first, inverse = distinct_rows(cols, 4000)
    mat = np.stack(cols, 1)
    want = len(np.unique(mat, axis=0))
    assert len(first) == want and inverse.max() == want - 1
    assert (mat[first][inverse] == mat).all()


@pytest.mark.skipif(sql.scanner() is None, reason="the compiled reader was not built")
def test_reading_stops_when_the_export_closes_early(tmp_path: Path) -> None:
    src = syn.write(tmp_path / "r.sqlite", 2000, steps=2, nccl_every=0, memcpy_every=0)
    export = sql.Export(src)
    chunks = export.chunks("CUPTI_ACTIVITY_KIND_KERNEL", {"start": "start"}, chunk_rows=64)
    first = next(chunks)
    assert first.num_rows == 64
    export.close()  # the reader thread is stopped and joined, the connections closed
    assert not any(t.name == "hermes-nsys-read" and t.is_alive()
                   for t in threading.enumerate())
