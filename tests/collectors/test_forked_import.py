"""The forked in-memory import (``hermes.collectors.importers.forked``): the trace it hands back
is the in-process import's, a child that fails gives way to the in-process import (and its
error), and it forks only where it should.

Forking is tried in a fresh interpreter (``_run``): the test process may hold threads, where
:func:`forked.can_fork` rightly refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes.collectors.importers import forked
from tests.conftest import DATA

ROOT = Path(__file__).resolve().parents[2]

KINETO = DATA / "kineto"
SOURCES = ["gpt_dataloader_starved.pt.trace.json.gz", "two_stream_prefetch.pt.trace.json.gz",
           "sampled_rank-1.json.gz", "cuda_event_sync.json.gz"]
LINUX_2CPU = sys.platform.startswith("linux") and len(os.sched_getaffinity(0)) >= 2
needs_fork = pytest.mark.skipif(not LINUX_2CPU, reason="forks only on Linux with >= 2 CPUs")

SAME = """
import sys, pickle
from pathlib import Path
import pandas as pd
import hermes.collectors.importers.kineto.importer as ki
from hermes.collectors.importers import forked
from hermes.diff.runs import import_in_memory
ki.ROW_GROUP_ROWS = 97  # several row groups: the categories' order depends on them
src = Path(sys.argv[1])
pending = forked.start(src)
assert pending is not None, "no fork"
fd = pending.fd
got = pending.result()
import os
assert pending.fd == -1 and not os.path.exists(f"/proc/self/fd/{fd}"), "left open"
ref = import_in_memory(src)
pd.testing.assert_frame_equal(got.events, ref.events, check_exact=True)
for c in ("lane", "kind", "name", "lane_kind", "unit", "coll_group"):
    assert list(got.events[c].cat.categories) == list(ref.events[c].cat.categories), c
assert got.meta == ref.meta
print(len(got.events))
"""


def _run(script: str, *args: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, **(env or {})}, timeout=300)


@needs_fork
@pytest.mark.parametrize("name", SOURCES)
def test_the_forked_import_is_the_in_process_import(name: str) -> None:
    r = _run(SAME, str(KINETO / name))
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) > 0


FAILED_CHILD = """
import os, sys
from pathlib import Path
from hermes.collectors.importers import forked
from hermes.commands._util import hermes_source
how = sys.argv[2]
real_child = forked._child
if how == "exit":  # the child ends before writing anything
    forked._child = lambda imp, src, fd: os._exit(3)
elif how == "kill":  # the child is killed half-way through its stream
    real = forked._child
    def half(imp, src, fd):
        os.write(fd, forked._MAGIC + b"\\xff\\xff\\xff\\xff")
        os.kill(os.getpid(), 9)
    forked._child = half
src = Path(sys.argv[1])
pending = forked.start(src)
assert pending is not None and pending.result() is None and pending.fd == -1
pending = forked.start(src)
with hermes_source(src, started=pending) as tr:  # falls back to the in-process import
    print(len(tr.events))
if how == "exit":  # a cancelled import: the child ended, its file removed
    forked._child = real_child
    pending = forked.start(src)
    pid = pending.pid
    pending.cancel()
    assert pending.fd == -1
    try:
        os.kill(pid, 0)
        raise AssertionError("the child still runs")
    except ProcessLookupError:
        pass
"""


@needs_fork
@pytest.mark.parametrize("how", ["exit", "kill"])
def test_a_failed_child_gives_way_to_the_in_process_import(how: str) -> None:
    from hermes.diff.runs import import_in_memory

    src = KINETO / SOURCES[1]
    r = _run(FAILED_CHILD, str(src), how)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == len(import_in_memory(src).events)


@needs_fork
def test_a_malformed_file_gives_the_same_error_with_and_without_the_fork(
        tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt.trace.json"
    good = (KINETO / "cuda_event_sync.json.gz").read_bytes()
    import gzip

    text = gzip.decompress(good).decode()
    bad.write_text(text[: len(text) // 2] + '{"ph": "X", "ts": "oops"')  # cut mid-event
    cmd = "from hermes.cli import main; main()"
    runs = [_run(cmd, "analyze", str(bad), env={forked.ENV: flag}) for flag in ("1", "0")]
    assert runs[0].returncode == runs[1].returncode == 2
    assert runs[0].stderr == runs[1].stderr and runs[0].stderr.count("\n") == 1
    assert "Traceback" not in runs[0].stderr and str(bad) in runs[0].stderr


@needs_fork
def test_analyze_output_is_the_same_with_and_without_the_fork() -> None:
    src = KINETO / SOURCES[0]
    cmd = "from hermes.cli import main; main()"
    runs = [_run(cmd, "analyze", str(src), "--format", "json", env={forked.ENV: flag})
            for flag in ("1", "0")]
    assert runs[0].returncode == runs[1].returncode == 0, runs[0].stderr + runs[1].stderr
    assert runs[0].stdout == runs[1].stdout
    assert json.loads(runs[0].stdout)["findings"]


def test_nothing_is_left_in_the_temporary_folder(tmp_path: Path) -> None:
    """The child's file is removed from its folder as soon as it is made: a forked import
    leaves nothing there, whether it succeeds, fails or is cancelled."""
    env = {"TMPDIR": str(tmp_path)}
    for how in ("exit", "kill"):
        r = _run(FAILED_CHILD, str(KINETO / SOURCES[1]), how, env=env)
        assert r.returncode == 0, r.stderr
    r = _run(SAME, str(KINETO / SOURCES[1]), env=env)
    assert r.returncode == 0, r.stderr
    # the parent killed while its child still writes: the child ends, nothing stays behind
    r = _run(ORPHAN, str(KINETO / SOURCES[0]), env=env)
    assert r.returncode == -9
    child = int(r.stdout)
    deadline = time.monotonic() + 120
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.iterdir()) == []


ORPHAN = """
import os, sys
from pathlib import Path
from hermes.collectors.importers import forked
pending = forked.start(Path(sys.argv[1]))
print(pending.pid, flush=True)
os.kill(os.getpid(), 9)
"""


def test_no_fork_where_it_should_not(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(forked.ENV, "0")
    assert not forked.can_fork()
    assert forked.start(KINETO / SOURCES[0]) is None
    monkeypatch.setenv(forked.ENV, "1")
    monkeypatch.setattr(forked.threading, "active_count", lambda: 2)  # another thread runs
    assert not forked.can_fork()
    monkeypatch.setattr(forked.threading, "active_count", lambda: 1)
    monkeypatch.setattr(forked.os, "fork", lambda: pytest.fail("forked"))
    assert forked.start(KINETO) is None  # a directory: imported per rank, as a path
    assert forked.start(DATA / "ascend" / "trace_view.json") is None  # no in-memory import
    assert forked.start(tmp_path / "missing.json") is None


NO_PANDAS = """
import sys
from pathlib import Path
from hermes.collectors import importers
src = Path(sys.argv[1])
table = importers.get("kineto").run([src], src.with_name("x.parquet"),
                                    {"in_memory": "arrow"}).trace
assert table.num_rows > 0 and b"hermes.ranks" in table.schema.metadata
print("pandas" in sys.modules)
"""


@pytest.mark.parametrize("name", SOURCES)
def test_an_import_into_arrow_loads_no_pandas(name: str) -> None:
    """What the forked child runs needs no pandas (~0.3 s of the parent's imports it overlaps):
    the in-memory writer builds its arrays from buffers, never with ``pa.array``."""
    r = _run(NO_PANDAS, str(KINETO / name))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


DONE = """
import os, sys, time
from pathlib import Path
from hermes.collectors.importers import forked
pending = forked.start(Path(sys.argv[1]))
assert pending is not None, "no fork"
while not pending.done():
    time.sleep(0.01)
assert pending.done()  # asked again: still done (the status is kept, not waited for twice)
os.kill = lambda pid, sig: sys.exit("killed a reaped child's pid")  # (it may be reused)
trace = pending.result()
print(len(trace.events))
pending.cancel()
"""


@needs_fork
def test_a_child_seen_ended_is_read_and_never_killed() -> None:
    """``done`` reaps the child without waiting; ``result`` then reads its trace from the
    status kept, and ``cancel`` sends no signal to a pid that may now be another process's."""
    from hermes.diff.runs import import_in_memory

    src = KINETO / SOURCES[2]
    r = _run(DONE, str(src))
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == len(import_in_memory(src).events)


WRITTEN = """
import os, sys, time
from pathlib import Path
from hermes.collectors.importers import forked
real = forked._child
def lingering(imp, src, fd, written):  # the real child, slow to end once it said it wrote all
    real_exit = os._exit
    os._exit = lambda code: (time.sleep(3), real_exit(code))
    real(imp, src, fd, written)
forked._child = lingering
pending = forked.start(Path(sys.argv[1]))
assert pending is not None, "no fork"
pid = pending.pid
trace = pending.result()
assert os.waitpid(pid, os.WNOHANG) == (0, 0), "the trace was read only once the child ended"
pending.cancel()  # waits for it: it ends by itself
try:
    os.kill(pid, 0)
    raise AssertionError("the child still runs")
except ProcessLookupError:
    pass
print(len(trace.events))
"""


@needs_fork
def test_the_trace_is_read_as_soon_as_the_child_has_written_it() -> None:
    """The child says on a pipe when all of its output is written: the parent reads the trace
    then, not once the child has ended (its exit frees its memory: ~10 ms for 200k events)."""
    from hermes.diff.runs import import_in_memory

    src = KINETO / SOURCES[2]
    r = _run(WRITTEN, str(src))
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == len(import_in_memory(src).events)


PREPARED = """
import sys
from pathlib import Path
from hermes import devices
from hermes.collectors import importers
from hermes.collectors.importers import forked
imp = importers.get("kineto")
fail = sys.argv[2] == "fail"
calls = []
def prepare():
    calls.append(1)
    if fail:
        raise RuntimeError("no profiles")
    devices.profiles()
object.__setattr__(imp, "prepare", prepare)
pending = forked.start(Path(sys.argv[1]))
assert pending is not None, "no fork"
# before the fork: the profiles are read once, here, for both processes
print(len(calls), devices.profiles.cache_info().currsize, len(pending.result().events))
"""


@needs_fork
@pytest.mark.parametrize("how", ["ok", "fail"])
def test_the_importers_preparation_runs_once_before_the_fork(how: str) -> None:
    """What both processes would do (the device profiles read) is done before the fork; a
    preparation that fails costs nothing but itself: the import goes on."""
    from hermes.diff.runs import import_in_memory

    src = KINETO / SOURCES[0]
    r = _run(PREPARED, str(src), how)
    assert r.returncode == 0, r.stderr
    calls, cached, n = map(int, r.stdout.split())
    assert calls == 1 and n == len(import_in_memory(src).events)
    assert cached == (1 if how == "ok" else 0)


def test_the_kineto_importer_prepares_the_device_profiles() -> None:
    from hermes import devices
    from hermes.collectors import importers

    devices.profiles.cache_clear()
    importers.get("kineto").prepare()
    assert devices.profiles.cache_info().currsize == 1


KILLED_MIDWAY = """
import os, sys
from pathlib import Path
import hermes.collectors.importers.kineto.importer as ki
from hermes.collectors.importers import forked
def die(*args, **kwargs):  # in the child, inside the importer's run: killed there
    os.kill(os.getpid(), 9)
ki._import_file = die
pending = forked.start(Path(sys.argv[1]))
assert pending is not None and pending.result() is None
print("ok")
"""


@needs_fork
def test_a_child_killed_inside_the_import_leaves_nothing_behind(tmp_path: Path) -> None:
    """An import into memory makes no scratch folder (its spool is in memory): a child killed
    half-way (``Pending.cancel`` sends SIGKILL) has nothing on disk to leave."""
    r = _run(KILLED_MIDWAY, str(KINETO / SOURCES[0]), env={"TMPDIR": str(tmp_path)})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    assert list(tmp_path.iterdir()) == []
