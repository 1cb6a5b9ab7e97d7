"""`hermes profile -- LAUNCHER ...`: which command lines are wrapped, which script the workers
run, what is refused (one line naming what to run instead), and the worker bootstrap's own
reading of an interpreter's command line. No launcher is started here (see
test_profile_torchrun.py for real torchrun jobs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes.collectors import launchers
from hermes.collectors.launcher import parse_command
from hermes.errors import UsageError
from tests.conftest import run_cli


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "train.py"
    p.write_text("print('hi')\n")
    return p


@pytest.mark.parametrize("cmd, launcher, module", [
    (["torchrun", "--nproc-per-node", "2", "train.py", "--lr", "1"], "torchrun", False),
    (["torchrun", "--nproc_per_node=2", "--standalone", "train.py"], "torchrun", False),
    (["torchrun", "--nnodes", "1", "-m", "pkg.train", "--x"], "torchrun", True),
    (["torchrun", "--no-python", "python", "-u", "train.py"], "torchrun", False),
    (["/usr/bin/python3", "-m", "torch.distributed.run", "--nproc-per-node", "2", "train.py"],
     "torchrun", False),
    (["python", "-u", "-m", "torch.distributed.launch", "--use-env", "train.py"], "torchrun",
     False),
    (["accelerate", "launch", "--cpu", "--num_processes", "2", "train.py"],
     "accelerate launch", False),
    (["accelerate", "launch", "--mixed_precision=bf16", "-m", "pkg.train"],
     "accelerate launch", True),
    (["deepspeed", "--num_gpus", "2", "train.py", "--deepspeed"], "deepspeed", False),
])
def test_launcher_command_lines_name_the_workers_script(script: Path, cmd: list[str],
                                                        launcher: str, module: bool) -> None:
    w = launchers.wrap(cmd, parse_command)
    assert w is not None and w.launcher == launcher and w.argv == cmd
    assert w.is_module is module
    assert w.target == ("pkg.train" if module else os.path.realpath(script))
    env = launchers.worker_env(w, {"PYTHONPATH": "/x"}, "bye")
    assert env["PYTHONPATH"] == f"{launchers.BOOT_DIR}{os.pathsep}/x"
    assert json.loads(env[launchers.WORKER_ENV])["target"] == w.target


def test_plain_python_is_not_a_launcher(script: Path) -> None:
    assert launchers.wrap(["python", "train.py"]) is None
    assert launchers.wrap(["python", "-m", "pkg"]) is None


@pytest.mark.parametrize("cmd, needle, instead", [
    (["mpirun", "-n", "2", "python", "train.py"], "cannot wrap from outside",
     "mpirun -n 2 ... hermes profile --out DIR -- python train.py"),
    (["srun", "python", "train.py"], "cannot wrap", "srun python"),
    (["deepspeed", "--hostfile", "hosts", "train.py"], "other hosts",
     "--no_python hermes profile --out DIR -- python"),
    (["torchrun", "--nproc-per-node", "2"], "no training script",
     "torchrun --nproc-per-node 2 --no-python hermes profile --out DIR -- python train.py"),
    (["torchrun", "--no-python", "./run.sh"], "cannot profile",
     "hermes profile --out DIR -- python train.py ARGS"),
    (["torchrun", "--no-python", "hermes", "profile", "--", "python", "train.py"],
     "already", "drop the outer"),
    (["torchrun", "missing.py"], "does not exist", "check the path"),
    (["accelerate", "config"], "not a launcher Hermes wraps", "accelerate launch"),
])
def test_launchers_hermes_cannot_wrap_say_what_to_run_instead(script: Path, cmd: list[str],
                                                              needle: str, instead: str) -> None:
    with pytest.raises(UsageError) as info:
        launchers.wrap(cmd, parse_command)
    line = info.value.one_line()
    assert needle in line and instead in line and "\n" not in line
    code, _, err = run_cli("profile", "--out", "job", "--", *cmd)
    assert code == 2 and needle in err and err.count("\n") == 1


def test_a_launcher_job_needs_an_out_directory(script: Path) -> None:
    code, _, err = run_cli("profile", "--out", "job.parquet", "--", "torchrun", "train.py")
    assert code == 2 and "one file per rank" in err


def _boot_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("hermes_boot", launchers.BOOT_DIR /
                                                  "sitecustomize.py")
    mod = importlib.util.module_from_spec(spec)
    os.environ.pop(launchers.WORKER_ENV, None)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("argv, runs", [
    (["python", "-u", "train.py", "a"], ("script", "train.py")),
    (["python", "-X", "dev", "-W", "ignore", "t.py"], ("script", "t.py")),
    (["python", "-m", "pkg.train"], ("module", "pkg.train")),
    (["python", "-mpkg"], ("module", "pkg")),
    (["python", "-c", "from multiprocessing.spawn import spawn_main"], None),
    (["python", "-uc", "code"], None),
    (["python"], None),
])
def test_the_bootstrap_reads_what_an_interpreter_runs(argv: list[str], runs: object) -> None:
    assert _boot_module()._runs(argv) == runs


def test_the_bootstrap_runs_the_sitecustomize_it_shadows(tmp_path: Path) -> None:
    """A distribution's or user's sitecustomize still runs; a process that is not the
    training script (here ``python -c``) is not profiled and imports no Hermes."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = '1'\n")
    env = {**os.environ, "PYTHONPATH": f"{launchers.BOOT_DIR}{os.pathsep}{user}",
           launchers.WORKER_ENV: json.dumps({"target": str(tmp_path / "train.py"),
                                             "module": False})}
    code = "import os, sys; print(os.environ.get('USER_SITE_RAN'), 'hermes' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "False"]


def test_python_c_is_profiled_like_a_script(tmp_path: Path) -> None:
    import hermes

    out = tmp_path / "c.parquet"
    code = ("import sys, hermes\nprint(sys.argv, __name__)\n"
            "for _ in range(3): hermes.step()\nsys.exit(3)")
    r = subprocess.run([sys.executable, "-m", "hermes.cli", "profile", "--mode", "monitor",
                        "--out", str(out), "--", sys.executable, "-c", code, "a", "b"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert "['-c', 'a', 'b'] __main__" in r.stdout
    trace = hermes.load(out)
    assert (trace.events.kind == "step").sum() == 3
    assert trace.meta.extra["command"] == ["-c", "a", "b"]
