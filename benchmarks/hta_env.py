"""A separate virtual environment with HolisticTraceAnalysis 0.5 for side-by-side benchmarks.

HTA is not a dependency of Hermes: it is installed into ``benchmarks/.cache/hta-venv`` on
first use (``pip install HolisticTraceAnalysis==0.5.0 'pandas<3'``; its critical-path analysis
fails under pandas 3). ``run_hta(code)`` runs a Python snippet there and returns its stdout.

    python benchmarks/hta_env.py            # create it (once; needs the package index)
    python benchmarks/hta_env.py --smoke    # never creates it: where it is ready, HTA's and
                                            # pandas' versions from inside it; else a line
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import venv
from pathlib import Path

VENV = Path(__file__).resolve().parent / ".cache" / "hta-venv"
PY = VENV / "bin" / "python"


def ensure_hta_venv() -> Path:
    """Create the HTA environment once; returns its python executable."""
    marker = VENV / ".hermes-ready"
    if marker.exists():
        return PY
    VENV.parent.mkdir(parents=True, exist_ok=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    subprocess.run([str(PY), "-m", "pip", "install", "-q", "HolisticTraceAnalysis==0.5.0",
                    "pandas<3"], check=True)
    marker.write_text("ok\n")
    return PY


def run_hta(code: str, *args: str, timeout: float = 3600) -> str:
    py = ensure_hta_venv()
    res = subprocess.run([str(py), "-c", code, *args], capture_output=True, text=True,
                         timeout=timeout, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    if res.returncode != 0:
        sys.stderr.write(res.stderr)
        raise RuntimeError(f"HTA snippet failed with exit code {res.returncode}")
    return res.stdout


def ready() -> bool:
    """Whether the environment has been created (``ensure_hta_venv`` would not install)."""
    return (VENV / ".hermes-ready").exists()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true",
                    help="do not create the environment; where it is ready, run a snippet in it")
    if not ap.parse_args().smoke:
        print(ensure_hta_venv())
    elif not ready():
        print(f"smoke run: HTA environment not created ({VENV}); skipped")
    else:
        print(f"{PY}: " + run_hta("import importlib.metadata as m; print('HTA', "
                                  "m.version('HolisticTraceAnalysis'), 'pandas', "
                                  "m.version('pandas'))", timeout=60).strip())
