"""Concurrent use of one output (issue 38 item 4): eight ranks publishing into one directory
at the same moment while a reader reads it, and two runs aimed at one ``--out``.

The rule (docs/trace-format.md, "Concurrent writers and readers"): each rank's files appear
atomically (temp name, then rename); a reader reads a consistent set of completed steps (never
a step twice, never a partial file); a second run aimed at a rank a running run is writing,
or at the saved steps of a killed run, is refused (exit 2 before the script starts under
``hermes profile``; an ``OutputError`` from ``hermes.profile()``), never mixed with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from hermes.errors import TraceFormatError
from hermes.trace import load
from hermes.trace.validate import validate

RANK_JOB = """
import os, sys, time
import hermes
import hermes.collectors.api, hermes.trace.segments  # imported before the start signal
out, rank, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
open(f"{go}.{rank}", "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
# even ranks publish a segment per step, odd ones journal their steps between checkpoints
with hermes.profile(out=out, mode="monitor", rank=rank, world_size=8,
                    flush_seconds=0 if rank % 2 == 0 else 1.0):
    for i in range(20):
        time.sleep(0.005)
        hermes.step()
"""
ENV = {**os.environ, "HERMES_NO_PROGRESS": "1"}


def _consistent(path: Path) -> dict[int, int] | None:
    """Steps per rank of one read of ``path`` (None before any file is published); every
    rank's steps are 0..k-1, each once: completed steps, none twice, none half-written."""
    try:
        ev = load(path, columns=["rank", "kind", "step"]).events
    except TraceFormatError as exc:
        assert "holds no *.parquet" in str(exc) or "no such file or directory" in str(exc), exc
        return None
    steps = ev[ev["kind"] == "step"]
    out = {}
    for rank, group in steps.groupby("rank", observed=True):
        got = np.sort(group["step"].to_numpy())
        assert (got == np.arange(len(got))).all(), (rank, got)
        out[int(rank)] = len(got)
    return out


def test_eight_ranks_publish_at_once_while_a_reader_reads(tmp_path: Path) -> None:
    out, go = tmp_path / "tr", tmp_path / "go"
    script = tmp_path / "rank.py"
    script.write_text(RANK_JOB)
    procs = [subprocess.Popen([sys.executable, str(script), str(out), str(r), str(go)],
                              env=ENV, stderr=subprocess.PIPE, text=True) for r in range(8)]
    deadline = time.monotonic() + 120  # all imported; then all start at the same moment
    while time.monotonic() < deadline and not all(
            Path(f"{go}.{r}").exists() for r in range(8)):
        time.sleep(0.01)
    go.touch()
    reads = []
    while any(p.poll() is None for p in procs):
        reads.append(_consistent(out))
    errs = [p.communicate()[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errs
    assert _consistent(out) == {r: 20 for r in range(8)}
    assert sorted(f.name for f in out.iterdir()) == [f"rank-{r:05d}.parquet" for r in range(8)]
    assert validate(out).ok
    partial = [r for r in reads if r and r != {k: 20 for k in range(8)}]
    assert partial, len(reads)  # it read while they wrote (and each read was consistent)


SLEEPER = """
import sys, time
import hermes
for i in range(2):
    time.sleep(0.002)
    hermes.step()
open(sys.argv[1], "w").close()
time.sleep(60)
"""


def _profile(out: Path, script: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "hermes.cli", "profile", "--mode", "monitor",
                             "--out", str(out), "--", sys.executable, str(script), *args],
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_runs_into_one_out_never_mix(tmp_path: Path) -> None:
    out, marker = tmp_path / "tr", tmp_path / "ready"
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(SLEEPER)
    other = tmp_path / "other.py"
    other.write_text("import hermes\nhermes.step()\nprint('ran')\n")
    first = _profile(out, sleeper, str(marker))
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.exists(), first.communicate()
        second = _profile(out, other)
        got, err = second.communicate(timeout=120)
        assert second.returncode == 2 and "ran" not in got, err
        assert "is being written by a running hermes profile run" in err, err
        assert err.count("hermes: error:") == 1 and "Traceback" not in err
        # the library call in a job not under `hermes profile`: refused the same way
        api = subprocess.run([sys.executable, "-c", "import hermes; hermes.profile(out="
                              f"{str(out)!r}, mode='monitor')"], env=ENV, capture_output=True,
                             text=True, timeout=120)
        assert api.returncode != 0 and "another run is writing rank-00000" in api.stderr
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    third = _profile(out, other)
    _, err = third.communicate(timeout=120)
    assert third.returncode == 2, err
    assert "holds the saved steps of an interrupted hermes profile run" in err, err
    report = validate(out)  # the killed run's two steps (one journaled), untouched by the
    assert report.ok and report.summary["steps"]["count"] == 2  # refused ones
    # once read (the journal turned into a segment), a new run is still refused
    fourth = _profile(out, other)
    _, err = fourth.communicate(timeout=120)
    assert fourth.returncode == 2 and "holds the saved steps of an interrupted" in err, err
