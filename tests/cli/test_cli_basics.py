from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hermes import __version__
from tests.conftest import run_cli


def test_version():
    code, out, _ = run_cli("--version")
    assert code == 0 and out.strip() == f"hermes {__version__}"


def test_every_command_help_has_an_example():
    import typer.main

    from hermes.cli import app

    group = typer.main.get_command(app)
    assert group.commands, "no commands registered"
    for name, _cmd in group.commands.items():
        code, out, err = run_cli(name, "--help")
        assert code == 0, (name, err)
        assert "Example" in out, f"`hermes {name} --help` has no example"


def test_unknown_command_is_one_line_exit_2():
    code, out, err = run_cli("frobnicate")
    assert code == 2
    assert err.count("\n") == 1 and "frobnicate" in err


def test_console_script_exit_code_for_missing_file(tmp_path):
    res = subprocess.run([sys.executable, "-m", "hermes.cli", "validate",
                          str(tmp_path / "missing.parquet")], capture_output=True, text=True)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert res.stderr.startswith("hermes: error: ") and "missing.parquet" in res.stderr


def test_text_outputs_get_normal_permissions(tmp_path: Path) -> None:
    """Reports are written to a temp file (mkstemp: 0600) and renamed: the result must carry the
    usual umask-derived mode, like any file the user's tools write."""
    import os

    from hermes.commands._util import write_text_atomic

    old = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "report.md", "# hi\n")
    finally:
        os.umask(old)
    assert (tmp_path / "report.md").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "report.md").read_text() == "# hi\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_output_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """`hermes ... | head -1`: the reader leaves early; no traceback, the SIGPIPE exit status."""
    proc = subprocess.Popen([sys.executable, "-m", "hermes.cli", "--help"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # nobody reads: the first write hits EPIPE
    _, err = proc.communicate(timeout=60)
    assert err == b"", err.decode()
    assert proc.returncode in (0, 1, 141)  # rich exits 1 on EPIPE, our own writes 141
