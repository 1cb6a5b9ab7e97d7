"""Ground truth: emulated runs with one cause injected are diagnosed with that cause.

A few causes on one workload, few steps; ``benchmarks/diagnosis.py`` runs the full matrix.
"""

from __future__ import annotations

import pytest

import hermes
from hermes.analyzers.engine.invariants import check_result
from hermes.check.selfcheck import self_check

CAUSES = ("io.slow_data_reading", "io.slow_data_processing", "cpu.operator_compilation",
          "cpu.garbage_collection", "cpu.environment_configuration")

#: Self-check violations (check, where) of these runs today (``hermes.check.selfcheck``): bugs of
#: the analysis or the advice, listed so that a new one -- or a fixed one -- fails. None left:
#: replayed speed-ups are capped at their finding's share (docs/rules.md), the io shares keep the
#: warm-up step in their denominator (docs/analysis/io.md).
KNOWN: dict[str | None, tuple[tuple[str, str], ...]] = {}


def analyze(tmp_path, inject: str | None):
    from hermes.commands.emulate import trace_collector
    from hermes.npu.emulate import emulate, plan

    p = plan("resnet50", inject_specs=[inject] if inject else [], seed=0)
    path = tmp_path / "run.parquet"
    emulate(p, trace_collector(p, path), steps=6)
    a = hermes.analyze(path)
    assert a.meta.extra.get("injected_ids", []) == ([inject] if inject else [])
    for rr in a.per_rank.values():
        for res in rr.values():
            check_result(res)
    bad = self_check(a.to_dict(), require_explained=True)
    assert sorted({(v.check, v.where) for v in bad}) == sorted(KNOWN.get(inject, ())), \
        [str(v) for v in bad]
    return a


@pytest.mark.parametrize("cause", CAUSES)
def test_injected_cause_leads(tmp_path, cause):
    a = analyze(tmp_path, cause)
    category = cause.split(".")[0]
    top_of_category = next(f for f in a.findings if f.category == category)
    assert top_of_category.id == cause
    assert a.findings[0].category == category
    assert a.bound == ("io" if category == "io" else "host")


def test_clean_run_has_no_cause_but_computation(tmp_path):
    a = analyze(tmp_path, None)
    assert [f.id for f in a.findings if f.time_share >= 0.05 and f.category != "computation"] == []
    assert a.bound == "device"
