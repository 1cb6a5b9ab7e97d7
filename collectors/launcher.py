"""``hermes profile -- python train.py ARGS...``: run a Python script unchanged, profiled.

Two halves:

* :func:`prepare` (in the ``hermes`` process) checks the command line and the output path and
  returns the ``argv`` and environment to *exec*: ``python [flags] -c BOOTSTRAP train.py ARGS``.
  Exec (not a child process) keeps the pid, stdin/stdout/stderr, signals and the exit status
  exactly those of ``python train.py ARGS`` run by hand.
* :func:`bootstrap` (in the exec'd interpreter) starts a :class:`hermes.collectors.api.Recording`
  from ``HERMES_PROFILE`` (JSON options), watches for PyTorch, then runs the script with
  ``runpy`` as ``__main__`` with ``sys.argv`` and ``sys.path[0]`` as Python would set them.
  Whatever way the script ends (return, ``sys.exit``, exception, SIGINT, SIGTERM) the session
  publishes the trace with every completed step before the process exits.

torchrun-style jobs: each process reads ``RANK``/``WORLD_SIZE`` and writes its own
``rank-NNNNN.parquet`` into the one ``--out`` directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes.errors import HermesError, OutputError, UsageError

ENV = "HERMES_PROFILE"
BOOTSTRAP = "from hermes.collectors.launcher import bootstrap; bootstrap()"
#: Interpreter flags that take no value / one value (``-W ignore``), passed through unchanged.
_FLAGS = frozenset({"-u", "-O", "-OO", "-B", "-E", "-s", "-S", "-b", "-bb", "-q", "-v", "-I"})
_FLAGS_WITH_VALUE = frozenset({"-W", "-X"})
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


@dataclass(frozen=True)
class Invocation:
    """What to run: an interpreter, its flags, a script path or ``-m`` module, the args."""

    python: str
    flags: tuple[str, ...]
    target: str
    is_module: bool
    args: tuple[str, ...]

    def argv(self) -> list[str]:
        """The argv to exec: the script's own argv follows the bootstrap."""
        kind = "-m" if self.is_module else "--"
        return [self.python, *self.flags, "-c", BOOTSTRAP, kind, self.target, *self.args]


def parse_command(cmd: list[str]) -> Invocation:
    """Understand ``python [flags] SCRIPT|-m MODULE ARGS`` (or ``SCRIPT.py ARGS``)."""
    if not cmd:
        raise UsageError("nothing to run after `--`",
                         hint="usage: hermes profile [OPTIONS] -- python train.py ARGS...")
    head, rest = cmd[0], list(cmd[1:])
    if _PYTHON.match(Path(head).name):
        python = shutil.which(head) if os.sep not in head else head
        if python is None or not os.access(python, os.X_OK):
            raise UsageError(f"Python interpreter {head!r} not found",
                             hint="give a full path or put it on PATH")
    elif head.endswith(".py"):
        python, rest = sys.executable, [head, *rest]
    else:
        raise UsageError(f"{head!r} is not a Python interpreter or a .py script",
                         hint="hermes profile runs Python: -- python train.py ARGS...")
    flags: list[str] = []
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        flag = rest.pop(0)
        if flag in _FLAGS_WITH_VALUE and rest:
            flags += [flag, rest.pop(0)]
        elif flag in _FLAGS or flag[:2] in _FLAGS_WITH_VALUE:
            flags.append(flag)
        else:
            raise UsageError(f"unsupported Python option {flag!r}",
                             hint="hermes profile runs a script or -m MODULE")
    if not rest:
        raise UsageError("no script given after the interpreter",
                         hint="usage: hermes profile -- python train.py ARGS...")
    if rest[0] == "-m":
        if len(rest) < 2:
            raise UsageError("-m needs a module name")
        return Invocation(python, tuple(flags), rest[1], True, tuple(rest[2:]))
    script = rest[0]
    if not Path(script).is_file():
        raise UsageError(f"script {script!r} does not exist", where="hermes profile",
                         hint="check the path (relative to the current directory)")
    return Invocation(python, tuple(flags), script, False, tuple(rest[1:]))


def check_out_dir(out: Path) -> None:
    """Fail before running anything when ``out`` cannot hold the trace (exit 2)."""
    target = out.parent if out.suffix == ".parquet" else out
    if out.suffix == ".parquet" and out.is_dir():  # found now, not after the script ran
        raise OutputError("output path is a directory; a single-file trace cannot replace it",
                          path=out, hint="name a file, or pass --out DIR for per-rank files")
    if target.exists() and not target.is_dir():
        raise OutputError("exists and is not a directory", path=target,
                          hint="choose another --out")
    parent = target if target.exists() else target.parent
    if not parent.is_dir():
        raise OutputError("output directory's parent does not exist", path=parent,
                          hint="create it first or choose another --out")
    try:  # os.access says yes to root on read-only file systems: really try
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise OutputError(f"output directory is not writable ({exc.strerror})",
                          path=parent, hint="choose another --out") from None


def prepare(cmd: list[str], options: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Validate; return (argv, env) to exec. ``options`` are :class:`Recording` keywords."""
    inv = parse_command(cmd)
    out = Path(options["out"]).resolve()
    check_out_dir(out)
    env = dict(os.environ)
    env[ENV] = json.dumps({**options, "out": str(out)})
    return inv.argv(), env


class _Unprofiled:
    """Stands for a session that could not start: the script runs all the same."""

    def close(self, meta_updates: dict[str, Any] | None = None) -> None:
        return None


def bootstrap() -> None:
    """Entry point inside the exec'd interpreter (``python -c BOOTSTRAP -- SCRIPT ARGS``)."""
    import runpy

    from hermes.collectors import api, torch_profiler

    options = json.loads(os.environ.pop(ENV, "{}") or "{}")
    kind, target, *args = sys.argv[1:]
    options.setdefault("extra", {})["command"] = [target, *args]
    try:
        session: Any = api.profile(**options)
        torch_profiler.watch(session)
    except Exception as exc:  # noqa: BLE001 - never stop the user's job from starting
        msg = exc.one_line() if isinstance(exc, HermesError) else f"{type(exc).__name__}: {exc}"
        api.warn(f"profiling disabled: {msg}; running the script unprofiled")
        session = _Unprofiled()
    try:
        if kind == "-m":
            sys.argv = [target, *args]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [target, *args]
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
    except SystemExit:
        _close(session)
        raise
    except BaseException as exc:
        _close(session, {"extra": {"ended_by": type(exc).__name__}})
        raise
    _close(session)


def _close(session: Any, meta: dict[str, Any] | None = None) -> None:
    close = getattr(session, "close_quietly", session.close)
    close(meta)
