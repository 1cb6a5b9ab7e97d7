"""The text report on a terminal: rich tables that fit the terminal's width."""

from __future__ import annotations

import pytest

from hermes.pipeline import analyze_and_advise
from hermes.report.terminal import render_rich
from tests.report.traces import kineto_with_memory


@pytest.fixture(scope="module")
def analysis(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from hermes.collectors import importers

    d = tmp_path_factory.mktemp("term")
    src = kineto_with_memory(d / "t.pt.trace.json")
    importers.get("kineto").run([src], d / "t.parquet", {})
    return analyze_and_advise(d / "t.parquet")


@pytest.mark.parametrize("width", [80, 160])
def test_no_line_wider_than_the_terminal(analysis, width: int) -> None:  # type: ignore[no-untyped-def]
    text = render_rich(*analysis, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "Verdict:" in text and "per step: median" in text
    assert "total over the capture" in text  # per-step figures vs totals are told apart


def test_trace_strings_are_not_markup(analysis) -> None:  # type: ignore[no-untyped-def]
    a, adv = analysis
    text = render_rich(a, adv, width=200)
    sev = a.to_dict()["findings"][0]["severity"]
    assert f"[{sev}]" in text  # rich would take "[high]" for a style and drop it


def test_missing_ranks_and_files_have_a_line(analysis) -> None:  # type: ignore[no-untyped-def]
    """A partial analysis says what it left out on the terminal too (as every renderer)."""
    import dataclasses

    a, adv = analysis
    part = dataclasses.replace(a, missing_ranks=[
        {"rank": 3, "error": "worker died", "attempts": 2},
        {"rank": None, "file": "rank-00007.parquet", "error": "no footer", "attempts": 2}])
    lines = render_rich(part, adv, width=200).splitlines()
    assert "MISSING rank 3: not analyzed (worker died)" in lines
    assert "MISSING file rank-00007.parquet: not read (no footer)" in lines
    assert not any("MISSING" in line for line in render_rich(a, adv, width=200).splitlines())
