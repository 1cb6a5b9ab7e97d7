"""A child process's wall time and peak RSS, measured so that the parent's size does not count.

Linux keeps a process's peak RSS across ``exec``: a child started by ``subprocess`` (vfork or
fork, then exec) reports in ``ru_maxrss`` at least the resident size of the memory it shared
before the exec -- the whole parent's. Measured here: a parent holding 800 MiB runs
``python -c pass`` and ``wait4`` says 813 MiB; from a small parent, 14 MiB. A benchmark whose
parent has read a trace, generated one or imported pandas would add that to every figure of its
children. So the measured command runs under a minimal launcher (``python -S``, a few MiB),
which forks, execs the command and reports the command's own ``wait4`` figures.

A helper of the benchmarks (no command of its own).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

#: fork, exec, wait4; writes "wall_s maxrss_kib cpu_s" to argv[1]; exits as the command did
_LAUNCH = """
import os, sys, time
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t
with open(sys.argv[1], "w") as f:
    f.write(f"{wall} {ru.ru_maxrss} {ru.ru_utime + ru.ru_stime}")
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


@dataclass(frozen=True)
class Child:
    """What one run of a command did: ``wall_s`` around its fork and exit, ``rss_gib`` its own
    peak RSS (``wait4``), ``cpu_s`` user + system time, its stdout/stderr and exit code."""

    wall_s: float
    rss_gib: float
    cpu_s: float
    stdout: str
    stderr: str
    code: int


def run_child(cmd: Sequence[str], env: dict[str, str] | None = None) -> Child:
    """Run ``cmd`` (``env``: added to this environment) under the launcher; see the module doc."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rusage") as ru:
        proc = subprocess.run([sys.executable, "-S", "-c", _LAUNCH, ru.name, *cmd], stdout=out,
                              stderr=err, env={**os.environ, **env} if env else None)
        out.seek(0)
        err.seek(0)
        text = ru.read().split()
        if len(text) != 3:
            raise RuntimeError(f"{' '.join(cmd[:3])} ...: the launcher reported nothing "
                               f"(exit {proc.returncode})")
        wall, kib, cpu = float(text[0]), int(text[1]), float(text[2])
        return Child(wall, kib / 2**20, cpu, out.read().decode(errors="replace"),
                     err.read().decode(errors="replace"), proc.returncode)
