"""Issue 17's integrity holes, beyond the corpus's exit codes: what is on disk afterwards."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hermes.cli import main
from hermes.trace.validate import validate
from tests.bad_inputs.make_corpus import kineto_text, retag, write


def test_a_trace_directory_is_replaced_whole(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["emulate", "resnet50", "--steps", "1", "--ranks", "4", "--out", str(out)]) == 0
    assert len(list(out.glob("*.parquet"))) == 4
    assert main(["emulate", "resnet50", "--steps", "1", "--ranks", "2", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["rank-00000.parquet", "rank-00001.parquet"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert validate(out).ok


def test_force_replaces_a_foreign_directory(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("x")
    assert main(["emulate", "resnet50", "--steps", "1", "--out", str(out), "--force"]) == 0
    assert [p.name for p in out.iterdir()] == ["rank-00000.parquet"]


def test_same_file_twice_is_imported_once_with_a_note(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    src = write(tmp_path, "r.pt.trace.json", kineto_text())
    (tmp_path / "alias.pt.trace.json").symlink_to(src)
    out = tmp_path / "o.parquet"
    assert main(["import", str(src), str(tmp_path / "alias.pt.trace.json"), "--out",
                 str(out)]) == 0
    assert "same file" in capsys.readouterr().out
    assert set(pq.read_table(out, columns=["rank"]).column("rank").to_pylist()) == {0}


def test_validate_flags_ranks_of_different_runs(tmp_path: Path) -> None:
    d = tmp_path / "tr"
    d.mkdir()
    retag(d, "rank-00000.parquet")
    retag(d, "rank-00001.parquet", hermes_ranks="[1]", hermes_extra='{"run_id": "other"}')
    errors = validate(d).errors
    assert any("run id" in e for e in errors), errors


def test_validate_flags_a_span_of_decades(tmp_path: Path) -> None:
    import pyarrow as pa

    good = retag(tmp_path, "g.parquet")
    table = pq.read_table(good)
    ts = table.column("ts_ns").to_pylist()
    ts[-1] = ts[0] + 40 * 365 * 86400 * 10**9
    i = table.schema.get_field_index("ts_ns")
    table = table.set_column(i, table.schema.field(i), pa.array(ts, pa.int64()))
    pq.write_table(table, tmp_path / "bad.parquet")
    errors = validate(tmp_path / "bad.parquet").errors
    assert any("days" in e for e in errors), errors
