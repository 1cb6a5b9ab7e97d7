"""``hermes profile`` must survive what it observes: a script killed with SIGKILL or aborted
keeps every completed step in a trace that validates, and faults of the profiler itself inside
the job (bad RANK, a broken trigger file, the output removed mid-run) are one warning, never a
stopped job. These spawn real processes (signals cannot be tested in-process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes.trace.validate import validate

SCRIPT = """
import os, sys, time
import hermes
n, how, marker = int(sys.argv[1]), sys.argv[2], sys.argv[3]
for i in range(n):
    time.sleep(0.01)
    hermes.step()
open(marker, "w").close()
if how == "abort":
    os.abort()
if how == "sleep":
    time.sleep(120)
if how == "rmout":
    import shutil
    shutil.rmtree(sys.argv[4])
print("script done")
"""


def _start(tmp_path: Path, n: int, how: str, *extra: str, env: dict[str, str] | None = None,
           out: str = "tr") -> tuple[subprocess.Popen[str], Path]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    marker = tmp_path / "done"
    cmd = [sys.executable, "-m", "hermes.cli", "profile", "--mode", "monitor",
           "--flush-every", "0", "--out", str(tmp_path / out), *extra, "--",
           sys.executable, str(script), str(n), how, str(marker), str(tmp_path / out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HERMES_NO_PROGRESS": "1", **(env or {})})
    return proc, marker


def _steps(trace: Path) -> int:
    report = validate(trace)
    assert report.ok, report.errors
    return int(report.summary["steps"]["count"])


def test_sigkill_keeps_every_completed_step(tmp_path: Path) -> None:
    proc, marker = _start(tmp_path, 7, "sleep")
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert _steps(tmp_path / "tr") == 7


def test_abort_keeps_every_completed_step(tmp_path: Path) -> None:
    proc, _ = _start(tmp_path, 5, "abort")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGABRT
    assert "Traceback" not in err
    assert _steps(tmp_path / "tr") == 5


def test_clean_exit_merges_the_segments(tmp_path: Path) -> None:
    proc, _ = _start(tmp_path, 4, "exit", out="one.parquet")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "script done" in out, err
    assert _steps(tmp_path / "one.parquet") == 4
    assert not (tmp_path / "one.parquet.partial").exists()


@pytest.mark.parametrize("env", [{"RANK": "\u00b2"}, {"WORLD_SIZE": "1.5"},
                                 {"RANK": "99999999999999999999"}])
def test_bad_rank_env_never_stops_the_job(tmp_path: Path, env: dict[str, str]) -> None:
    proc, _ = _start(tmp_path, 2, "exit", env=env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "script done" in out, err
    assert "Traceback" not in err
    assert len([x for x in err.splitlines() if x.startswith("hermes: warning:")]) == 1, err


def test_output_removed_mid_run_is_one_warning(tmp_path: Path) -> None:
    proc, _ = _start(tmp_path, 3, "rmout")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "script done" in out, err
    assert "Traceback" not in err


@pytest.mark.parametrize("content", [b"\xff\xfe", "\u00b2".encode(), b"9" * 40, None])
def test_broken_trigger_file_is_ignored(tmp_path: Path, content: bytes | None) -> None:
    trig = tmp_path / "trig"
    if content is None:
        os.mkfifo(trig)  # reading it would block the job forever
    else:
        trig.write_bytes(content)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, "-m", "hermes.cli", "profile", "--mode", "auto", "--trigger-file",
           str(trig), "--out", str(tmp_path / "tr"), "--", sys.executable, str(script), "3",
           "exit", str(tmp_path / "m")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "HERMES_NO_PROGRESS": "1"})
    assert res.returncode == 0 and "script done" in res.stdout, res.stderr
    assert "Traceback" not in res.stderr
    assert _steps(tmp_path / "tr") == 3
