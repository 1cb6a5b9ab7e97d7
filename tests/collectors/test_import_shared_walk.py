"""Every Kineto and Ascend trace under ../shared/traces imports without --from and analyzes
with exit 0, and its analysis passes the self-check (``hermes.check.selfcheck``) but for the
violations listed in ``KNOWN``. Files that are not traces (a PyTorch Execution Trace, a
memory-timeline export) are left out because the importers recognize and name them, not by a
list of names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes.check.selfcheck import self_check
from hermes.collectors import importers
from tests.conftest import SHARED_TRACES, run_cli

#: Self-check violations of the shared traces' analyses today, (check, where) per trace: each is a
#: bug of the analysis or the advice (docs/analysis/selfcheck.md), listed so that a new one -- or
#: a fixed one -- fails the test. Never a tolerance: fix the cause, then drop the entry.
KNOWN: dict[str, tuple[tuple[str, str], ...]] = {
    "ascend/trace_view.json": (
        ("speedup_within_share", "findings[1] cpu.operator_dispatch rule cpu.dispatch_fusion"),
        ("speedup_within_share", "findings[1] cpu.operator_dispatch rule cpu.dispatch_pipeline"),
        ("speedup_within_share", "findings[1] cpu.operator_dispatch rule cpu.dispatch_sink"),
        ("speedup_within_share",
         "findings[1] cpu.operator_dispatch rule cpu.dispatch_tiling_cache"),
        ("speedup_within_share",
         "findings[5] computation.memory_bound rule computation.memory_fusion"),
    ),
    "hta/timeline_analysis/sampled_rank-0.json.gz": (
        ("speedup_within_share", "findings[1] cpu.operator_dispatch rule cpu.dispatch_sink"),
    ),
    "hta/trace_filter/sampled_rank-0.json.gz": (
        ("speedup_within_share", "findings[1] cpu.operator_dispatch rule cpu.dispatch_sink"),
    ),
    "public/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz": (
        ("speedup_within_share", "findings[0] cpu.operator_dispatch rule cpu.dispatch_sink"),
    ),
    "public/tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz": (
        ("speedup_within_share", "findings[3] cpu.operator_dispatch rule cpu.dispatch_fusion"),
    ),
    "public/tracelens/mi300/Falconsai_nsfw_image_detection__1016002.json.gz": (
        ("speedup_within_share", "findings[0] cpu.operator_dispatch rule cpu.dispatch_fusion"),
    ),
    "public/tracelens/perf_model/normalization/normalization_layer_test.json.gz": (
        ("speedup_within_share", "findings[1] cpu.operator_dispatch rule cpu.dispatch_fusion"),
    ),
}

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
    code, text, err = run_cli("analyze", str(out), "--format", "json")
    assert code == 0, err
    rel = str(src.relative_to(SHARED_TRACES))
    bad = self_check(json.loads(text), require_explained=True)
    assert sorted({(v.check, v.where) for v in bad}) == sorted(KNOWN.get(rel, ())), \
        [str(v) for v in bad]
