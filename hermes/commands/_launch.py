"""The ``hermes`` console script: starts a profiler file's import before the CLI is loaded.

``hermes analyze FILE.json.gz`` imports the file in a forked process while this one loads what
analyzes it (:mod:`hermes.collectors.importers.forked`); the parse is the longer of the two,
so every millisecond before the fork is on the command's critical path. Loading typer and
every command module to parse the arguments takes time; :func:`main` reads the few things
the decision needs straight from ``sys.argv`` first (:func:`early_source`) and starts the
import at once, then hands over to :func:`hermes.cli.main`, whose ``analyze`` takes the import
already under way (``forked.start`` of the same file) instead of starting another. A
mis-read command line costs nothing but the early child: whatever the CLI then decides, an
import it did not take is ended before the process exits.

The options ``analyze`` takes a value for are listed here (:data:`VALUE_OPTIONS`), so that the
trace argument is found without loading the CLI; a test checks the list against the command.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: ``hermes analyze``'s options that take a value (the next argument, or ``--opt=value``)
VALUE_OPTIONS = frozenset({"--format", "-f", "--out", "-o", "--rank", "-r", "--top",
                           "--workers", "-j", "--scheduler", "--save-trace", "--device"})
#: ``hermes analyze``'s options that take none
FLAG_OPTIONS = frozenset({"--allow-missing", "--keep-warmup"})
#: any of these: no import is started (help, another process or cluster does the work, a
#: Parquet is to be kept: ``hermes_source`` then imports through a file)
_NOT_HERE = frozenset({"--help", "-h", "--scheduler", "--save-trace"})


def early_source(argv: list[str]) -> Path | None:
    """The profiler file ``hermes analyze`` (arguments ``argv``) will import into memory in
    this process, as far as the arguments tell without the CLI: None unless the command is
    ``analyze`` with one trace argument, no option that sends the work elsewhere (``--workers``
    > 1, ``--scheduler``, ``$DASK_SCHEDULER_ADDRESS``) and no option this reading does not
    know (then the CLI decides alone)."""
    if len(argv) < 2 or argv[0] != "analyze" or os.environ.get("DASK_SCHEDULER_ADDRESS"):
        return None
    positional: list[str] = []
    i, options = 1, True
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not options or arg == "-" or not arg.startswith("-"):
            positional.append(arg)
            continue
        if arg == "--":
            options = False
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg[:2], "", arg[2:])
        if name in _NOT_HERE or name not in VALUE_OPTIONS | FLAG_OPTIONS:
            return None
        if name in FLAG_OPTIONS:
            if eq or value:  # --flag=x or a bundle of short flags: the CLI's to read
                return None
            continue
        if not eq and not value:  # the value is the next argument
            if i >= len(argv):
                return None
            value = argv[i]
            i += 1
        if name in ("--workers", "-j") and not _at_most_one(value):
            return None
    return Path(positional[0]) if len(positional) == 1 else None


def _at_most_one(value: str) -> bool:
    try:
        return int(value) <= 1
    except ValueError:
        return False


def start_early(argv: list[str]) -> bool:
    """Start the import :func:`early_source` names, if ``hermes_source`` would import it into
    memory (``commands._util.start_source``); ``forked.start`` keeps it for the CLI. Whether
    one was started."""
    src = early_source(argv)
    if src is None:
        return False
    from hermes.commands._util import start_source

    return start_source(src, None, early=True) is not None


#: numpy's OpenBLAS starts a thread per CPU when numpy loads, and each spins for work a while
#: (CPU time, not wall time: docs/benchmarks.md). Hermes calls no BLAS routine worth a thread (one ``polyfit`` of a few points), so the
#: import started here loads numpy with one; the variable is taken back out of the
#: environment right after, so that no process Hermes starts later (``hermes profile``'s
#: training script) inherits it. A value the user set is kept.
_BLAS_THREADS = "OPENBLAS_NUM_THREADS"


def main() -> int:
    """Console-script entry point: :func:`start_early`, then :func:`hermes.cli.main`.

    The cyclic garbage collector is off while the modules load (``_util.hold_gc``): they make
    long-lived objects only, which each collection would traverse again (``hermes analyze`` of
    a 200k-event trace: ~190 collections, ~30-60 ms, during its imports). It is back on, with
    what was loaded frozen, before the command runs, or, where an import was started here,
    once ``analyze`` has loaded what analyzes the trace (``hermes_source``)."""
    from hermes.commands import _util

    _util.hold_gc()
    blas = _BLAS_THREADS not in os.environ
    if blas:
        os.environ[_BLAS_THREADS] = "1"
    try:
        if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):  # a command, not --help
            _util.use_system_allocator()  # (before the import starts: its child inherits it)
        started = start_early(sys.argv[1:])
    finally:
        if blas:
            os.environ.pop(_BLAS_THREADS, None)
    from hermes.cli import main as cli_main

    if not started:
        _util.release_gc()
    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
