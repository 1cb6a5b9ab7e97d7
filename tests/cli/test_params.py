"""The CLI's plain-value coercion (hermes/commands/_params.py) against typer's own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hermes.commands._params import Light, light_params
from tests.conftest import DATA, REPO

typer = pytest.importorskip("typer")
coercion = pytest.importorskip("typer._coercion")
BadParameter = pytest.importorskip("typer._click.exceptions").BadParameter

INPUTS = ["10", "007", "-3", "+4", " 5", "1_000", "1.0", "1e3", "", "\u0663", "x", "0.9",
          "-1", "2147483648", "99999999999999999999", 7, 2.5, True, None, "a\x00b", ".",
          "missing/file.parquet", str(REPO / "README.md"), ["1", "2"], ("3", "x"), []]


def _params() -> list:
    from hermes.cli import app

    group = typer.main.get_command(app)
    light_params(group)
    out = []
    for name, cmd in group.commands.items():
        out += [(name, p) for p in cmd.params if isinstance(p._runtime_param, Light)]
    return out


def _outcome(runtime, value, param):
    try:
        return "ok", runtime.coerce(value, param=param, ctx=None)
    except BadParameter as exc:
        return "error", exc.format_message()


def test_light_coercion_gives_what_typer_gives():
    params = _params()
    kinds = {(p.type_descriptor.annotation, p.type_descriptor.parameter_info.min)
             for _, p in params}
    assert len(kinds) >= 6  # str, int, int with min, float with bounds, Path, lists
    for name, p in params:
        typer_own = coercion.build_runtime_param(p.type_descriptor)
        for value in INPUTS:
            if isinstance(value, (list, tuple)) != bool(p.multiple or p.nargs == -1):
                continue
            assert _outcome(p._runtime_param, value, p) == _outcome(typer_own, value, p), \
                (name, p.name, value)


def test_a_command_line_does_not_import_pydantic():
    trace = next((DATA / "kineto").glob("*.json*"))
    code = ("import sys\nfrom hermes.cli import main\n"
            f"main(['analyze', {str(trace)!r}, '--top', '3', '--format', 'json'])\n"
            "print('pydantic' in sys.modules, file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO)
    assert res.stderr.strip().splitlines()[-1] == "False", res.stderr
    assert '"verdict"' in res.stdout


def test_bad_value_still_gets_typers_message():
    from tests.conftest import run_cli

    code, _, err = run_cli("analyze", str(Path("x.parquet")), "--top", "abc")
    assert code == 2
    assert "Invalid value for '--top'" in err and "valid integer" in err
