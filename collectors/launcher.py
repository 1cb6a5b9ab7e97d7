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

from hermes.collectors import launchers
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
    target: str  # a script path, a module name or the code of ``-c``
    kind: str  # "--" (a script), "-m" (a module) or "-c" (code)
    args: tuple[str, ...]

    def argv(self) -> list[str]:
        """The argv to exec: the script's own argv follows the bootstrap."""
        return [self.python, *self.flags, "-c", BOOTSTRAP, self.kind, self.target, *self.args]


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
        raise UsageError(f"{head!r} is not a Python interpreter, a .py script or a launcher "
                         "Hermes wraps",
                         hint="hermes profile runs Python: -- python train.py ARGS..., or a "
                              f"launcher: -- {' | '.join(sorted(launchers.LAUNCHERS))} "
                              "ARGS train.py ...")
    flags: list[str] = []
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
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
    if rest[0] in ("-m", "-c"):
        if len(rest) < 2:
            raise UsageError(f"{rest[0]} needs {'a module name' if rest[0] == '-m' else 'code'}")
        return Invocation(python, tuple(flags), rest[1], rest[0], tuple(rest[2:]))
    script = rest[0]
    if not Path(script).is_file():
        raise UsageError(f"script {script!r} does not exist", where="hermes profile",
                         hint="check the path (relative to the current directory)")
    return Invocation(python, tuple(flags), script, "--", tuple(rest[1:]))


def check_out_dir(out: Path) -> None:
    """Fail before running anything when ``out`` cannot hold the trace (exit 2)."""
    target = out.parent if out.suffix == ".parquet" else out
    if out.suffix == ".parquet" and out.is_dir():  # found now, not after the script ran
        raise OutputError("output path is a directory; a single-file trace cannot replace it",
                          path=out, hint="name a file, or pass --out DIR for per-rank files")
    if target.exists() and not target.is_dir():
        raise OutputError("exists and is not a directory", path=target,
                          hint="choose another --out")
    from hermes.trace.segments import busy

    why = busy(out)  # a run writing there, or a killed one's saved steps: never mixed
    if why:
        raise OutputError(f"output {why}", path=out,
                          hint="give each run its own --out (or move the old steps away)")
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


def prepare(cmd: list[str], options: dict[str, Any], epilogue: str = ""
            ) -> tuple[list[str], dict[str, str]]:
    """Validate; return (argv, env) to exec. ``options`` are :class:`Recording` keywords.

    A launcher command (torchrun, ``accelerate launch``, ``deepspeed``: :mod:`launchers`) is
    exec'd unchanged with the worker bootstrap in its environment (``epilogue``: printed by
    rank 0's worker after its trace is published); anything else is a Python invocation."""
    if not cmd:
        parse_command(cmd)  # "nothing to run"
    wrapped = launchers.wrap(cmd, parse_command)
    inv = parse_command(cmd) if wrapped is None else None
    out = Path(options["out"]).resolve()
    if wrapped is not None and out.suffix == ".parquet":
        raise UsageError(f"a {wrapped.launcher} job writes one file per rank: --out needs a "
                         "directory, not a .parquet file", where=str(out),
                         hint="pass --out DIR")
    check_out_dir(out)
    env = dict(os.environ)
    env[ENV] = json.dumps({**options, "out": str(out)})
    if wrapped is not None:
        return wrapped.argv, launchers.worker_env(wrapped, env, epilogue)
    assert inv is not None
    return inv.argv(), env


class _Unprofiled:
    """Stands for a session that could not start: the script runs all the same."""

    def close(self, meta_updates: dict[str, Any] | None = None) -> None:
        return None


def bootstrap() -> None:
    """Entry point inside the exec'd interpreter (``python -c BOOTSTRAP -- SCRIPT ARGS``)."""
    import runpy

    from hermes.collectors import api, pysample, torch_profiler

    pysample.skip_callers(sys._getframe(1))  # the `python -c BOOTSTRAP` frame: not the job's
    options = json.loads(os.environ.pop(ENV, "{}") or "{}")
    kind, target, *args = sys.argv[1:]
    options.setdefault("extra", {})["command"] = ["-c" if kind == "-c" else target, *args]
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
        elif kind == "-c":  # as `python -c CODE ARGS`: argv[0] is "-c", code in __main__
            sys.argv = ["-c", *args]
            exec(compile(target, "<string>", "exec"), sys.modules["__main__"].__dict__)  # noqa: S102
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


def worker_start(worker: dict[str, Any]) -> None:
    """Start recording in a launcher's worker, before its script runs (called by
    ``collectors/_boot/sitecustomize.py`` in the interpreter that runs the training script).

    The session's exit handler publishes the trace when the interpreter exits; an uncaught
    exception is noted (``extra.ended_by``) first. The variables are taken out of the
    environment, so processes this worker starts are not profiled again."""
    from hermes.collectors import api, torch_profiler

    options = json.loads(os.environ.pop(ENV, "{}") or "{}")
    os.environ.pop(launchers.WORKER_ENV, None)
    options.setdefault("extra", {}).update(command=list(sys.argv),
                                           launcher=worker.get("launcher"))
    epilogue = worker.get("epilogue")
    if epilogue and os.environ.get("RANK", "0") == "0":
        # registered before the session's own handler, so it runs after the trace is out
        import atexit

        atexit.register(_say, epilogue)
    try:
        session: Any = api.profile(**options)
        torch_profiler.watch(session)
    except Exception as exc:  # noqa: BLE001 - never stop the user's job from starting
        msg = exc.one_line() if isinstance(exc, HermesError) else f"{type(exc).__name__}: {exc}"
        api.warn(f"profiling disabled in this worker: {msg}; running it unprofiled")
        return
    previous = sys.excepthook

    def excepthook(typ: type[BaseException], value: BaseException, tb: Any) -> None:
        if typ is not SystemExit:
            _close(session, {"extra": {"ended_by": typ.__name__}})
        previous(typ, value, tb)

    sys.excepthook = excepthook


def _say(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
