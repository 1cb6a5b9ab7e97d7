"""``hermes import`` on Ascend profiler output: detection, summary, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import hermes
from tests.conftest import DATA as TEST_DATA
from tests.conftest import run_cli

DATA = TEST_DATA / "ascend"


def test_cli_detects_ascend_directory(tmp_path: Path) -> None:
    out = tmp_path / "run.parquet"
    code, stdout, stderr = run_cli("import", str(DATA), "--out", str(out), "--json")
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["importer"] == "ascend"
    assert summary["ranks"] == list(range(8))
    events = hermes.load(out).events
    assert summary["events"] == len(events)
    assert summary["by_kind"]["step"] == (events["kind"].astype(str) == "step").sum() == 9


def test_cli_single_file_and_forced_importer(tmp_path: Path) -> None:
    out = tmp_path / "kd.parquet"
    code, stdout, _ = run_cli("import", str(DATA / "kernel_details_newer_cann.csv"),
                              "--from", "ascend", "--out", str(out))
    assert code == 0 and "with ascend" in stdout and "kernel" in stdout
    assert len(hermes.load(out).events) == 29


def test_cli_truncated_trace_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "trace_view.json"
    bad.write_bytes((DATA / "trace_view.json").read_bytes()[:5000])
    out = tmp_path / "x.parquet"
    code, stdout, stderr = run_cli("import", str(bad), "--out", str(out))
    assert code == 2 and stdout == ""
    assert len(stderr.strip().splitlines()) == 1
    assert "byte offset 5000" in stderr and str(bad) in stderr
    assert not out.exists()
