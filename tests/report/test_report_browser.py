"""The HTML report in a real browser: headless Chromium draws every figure with no script error.

Each report is opened twice: ``--dump-dom`` gives the page after its scripts ran (plotly adds a
``plot-container`` to every figure it drew) with the console on stderr, ``--screenshot`` writes
a picture (under ``tests/data/screenshots`` when ``HERMES_SCREENSHOTS`` names no folder).
Skipped only where chromium is missing outside CI; CI installs it (``.ci/run``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES, run_cli
from tests.report.traces import EVIL, emulated, kineto_with_memory

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                                reason="chromium not installed (CI installs it)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
         "--enable-logging=stderr", "--v=0"]


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None, "CI must have chromium (.ci/run installs it)"
    return subprocess.run([CHROMIUM, *FLAGS, *args], capture_output=True, text=True,
                          timeout=120, check=False)


def _shots(tmp_path: Path) -> Path:
    d = Path(os.environ.get("HERMES_SCREENSHOTS") or tmp_path / "screenshots")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _check_in_browser(html: Path, png: Path) -> str:
    page = html.read_text()
    figs = json.loads(re.search(r"const FIGS=(.*?);\n", page).group(1))  # type: ignore[union-attr]
    assert figs, "a report with no figure"
    for f in figs:  # every figure has data to draw
        assert f["data"] and all(any(t.get(k) for k in ("x", "y", "z")) for t in f["data"]), f["id"]
    run = _chromium("--dump-dom", html.resolve().as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    assert "Uncaught" not in run.stderr, run.stderr[-2000:]
    drawn = re.findall(r'<div class="plot[^"]*" id="(fig\d+)"[^>]*>\s*<div class="plot-container',
                       dom)
    assert sorted(drawn) == sorted(f["id"] for f in figs), (drawn, [f["id"] for f in figs])
    shot = _chromium(f"--screenshot={png}", "--window-size=1400,3000", html.resolve().as_uri())
    assert shot.returncode == 0 and png.stat().st_size > 10_000, shot.stderr[-2000:]
    return dom


def _report(src: Path, out: Path) -> Path:
    code, _, err = run_cli("report", str(src), "--out", str(out))
    assert code == 0, err
    return out


def test_emulated_8_ranks(tmp_path: Path) -> None:
    trace = emulated(tmp_path / "emu8", ranks=8)
    dom = _check_in_browser(_report(trace, tmp_path / "r.html"), _shots(tmp_path) / "emu8.png")
    assert "Cluster: per-rank step components" in dom and "rank 7" in dom


def test_memory_samples_and_markup_names(tmp_path: Path) -> None:
    src = kineto_with_memory(tmp_path / "mem.pt.trace.json")
    dom = _check_in_browser(_report(src, tmp_path / "r.html"), _shots(tmp_path) / "memory.png")
    assert '<section id="memory">' in dom
    # the operator named <script>... is text in the page, never an element
    assert "&lt;script&gt;alert(1)" in dom and EVIL not in dom


@pytest.mark.parametrize("rel", ["kineto-h100/gpt_balanced.pt.trace.json.gz",
                                 "ascend/trace_view.json"])
def test_real_traces(tmp_path: Path, rel: str) -> None:
    src = SHARED_TRACES / rel
    if not src.exists():
        pytest.skip(f"{src} absent")
    name = rel.split("/")[0]
    dom = _check_in_browser(_report(src, tmp_path / "r.html"), _shots(tmp_path) / f"{name}.png")
    assert '<section id="timeline">' in dom and '<section id="findings">' in dom
