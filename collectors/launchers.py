"""``hermes profile -- torchrun ARGS train.py ...``: profile every worker a launcher starts.

A launcher (torchrun, ``python -m torch.distributed.run``, ``accelerate launch``,
``deepspeed``) starts the training script once per rank, as ``python -u train.py ARGS`` in a
fresh interpreter. Hermes runs the launcher's own command line unchanged (exec: its pid, stdio,
signals and exit code are the launcher's) with two variables added to the environment:

* ``PYTHONPATH`` gains ``collectors/_boot``, whose ``sitecustomize`` runs first thing in every
  Python process the launcher starts; it costs a variable lookup and a few string compares
  in the processes that are not the training script;
* ``HERMES_WORKER`` (JSON) names the training script (its real path) or module. A process whose
  own command line (``sys.orig_argv``) runs that script or module starts a
  :class:`hermes.collectors.api.Recording` (``HERMES_PROFILE``'s options) before the script
  runs; it reads ``RANK``/``WORLD_SIZE`` and writes ``rank-NNNNN.parquet`` into ``--out``. The
  launcher itself, data-loader workers (``multiprocessing`` children run ``-c``) and helper
  interpreters are left alone.

Which argument is the script is read from the launcher's command line with the launcher's own
table of options (:data:`LAUNCHERS`); an option the table does not know is taken to have a
value unless that value is an existing ``.py`` file. A command line Hermes cannot wrap (a
remote launcher, ``--no-python`` with a non-Python program, a launcher it does not know) is
one clear line that says what to run instead: ``LAUNCHER ARGS hermes profile --out DIR --
python train.py``, i.e. Hermes inside each rank.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes.errors import UsageError

WORKER_ENV = "HERMES_WORKER"
BOOT_DIR = Path(__file__).resolve().parent / "_boot"
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


@dataclass(frozen=True)
class Launcher:
    """One launcher: how its command line is read."""

    name: str
    #: options that take no value (any other option takes one, unless ``--opt=value``)
    flags: frozenset[str]
    #: options after which the first positional is a module name, not a script
    module_flags: frozenset[str] = frozenset({"-m", "--module"})
    #: options after which the first positional is a program run as is
    no_python_flags: frozenset[str] = frozenset({"--no-python", "--no_python"})
    #: why this command line cannot be wrapped (None: it can)
    refuse: Callable[[list[str]], str | None] = field(default=lambda args: None)


def _deepspeed_remote(args: list[str]) -> str | None:
    remote = {"--hostfile", "-H", "--master_addr", "--num_nodes", "--launcher"}
    hit = next((a.split("=", 1)[0] for a in args if a.split("=", 1)[0] in remote), None)
    return (f"deepspeed {hit} starts ranks on other hosts through ssh/pdsh, which do not "
            "carry Hermes's environment") if hit else None


_TORCHRUN_FLAGS = frozenset({"-h", "--help", "--standalone", "--run-path", "--run_path",
                             "--virtual-local-rank", "--virtual_local_rank"})
_ACCELERATE_FLAGS = frozenset({
    "-h", "--help", "--cpu", "--multi_gpu", "--tpu", "--ipex", "--use_xpu", "-q", "--quiet",
    "--debug", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm", "--use_parallelism_config",
    "--no_python", "-m", "--module", "--same_network", "--tpu_use_cluster", "--tpu_use_sudo",
    "--dynamo_use_fullgraph", "--dynamo_use_dynamic", "--dynamo_use_regional_compilation",
    "--enable_cpu_affinity", "--monitor_interval", "--rdzv_conf", "--max_restarts",
    "--fsdp_use_orig_params", "--downcast_bf16", "--standalone"})
_DEEPSPEED_FLAGS = frozenset({"-h", "--help", "--no_python", "--module", "--no_local_rank",
                              "--no_ssh_check", "--no_ssh", "--force_multi", "--save_pid",
                              "--enable_each_rank_log", "--elastic_training",
                              "--bind_cores_to_rank", "--enable_numa_binding"})

#: Launcher name -> how its command line is read.
LAUNCHERS: dict[str, Launcher] = {
    "torchrun": Launcher("torchrun", _TORCHRUN_FLAGS),
    "accelerate launch": Launcher("accelerate launch", _ACCELERATE_FLAGS),
    "deepspeed": Launcher("deepspeed", _DEEPSPEED_FLAGS, module_flags=frozenset({"--module"}),
                          no_python_flags=frozenset({"--no_python"}), refuse=_deepspeed_remote),
}
#: ``python -m MODULE`` spellings of a launcher
MODULES = {"torch.distributed.run": "torchrun", "torch.distributed.launch": "torchrun",
           "accelerate.commands.launch": "accelerate launch"}
#: launchers that start ranks Hermes cannot reach from here: run Hermes inside each rank
FOREIGN = frozenset({"mpirun", "mpiexec", "srun", "jsrun", "horovodrun", "aprun", "pdsh",
                     "charmrun", "ompi"})


@dataclass(frozen=True)
class Wrapped:
    """A launcher command line Hermes can wrap: what the workers run."""

    launcher: str
    argv: list[str]  # the launcher's command, unchanged
    target: str  # the script's real path, or the module name
    is_module: bool


def instead(launcher: str, before: list[str], after: list[str]) -> str:
    """What to run instead: Hermes inside each rank (``--no-python`` for torchrun)."""
    no_py = {"torchrun": "--no-python ", "deepspeed": "--no_python ",
             "accelerate launch": "--no_python "}.get(launcher, "")
    head = " ".join([launcher, *before]).strip()
    return (f"{head} {no_py}hermes profile --out DIR -- python "
            f"{' '.join(after) or 'train.py ARGS'}").replace("  ", " ")


def find(cmd: list[str]) -> tuple[str, list[str], list[str]] | None:
    """``(launcher name, its head words, its arguments)`` when ``cmd`` starts a known launcher
    (``torchrun ...``, ``python [flags] -m torch.distributed.run ...``, ``accelerate launch
    ...``, ``deepspeed ...``); None for anything else. A launcher Hermes cannot reach
    (mpirun, srun, ...) or an ``accelerate`` subcommand other than ``launch`` is refused here."""
    name = Path(cmd[0]).name
    if name in FOREIGN:
        raise UsageError(f"{name} starts ranks Hermes cannot wrap from outside",
                         hint=f"run Hermes inside each rank: {name} {' '.join(cmd[1:3])} ... "
                              "hermes profile --out DIR -- python train.py ARGS")
    if name in LAUNCHERS:
        return name, cmd[:1], cmd[1:]
    if name == "accelerate":
        if len(cmd) > 1 and cmd[1] == "launch":
            return "accelerate launch", cmd[:2], cmd[2:]
        raise UsageError(f"accelerate {cmd[1] if len(cmd) > 1 else ''}".strip()
                         + " is not a launcher Hermes wraps",
                         hint="hermes profile -- accelerate launch [ARGS] train.py ARGS")
    if _PYTHON.match(name):
        i = 1
        while i < len(cmd) and cmd[i].startswith("-") and cmd[i] != "-m":
            i += 2 if cmd[i] in ("-W", "-X") else 1
        if i + 1 < len(cmd) and cmd[i] == "-m" and cmd[i + 1] in MODULES:
            return MODULES[cmd[i + 1]], cmd[:i + 2], cmd[i + 2:]
    return None


def wrap(cmd: list[str], parse: Callable[[list[str]], Any] | None = None) -> Wrapped | None:
    """The launcher command ``cmd`` checked and its training script found, or None when ``cmd``
    is not a launcher (a plain ``python train.py``). A launcher command Hermes cannot wrap is a
    :class:`UsageError` naming what to run instead. ``parse``: how a Python command line is
    read (``launcher.parse_command``), for ``--no-python python ...``."""
    found = find(cmd)
    if found is None:
        return None
    name, head, args = found
    spec = LAUNCHERS[name]
    why = spec.refuse(args)
    if why:
        raise UsageError(why, hint="run instead: " + instead(name, args[:2] + ["..."], []))
    pos, module, no_python = _positional(spec, args)
    if pos is None:
        raise UsageError(f"no training script found in the {name} command line",
                         hint="run instead: " + instead(name, args, []))
    target, rest = args[pos], args[pos + 1:]
    if no_python:
        return _no_python(name, cmd, args[:pos], target, rest, parse)
    if module:
        return Wrapped(name, cmd, target, True)
    if not Path(target).is_file():
        raise UsageError(f"script {target!r} does not exist", where=f"hermes profile -- {name}",
                         hint="check the path (relative to the current directory)")
    return Wrapped(name, cmd, os.path.realpath(target), False)


def _positional(spec: Launcher, args: list[str]) -> tuple[int | None, bool, bool]:
    """Index of the launcher's first positional argument (the script), and whether a module
    flag / a no-python flag came before it."""
    i, module, no_python = 0, False, False
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return (i + 1 if i + 1 < len(args) else None), module, no_python
        if not arg.startswith("-") or arg == "-":
            return i, module, no_python
        name = arg.split("=", 1)[0]
        module |= name in spec.module_flags
        no_python |= name in spec.no_python_flags
        known_flag = name in spec.flags | spec.module_flags | spec.no_python_flags
        if "=" in arg or known_flag or (not arg.startswith("--") and len(arg) > 2):
            i += 1  # --opt=value, a flag, or -r3 (a short option with its value attached)
        elif i + 1 < len(args) and args[i + 1].endswith(".py") and Path(args[i + 1]).is_file():
            return i + 1, module, no_python  # an unknown flag, then the script
        else:
            i += 2
    return None, module, no_python


def _no_python(name: str, cmd: list[str], before: list[str], program: str,
               rest: list[str], parse: Callable[[list[str]], Any] | None) -> Wrapped:
    """``--no-python PROGRAM ARGS``: wrapped when PROGRAM is a Python interpreter running a
    script (or a .py with a shebang); refused otherwise."""
    base = Path(program).name
    if base in ("hermes",):
        raise UsageError(f"this {name} command runs `hermes profile` in each rank already",
                         hint=f"drop the outer `hermes profile`: run {name} ... as it is")
    if base.endswith(".py") and Path(program).is_file():
        return Wrapped(name, cmd, os.path.realpath(program), False)
    if _PYTHON.match(base) and parse is not None:
        inv = parse([program, *rest])
        if inv.kind != "-c":
            target = inv.target if inv.kind == "-m" else os.path.realpath(inv.target)
            return Wrapped(name, cmd, target, inv.kind == "-m")
    if _PYTHON.match(base):  # python -c CODE
        hint = "run instead: " + instead(name, [a for a in before if a not in
                                               ("--no-python", "--no_python")], [])
    else:
        hint = (f"profile inside {program}: start its training script as `hermes profile "
                "--out DIR -- python train.py ARGS`")
    raise UsageError(f"{name} --no-python runs {program!r}, which Hermes cannot profile",
                     hint=hint)


def worker_env(wrapped: Wrapped, env: dict[str, str], epilogue: str) -> dict[str, str]:
    """``env`` with the bootstrap on ``PYTHONPATH`` and the worker's description added."""
    out = dict(env)
    path = out.get("PYTHONPATH", "")
    out["PYTHONPATH"] = str(BOOT_DIR) + (os.pathsep + path if path else "")
    out[WORKER_ENV] = json.dumps({"target": wrapped.target, "module": wrapped.is_module,
                                  "launcher": wrapped.launcher, "epilogue": epilogue})
    return out
