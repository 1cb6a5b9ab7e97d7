"""A profiled job that dies keeps its steps (issue 38 item 3).

Real processes under ``hermes profile`` (default ``--flush-every``: 1 s), killed after 1, 2 and
5 completed steps of 5 ms, well inside the first second: by SIGKILL from outside, by
``os.abort()`` and by a segfault from inside (no Python code runs after either), and by
SIGABRT / SIGTERM from outside (the session's handlers save before the process dies of the
same signal). Each step records events on both of the session's paths: a producer's Arrow
batch (``on_events``: 40 ``host_op`` events) and the session's own rows (``record``: 3
markers), besides the monitor's step row.

No save comes before the first second: each step goes to the step journal
(``hermes.trace.journal``) as it completes: every completed step loads, each once, whatever
kills the job; readers say how many steps the monitor had seen. (The handled signals are tried
after 2 steps only: their save does not depend on the count.) ``--flush-every 0`` saves each
step as a segment as it completes (no journal).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hermes.trace import load
from hermes.trace.segments import interrupted
from hermes.trace.validate import validate

SCRIPT = """
import ctypes, os, sys, time
import hermes
from hermes.collectors.api import current
n, how, marker = int(sys.argv[1]), sys.argv[2], sys.argv[3]
for i in range(n):
    time.sleep(0.005)
    rec, t = current(), time.perf_counter_ns()
    rec.on_events({"rank": [0] * 40, "lane": ["thread 1"] * 40, "lane_kind": ["host"] * 40,
                   "kind": ["host_op"] * 40, "name": [f"test.op{k % 7}" for k in range(40)],
                   "ts_ns": [t + k for k in range(40)], "dur_ns": [1] * 40, "step": [i] * 40})
    for k in range(3):
        rec.record("marker", "test.tick", t + k, 0)
    hermes.step()
if how == "abort":
    os.abort()
if how == "segv":
    ctypes.string_at(0)
open(marker, "w").close()
time.sleep(60)
"""
OPS, TICKS = 40, 3  # per step, as the script records them
#: how the job dies -> (inside the job, signal it dies of, its handler saves every step)
DEATHS = {"sigkill": ("sleep", signal.SIGKILL, False),
          "abort": ("abort", signal.SIGABRT, False),
          "segfault": ("segv", signal.SIGSEGV, False),
          "sigabrt": ("sleep", signal.SIGABRT, True),
          "sigterm": ("sleep", signal.SIGTERM, True)}
ENV = {**os.environ, "HERMES_NO_PROGRESS": "1"}


def _start(tmp: Path, case: tuple[str, int, str]) -> tuple[subprocess.Popen[str], Path, Path]:
    death, n, tag = case
    flags = ("--flush-every", "0") if tag == "-flush0" else ()
    d = tmp / f"{death}-{n}{tag}"
    d.mkdir()
    script = d / "train.py"
    script.write_text(SCRIPT)
    # fine: producers' batches are recorded (the Python stack sampler's events, timed, are
    # not among those counted)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hermes.cli", "profile", "--mode", "fine", *flags, "--out",
         str(d / "tr"), "--", sys.executable, str(script), str(n), DEATHS[death][0],
         str(d / "ready")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**ENV, "PYTHONFAULTHANDLER": ""})
    return proc, d / "ready", d / "tr"


def _finish(proc: subprocess.Popen[str], marker: Path, death: str) -> None:
    how, sig, _ = DEATHS[death]
    if how == "sleep":
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.005)
        assert marker.exists(), proc.communicate()
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -sig, (death, err)
    assert "Traceback" not in err and "warning" not in err, err


def _run_all(tmp: Path, cases: list[tuple[str, int, str]]) -> dict[Any, Path]:
    """Start every job at once (two CPUs: one after the other would take minutes), then
    kill each as its case says; the trace each left, by case."""
    started = {case: _start(tmp, case) for case in cases}
    try:
        for (death, _, _), (proc, marker, _) in started.items():
            _finish(proc, marker, death)
    finally:
        for proc, _, _ in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return {case: out for case, (_, _, out) in started.items()}


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> dict[Any, Path]:
    """Every job of this module, started at once: the default-flush kill matrix (the deaths
    no Python code survives after 1, 2 and 5 steps, the handled ones after 2), a second
    SIGKILL-after-5 job the CLI reads first, and those deaths after 5 with --flush-every 0."""
    cases = [(death, n, "") for death in DEATHS
             for n in ((2,) if DEATHS[death][2] else (1, 2, 5))] + [("sigkill", 5, "-cli")] + \
        [(death, 5, "-flush0") for death in ("sigkill", "abort", "segfault")]
    return _run_all(tmp_path_factory.mktemp("killed"), cases)


def _steps_loaded(trace: Path, n: int) -> None:
    """Every one of the ``n`` completed steps loads, once, with the events it recorded."""
    report = validate(trace)
    assert report.ok, report.errors
    assert report.summary["steps"]["count"] == n
    ev = load(trace, columns=["kind", "name", "step"]).events
    per = Counter(zip(ev["kind"].astype(str), ev["step"].astype(int), strict=True))
    steps = sorted(ev.loc[ev["kind"] == "step", "step"].astype(int))
    assert steps == list(range(n))
    assert {s: per[("host_op", s)] for s in range(n)} == {s: OPS for s in range(n)}
    ticks = ev[ev["name"] == "test.tick"]
    assert sorted(Counter(ticks["step"].astype(int)).items()) == [(s, TICKS) for s in range(n)]
    assert len(ev[ev["kind"] == "host_op"]) == n * OPS  # no step's events twice


def test_a_killed_job_keeps_every_completed_step(killed: dict[Any, Path]) -> None:
    for (death, n, tag), out in killed.items():
        if tag:  # (the other tests')
            continue
        handled = DEATHS[death][2]
        if not handled:  # what it left: the journal and the progress file
            assert (out / ".rank-00000.journal").exists(), (death, n)
        _steps_loaded(out, n)
        left = interrupted(out)
        if handled:  # closed cleanly by its handler: merged, no progress file left
            assert left == [], (death, n)
            assert sorted(p.name for p in out.iterdir()) == ["rank-00000.parquet"]
        else:  # the first read turned the journal into the segment its checkpoint would be
            assert left == [{"rank": 0, "pid": left[0]["pid"], "steps": n,
                             "running": False}], (death, n)
            assert not (out / ".rank-00000.journal").exists()
            segs = sorted(p.name for p in out.glob("rank-00000.seg-*.parquet"))
            assert len(segs) == 1, segs  # the journal's


def test_every_reader_reads_the_journaled_steps(killed: dict[Any, Path], tmp_path: Path
                                                ) -> None:
    """validate, analyze and report of a job killed after its fifth step (all of them in
    the journal, not yet read) read all five and say the run was interrupted."""
    out = killed[("sigkill", 5, "-cli")]
    assert (out / ".rank-00000.journal").exists()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hermes.cli", *args], capture_output=True,
                              text=True, timeout=120, env=ENV)
    res = cli("validate", str(out))
    assert res.returncode == 0, res.stderr
    assert "steps: 5" in res.stdout and "the monitor saw rank 0 5 step(s)" in res.stdout
    res = cli("analyze", str(out), "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["steps"]["count"] + len(doc["warmup"]) == 5  # a warm-up first step is set apart
    assert "was interrupted" in res.stderr and "5 step(s)" in res.stderr
    res = cli("report", str(out), "--out", str(tmp_path / "r.html"))
    assert res.returncode == 0, res.stderr
    assert "was interrupted" in res.stderr and (tmp_path / "r.html").stat().st_size > 0


def test_flush_every_zero_saves_each_step_as_a_segment(killed: dict[Any, Path]) -> None:
    for (death, n, tag), out in killed.items():
        if tag == "-flush0":
            assert not (out / ".rank-00000.journal").exists(), death
            assert len(list(out.glob("rank-00000.seg-*.parquet"))) == n
            _steps_loaded(out, n)
