"""``hermes check``: a 10 % regression fails, a re-run passes (emulator), budgets and their
errors, the history rule, and the JUnit XML structure."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hermes.check import BudgetError, check, load_budget, render_junit, render_markdown
from hermes.commands.emulate import trace_collector
from hermes.diff.runs import load_run
from hermes.npu.emulate import emulate, plan
from tests.conftest import run_cli

STEPS = 12


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """bert-large on 2 ranks: a base run, a re-run with another seed, and a run whose second
    rank's clock is slowed (``computation.slow_node`` at strength 0.05: measured +9.8 % median
    step time)."""
    d = tmp_path_factory.mktemp("check")
    out = {}
    for name, spec, seed in (("base", [], 0), ("rerun", [], 7),
                             ("slow", ["computation.slow_node=0.05"], 7)):
        out[name] = d / f"{name}.parquet"
        p = plan("bert-large", ranks=2, inject_specs=spec, seed=seed)
        emulate(p, trace_collector(p, out[name]), STEPS)
    return out


def test_regression_fails_rerun_passes(runs: dict[str, Path]) -> None:
    base, rerun, slow = (load_run(runs[k], k) for k in ("base", "rerun", "slow"))
    ok = check(rerun, [base])
    assert ok.exit_code == 0, ok.gates[0].summary
    bad = check(slow, [base])
    g = bad.gates[0]
    assert bad.exit_code == 1 and g.status == "fail" and not g.flagged
    assert 1.08 < g.details["ratio"] < 1.12 and g.details["p_value"] < 0.01
    # the slowed device work is named: kernels first
    assert bad.responsible and bad.responsible[0]["category"] == "kernel"
    # a history of two runs: pooled, and the re-run is inside it
    hist = check(rerun, [base, slow])
    d = hist.gates[0].details
    assert d["baselines"] == 2 and d["base_steps"] == 2 * STEPS and hist.exit_code == 0
    # the slow run's median sits ~4.6 % above the pooled one: the history's spread
    assert 0.03 < d["history_spread"] < 0.06
    assert d["threshold"] == max(0.05, d["history_spread"])


def test_too_few_steps_is_flagged(runs: dict[str, Path]) -> None:
    base, slow = load_run(runs["base"], "base"), load_run(runs["slow"], "slow")
    base.windows = base.windows[base.windows["ordinal"] < 3]
    slow.windows = slow.windows[slow.windows["ordinal"] < 3]
    g = check(slow, [base]).gates[0]
    assert g.flagged and g.status == "fail" and "too few steps" in g.summary
    assert g.details["min_p"] == pytest.approx(1 / 20)


def test_cli_exit_codes_junit_and_markdown(runs: dict[str, Path], tmp_path: Path) -> None:
    junit, md = tmp_path / "r.xml", tmp_path / "s.md"
    budget = tmp_path / "b.toml"
    budget.write_text('max_step_ms = 1000.0\nmin_mfu = 0.3\nno_new_high_findings = true\n'
                      'max_exposed_comm_pct = 100.0\n'
                      '[finding."cpu.operator_dispatch"]\nmax_share = 0.2\n')
    code, out, _ = run_cli("check", str(runs["slow"]), "--baseline", str(runs["base"]),
                           "--budget", str(budget), "--junit", str(junit), "--md", str(md))
    assert code == 1 and "FAIL" in out and "step_time_regression" in out
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    cases = suites[0].findall("testcase")
    assert int(suites[0].get("tests")) == len(cases) == 6
    assert all(c.get("name") and c.get("classname") for c in cases)
    failures = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failures] == ["step_time_regression"]
    assert int(suites[0].get("failures")) == 1
    assert failures[0].find("failure").get("message")
    skipped = [c.get("name") for c in cases if c.find("skipped") is not None]
    assert skipped == []  # every budgeted figure is measured on the emulator's traces
    assert int(suites[0].get("skipped")) == 0
    text = md.read_text()
    assert text.startswith("### ❌") and "| `step_time_regression` | FAIL |" in text
    code, out, _ = run_cli("check", str(runs["rerun"]), "-b", str(runs["base"]),
                           "--max-regression", "5%")
    assert code == 0 and "PASS" in out


def test_required_figure_not_measured_fails(tmp_path: Path) -> None:
    """A host-only trace (no kernels, so no FLOPs): MFU is not measured. Skipped unless the
    budget requires it, then a failure."""
    from hermes.trace.writer import write_trace
    from tests.tracegen import ev, events

    rows = [ev("step", f"ProfilerStep#{i}", i * 1000, 1000) for i in range(4)]
    rows += [ev("host_op", "aten::add", i * 1000 + 100, 500) for i in range(4)]
    t = write_trace(tmp_path / "host.parquet", events(*rows))
    b = tmp_path / "b.toml"
    b.write_text('min_mfu = 0.3\n')
    v = check(load_run(t, "host"), [], budget=load_budget(b))
    assert v.exit_code == 0 and "not measured" in v.gates[0].summary
    b.write_text('min_mfu = 0.3\nrequire = ["mfu"]\n')
    v = check(load_run(t, "host"), [], budget=load_budget(b))
    assert v.exit_code == 1 and any("not measured" in g.summary for g in v.gates)
    assert "FAIL" in render_markdown(v) and "<failure" in render_junit(v)


@pytest.mark.parametrize("text,key,reason", [
    ('max_step_ms = "fast"\n', "max_step_ms", "expected a number"),
    ("max_step_ms = true\n", "max_step_ms", "expected a number"),
    ("max_stepms = 3\n", "max_stepms", "unknown key"),
    ("max_host_bound_pct = 130\n", "max_host_bound_pct", "out of range"),
    ('[finding."cpu.nope"]\nmax_share = 0.2\n', 'finding."cpu.nope"', "unknown finding id"),
    ('[finding."cpu.operator_dispatch"]\nmax = 0.2\n', "max", "unknown key"),
    ('require = ["speed"]\n', "require", "unknown figure"),
    ("max_step_ms 3\n", "line 1", "not valid TOML"),
])
def test_malformed_budget_exits_2(tmp_path: Path, text: str, key: str, reason: str) -> None:
    b = tmp_path / "perf.toml"
    b.write_text(text)
    with pytest.raises(BudgetError):
        load_budget(b)
    code, out, err = run_cli("check", str(tmp_path / "whatever.parquet"), "--budget", str(b))
    assert code == 2 and out == ""
    assert str(b) in err and key in err and reason in err and err.count("\n") == 1


def test_check_needs_something_to_check(tmp_path: Path) -> None:
    code, _, err = run_cli("check", str(tmp_path / "x.parquet"))
    assert code == 2 and "--baseline" in err
    code, _, err = run_cli("check", str(tmp_path / "x.parquet"), "-b", "y", "--max-regression",
                           "lots")
    assert code == 2 and "--max-regression" in err
