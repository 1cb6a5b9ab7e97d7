"""``hermes report`` and the one-command path: profiler output straight into analyze/report."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES, run_cli
from tests.report.traces import kineto_with_memory


@pytest.fixture
def kineto(tmp_path: Path) -> Path:
    return kineto_with_memory(tmp_path / "w.pt.trace.json")


def test_report_from_profiler_output(tmp_path: Path, kineto: Path) -> None:
    out = tmp_path / "r.html"
    code, stdout, err = run_cli("report", str(kineto), "--out", str(out))
    assert code == 0, err
    assert f"wrote {out}" in stdout and out.read_text().startswith("<!DOCTYPE html>")


def test_analyze_imports_in_process_and_saves_the_trace(tmp_path: Path, kineto: Path) -> None:
    saved = tmp_path / "kept.parquet"
    code, stdout, err = run_cli("analyze", str(kineto), "--save-trace", str(saved))
    assert code == 0, err
    assert stdout.startswith("Hermes analysis — 1 rank(s)")  # the plain layout when piped
    assert saved.is_file()
    code2, stdout2, _ = run_cli("analyze", str(saved))
    assert code2 == 0 and stdout2 == stdout


def test_analyze_a_real_gz_trace() -> None:
    src = SHARED_TRACES / "kineto-h100" / "gpt_balanced.pt.trace.json.gz"
    if not src.exists():
        pytest.skip(f"{src} absent")
    code, stdout, err = run_cli("analyze", str(src), "--format", "md")
    assert code == 0, err
    assert stdout.startswith("# Hermes analysis")


def test_unreadable_input_says_what_hermes_reads(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    for cmd in ("analyze", "report"):
        code, _, err = run_cli(cmd, str(bad))
        assert code == 2
        line = err.strip()
        assert "\n" not in line and ".parquet" in line and "Kineto" in line and "Ascend" in line
    code, _, err = run_cli("report", str(tmp_path / "missing.json"))
    assert code == 2 and "no such file" in err


def test_save_trace_of_a_hermes_trace_is_refused(tmp_path: Path) -> None:
    from hermes.sample_traces import __file__ as pkg

    tiny = Path(pkg).parent / "tiny.parquet"
    code, _, err = run_cli("analyze", str(tiny), "--save-trace", str(tmp_path / "x.parquet"))
    assert code == 2 and "Hermes trace already" in err


def test_analyze_format_html_draws_the_timeline(tmp_path: Path, kineto: Path) -> None:
    out = tmp_path / "a.html"
    code, _, err = run_cli("analyze", str(kineto), "--format", "html", "--out", str(out))
    assert code == 0, err
    assert '<section id="timeline">' in out.read_text()


def test_demo_writes_the_html_report(tmp_path: Path) -> None:
    code, stdout, err = run_cli("demo", "--out", str(tmp_path / "d"), "--steps", "4")
    assert code == 0, err
    assert (tmp_path / "d" / "report.html").is_file()
    assert f"html:     {tmp_path / 'd' / 'report.html'}" in stdout
