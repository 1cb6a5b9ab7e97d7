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
#: a fixed one -- fails the test. Never a tolerance: fix the cause, then drop the entry. None
#: left: the replayed speed-ups above their finding's share (dispatch sink/fusion/pipeline/tiling
#: cache, memory-bound fusion) are capped at 1 / (1 - share) since docs/rules.md's rule.
KNOWN: dict[str, tuple[tuple[str, str], ...]] = {}

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
    doc = json.loads(text)
    bad = self_check(doc, require_explained=True)
    # a replayed gain above what removing all of its finding's time gives is capped at that
    # (1 / (1 - share), 2 decimals rounded down) and kept beside it, unless it claims the time
    # of more findings or its median step saves more than the run's average (docs/rules.md)
    for f in doc["findings"]:
        for r in f["recommendations"]:
            if "replayed_speedup" in r and "claims" not in r:
                assert r["estimate"] == "replay" and r["replayed_speedup"] > \
                    r["estimated_speedup"] == pytest.approx(1 / (1 - f["time_share"]), abs=0.01)
    if rel == "hta/trace_filter/sampled_rank-0.json.gz":
        # dispatch 0.191 of the step: sinking the graph replays 1.30x (it removes every
        # per-operator host cost, more than the dispatch finding's), written 1 / 0.809 = 1.23x
        f = next(f for f in doc["findings"] if f["id"] == "cpu.operator_dispatch")
        sink = next(r for r in f["recommendations"] if r["rule"] == "cpu.dispatch_sink")
        assert (round(f["time_share"], 3), sink["estimated_speedup"],
                sink["replayed_speedup"]) == (0.191, 1.23, 1.3)
    assert sorted({(v.check, v.where) for v in bad}) == sorted(KNOWN.get(rel, ())), \
        [str(v) for v in bad]
