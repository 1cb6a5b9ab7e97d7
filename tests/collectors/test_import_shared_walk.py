"""Every Kineto and Ascend trace under ../shared/traces imports without --from and analyzes
with exit 0. Files that are not traces (a PyTorch Execution Trace, a memory-timeline export)
are left out because the importers recognize and name them, not by a list of names."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes.collectors import importers
from tests.conftest import SHARED_TRACES, run_cli

#: shared files that are neither traces nor profiler output (labels, calibration figures)
_NOT_PROFILER_OUTPUT = {"README.md", "steps.json", "h100_calibration.json"}


def _sources() -> list[Path]:
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(p for p in SHARED_TRACES.rglob("*") if p.is_file()
                  and p.name not in _NOT_PROFILER_OUTPUT)


@pytest.mark.parametrize("src", _sources(), ids=lambda p: str(p.relative_to(SHARED_TRACES)))
def test_shared_source_imports_and_analyzes(src: Path, tmp_path: Path,
                                            shared_traces: Path) -> None:
    if importers.detect(src) is None:
        what = importers.explain(src)
        assert what is not None, f"{src}: neither imported nor recognized"
        code, _, err = run_cli("import", str(src), "--out", str(tmp_path / "x.parquet"))
        assert code == 2 and "not a profiler trace" in err
        return
    out = tmp_path / "t.parquet"
    code, _, err = run_cli("import", str(src), "--out", str(out))
    assert code == 0, err
    code, _, err = run_cli("analyze", str(out), "--format", "json")
    assert code == 0, err
