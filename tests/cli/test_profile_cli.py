"""`hermes profile -- python SCRIPT`: pass-through, crash/kill safety, ranks, bad invocations."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import hermes
from hermes.trace.validate import validate
from tests.conftest import REPO, run_cli

LOOP = textwrap.dedent("""
    import sys, time
    import hermes
    n = int(sys.argv[1])
    for i in range(n):
        with hermes.region("work"):
            time.sleep(float(sys.argv[2]))
        hermes.step(samples=2)
        print("done", i, flush=True)
    if len(sys.argv) > 3 and sys.argv[3] == "crash":
        raise RuntimeError("boom")
    sys.exit(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
""")


def _script(tmp_path: Path, text: str = LOOP, name: str = "train.py") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _profile(*args: str, env: dict[str, str] | None = None, **kw: object) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "hermes.cli", "profile", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, **kw)


def _steps(out: Path) -> list[int]:
    ev = hermes.load(out).events
    return sorted(ev[ev.kind == "step"].step.astype(int).tolist())


def test_exit_code_argv_and_stdio_pass_through(tmp_path: Path) -> None:
    script = _script(tmp_path, textwrap.dedent("""
        import sys
        line = sys.stdin.readline().strip()
        print("argv", sys.argv[0].endswith("echo.py"), sys.argv[1:], "stdin", line)
        print("to stderr", file=sys.stderr)
        print("name", __name__)
        sys.exit(7)
    """), "echo.py")
    out = tmp_path / "trace"
    p = _profile("--out", str(out), "--", sys.executable, str(script), "a b", "--flag",
                 stdin=subprocess.PIPE)
    stdout, stderr = p.communicate("hello\n", timeout=60)
    assert p.returncode == 7
    assert "argv True ['a b', '--flag'] stdin hello" in stdout
    assert "name __main__" in stdout
    assert "to stderr" in stderr
    assert validate(out).ok


def test_sigterm_keeps_every_completed_step(tmp_path: Path) -> None:
    out = tmp_path / "trace"
    p = _profile("--mode", "fine", "--out", str(out), "--", sys.executable,
                 str(_script(tmp_path)), "1000", "0.01")
    done = -1
    assert p.stdout is not None
    while done < 5:
        line = p.stdout.readline()
        assert line, p.stderr.read() if p.stderr else ""
        done = int(line.split()[1])
    p.send_signal(signal.SIGTERM)
    rest, _ = p.communicate(timeout=60)
    done = max([done] + [int(x.split()[1]) for x in rest.splitlines() if x.startswith("done")])
    assert p.returncode == -signal.SIGTERM
    assert validate(out).ok
    steps = _steps(out)
    assert steps[: done + 1] == list(range(done + 1))  # every completed step is there
    trace = hermes.load(out)
    assert trace.meta.extra["ended_by"] == "SIGTERM"
    marks = trace.events[trace.events.name == "work"]
    assert set(range(done + 1)) <= set(marks.step.astype(int))


def test_sigint_and_crash_publish_the_trace(tmp_path: Path) -> None:
    out = tmp_path / "int"
    # a shell without job control starts background jobs with SIGINT ignored, and Python keeps an
    # ignored SIGINT ignored: give the profiler the default disposition, as a terminal would
    p = _profile("--out", str(out), "--", sys.executable, str(_script(tmp_path)), "1000", "0.01",
                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert p.stdout is not None
    while not p.stdout.readline().startswith("done 3"):
        pass
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=60)
    assert p.returncode != 0
    assert validate(out).ok and _steps(out)[:4] == [0, 1, 2, 3]

    crash = tmp_path / "crash"
    p = _profile("--out", str(crash), "--", sys.executable, str(_script(tmp_path)), "4", "0",
                 "crash")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1 and "RuntimeError: boom" in err
    assert _steps(crash) == [0, 1, 2, 3]
    assert hermes.load(crash).meta.extra["ended_by"] == "RuntimeError"


def test_torchrun_style_ranks_share_one_directory(tmp_path: Path) -> None:
    out = tmp_path / "job"
    script = _script(tmp_path)
    procs = [_profile("--mode", "monitor", "--out", str(out), "--", sys.executable,
                      str(script), "3", "0", env={"RANK": str(r), "WORLD_SIZE": "2"})
             for r in (0, 1)]
    for p in procs:
        p.communicate(timeout=60)
        assert p.returncode == 0
    assert sorted(f.name for f in out.glob("*.parquet")) == ["rank-00000.parquet",
                                                            "rank-00001.parquet"]
    trace = hermes.load(out)
    assert trace.meta.ranks == (0, 1)
    steps = trace.events[trace.events.kind == "step"]
    assert steps.groupby("rank").size().tolist() == [3, 3]


def test_on_demand_capture_with_a_trigger_file(tmp_path: Path) -> None:
    flag = tmp_path / "capture-now"
    script = _script(tmp_path, textwrap.dedent(f"""
        import pathlib, time
        import hermes
        for i in range(12):
            with hermes.region("work"):
                time.sleep(0.001)
            if i == 4:
                pathlib.Path({str(flag)!r}).write_text("2")
                time.sleep(0.6)  # longer than the trigger file's poll interval
            hermes.step()
    """))
    out = tmp_path / "trace"
    p = _profile("--mode", "auto", "--trigger-file", str(flag), "--out", str(out), "--",
                 sys.executable, str(script))
    p.communicate(timeout=60)
    assert p.returncode == 0
    trace = hermes.load(out)
    work = trace.events[trace.events.name == "work"]
    requests = trace.meta.collector["requests"]
    by_file = [r for r in requests if r["reason"].startswith("trigger file")]
    assert [(r["from_step"], r["to_step"]) for r in by_file] == [(5, 6)]
    # 1 ms steps on a shared machine may also trip the slow-step detector: only the windows
    # that were requested may hold detail, and the file's window must.
    allowed = {s for r in requests for s in range(r["from_step"], r["to_step"] + 1)}
    assert {5, 6} <= set(work.step.astype(int)) <= allowed
    assert not flag.exists()


@pytest.mark.parametrize("args, needle", [
    (["--"], "nothing to run"),
    ([], "nothing to run"),
    (["--", sys.executable, "/no/such/train.py"], "does not exist"),
    (["--", "ls", "-l"], "not a Python interpreter"),
    (["--mode", "sometimes", "--", sys.executable, __file__], "unknown --mode"),
])
def test_bad_invocations_exit_2(args: list[str], needle: str) -> None:
    code, _, err = run_cli("profile", *args)
    assert code == 2
    assert needle in err and err.count("\n") == 1


def test_unwritable_out_exits_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run_cli("profile", "--out", str(blocker / "trace"), "--", sys.executable,
                           __file__)
    assert code == 2 and "output" in err
    code, _, err = run_cli("profile", "--out", "/proc/hermes-trace", "--", sys.executable,
                           __file__)
    assert code == 2 and "not writable" in err


def test_pytorch_example_yields_host_ops_and_steps(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from hermes.collectors import importers

    try:
        importers.get("kineto")
    except hermes.HermesError:
        pytest.skip("the kineto importer is not in this tree yet")
    out = tmp_path / "torch"
    t0 = time.time()
    p = _profile("--mode", "fine", "--out", str(out), "--", sys.executable,
                 str(REPO / "examples" / "train_torch_cpu.py"), "--steps", "5")
    stdout, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert stdout.count("loss") == 5 and time.time() - t0 < 120
    assert validate(out).ok
    ev = hermes.load(out).events
    assert _steps(out) == [0, 1, 2, 3, 4]
    ops = ev[ev.kind == "host_op"]
    assert {"aten::linear", "aten::relu"} <= set(ops.name.astype(str))
    # the profiler starts at the first optimizer step (wait = 1 step): steps 1.. have operators
    assert set(ops.step.astype(int)) >= {1, 2, 3, 4}
    assert (ev.kind == "data_wait").sum() >= 5
    # the DataLoader's configuration rides on its waits (the example loads in-process)
    waits = ev[(ev.kind == "data_wait") & (ev.name == "DataLoader.__next__")]
    assert len(waits) >= 5
    assert {json.loads(a)["num_workers"] for a in waits.args} == {0}
    assert {json.loads(a)["pin_memory"] for a in waits.args} == {False}
