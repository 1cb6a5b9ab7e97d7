"""The version every trace records (``created_by``) is hermes/_version.py's, the one place it is
written: the installed distribution says the same, and reading it imports no importlib.metadata."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import hermes
from hermes.trace.meta import TraceMeta

ROOT = Path(__file__).resolve().parents[2]


def test_installed_metadata_and_created_by_agree_with_the_version_file():
    assert importlib.metadata.version("hermes-profiler") == hermes.__version__
    assert TraceMeta().created_by == f"hermes-profiler {hermes.__version__}"


def test_pyproject_reads_its_version_from_the_version_file():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"] and "version" not in project["project"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "hermes._version.__version__"


def test_writing_a_trace_header_imports_no_importlib_metadata():
    code = ("import sys; from hermes.trace.meta import TraceMeta; TraceMeta().to_kv(); "
            "print('importlib.metadata' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
