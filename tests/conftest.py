from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("HERMES_SHARED", REPO.parent / "shared"))
SHARED_TRACES = SHARED / "traces"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"shared traces not found at {SHARED_TRACES}")
    return SHARED_TRACES


def run_cli(*args: str) -> tuple[int, str, str]:
    """Run the hermes CLI in-process; returns (exit code, stdout, stderr)."""
    import contextlib
    import io

    from hermes.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def negative_dur(f: Path, row: int) -> None:
    """Give event ``row`` of Hermes trace file ``f`` a negative duration (its metadata kept):
    the analysis then refuses that file's rank (a rank to be reported missing)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(f)
    t, md = pf.read(), pf.metadata.metadata
    dur = t.column("dur_ns").to_numpy().copy()
    dur[row] = -7
    pq.write_table(t.set_column(t.schema.get_field_index("dur_ns"), "dur_ns", pa.array(dur))
                   .replace_schema_metadata(md), f)


def emulated_run(out: Path, workload: str, ranks: int, steps: int) -> Path:
    """``hermes emulate WORKLOAD --ranks N --steps S --out OUT`` (checked), returns ``out``."""
    code, _, err = run_cli("emulate", workload, "--ranks", str(ranks), "--steps", str(steps),
                           "--out", str(out))
    assert code == 0, err
    return out
