"""``hermes optimize``: the closed loop on the emulator reaches a speedup."""

from __future__ import annotations

import json

from hermes.commands.optimize import loop
from tests.conftest import run_cli


def test_optimize_reaches_a_speedup_within_three_rounds():
    rounds = loop("resnet50", ["cpu.garbage_collection"], iterations=1, steps=4)
    assert len(rounds) == 2
    first, last = rounds
    assert first.applied.split("=")[0] in ("gc_freeze", "gc_threshold")
    assert first.estimate == "replay"
    assert first.measured_ms / last.measured_ms > 1.5
    # the replayed prediction is within 15 % of what the emulator then measured
    assert abs(first.predicted_ms / last.measured_ms - 1) < 0.15


def test_optimize_command_json():
    code, out, err = run_cli("optimize", "resnet50", "--inject", "cpu.host_device_sync",
                             "--iterations", "1", "--steps", "4", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["speedup"] > 1.0
    assert d["iterations"][0]["applied"]
