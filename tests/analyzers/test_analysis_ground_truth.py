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

_SPEEDUP = "speedup_within_share"
#: Self-check violations (check, where) of these runs today (``hermes.check.selfcheck``): bugs of
#: the analysis or the advice, listed so that a new one -- or a fixed one -- fails. The replayed
#: speed-ups claim more than their finding's share (the optimization removes other causes' time
#: too); the io analyzer's share leaves the first step out, the breakdown does not.
KNOWN: dict[str | None, tuple[tuple[str, str], ...]] = {
    "io.slow_data_reading": (
        (_SPEEDUP, "findings[0] io.slow_data_reading rule io.read_uncompressed"),
        (_SPEEDUP, "findings[3] io.slow_data_processing rule io.processing_more_workers")),
    "io.slow_data_processing": (
        ("share_within_category", "findings[0] io.slow_data_processing"),),
    "cpu.operator_compilation": (
        (_SPEEDUP, "findings[0] cpu.operator_compilation rule cpu.compile_static_shapes"),
        (_SPEEDUP, "findings[2] cpu.operator_dispatch rule cpu.dispatch_pipeline"),
        (_SPEEDUP, "findings[2] cpu.operator_dispatch rule cpu.dispatch_sink")),
    "cpu.garbage_collection": (
        (_SPEEDUP, "findings[0] cpu.garbage_collection rule cpu.gc_freeze"),
        (_SPEEDUP, "findings[0] cpu.garbage_collection rule cpu.gc_threshold")),
    "cpu.environment_configuration": (
        (_SPEEDUP, "findings[1] computation.memory_bound rule computation.memory_fusion"),
        *((_SPEEDUP, f"findings[2] cpu.operator_dispatch rule cpu.dispatch_{r}")
          for r in ("fusion", "host_small_ops", "pipeline", "sink", "tiling_cache"))),
}


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
