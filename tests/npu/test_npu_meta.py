"""What an emulated trace records for the advisor: every setting, the options it cannot take."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

import hermes
from hermes.collectors.fine import FineCollector
from hermes.errors import HermesError
from hermes.npu.emulate import emulate, plan
from hermes.npu.opts import OPTS
from hermes.npu.settings import Settings

# (workload, ranks, injected causes, options): runs whose rejections are checked against plan()
SCENARIOS = [
    ("resnet50", 1, [], []),
    ("bert-large", 1, ["cpu.operator_compilation"], []),
    ("vgg16", 2, ["communication.small_packet"], ["sink"]),
    ("gpt3-13b", 8, [], ["parallel=dp2,tp2,pp2"]),
]


def test_settings_record_every_field_as_json() -> None:
    p = plan("vgg16", ranks=2, inject_specs=["computation.slow_node"], opt_specs=["fusion"])
    meta = p.settings.to_meta()
    assert set(meta) == {f.name for f in fields(Settings)}
    assert json.loads(json.dumps(meta)) == meta  # JSON-able as it stands
    assert meta["slow_rank"] == 1 and meta["fusion"] is True
    assert meta["num_workers"] == Settings().num_workers  # defaults recorded too
    assert Settings(**{k: tuple(v) if isinstance(v, list) else v
                       for k, v in meta.items()}) == p.settings


@pytest.mark.parametrize("workload,ranks,causes,given", SCENARIOS)
def test_rejected_options_are_what_plan_refuses(workload: str, ranks: int, causes: list[str],
                                                given: list[str]) -> None:
    p = plan(workload, ranks=ranks, inject_specs=causes, opt_specs=given)
    rejected = p.truth()["opts_rejected"]
    names = {spec.partition("=")[0] for spec in given}
    assert not names & set(rejected)  # options already applied are not listed
    for name, opt in OPTS.items():
        if name in names:
            continue
        try:
            plan(workload, ranks=ranks, inject_specs=causes, opt_specs=[*given, opt.example])
        except HermesError as exc:
            assert rejected.get(name) == exc.one_line(), name
        else:
            assert name not in rejected, name


def test_rejections_name_the_reason() -> None:
    rejected = plan("bert-large", inject_specs=["cpu.operator_compilation"]).truth()[
        "opts_rejected"]
    assert "dynamic" in rejected["sink"]  # sink needs a static graph
    assert "--ranks" in rejected["parallel"]
    assert all("\n" not in why for why in rejected.values())


def test_trace_records_settings_and_rejections(tmp_path: Path) -> None:
    p = plan("resnet50", inject_specs=["cpu.operator_compilation"], opt_specs=["fusion"])
    out = tmp_path / "run.parquet"
    emulate(p, FineCollector(out), 2)
    extra = hermes.load(out).meta.extra
    assert extra["settings"] == json.loads(json.dumps(p.settings.to_meta()))
    assert extra["opts"] == {"fusion": True}
    assert "sink" in extra["opts_rejected"] and "fusion" not in extra["opts_rejected"]
    assert extra["reference"]["workload"] == "resnet50"


def test_emulate_takes_a_collector_not_a_path(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="collector"):
        emulate(plan("resnet50"), tmp_path / "run.parquet", 1)  # type: ignore[arg-type]
