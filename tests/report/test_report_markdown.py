"""``--format md`` pinned: the Markdown report of a small hand-made trace, compared exactly.

The trace (tests/report/traces.py) is four 1 ms steps of one operator and two kernels; the
output changes only when the report, the analysis or the advice does. After such an intended
change, ``HERMES_UPDATE_GOLDEN=1 pytest tests/report/test_report_markdown.py`` rewrites the
file: read its diff before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

from hermes.pipeline import analyze_and_advise
from hermes.report import render
from tests.conftest import DATA
from tests.report.traces import kineto_with_memory

GOLDEN = DATA / "golden" / "small_kineto.md"


def _md(tmp_path: Path) -> str:
    from hermes.collectors import importers

    src = kineto_with_memory(tmp_path / "small.pt.trace.json")
    importers.get("kineto").run([src], tmp_path / "t.parquet", {})
    a, adv = analyze_and_advise(tmp_path / "t.parquet")
    return render("md", a, adv)


def test_markdown_matches_the_golden_file(tmp_path: Path) -> None:
    md = _md(tmp_path)
    if os.environ.get("HERMES_UPDATE_GOLDEN"):
        GOLDEN.write_text(md)
    assert md == GOLDEN.read_text()


def test_markdown_is_table_safe(tmp_path: Path) -> None:
    md = _md(tmp_path)
    assert "<script>" not in md  # a GitHub comment would drop it; shown as text instead
    for line in md.splitlines():
        if line.startswith("|"):
            assert line.endswith("|")
