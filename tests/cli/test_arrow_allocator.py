"""The CLI's pyarrow allocations come from malloc (``_util.use_system_allocator``), a choice the
user's ``ARROW_DEFAULT_MEMORY_POOL`` overrides and that no process Hermes starts inherits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = ("import os; from hermes.commands._util import use_system_allocator; "
         "use_system_allocator(); import pyarrow as pa; "
         "print(pa.default_memory_pool().backend_name, os.environ.get('ARROW_DEFAULT_MEMORY_POOL'))")


def _run(code: str, env: dict[str, str] | None = None) -> str:
    base = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**base, **(env or {})}, check=True)
    return out.stdout.strip()


def test_arrow_allocates_from_malloc_and_the_variable_is_gone_after() -> None:
    assert _run(PROBE) == "system None"


def test_the_users_choice_stands() -> None:
    assert _run(PROBE, {"ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}) == "mimalloc mimalloc"


def test_a_profiled_script_does_not_inherit_it(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import os\nprint('POOL', os.environ.get('ARROW_DEFAULT_MEMORY_POOL'))\n")
    base = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    hermes = Path(sys.executable).with_name("hermes")
    cmd = [str(hermes)] if hermes.exists() else [sys.executable, "-m", "hermes.cli"]
    out = subprocess.run([*cmd, "profile", "--mode", "monitor", "--out", str(tmp_path / "t"),
                          "--", sys.executable, str(script)], capture_output=True, text=True,
                         env={**base, "HERMES_NO_PROGRESS": "1"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "POOL None" in out.stdout, out.stdout[-2000:]
