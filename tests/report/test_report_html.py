"""The HTML renderer: one self-contained page, every trace string escaped, sections with no data
left out with a line saying why, and the registry's other formats unchanged."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import hermes
from hermes.pipeline import analyze_and_advise
from hermes.report import RENDERERS, render
from hermes.report.html_parts import script_json
from hermes.report.timeline import aggregate, columns
from tests.report.traces import EVIL, kineto_with_memory


@pytest.fixture(scope="module")
def mem_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hermes.collectors import importers

    d = tmp_path_factory.mktemp("mem")
    src = kineto_with_memory(d / "mem.pt.trace.json")
    importers.get("kineto").run([src], d / "t.parquet", {})
    return d / "t.parquet"


def _html(path: Path) -> str:
    a, adv = analyze_and_advise(path)
    return render("html", a, adv, trace=hermes.load(path, columns=columns()))


def test_markup_in_operator_names_renders_as_text(mem_trace: Path) -> None:
    page = _html(mem_trace)
    assert EVIL not in page  # neither as HTML nor inside the figures' JSON
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 3  # plotly.js, the figures, the table sort


def test_script_json_cannot_close_its_script() -> None:
    s = script_json({"name": "</script><b>&"})
    assert "<" not in s and ">" not in s and "&" not in s
    assert json.loads(s) == {"name": "</script><b>&"}


def test_sections_without_data_say_why(mem_trace: Path) -> None:
    page = _html(mem_trace)
    for sid in ("summary", "findings", "breakdown", "timeline", "tables", "memory"):
        assert f'<section id="{sid}">' in page, sid
    assert '<p class="omitted"><b>Communication</b>: the trace has no collectives</p>' in page
    assert "<b>Cluster</b>: one rank" in page
    assert "hermes export TRACE --format chrome" in page  # the full trace in Perfetto


def test_one_plotly_and_offline(mem_trace: Path) -> None:
    page = _html(mem_trace)
    assert page.count("plotly.js v") == 1  # the library, once
    assert not re.search(r'<script[^>]+src=', page)


def test_without_the_trace_the_timeline_is_left_out(mem_trace: Path) -> None:
    a, adv = analyze_and_advise(mem_trace)
    page = RENDERERS.get("html")(a, adv)
    assert '<b>Timeline</b>: rendered without the trace' in page


def test_other_formats_ignore_the_trace(mem_trace: Path) -> None:
    a, adv = analyze_and_advise(mem_trace)
    tr = hermes.load(mem_trace)
    assert render("text", a, adv, trace=tr) == render("text", a, adv)
    assert json.loads(render("json", a, adv))["schema"] == "hermes.analysis/1"
    assert RENDERERS.get("html").filename == "report.html"


def test_timeline_busy_fraction_is_exact_for_overlaps() -> None:
    import pandas as pd

    ev = pd.DataFrame({"rank": [0, 0, 0], "lane": ["a", "a", "b"],
                       "lane_kind": ["host", "host", "device"],
                       "kind": ["host_op", "host_op", "kernel"],
                       "ts_ns": [0, 0, 50], "dur_ns": [100, 50, 50]})
    tl = aggregate(ev, buckets=2)
    assert tl is not None and tl.labels == ["r0 host · a", "r0 device · b"]
    # lane a: two events in [0, 50) (concurrency 2), one in [50, 100)
    assert tl.busy.tolist() == [[2.0, 1.0], [0.0, 1.0]]
