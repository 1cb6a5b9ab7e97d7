"""``hermes profile`` ends by saying where the trace is and what to run next."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_profile_says_where_the_trace_is(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import hermes\nfor _ in range(3):\n    hermes.step()\nprint('done')\n")
    out = tmp_path / "trace"
    run = subprocess.run([sys.executable, "-m", "hermes.cli", "profile", "--out", str(out),
                          "--", sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "done"  # the script's output stays its own
    assert f"hermes: trace written to {out}" in run.stderr
    assert f"next: hermes analyze {out}" in run.stderr
    assert any(out.glob("*.parquet"))

