"""The Ascend chip a torch_npu profile names (profiler_info_<rank>.json) picks its own device
profile: the whole name ("Ascend910_9392" is a 910C), not its number ("Ascend910" is a 910A)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hermes
from hermes.collectors.importers import get
from hermes.collectors.importers.ascend.importer import chip_profile
from hermes.devices.identify import identify

#: (what the info file says, the profile it names); names from the device table's aliases
CHIPS = [("Ascend910_9392", "ascend910c"), ("Ascend910_9382", "ascend910c"),
         ("Ascend910B3", "ascend910b"), ("Ascend910B4-1", "ascend910b"),
         ("Ascend 910B4", "ascend910b"),          # spaced: the table lists "Ascend910B4"
         ("Ascend910B9", "ascend910b"),           # a 910B variant the table does not list
         ("Ascend910", "ascend910a"), ("Ascend910PremiumA", "ascend910a"),
         ("Ascend910_9399", None),                # unlisted, no family letter: not the 910A
         ("Ascend310P3", None)]                   # an inference chip the table has not


@pytest.mark.parametrize(("text", "want"), CHIPS)
def test_chip_name_names_its_profile(text: str, want: str | None) -> None:
    got = chip_profile(json.dumps({"config": {}, "device": text}))
    assert (got.name if got else None) == want


def _profile_dir(root: Path, chip: str) -> Path:
    pt = root / "node1_1234_20250101_ascend_pt"
    out = pt / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    hw = [{"ph": "M", "name": "process_name", "pid": 30, "tid": 0,
           "args": {"name": "Ascend Hardware"}},
          {"ph": "X", "name": "MatMul_1", "pid": 30, "tid": 2, "ts": "110.250", "dur": 5.5,
           "args": {"Task Type": "AI_CORE", "Stream Id": 2}}]
    (out / "trace_view.json").write_text(json.dumps(hw))
    (pt / "profiler_info_0.json").write_text(json.dumps({"config": {}, "device": chip}))
    return pt


@pytest.mark.parametrize(("chip", "want", "arch"), [("Ascend910_9392", "ascend910c", "dav-c220"),
                                                    ("Ascend910", "ascend910a", "dav-c100")])
def test_imported_910c_is_identified_as_910c(tmp_path: Path, chip: str, want: str,
                                             arch: str) -> None:
    res = get("ascend").run([_profile_dir(tmp_path, chip)], tmp_path / "out", {})
    meta = hermes.load(tmp_path / "out").meta
    assert not res.warnings and meta.device["name"] == want
    dev = identify(meta.device)
    assert dev.source == "trace field" and dev.arch == arch
    # the 910C (like the 910B) has bf16 matrix units and no fp8; the 910A has neither
    assert dev.supports("bf16") is (want == "ascend910c") and dev.supports("fp8") is False
