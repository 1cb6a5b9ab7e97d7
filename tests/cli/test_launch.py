"""The console script's early start (``hermes.commands._launch``): the trace argument read
without the CLI, the import started before typer loads, taken by ``analyze`` or ended."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes.commands import _launch
from tests.conftest import DATA

ROOT = Path(__file__).resolve().parents[2]
SRC = DATA / "kineto" / "gpt_dataloader_starved.pt.trace.json.gz"
LINUX_2CPU = sys.platform.startswith("linux") and len(os.sched_getaffinity(0)) >= 2


@pytest.mark.parametrize(("argv", "want"), [
    (["analyze", "t.json"], "t.json"),
    (["analyze", "--format", "json", "t.json", "-o", "r.json"], "t.json"),
    (["analyze", "-fjson", "--top=3", "-r", "0", "--rank", "1", "t.json"], "t.json"),
    (["analyze", "--keep-warmup", "--allow-missing", "-j", "1", "t.json"], "t.json"),
    (["analyze", "--", "-t.json"], "-t.json"),  # after --, a name that looks like an option
    (["analyze", "--workers", "0", "t.json"], "t.json"),
])
def test_the_trace_argument_is_found(argv: list[str], want: str) -> None:
    assert _launch.early_source(argv) == Path(want)


@pytest.mark.parametrize("argv", [
    [], ["analyze"], ["import", "t.json"], ["diff", "a.json", "b.json"],
    ["analyze", "a.json", "b.json"],  # two traces: the CLI's error
    ["analyze", "--help", "t.json"], ["analyze", "t.json", "-h"],
    ["analyze", "--workers", "4", "t.json"], ["analyze", "-j4", "t.json"],
    ["analyze", "-j", "x", "t.json"],  # not a number: the CLI's error
    ["analyze", "--scheduler", "local", "t.json"], ["analyze", "--save-trace=k.parquet", "t.json"],
    ["analyze", "--bogus", "t.json"], ["analyze", "--keep-warmup=1", "t.json"],
    ["analyze", "t.json", "--format"],  # a value missing
])
def test_no_early_start_where_the_cli_might_decide_otherwise(argv: list[str]) -> None:
    assert _launch.early_source(argv) is None


def test_a_dask_scheduler_in_the_environment_means_no_early_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:8786")
    assert _launch.early_source(["analyze", "t.json"]) is None


def test_the_option_lists_are_the_commands_options() -> None:
    """Every option ``analyze`` has is in one of the launcher's lists, with or without a value
    as the command takes it: a new option cannot make the launcher misread the trace."""
    import typer.main

    from hermes.cli import app

    cmd = typer.main.get_command(app).commands["analyze"]  # type: ignore[attr-defined]
    value, flag = set(), set()
    for p in cmd.params:
        if p.param_type_name != "option":
            continue
        names = set(p.opts) | set(p.secondary_opts)
        (flag if p.is_flag else value).update(names)
    assert value == _launch.VALUE_OPTIONS
    assert flag - {"--help", "-h"} == _launch.FLAG_OPTIONS


LAUNCH = "from hermes.commands._launch import main; main()"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LAUNCH, *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=300)


@pytest.mark.skipif(not LINUX_2CPU, reason="forks only on Linux with >= 2 CPUs")
def test_the_console_script_gives_the_clis_output() -> None:
    early = _run("analyze", str(SRC), "--format", "json")
    late = _run("analyze", str(SRC), "--format", "json", env={"HERMES_FORKED_IMPORT": "0"})
    assert early.returncode == late.returncode == 0, early.stderr + late.stderr
    assert early.stdout == late.stdout and early.stderr == late.stderr


TAKEN = """
import sys
from pathlib import Path
from hermes.collectors.importers import forked
from hermes.commands import _launch
_launch.start_early(["analyze", sys.argv[1]])
kept = forked._early
assert kept is not None and kept[1].pid > 0, "not started"
assert forked.start(Path(sys.argv[1])) is kept[1] and forked._early is None  # taken
other = Path(sys.argv[2])
_launch.start_early(["analyze", sys.argv[1]])
first = forked._early[1]
pending = forked.start(other)  # another file: the early one is ended, a new one started
assert forked._early is None and first.pid == 0 and pending is not first
print(len(pending.result().events))
"""


@pytest.mark.skipif(not LINUX_2CPU, reason="forks only on Linux with >= 2 CPUs")
def test_an_early_import_is_taken_by_the_same_file_only() -> None:
    from hermes.diff.runs import import_in_memory

    other = DATA / "kineto" / "two_stream_prefetch.pt.trace.json.gz"
    r = subprocess.run([sys.executable, "-c", TAKEN, str(SRC), str(other)], capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == len(import_in_memory(other).events)


@pytest.mark.skipif(not LINUX_2CPU, reason="forks only on Linux with >= 2 CPUs")
def test_an_import_no_command_took_is_ended(tmp_path: Path) -> None:
    """The command fails before it needs the trace (its output would overwrite it): the early
    child is ended with the process, not left to parse on."""
    script = ("import sys\nfrom hermes.collectors.importers import forked\n"
              "orig = forked.Pending.cancel\n"
              "def cancel(self):\n    print('ended', self.pid, flush=True)\n    orig(self)\n"
              "forked.Pending.cancel = cancel\n" + LAUNCH)
    r = subprocess.run([sys.executable, "-c", script, "analyze", str(SRC), "-o", str(SRC)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 2 and "overwrite an input" in r.stderr
    words = r.stdout.split()
    assert words[0] == "ended" and int(words[1]) > 0
    deadline = time.monotonic() + 30
    while Path(f"/proc/{words[1]}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{words[1]}").exists()


GC_STATE = """
import gc, sys
from hermes.commands import _util
seen = []
orig = _util.release_gc
def release():
    seen.append((gc.isenabled(), "pandas" in sys.modules,
                 "hermes.analyzers.critical_path.analysis" in sys.modules,
                 "hermes.report.text" in sys.modules))
    orig()
    seen.append((gc.isenabled(), gc.get_freeze_count() > 0))
_util.release_gc = release
import hermes.cli
def quick_exit(code):
    print(seen, gc.isenabled(), flush=True)
hermes.cli._quick_exit = quick_exit
""" + LAUNCH


@pytest.mark.skipif(not LINUX_2CPU, reason="forks only on Linux with >= 2 CPUs")
def test_the_collector_is_off_while_an_early_analyze_loads_its_modules() -> None:
    """``analyze FILE`` started early: the collector stays off through the analysis stage's
    imports (pandas, the analyzers, the renderer, all loaded while the child parses) and is
    back on, with them frozen, before the analysis."""
    r = subprocess.run([sys.executable, "-c", GC_STATE, "analyze", str(SRC)], capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]  # after the report
    assert last == "[(False, True, True, True), (True, True)] True"  # on at the end too


def test_the_collector_is_on_for_a_command_started_without_an_import() -> None:
    r = subprocess.run([sys.executable, "-c", "import gc, hermes.cli\n"
                        "hermes.cli.app.command('gcstate')(lambda: print(gc.isenabled()))\n"
                        + LAUNCH, "gcstate"], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


def test_hold_and_release_leave_a_callers_own_setting_alone() -> None:
    import gc

    from hermes.commands import _util

    assert gc.isenabled()
    _util.hold_gc()
    try:
        assert not gc.isenabled()
        _util.hold_gc()  # already off: still held once
    finally:
        _util.release_gc()
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    gc.disable()  # the caller's choice: neither call changes it
    try:
        _util.hold_gc()
        _util.release_gc()
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
    assert frozen > 0


BLAS = """
import os, sys
def before():
    tasks = [open(f"/proc/self/task/{t}/comm").read().strip()
             for t in os.listdir("/proc/self/task")]
    print("FORK", os.environ.get("OPENBLAS_NUM_THREADS"), tasks.count("python"), flush=True)
os.register_at_fork(before=before)
import hermes.cli
def main():
    print("CLI", os.environ.get("OPENBLAS_NUM_THREADS"), flush=True)
    sys.exit(0)
hermes.cli.main = main
""" + LAUNCH


@pytest.mark.skipif(not LINUX_2CPU, reason="forks only on Linux with >= 2 CPUs")
@pytest.mark.parametrize("user", [None, "2"])
def test_numpy_loads_with_one_blas_thread_and_the_environment_is_left_as_it_was(user):
    """The early import loads numpy with OpenBLAS on one thread (no thread of its own spinning
    beside the import until the fork, where OpenBLAS ends its threads); the variable is gone
    from the environment once the import is started (a training script that ``hermes profile``
    starts must not inherit it); a value the user set is the one used, and kept."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if user:
        env["OPENBLAS_NUM_THREADS"] = user
    r = subprocess.run([sys.executable, "-c", BLAS, "analyze", str(SRC)], capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith(("FORK", "CLI"))]
    assert lines == (["FORK 2 2", "CLI 2"] if user else ["FORK 1 1", "CLI None"])
