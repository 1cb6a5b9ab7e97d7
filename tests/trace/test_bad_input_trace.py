"""Bad input to `hermes validate` and `hermes export`: exit code 2, one stderr line naming the
file and the problem, no traceback, no partial output, an existing output left intact."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hermes.trace import TraceMeta, open_writer
from tests.conftest import REPO, run_cli
from tests.tracegen import ev, events


def good_trace(path: Path, n: int = 4000, ranks: tuple[int, ...] = (0,)) -> Path:
    rows = []
    for r in ranks:
        for i in range(n):
            rows.append(ev("launch", f"launch{i % 7}", i * 1000, 100, rank=r, corr_id=i))
            rows.append(ev("kernel", f"kernel{i % 13}", i * 1000 + 300, 500, rank=r, corr_id=i,
                           args=f'{{"i": {i}}}'))
    with open_writer(path, TraceMeta(source="synthetic"), row_group_rows=1000) as w:
        w.write(events(*rows))
    return path


def with_metadata(src: Path, dst: Path, **kv: str) -> Path:
    table = pq.read_table(src)
    md = dict(table.schema.metadata or {})
    md.update({k.encode(): v.encode() for k, v in kv.items()})
    pq.write_table(table.replace_schema_metadata(md), dst)
    return dst


def _empty(d: Path) -> Path:
    (d / "empty.parquet").write_bytes(b"")
    return d / "empty.parquet"


def _random(d: Path) -> Path:
    (d / "random.parquet").write_bytes(os.urandom(4096))
    return d / "random.parquet"


def _truncated(d: Path) -> Path:
    raw = good_trace(d / "whole.parquet").read_bytes()
    (d / "half.parquet").write_bytes(raw[: len(raw) // 2])
    return d / "half.parquet"


def _corrupt_pages(d: Path) -> Path:
    raw = bytearray(good_trace(d / "whole.parquet").read_bytes())
    raw[1000:len(raw) // 2] = b"\x55" * (len(raw) // 2 - 1000)  # footer intact, pages not
    (d / "corrupt.parquet").write_bytes(bytes(raw))
    return d / "corrupt.parquet"


def _other_schema(d: Path) -> Path:
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), d / "other.parquet")
    return d / "other.parquet"


def _newer(d: Path) -> Path:
    return with_metadata(good_trace(d / "whole.parquet"), d / "newer.parquet",
                         **{"hermes.schema_version": "2"})


def _bad_metadata(d: Path) -> Path:
    return with_metadata(good_trace(d / "whole.parquet"), d / "badmeta.parquet",
                         **{"hermes.ranks": '"zero"'})


def _null_required(d: Path) -> Path:
    table = pq.read_table(good_trace(d / "whole.parquet"))
    i = table.schema.get_field_index("ts_ns")
    ts = pa.array([None] + table.column(i).to_pylist()[1:], pa.int64())
    pq.write_table(table.set_column(i, "ts_ns", ts), d / "nullts.parquet")
    return d / "nullts.parquet"


def _wrong_type(d: Path) -> Path:
    table = pq.read_table(good_trace(d / "whole.parquet"))
    i = table.schema.get_field_index("dur_ns")
    pq.write_table(table.set_column(i, "dur_ns", pa.array(["long"] * len(table))),
                   d / "strdur.parquet")
    return d / "strdur.parquet"


def _missing_column(d: Path) -> Path:
    pq.write_table(pq.read_table(good_trace(d / "whole.parquet")).drop_columns(["kind"]),
                   d / "nokind.parquet")
    return d / "nokind.parquet"


def _empty_dir(d: Path) -> Path:
    (d / "emptydir").mkdir()
    return d / "emptydir"


def _dir_of_text(d: Path) -> Path:
    (d / "notes").mkdir()
    (d / "notes" / "readme.txt").write_text("hello")
    (d / "notes" / "data.csv").write_text("a,b\n1,2\n")
    return d / "notes"


def _dir_of_junk_parquet(d: Path) -> Path:
    (d / "junk").mkdir()
    (d / "junk" / "rank-00000.parquet").write_text("not parquet at all")
    return d / "junk"


def _dir_second_rank_truncated(d: Path) -> Path:
    good_trace(d / "ranked", n=2000, ranks=(0, 1))
    second = d / "ranked" / "rank-00001.parquet"
    second.write_bytes(second.read_bytes()[:-100])
    return d / "ranked"


def _missing(d: Path) -> Path:
    return d / "nothere.parquet"


#: case -> (builder, the file the message must name, words of the problem)
CASES: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "empty file": (_empty, "empty.parquet", "0 bytes"),
    "random bytes": (_random, "random.parquet", "not a readable Parquet file"),
    "truncated parquet": (_truncated, "half.parquet", "not a readable Parquet file"),
    "corrupt pages": (_corrupt_pages, "corrupt.parquet", "cannot read"),
    "other schema": (_other_schema, "other.parquet", "without Hermes metadata"),
    "newer version": (_newer, "newer.parquet", "version 2 is newer"),
    "bad metadata": (_bad_metadata, "badmeta.parquet", "invalid Hermes metadata"),
    "null in required column": (_null_required, "nullts.parquet", "'ts_ns' has 1 null"),
    "wrong column type": (_wrong_type, "strdur.parquet", "'dur_ns' has type string"),
    "missing column": (_missing_column, "nokind.parquet", "missing required column(s) kind"),
    "empty directory": (_empty_dir, "emptydir", "no *.parquet trace files"),
    "directory of other files": (_dir_of_text, "notes", "no *.parquet trace files"),
    "directory of junk parquet": (_dir_of_junk_parquet, "rank-00000.parquet",
                                  "not a readable Parquet file"),
    "second rank file truncated": (_dir_second_rank_truncated, "rank-00001.parquet",
                                   "not a readable Parquet file"),
    "missing path": (_missing, "nothere.parquet", "no such file or directory"),
}


def assert_one_line_error(code: int, stdout: str, stderr: str, names: str, problem: str) -> None:
    assert code == 2, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("hermes: error: ")
    assert names in lines[0] and problem in lines[0], lines[0]
    assert "Traceback" not in stdout + stderr


@pytest.mark.parametrize("case", list(CASES))
def test_validate_rejects(tmp_path: Path, case: str) -> None:
    build, names, problem = CASES[case]
    bad = build(tmp_path)
    if case in READ_PAST:  # a directory's file that cannot be read: a problem of the report
        code, out, err = run_cli("validate", str(bad))
        assert code == 1 and "INVALID: 1 problem(s)" in out, (out, err)
        assert "files: 1 " in out  # the readable file was checked
        assert f"{names}: {problem}" in err, err
        return
    assert_one_line_error(*run_cli("validate", str(bad)), names, problem)


#: cases ``hermes validate`` reads past (a per-rank directory's other files are checked; the
#: unreadable file is an error of the report, exit 1), where `hermes export` refuses them
READ_PAST = {"second rank file truncated"}


@pytest.mark.parametrize("case", list(CASES))
def test_export_rejects_and_leaves_output_alone(tmp_path: Path, case: str) -> None:
    build, names, problem = CASES[case]
    bad = build(tmp_path)
    outdir = tmp_path / "out"
    outdir.mkdir()
    previous = outdir / "trace.json.gz"
    previous.write_bytes(b"an earlier export")
    assert_one_line_error(*run_cli("export", str(bad), "--out", str(previous)), names, problem)
    assert previous.read_bytes() == b"an earlier export"
    assert sorted(p.name for p in outdir.iterdir()) == ["trace.json.gz"]  # no temp file left


def test_export_output_in_missing_directory(tmp_path: Path) -> None:
    src = good_trace(tmp_path / "t.parquet", n=10)
    code, out, err = run_cli("export", str(src), "--out", str(tmp_path / "nope" / "t.json"))
    assert_one_line_error(code, out, err, str(tmp_path / "nope"), "does not exist")
    assert not (tmp_path / "nope").exists()


def test_export_output_is_a_directory(tmp_path: Path) -> None:
    src = good_trace(tmp_path / "t.parquet", n=10)
    (tmp_path / "outdir").mkdir()
    code, out, err = run_cli("export", str(src), "--out", str(tmp_path / "outdir"))
    assert_one_line_error(code, out, err, "outdir", "is a directory")
    assert list((tmp_path / "outdir").iterdir()) == []


def cli(*args: str) -> tuple[int, str, str]:
    """The real console entry point in a fresh interpreter."""
    env = dict(os.environ, HERMES_NO_PROGRESS="1")
    proc = subprocess.run([sys.executable, "-m", "hermes.cli", *args], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("case", ["truncated parquet", "random bytes", "newer version"])
def test_console_script_validate_and_export(tmp_path: Path, case: str) -> None:
    build, names, problem = CASES[case]
    bad = build(tmp_path)
    assert_one_line_error(*cli("validate", str(bad)), names, problem)
    out = tmp_path / "x.json"
    assert_one_line_error(*cli("export", str(bad), "--out", str(out)), names, problem)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_console_script_missing_output_directory(tmp_path: Path) -> None:
    src = good_trace(tmp_path / "t.parquet", n=10)
    code, out, err = cli("export", str(src), "--out", str(tmp_path / "a" / "b.json.gz"))
    assert_one_line_error(code, out, err, str(tmp_path / "a"), "does not exist")


def test_failure_while_writing_removes_temp_and_keeps_previous(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    from hermes.errors import TraceFormatError
    from hermes.trace import chrome

    src = good_trace(tmp_path / "t.parquet", n=3000)
    out = tmp_path / "out" / "t.json"
    out.parent.mkdir()
    out.write_text("previous")
    real, calls = chrome.format_batch, []

    def failing(*args: object) -> object:  # fail on the third batch, after bytes were written
        calls.append(1)
        if len(calls) == 3:
            raise TraceFormatError("cannot read row group 2 (simulated)", path=src)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(chrome, "BATCH_ROWS", 1000)
    monkeypatch.setattr(chrome, "format_batch", failing)
    assert_one_line_error(*run_cli("export", str(src), "--out", str(out)), "t.parquet",
                          "simulated")
    assert len(calls) == 3
    assert out.read_text() == "previous"
    assert [p.name for p in out.parent.iterdir()] == ["t.json"]
