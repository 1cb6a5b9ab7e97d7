"""Disk full / file too large while writing: one line, exit 2, no partial file, the previous
output untouched. ``RLIMIT_FSIZE`` (with SIGXFSZ ignored) makes every write past the limit fail
with EFBIG, as a full disk fails with ENOSPC, in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bad_inputs.make_corpus import good_trace, kineto_text, write

CHILD = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.RLIM_INFINITY))
from hermes.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _run(limit: int, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, str(limit), *argv], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "HERMES_NO_PROGRESS": "1"})


def _check(res: subprocess.CompletedProcess[str], d: Path, keep: Path, before: bytes) -> None:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = [x for x in res.stderr.splitlines() if x.startswith("hermes: error:")]
    assert len(lines) == 1 and "internal error" not in lines[0], res.stderr
    assert keep.read_bytes() == before
    assert not [p for p in d.rglob("*") if ".tmp" in p.name], list(d.rglob("*"))


@pytest.mark.parametrize("command", ["export", "analyze", "import"])
def test_file_too_large_is_one_line_and_keeps_the_old_output(tmp_path: Path,
                                                             command: str) -> None:
    trace = good_trace(tmp_path, "t.parquet")
    if command == "import":
        src = write(tmp_path, "big.pt.trace.json", kineto_text(
            events=[{"ph": "X", "cat": "cpu_op", "name": f"op{i}" * 20, "pid": 1, "tid": 1,
                     "ts": i * 10, "dur": 5} for i in range(20000)]))
        out, argv = trace, ["import", str(src), "--out", str(trace)]
    else:
        out = tmp_path / ("o.json" if command == "export" else "o.md")
        out.write_text("previous\n")
        argv = [command, str(trace), "--out", str(out)]
        if command == "analyze":
            argv += ["--format", "md"]
    before = out.read_bytes()
    res = _run(1024 if command != "import" else 40_000, *argv)
    _check(res, tmp_path, out, before)
