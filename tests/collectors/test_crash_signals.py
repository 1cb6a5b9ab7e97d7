"""A profiled job that dies keeps its steps (issue 38 item 3).

Real processes under ``hermes profile``, killed after 1, 2 and 5 completed steps of 5 ms,
well inside the first second: by SIGKILL from outside, by ``os.abort()`` and by a segfault
from inside (no Python code runs after either), and by SIGABRT / SIGTERM from outside (the
session's handlers save before the process dies of the same signal).

(The handled signals are tried after 2 steps only: their save does not depend on the count.)
With the default ``--flush-every`` (1 s) the first completed step is saved at once and the
next ones at the next flush: a death that runs no Python code keeps step 1, and readers say
how many steps the monitor had seen. A handled signal saves them all; ``--flush-every 0``
saves each step as it completes, so every completed step loads whatever kills the job.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hermes.trace.segments import interrupted
from hermes.trace.validate import validate

SCRIPT = """
import ctypes, os, sys, time
import hermes
n, how, marker = int(sys.argv[1]), sys.argv[2], sys.argv[3]
for i in range(n):
    time.sleep(0.005)
    hermes.step()
if how == "abort":
    os.abort()
if how == "segv":
    ctypes.string_at(0)
open(marker, "w").close()
time.sleep(60)
"""
#: how the job dies -> (inside the job, signal it dies of, its handler saves every step)
DEATHS = {"sigkill": ("sleep", signal.SIGKILL, False),
          "abort": ("abort", signal.SIGABRT, False),
          "segfault": ("segv", signal.SIGSEGV, False),
          "sigabrt": ("sleep", signal.SIGABRT, True),
          "sigterm": ("sleep", signal.SIGTERM, True)}


def _start(tmp_path: Path, n: int, death: str, *flags: str
           ) -> tuple[subprocess.Popen[str], Path, Path]:
    d = tmp_path / f"{death}-{n}{''.join(flags)}"
    d.mkdir()
    script = d / "train.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hermes.cli", "profile", "--mode", "monitor", *flags, "--out",
         str(d / "tr"), "--", sys.executable, str(script), str(n), DEATHS[death][0],
         str(d / "ready")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HERMES_NO_PROGRESS": "1", "PYTHONFAULTHANDLER": ""})
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
    assert "Traceback" not in err


def _run_all(tmp_path: Path, cases: list[tuple[str, int]], *flags: str) -> dict[Any, Path]:
    """Start every job at once (two CPUs: one after the other would take a minute), then
    kill each as its case says; the trace each left, by case."""
    started = {(death, n): _start(tmp_path, n, death, *flags) for death, n in cases}
    try:
        for (death, _), (proc, marker, _) in started.items():
            _finish(proc, marker, death)
    finally:
        for proc, _, _ in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return {case: out for case, (_, _, out) in started.items()}


def _saved_steps(trace: Path) -> int:
    report = validate(trace)
    assert report.ok, report.errors
    return int(report.summary["steps"]["count"])


def test_a_killed_job_keeps_its_first_step_and_says_how_far_it_got(tmp_path: Path) -> None:
    # the deaths no Python code survives after 1, 2 and 5 steps; the handled ones after 2
    cases = [(death, n) for death in DEATHS for n in ((2,) if DEATHS[death][2] else (1, 2, 5))]
    for (death, n), out in _run_all(tmp_path, cases).items():
        handled = DEATHS[death][2]
        assert _saved_steps(out) == (n if handled else 1), (death, n)
        left = interrupted(out)
        if handled:  # closed cleanly by its handler: merged, no progress file left
            assert left == [], (death, n)
            assert sorted(p.name for p in out.iterdir()) == ["rank-00000.parquet"]
        else:
            assert left == [{"rank": 0, "pid": left[0]["pid"], "steps": n,
                             "running": False}], (death, n)


def test_flush_every_zero_keeps_every_step_and_every_reader_reads_them(tmp_path: Path) -> None:
    """--flush-every 0: each completed step saved as it ends; validate, analyze and report read
    all five steps of a job killed after its fifth and say the run was interrupted."""
    cases = [(death, 5) for death in ("sigkill", "abort", "segfault")]
    runs = _run_all(tmp_path, cases, "--flush-every", "0")
    for (death, n), out in runs.items():
        assert _saved_steps(out) == n, (death, n)
    out = runs[("sigkill", 5)]
    env = {**os.environ, "HERMES_NO_PROGRESS": "1"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hermes.cli", *args], capture_output=True,
                              text=True, timeout=120, env=env)
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
