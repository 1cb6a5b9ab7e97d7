"""The package installs as a wheel into a fresh virtual environment and its CLI runs there."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile

from tests.conftest import REPO


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
    # the compiled passes (setup.py; optional, but this machine has a C compiler)
    assert any(n.startswith("hermes/trace/_columns.") and n.endswith((".so", ".pyd"))
               for n in names), names
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
    native = subprocess.run([str(py), "-c", "from hermes.trace import columns; "
                             "print(columns.NATIVE, columns._c.__file__)"],
                            check=True, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert native.stdout.startswith("True " + str(env_dir)), native.stdout
    res = subprocess.run([str(env_dir / "bin" / "hermes"), "--help"], capture_output=True,
                         text=True, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "validate" in res.stdout
