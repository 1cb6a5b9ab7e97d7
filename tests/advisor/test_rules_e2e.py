"""End to end: an emulated run with a cause injected, analyzed, carries the cause's
recommendation; applying its emulator spelling to the same run makes the run faster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hermes
import hermes.advisor
import hermes.advisor.advice
import hermes.rules
from hermes.commands.emulate import trace_collector
from hermes.npu.emulate import emulate, plan
from tests.conftest import run_cli

STEPS = 6

# cause -> (workload, ranks, the rule expected first, its emulator option's name)
CASES = {
    "io.slow_data_processing": ("resnet50", 1, "io.processing_more_workers", "num_workers"),
    "io.slow_data_fetching": ("resnet50", 1, "io.fetch_pin_memory", "pin_memory"),
    "cpu.host_device_sync": ("resnet50", 1, "cpu.sync_remove", "remove_syncs"),
    "cpu.garbage_collection": ("resnet50", 1, "cpu.gc_freeze", "gc_freeze"),
    "communication.small_packet": ("vgg16", 2, "communication.bigger_buckets", "grad_bucket_mb"),
}


def run(path: Path, workload: str, ranks: int, cause: str, opt: list[str]) -> float:
    """Median step time (ms) of the emulated run, trace written to ``path``."""
    p = plan(workload, ranks=ranks, inject_specs=[cause], opt_specs=opt, seed=0)
    return float(emulate(p, trace_collector(p, path), STEPS).median_step_ms)


@pytest.fixture(scope="module")
def slow_processing(tmp_path_factory) -> tuple[Path, float]:
    path = tmp_path_factory.mktemp("rules") / "slow_processing.parquet"
    return path, run(path, "resnet50", 1, "io.slow_data_processing", [])


def test_json_report_carries_the_recommendation(slow_processing):
    path, _ = slow_processing
    code, out, err = run_cli("analyze", str(path), "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    f = next(f for f in d["findings"] if f["id"] == "io.slow_data_processing")
    top = f["recommendations"][0]
    assert top["rule"] == "io.processing_more_workers"
    assert top["emulator_opt"].startswith("num_workers=")
    assert int(top["emulator_opt"].split("=")[1]) >= 2          # the run had 1 worker
    assert top["estimated_speedup"] > 1.5
    # every finding's recommendations follow the contract, best first
    for g in d["findings"]:
        s = [r["estimated_speedup"] for r in g["recommendations"]]
        assert s == sorted(s, reverse=True)
        for r in g["recommendations"]:
            keys = {"rule", "optimization", "how", "estimated_speedup", "emulator_opt",
                    "estimate"}
            # a replayed gain above the finding's 1 / (1 - share): capped, the replay beside it
            if "replayed_speedup" in r:
                keys.add("replayed_speedup")
                assert r["replayed_speedup"] > r["estimated_speedup"]
            # above it only with the findings whose time the change removes named (claims)
            if "claims" in r:
                keys.add("claims")
            else:
                assert r["estimated_speedup"] <= 1 / (1 - g["time_share"]) + 0.005
            assert set(r) == keys


def test_text_and_markdown_show_the_top_recommendation(slow_processing):
    path, _ = slow_processing
    code, text, _ = run_cli("analyze", str(path), "--format", "text")
    assert code == 0
    assert "-> more data-loader workers (est. " in text and "[--opt num_workers=" in text
    code, md, _ = run_cli("analyze", str(path), "--format", "md")
    assert code == 0
    assert "## Recommendations" in md
    assert "`io.slow_data_processing` → **more data-loader workers**" in md
    assert "(`hermes emulate --opt num_workers=" in md


def test_applying_the_emulator_opt_makes_the_run_faster(slow_processing, tmp_path):
    path, before = slow_processing
    f = hermes.analyze(path).finding("io.slow_data_processing")
    rec = f.recommendations[0]
    after = run(tmp_path / "after.parquet", "resnet50", 1, "io.slow_data_processing",
                [rec.emulator_opt])
    assert after < before
    measured = before / after
    # the estimate is of the right size (docs/rules.md: calibration table)
    assert 0.5 < rec.estimated_speedup / measured < 2.0, (rec.estimated_speedup, measured)


@pytest.mark.parametrize("cause", [c for c in CASES if c != "io.slow_data_processing"])
def test_injected_cause_gets_its_rule_and_the_opt_helps(cause, tmp_path):
    workload, ranks, rule, opt_name = CASES[cause]
    before = run(tmp_path / "before", workload, ranks, cause, [])
    a = hermes.analyze(tmp_path / "before")
    f = a.finding(cause)
    assert f is not None, [g.id for g in a.findings]
    rec = next(r for r in f.recommendations if r.rule == rule)
    assert rec.emulator_opt is not None and rec.emulator_opt.split("=")[0] == opt_name
    after = run(tmp_path / "after", workload, ranks, cause, [rec.emulator_opt])
    assert after < before, (cause, before, after)


def test_broken_rule_table_is_one_line_exit_2(slow_processing, tmp_path, monkeypatch):
    bad = tmp_path / "rules.toml"
    bad.write_text('version = 1\n[[rule]]\nid = "x.one"\ncause = "cpu.garbage_collection"\n'
                   'optimization = "o"\nhow = "h"\nrecover = 1.5\nbasis = "b"\n')

    def broken(*args, **kwargs):
        return hermes.rules.load_rules(bad)

    monkeypatch.setattr(hermes.advisor.advice, "recommend", broken)
    code, out, err = run_cli("analyze", str(slow_processing[0]))
    assert code == 2
    assert "(x.one), field 'recover'" in err and "Traceback" not in err
    assert err.strip().count("\n") == 0
