"""torch.compile: one-off compilation in the first step vs recompiling every step.

A real PyTorch 2.13 trace (tests/data/kineto/torch_compile_cpu.json.gz, SOURCES.md) and hand-made
steps; the rule table picks the warm-up advice or the static-shapes advice from the evidence.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import hermes
from hermes.collectors.importers import get
from tests.analyzers.test_analysis_cpu import run
from tests.conftest import DATA
from tests.tracegen import ev


def test_real_torch_compile_trace_is_a_one_off_compilation(tmp_path: Path) -> None:
    out = tmp_path / "tc.parquet"
    get("kineto").run([DATA / "kineto" / "torch_compile_cpu.json.gz"], out, {})
    # by default the compiling first step is a warm-up outlier: left out, and said so
    steady = hermes.analyze(out)
    assert [(w["step"], w["factor"] > 100) for w in steady.warmup] == [(0, True)]
    assert steady.steps["count"] == 2
    assert steady.finding("cpu.operator_compilation") is None
    # analyzed with it, the compilation is the finding, and a one-off one
    a = hermes.analyze(out, keep_warmup=True)
    top = a.findings[0]
    assert top.id == "cpu.operator_compilation" and top.time_share > 0.9
    assert top.evidence["trace_steps"] == 3
    assert top.evidence["compile_after_first_share"] < 0.1
    assert top.summary.startswith("operators are compiled once, in the first step")
    names = {o["name"] for o in top.evidence["top_ops"]}
    assert any(n.endswith("(dynamo_timed)") for n in names)
    rules = [r.to_dict()["rule"] for r in top.recommendations]
    assert rules[0] == "cpu.compile_warmup" and "cpu.compile_static_shapes" not in rules


@pytest.mark.parametrize("every_step", [False, True])
def test_compile_once_or_every_step(every_step: bool) -> None:
    # three steps of 1000 ns; a 400 ns compile in step 1 only, or in every step (new shapes)
    from hermes.advisor import recommend

    rows = []
    for i in range(3):
        t = 1000 * i
        rows.append(ev("step", f"ProfilerStep#{i + 1}", t, 1000))
        if every_step or i == 0:
            rows.append(ev("host_op", "compile_fx_inner (dynamo_timed)", t, 400))
        rows.append(ev("kernel", "k", t + 500, 500, stream=7))
    res = run(*rows)
    f = next(f for f in res.findings if f.cause == "operator_compilation")
    assert f.evidence["compile_after_first_share"] == (0.6667 if every_step else 0)  # 800/1200
    assert [r.rule for r in recommend(f)][0] == (
        "cpu.compile_static_shapes" if every_step else "cpu.compile_warmup")
