"""benchmarks/childproc.py: a child's peak RSS is its own, not its parent's (Linux keeps a
process's peak RSS across exec, so a child started straight from a big parent reports the
parent's size)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from childproc import run_child  # noqa: E402

MIB = 2**20


def test_a_big_parent_is_not_counted_in_its_childs_peak() -> None:
    ballast = bytearray(400 * MIB)
    ballast[::4096] = b"\1" * len(ballast[::4096])  # resident, not just reserved
    small = run_child([sys.executable, "-c", "pass"])
    assert small.code == 0
    assert small.rss_gib * 1024 < 100, small  # a bare interpreter: ~10-15 MiB
    # what the naive measurement says, for contrast (the reason the launcher exists)
    import os

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    _, _, usage = os.wait4(proc.pid, 0)
    assert usage.ru_maxrss / 1024 > 400
    del ballast


def test_the_childs_own_memory_its_output_and_exit_code_come_back() -> None:
    code = ("import sys; b = bytearray(300 * 2**20); b[::4096] = b'\\1' * len(b[::4096]); "
            "print('done'); sys.exit(3)")
    c = run_child([sys.executable, "-c", code])
    assert c.code == 3
    assert c.stdout.strip() == "done"
    assert 300 <= c.rss_gib * 1024 < 400, c
    assert c.wall_s > 0 and c.cpu_s > 0
