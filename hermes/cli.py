"""The ``hermes`` command line: a thin layer over the library.

Each command lives in its own module under ``hermes/commands/`` and registers itself with
``register(app)``; this file only assembles them and turns errors into one line on stderr
with exit code 2.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys

import typer

try:  # recent typer vendors its own copy of click
    from typer._click import exceptions as click  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - older typer uses the click package
    from click import exceptions as click  # type: ignore[no-redef]

from hermes.commands._params import light_params
from hermes.errors import HermesError

app = typer.Typer(
    name="hermes",
    help="Hermes: find out why ML training is slow. Collect host/device timelines, store them "
         "as Parquet, analyze bottlenecks, and get ranked optimizations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        from hermes import __version__

        typer.echo(f"hermes {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Hermes: profiling and bottleneck analysis for ML training on NPUs and GPUs."""


def _register_commands() -> None:
    import hermes.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"hermes.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)
    for cmd in app.registered_commands:
        if cmd.short_help is None:
            cmd.short_help = _first_sentence(cmd.help or inspect.getdoc(cmd.callback) or "")


def _first_sentence(doc: str) -> str:
    """The command list's one-liner: the docstring's first sentence, hard line breaks removed
    (rich help keeps them, which breaks the list's column wrapping)."""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    end = para.find(". ")
    return para if end < 0 else para[: end + 1]


_register_commands()


def fail(message: str, code: int = 2) -> int:
    """One line on stderr. Bytes a file name cannot encode (non-UTF-8 names reach Python as
    surrogates) are escaped, never a UnicodeEncodeError; newlines are flattened."""
    line = " ".join(f"hermes: error: {message}".splitlines())
    data = (line + "\n").encode(getattr(sys.stderr, "encoding", None) or "utf-8",
                                "backslashreplace")
    try:
        sys.stderr.write(data.decode(getattr(sys.stderr, "encoding", None) or "utf-8",
                                     "replace"))
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: the exit code still says it
        pass
    return code


def unexpected(exc: BaseException) -> int:
    """Any exception no command turned into a HermesError: one line, exit 2 (HERMES_DEBUG=1
    re-raises it for a traceback). OS and resource failures are named as such: they are the
    user's environment, not a Hermes bug."""
    import os

    if os.environ.get("HERMES_DEBUG"):
        raise exc
    if isinstance(exc, OSError):
        where = f"{os.fsdecode(exc.filename)}: " if exc.filename is not None else ""
        return fail(f"{where}{exc.strerror or exc}", 2)
    if isinstance(exc, MemoryError):
        return fail("out of memory: the input is too large for this machine "
                    "(try one rank at a time)", 2)
    if isinstance(exc, RecursionError):
        return fail("input nested too deeply to process", 2)
    return fail(f"internal error: {type(exc).__name__}: {exc} (please report)", 2)


def _quiet_stdout() -> int:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush cannot
    print a traceback, and return 141 (128 + SIGPIPE), what a shell reports for such a reader."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point. Returns (and exits with) the exit code."""
    args = sys.argv[1:] if argv is None else argv
    if args and not args[0].startswith("-"):  # a command (not --help / --version)
        from hermes.commands._util import use_system_allocator

        use_system_allocator()
    try:
        command = typer.main.get_command(app)
        light_params(command)  # no pydantic for plain values (typer >= 0.26 coerces with it)
        rv = command(args=args, prog_name="hermes", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except HermesError as exc:
        code = fail(exc.one_line(), exc.exit_code)
    except click.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "", err=False)
        code = 2
    except click.UsageError as exc:
        hint = ""
        if exc.ctx is not None:
            hint = f" (see `{exc.ctx.command_path} --help`)"
        code = fail(f"{exc.format_message()}{hint}", 2)
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:
        code = fail("interrupted", 130)
    except KeyboardInterrupt:
        code = fail("interrupted", 130)
    except BrokenPipeError:  # `hermes ... | head`: the reader left; stop quietly
        code = _quiet_stdout()
    except SystemExit as exc:  # typer exits on EPIPE even outside standalone mode
        code = exc.code if isinstance(exc.code, int) else 1
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":  # typer's mark of a broken pipe
            code = _quiet_stdout()
    except click.ClickException as exc:
        code = fail(exc.format_message(), exc.exit_code or 2)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        code = unexpected(exc)
    _cancel_early()
    if argv is None:
        if code == 0 and args and args[0] in _QUICK_EXIT:
            _quick_exit(code)
        sys.exit(code)
    return code


#: Commands that close everything they write before returning: a console run ends without the
#: interpreter's teardown (freeing every module and Arrow's pools; after an analysis also its
#: frames, results and the modules of pandas and scipy; docs/benchmarks.md has its cost).
_QUICK_EXIT = frozenset({"import", "analyze"})


def _cancel_early() -> None:
    """End an import the console script started before the arguments were read
    (``hermes.commands._launch``) that the command did not take."""
    forked = sys.modules.get("hermes.collectors.importers.forked")
    if forked is not None:
        forked.cancel_early()


def _quick_exit(code: int) -> None:
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: the normal exit reports it
        return
    os._exit(code)


if __name__ == "__main__":
    main()
