"""Hermes's worker bootstrap, on ``PYTHONPATH`` only under ``hermes profile -- LAUNCHER ...``.

Python imports ``sitecustomize`` at start-up in every interpreter the launcher starts. This one
first imports the ``sitecustomize`` it shadows (a distribution's or the user's, if any), then,
when ``HERMES_WORKER`` names the script or module this interpreter's own command line
(``sys.orig_argv``) runs, starts Hermes's recording before the script does
(``hermes.collectors.launcher.worker_start``). Every other process (the launcher itself,
data-loader workers, helpers) pays one environment lookup and a few string compares.
"""

import os
import sys


def _chain():
    """Run the ``sitecustomize`` this file shadows, as Python would have without Hermes."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _runs(argv):
    """``("script", path)``, ``("module", name)`` or None: what the command line ``argv``
    (interpreter first) runs."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in ("-c", "-"):
            return None
        if arg == "-m" or (arg.startswith("-m") and len(arg) > 2 and arg[1] != "-"):
            name = argv[i + 1] if arg == "-m" and i + 1 < len(argv) else arg[2:]
            return ("module", name) if name else None
        if not arg.startswith("-"):
            return ("script", arg)
        if arg in ("-W", "-X", "--check-hash-based-pycs"):
            i += 1
        elif arg[1:2] != "-" and ("c" in arg[1:] or "m" in arg[1:]):
            return None  # a bundle such as -uc: code or a module name follows, not a script
        i += 1
    return None


def _main():
    raw = os.environ.get("HERMES_WORKER")
    if not raw:
        return
    import json

    try:
        worker = json.loads(raw)
        runs = _runs(list(getattr(sys, "orig_argv", [])))
    except ValueError:
        return
    if runs is None:
        return
    kind, what = runs
    if worker.get("module"):
        match = kind == "module" and what == worker.get("target")
    else:
        match = kind == "script" and os.path.realpath(what) == worker.get("target")
    if not match:
        return
    try:
        from hermes.collectors.launcher import worker_start

        worker_start(worker)
    except Exception as exc:  # noqa: BLE001 - never stop the user's job from starting
        try:
            sys.stderr.write(f"hermes: warning: profiling disabled in this worker: "
                             f"{type(exc).__name__}: {exc}\n")
        except (OSError, ValueError):
            pass


try:
    _chain()
finally:
    _main()
