"""``hermes analyze FILE.json.gz`` imports the Kineto file into memory and analyzes it in the
same process: no Parquet is written, and the output is the one of the imported trace file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import hermes.collectors.importers.kineto.importer as kineto_importer
from hermes.diff.runs import import_in_memory, import_trace
from hermes.trace import load
from tests.conftest import DATA, run_cli

KINETO = DATA / "kineto"
SOURCES = ["gpt_dataloader_starved.pt.trace.json.gz", "two_stream_prefetch.pt.trace.json.gz",
           "sampled_rank-1.json.gz", "cuda_event_sync.json.gz"]


def _no_parquet(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a Parquet trace was written")

    monkeypatch.setattr("hermes.trace.writer.TraceWriter.__init__", refuse)
    monkeypatch.setattr("hermes.diff.runs.import_trace", refuse)


@pytest.mark.parametrize(("name", "rows"), list(zip(SOURCES, (500, 97, 500, 7), strict=True)))
def test_in_memory_import_is_the_loaded_file(name: str, rows: int, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # small row groups: the categories' order depends on them (several per file here)
    monkeypatch.setattr(kineto_importer, "ROW_GROUP_ROWS", rows)
    ref = load(import_trace(KINETO / name, tmp_path / "t.parquet"))
    got = import_in_memory(KINETO / name)
    assert len(got.events) == len(ref.events) > 3 * rows
    pd.testing.assert_frame_equal(got.events, ref.events)
    for c in ("lane", "kind", "name", "lane_kind", "unit", "coll_group"):
        assert list(got.events[c].cat.categories) == list(ref.events[c].cat.categories), c
    assert got.meta == ref.meta


def test_not_in_memory_when_the_importer_cannot(tmp_path: Path) -> None:
    assert import_in_memory(KINETO) is None  # a directory: imported per rank, as a path
    (tmp_path / "x.parquet").write_bytes(b"")
    assert import_in_memory(DATA / "ascend" / "trace_view.json") is None


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_analyze_kineto_file_in_one_process(fmt: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    src = KINETO / SOURCES[0]
    pq = tmp_path / "t.parquet"
    code, _, err = run_cli("import", str(src), "--out", str(pq))
    assert code == 0, err
    code, want, err = run_cli("analyze", str(pq), "--format", fmt)
    assert code == 0, err
    with monkeypatch.context() as m:
        _no_parquet(m)
        code, got, err = run_cli("analyze", str(src), "--format", fmt)
    assert code == 0, err
    assert got == want


def test_analyze_save_trace_still_writes_it(tmp_path: Path) -> None:
    src = KINETO / SOURCES[1]
    keep = tmp_path / "kept.parquet"
    code, got, err = run_cli("analyze", str(src), "--format", "json", "--save-trace", str(keep))
    assert code == 0, err
    code, want, err = run_cli("analyze", str(keep), "--format", "json")
    assert code == 0 and got == want


def test_analysis_failure_in_memory_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("boom")

    monkeypatch.setattr("hermes.analyzers.engine.run.run_rank", broken)
    code, _, err = run_cli("analyze", str(KINETO / SOURCES[1]))
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "no rank could be analyzed: rank 0: ValueError: boom" in lines[0]
    assert "internal error" not in lines[0]


def test_console_analyze_output_is_complete(tmp_path: Path) -> None:
    """A console ``hermes analyze`` ends without the interpreter's teardown (``os._exit``):
    everything it printed or wrote is there first."""
    import subprocess
    import sys

    src = KINETO / SOURCES[1]
    code, want, err = run_cli("analyze", str(src), "--format", "json")
    assert code == 0, err
    cmd = [sys.executable, "-m", "hermes.cli", "analyze", str(src), "--format", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == want, r.stderr
    out = tmp_path / "a.json"
    r = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and out.read_text() == want, r.stderr


def test_a_big_profiler_file_goes_through_a_temporary_parquet(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above IN_MEMORY_MAX_BYTES of JSON a Kineto file is imported to a temporary Parquet and
    analyzed from the path (its events let go once analyzed): the same output; at or below, in
    memory. A .gz counts its uncompressed size (the gzip trailer)."""
    import gzip

    from hermes.commands import _util

    src = KINETO / SOURCES[0]
    text = len(gzip.decompress(src.read_bytes()))
    assert _util.json_bytes(src) == text > 4 * src.stat().st_size
    plain = tmp_path / "plain.json"
    plain.write_bytes(b"{}")
    assert _util.json_bytes(plain) == 2
    code, want, err = run_cli("analyze", str(src), "--format", "json")
    assert code == 0, err
    written: list[object] = []
    real = kineto_importer.open_writer

    def spy(*args: object, **kwargs: object) -> object:
        written.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(kineto_importer, "open_writer", spy)
    monkeypatch.setattr(_util, "IN_MEMORY_MAX_BYTES", text)
    code, got, err = run_cli("analyze", str(src), "--format", "json")
    assert code == 0 and got == want and written == [], err  # at the limit: in memory
    monkeypatch.setattr(_util, "IN_MEMORY_MAX_BYTES", text - 1)
    code, got, err = run_cli("analyze", str(src), "--format", "json")
    assert code == 0, err
    assert len(written) == 1 and got == want  # above it: one Parquet written, same document
