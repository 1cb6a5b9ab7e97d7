"""``benchmarks/diagnosis.py``: random seeds printed for replay, ``--seed`` replays them, every run
self-checked; one small case (resnet50, one cause, 4 steps) end to end."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def diagnosis():
    spec = importlib.util.spec_from_file_location("diagnosis", ROOT / "benchmarks/diagnosis.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_seeds_random_or_given(diagnosis) -> None:
    a = diagnosis.seeds_of(argparse.Namespace(seeds=5, seed="0,1,2"))
    b = diagnosis.seeds_of(argparse.Namespace(seeds=5, seed="0,1,2"))
    assert len(a) == 5 and all(0 <= s < 2**31 for s in a) and a != b
    assert diagnosis.seeds_of(argparse.Namespace(seeds=None, seed="7, 11")) == [7, 11]
    with pytest.raises(SystemExit, match="give integers"):
        diagnosis.seeds_of(argparse.Namespace(seeds=None, seed="7,x"))
    with pytest.raises(SystemExit, match=">= 1"):
        diagnosis.seeds_of(argparse.Namespace(seeds=0, seed=""))


def test_violation_key_drops_position_and_figures(diagnosis) -> None:
    v = ("speedup_within_share: findings[2] cpu.operator_dispatch rule cpu.dispatch_sink: "
         "estimated_speedup 3.0700x (replay) above 1 / (1 - 0.6695) = 3.0261x")
    assert diagnosis.violation_key(v) == ("speedup_within_share: cpu.operator_dispatch rule "
                                          "cpu.dispatch_sink")


def test_one_case_prints_seed_accuracy_and_self_check(diagnosis, tmp_path, capsys) -> None:
    out = tmp_path / "runs.json"
    code = diagnosis.main(["--workloads", "resnet50", "--causes", "cpu.host_device_sync",
                           "--seed", "3", "--steps", "4", "--out", str(out)])
    text = capsys.readouterr().out
    runs = json.loads(out.read_text())
    assert text.splitlines()[0] == "seeds: 3  (replay one: --seed S)"
    assert [(r["cause"], r["seed"], r["top1"]) for r in runs] == [
        ("none", 3, True), ("cpu.host_device_sync", 3, True)]
    assert "top-1 accuracy: 2/2 = 100.0 %" in text
    assert [r["selfcheck"] for r in runs] == [[], []]
    assert "self-check: 2/2 runs consistent" in text and code == 0
