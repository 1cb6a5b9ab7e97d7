"""The package installs as a wheel into a fresh virtual environment and its CLI runs there."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

#: the C extension modules setup.py builds, and their sources
COMPILED = {"hermes.trace._columns": REPO / "hermes" / "trace" / "_columns.c",
            "hermes.analyzers.critical_path._lanes": REPO / "analyzers" / "critical_path" / "_lanes.c"}


@pytest.mark.parametrize("mod", sorted(COMPILED))
def test_compiled_modules_are_built_from_the_current_source(mod):
    """An editable install builds each module next to its source; a change to the source needs
    ``pip install -e .`` again, or the tests would run the old build."""
    try:
        built = Path(importlib.import_module(mod).__file__ or "")
    except ImportError:
        pytest.skip(f"{mod} not compiled here (no C compiler at install time)")
    source = COMPILED[mod]
    if built.parent != source.parent:
        pytest.skip("installed as a wheel: built from its own copy of the source")
    assert built.stat().st_mtime >= source.stat().st_mtime, (
        f"{source.relative_to(REPO)} changed after {mod} was built: run `pip install -e .` again")
    assert f'"{mod}"' in (REPO / "setup.py").read_text()


def test_compiled_modules_are_built_where_a_compiler_is():
    """The extensions are optional (no compiler: the install goes on without them), so a
    compile error would pass unseen: where Python's C compiler is on this machine, both must
    have been built by the install."""
    cc = (sysconfig.get_config_var("CC") or "").split()
    if not cc or shutil.which(cc[0]) is None:
        pytest.skip("no C compiler here: the Python passes run")
    missing = [m for m in COMPILED if importlib.util.find_spec(m) is None]
    assert not missing, f"{missing} not built although {cc[0]} is here: see pip's build log"


def test_every_source_package_is_listed_in_pyproject():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    mapping = cfg["package-dir"]
    found = set()
    for name, folder in mapping.items():
        root = REPO / folder
        for init in root.rglob("__init__.py"):
            rel = init.parent.relative_to(root)
            if any(part.startswith((".", "_")) for part in rel.parts):
                continue
            dotted = ".".join((name, *rel.parts)) if rel.parts else name
            # a sub-folder that is mapped on its own is covered by its own entry
            if dotted in mapping and dotted != name:
                continue
            found.add(dotted)
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_wheel_installs_and_runs_in_fresh_venv(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(REPO)],
                   check=True, capture_output=True, cwd=tmp_path)
    wheel = next(dist.glob("hermes_profiler-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "hermes/collectors/__init__.py" in names
    assert "hermes/analyzers/__init__.py" in names
    assert "hermes/rules/__init__.py" in names
    # the compiled modules (setup.py; optional): in the wheel wherever this environment's own
    # install could build them (a machine with no C compiler gets neither)
    built = [m for m in COMPILED if importlib.util.find_spec(m) is not None]
    for mod in built:
        assert any(n.startswith(mod.replace(".", "/") + ".") and n.endswith((".so", ".pyd"))
                   for n in names), (mod, names)
    # nothing generic lands at the top of site-packages
    tops = {n.split("/")[0] for n in names}
    assert tops <= {"hermes", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True)
    # Dependencies come from this test environment's site-packages via PYTHONPATH (.pth files
    # there are not processed, so the editable install of hermes stays invisible).
    env = dict(os.environ, PYTHONPATH=sysconfig.get_paths()["purelib"] + os.pathsep
               + sysconfig.get_paths()["platlib"])
    where = subprocess.run([str(py), "-c", "import hermes; print(hermes.__file__)"],
                           check=True, capture_output=True, text=True, env=env, cwd=tmp_path).stdout
    assert str(env_dir) in where
    for mod in built:
        where = subprocess.run([str(py), "-c", f"import {mod} as m; print(m.__file__)"],
                               check=True, capture_output=True, text=True, env=env,
                               cwd=tmp_path).stdout
        assert where.startswith(str(env_dir)), (mod, where)
    res = subprocess.run([str(env_dir / "bin" / "hermes"), "--help"], capture_output=True,
                         text=True, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "validate" in res.stdout
