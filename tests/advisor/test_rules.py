"""The rule table: coverage, schema check, hand-computed speedups (docs/rules.md)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from hermes.advisor import context, evaluate, recommend, speedup
from hermes.devices import get as get_device
from hermes.findings import CAUSE_IDS, Finding
from hermes.npu import opts
from hermes.rules import TABLE, RuleError, load_rules
from hermes.trace.meta import TraceMeta
from tests.conftest import REPO

ASCEND = TraceMeta(source="hermes", device=get_device("ascend910b").to_meta())
H100 = TraceMeta(source="kineto", device=get_device("h100").to_meta())
BARE = TraceMeta(source="unknown")


def finding(fid: str, share: float, **evidence: Any) -> Finding:
    cat, cause = fid.split(".")
    return Finding(cat, cause, share, "hand-made", evidence=evidence, ranks=(0,))


def by_rule(recs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r.rule: r for r in recs}


# ---------------------------------------------------------------------------- the table

def test_every_cause_id_has_a_rule():
    assert {r.cause for r in TABLE.rules} == set(CAUSE_IDS)


def test_every_emulator_opt_parses():
    """Each emulator spelling, placeholders filled from the rule's own parameters on a
    representative finding, is accepted by hermes emulate's --opt parser."""
    checked = 0
    for rule in TABLE.rules:
        if rule.emulator_opt is None:
            continue
        ns = context(finding(rule.cause, 0.5, reason="", h2d_pageable=3, bubble_pct_mean=10.0,
                             small_kernels_pct=50.0), ASCEND)
        got = evaluate(rule, ns)
        params = got[1] if got else {}
        spec = rule.emulator_opt.format(**{**ns, **params})
        name, _ = opts.parse(spec)
        assert name in opts.OPTS, rule.id
        checked += 1
    assert checked >= 20


def test_speedup_formula_and_cap():
    assert speedup(0.5, 10.0) == 2.0
    assert speedup(0.0, 10.0) == 1.0
    assert speedup(0.95, 10.0) == 10.0   # capped: 1 / (1 - 0.95) = 20
    assert speedup(0.2, 10.0) == 1.25


# ---------------------------------------------------------------------------- hand-computed

def test_more_workers_from_the_share_of_data_wait():
    # 1 worker (default when the trace does not say), 60 % waiting: the loader needs
    # 1 / (1 - 0.6) = 2.5 workers; x1.25 headroom -> ceil(3.125) = 4; with 4 workers the wait
    # left is max(0, 1/4 - 0.4) = 0 -> all 60 % recovered -> 1 / 0.4 = 2.5x
    recs = recommend(finding("io.slow_data_processing", 0.6), ASCEND)
    assert [r.rule for r in recs] == ["io.processing_more_workers", "io.processing_on_device"]
    assert recs[0].estimated_speedup == 2.5
    assert "num_workers=4" in recs[0].how
    assert recs[0].emulator_opt is None            # not an emulated trace
    # on-device augmentation recovers half: 0.3 of the step -> 1 / 0.7 = 1.43x
    assert recs[1].estimated_speedup == 1.43


def test_more_workers_capped_at_64_leaves_a_residual_wait():
    # 8 workers, 95 % waiting: 1.25 * 8 / 0.05 = 200 -> capped at 64 workers; the loader then
    # delivers a batch every 8/64 = 0.125 of the old step while compute is 0.05 of it: the wait
    # left is 0.125 - 0.05 = 0.075, recovered 0.95 - 0.075 = 0.875 -> 1 / 0.125 = 8.0x
    recs = by_rule(recommend(finding("io.slow_data_processing", 0.95, num_workers=8), ASCEND))
    assert recs["io.processing_more_workers"].estimated_speedup == 8.0
    assert "num_workers=64" in recs["io.processing_more_workers"].how


def test_pin_memory_from_the_device_bandwidths():
    # Ascend 910B profile: pageable 8 GB/s, pinned 24 GB/s -> copies take 1/3: 2/3 of the
    # 30 % recovered = 0.2 -> 1.25x; prefetch recovers half: 0.15 -> 1 / 0.85 = 1.18x
    recs = recommend(finding("io.slow_data_fetching", 0.3, h2d_pageable=10), ASCEND)
    assert [(r.rule, r.estimated_speedup) for r in recs] == [
        ("io.fetch_pin_memory", 1.25), ("io.fetch_prefetch", 1.18)]
    # no pageable copies seen: pinning is not the fix
    recs = recommend(finding("io.slow_data_fetching", 0.3, h2d_pageable=0), ASCEND)
    assert [r.rule for r in recs] == ["io.fetch_prefetch"]
    # unknown device: the documented fallback (0.5) -> 0.15 -> 1.18x, tie kept in table order
    recs = recommend(finding("io.slow_data_fetching", 0.3, h2d_pageable=10), BARE)
    assert [(r.rule, r.estimated_speedup) for r in recs] == [
        ("io.fetch_pin_memory", 1.18), ("io.fetch_prefetch", 1.18)]


def test_low_precision_from_the_dtype_peaks():
    # 910B: bf16 320 -> int8 640 TFLOP/s; H100: bf16 989.4 -> fp8 1979 TFLOP/s: half the matmul
    # time recovered; 40 % compute-bound -> 0.2 -> 1.25x on both
    for meta in (ASCEND, H100):
        (rec,) = recommend(finding("computation.compute_bound", 0.4), meta)
        assert rec.rule == "computation.low_precision"
        assert rec.estimated_speedup == 1.25
    assert "allow_tf32" in recommend(finding("computation.compute_bound", 0.4), H100)[0].how
    # no device peaks: fallback 0.5 gives the same here
    assert recommend(finding("computation.compute_bound", 0.4), BARE)[0].estimated_speedup \
        == 1.25


def test_synchronization_wait_gets_no_bandwidth_fix():
    recs = recommend(finding("communication.synchronization_wait", 0.3, R_wait_mean=0.3), ASCEND)
    # fix the straggler recovers 0.9 x 0.3 = 0.27 -> 1 / 0.73 = 1.37x; balancing 0.15 -> 1.18x
    assert [(r.rule, r.estimated_speedup) for r in recs] == [
        ("communication.fix_straggler", 1.37), ("communication.balance_load", 1.18)]
    assert not any(k in r.how for r in recs for k in ("HCCL_", "NCCL_", "bucket_cap_mb"))


def test_underutilization_rules_follow_the_reason():
    got = {reason: [r.rule for r in recommend(
        finding("computation.underutilization", 0.2, reason=reason), ASCEND)]
        for reason in ("ai_cpu", "private_format", "shape_affinity", "frequency_drop", "")}
    assert got == {"ai_cpu": ["computation.no_ai_cpu"],
                   "private_format": ["computation.no_private_format"],
                   "shape_affinity": ["computation.affinity_shapes"],
                   "frequency_drop": ["computation.fix_downclock"],
                   "": ["computation.bigger_kernels"]}
    # private formats: 0.9 x 0.2 = 0.18 -> 1 / 0.82 = 1.22x
    rec = recommend(finding("computation.underutilization", 0.2, reason="private_format"), ASCEND)
    assert rec[0].estimated_speedup == 1.22
    assert "allow_internal_format = False" in rec[0].how


def test_underutilization_broken_down_by_sub_cause():
    # one finding, 64 % of the step underutilized, of which private formats explain 14.8 %:
    # forbidding them recovers 0.9 x 0.148 = 0.1332 -> 1 / 0.8668 = 1.15x; the unexplained
    # 0.492 gets bigger kernels: 0.3 x 0.492 = 0.1476 -> 1 / 0.8524 = 1.17x
    f = finding("computation.underutilization", 0.64, reason="private_format",
                causes={"private_format": {"share": 0.148, "text": "TransData"}})
    recs = recommend(f, ASCEND)
    assert [(r.rule, r.estimated_speedup) for r in recs] == [
        ("computation.bigger_kernels", 1.17), ("computation.no_private_format", 1.15)]
    # fully explained by its sub-causes: no generic advice
    f = finding("computation.underutilization", 0.3, reason="ai_cpu",
                causes={"ai_cpu": {"share": 0.2}, "shape_affinity": {"share": 0.1}})
    recs = by_rule(recommend(f, ASCEND))
    assert set(recs) == {"computation.no_ai_cpu", "computation.affinity_shapes"}
    # 0.8 x 0.2 = 0.16 -> 1.19x; 0.6 x 0.1 = 0.06 -> 1.06x
    assert recs["computation.no_ai_cpu"].estimated_speedup == 1.19
    assert recs["computation.affinity_shapes"].estimated_speedup == 1.06


def test_device_specific_rules_and_wording():
    npu = by_rule(recommend(finding("cpu.operator_dispatch", 0.5), ASCEND))
    gpu = by_rule(recommend(finding("cpu.operator_dispatch", 0.5), H100))
    assert "cpu.dispatch_pipeline" in npu and "cpu.dispatch_pipeline" not in gpu
    assert "MAX_RUNTIME_CORE_NUMBER=3" in npu["cpu.dispatch_pipeline"].how
    assert "cpu.dispatch_tiling_cache" in npu and "cpu.dispatch_tiling_cache" not in gpu
    assert "CUDA graph" in gpu["cpu.dispatch_sink"].how
    # sink 0.95 x 0.5 = 0.475 -> 1 / 0.525 = 1.90x; pipeline 0.4 x 0.5 -> 1.25x
    assert npu["cpu.dispatch_sink"].estimated_speedup == 1.9
    assert npu["cpu.dispatch_pipeline"].estimated_speedup == 1.25
    env_npu = recommend(finding("cpu.environment_configuration", 0.2), ASCEND)[0].how
    env_gpu = recommend(finding("cpu.environment_configuration", 0.2), H100)[0].how
    assert "ASCEND_GLOBAL_LOG_LEVEL=3" in env_npu and "NCCL_DEBUG" in env_gpu


def test_rdma_timeout_formula():
    # wait 4.096 us x 2^t: t 20 -> 18 waits a quarter: 0.75 of 0.4 = 0.3 -> 1 / 0.7 = 1.43x
    recs = by_rule(recommend(finding("communication.rdma_retransmission", 0.4), ASCEND))
    assert recs["communication.rdma_timeout"].estimated_speedup == 1.43
    assert "HCCL_RDMA_TIMEOUT=18" in recs["communication.rdma_timeout"].how


def test_sorted_by_estimated_speedup():
    for cid in CAUSE_IDS:
        recs = recommend(finding(cid, 0.3, reason=""), ASCEND)
        assert recs, cid
        s = [r.estimated_speedup for r in recs]
        assert s == sorted(s, reverse=True), cid
        assert all(set(r.to_dict()) == {"rule", "optimization", "how", "estimated_speedup",
                              "emulator_opt", "estimate"} for r in recs)


# ---------------------------------------------------------------------------- emulated traces

def emulated(**extra: Any) -> TraceMeta:
    """Metadata as the emulator writes it: every setting it used (the defaults, plus what the
    test overrides) and the options it found it cannot plan with the run (``opts_rejected``)."""
    from dataclasses import asdict

    from hermes.npu.settings import Settings

    settings = {k: v for k, v in asdict(Settings()).items()
                if isinstance(v, (int, float, str, bool))}
    settings.update(extra.pop("settings", {}))
    base = {"workload": "resnet50", "ranks": 1, "device_name": "ascend910b", "clock": "virtual",
            "injected": [], "opts": {}, "opts_rejected": {}, "settings": settings}
    return TraceMeta(source="emulator", device=get_device("ascend910b").to_meta(),
                     extra={**base, **extra})


def test_emulator_opt_only_for_emulated_traces():
    f = finding("io.slow_data_processing", 0.6)
    # the emulator's default is 8 workers: 1.25 * 8 / 0.4 = 25 workers
    rec = recommend(f, emulated(injected=[{"id": "io.slow_data_processing", "strength": 1.0}],
                                settings={"num_workers": 1}))[0]
    assert rec.emulator_opt == "num_workers=4"
    rec = recommend(f, emulated())[0]
    assert rec.emulator_opt == "num_workers=25"
    assert recommend(f, ASCEND)[0].emulator_opt is None


def test_emulator_opt_already_applied_is_not_recommended_again():
    f = finding("io.slow_data_fetching", 0.3, h2d_pageable=10)
    assert [r.rule for r in recommend(f, emulated(opts={"pin_memory": True}))] == \
        ["io.fetch_prefetch"]


def test_emulator_opt_contradicting_the_run_is_dropped():
    # sink needs static shapes: with operator compilation (dynamic shapes) injected, the sink
    # advice stays but without an emulator spelling
    from hermes.npu.emulate import plan

    truth = plan("mobilenetv1-ssd", inject_specs=["cpu.operator_compilation"]).truth()
    assert "sink" in truth["opts_rejected"]          # what the emulator records for the advisor
    meta = emulated(workload="mobilenetv1-ssd", **{k: truth[k] for k in
                                                   ("injected", "opts", "opts_rejected")})
    recs = by_rule(recommend(finding("cpu.operator_dispatch", 0.5), meta))
    assert recs["cpu.dispatch_sink"].emulator_opt is None
    assert recs["cpu.dispatch_pipeline"].emulator_opt == "pipeline"


def test_taskset_rule_needs_a_binding_when_known():
    f = finding("cpu.environment_configuration", 0.3)
    assert "cpu.env_no_taskset" in by_rule(recommend(f, ASCEND))          # not recorded
    assert "cpu.env_no_taskset" not in by_rule(recommend(f, emulated()))  # emulator: unbound
    assert by_rule(recommend(f, emulated(settings={"taskset_cores": 2})))[
        "cpu.env_no_taskset"].emulator_opt == "no_taskset"


# ---------------------------------------------------------------------------- broken tables

GOOD_RULE = '''
[[rule]]
id = "x.one"
cause = "cpu.garbage_collection"
optimization = "freeze"
how = "gc.freeze()"
recover = 0.5
basis = "test"
'''


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "rules.toml"
    p.write_text("version = 1\n" + text)
    return p


@pytest.mark.parametrize("text, where, what", [
    (GOOD_RULE.replace('how = "gc.freeze()"\n', ""), "(x.one), field 'how'", "missing"),
    (GOOD_RULE.replace("recover = 0.5", 'recover = "__import__(\'os\')"'),
     "(x.one), field 'recover'", "only calls of"),
    (GOOD_RULE.replace("recover = 0.5", 'recover = "share *"'), "field 'recover'", "syntax"),
    (GOOD_RULE.replace("recover = 0.5", "recover = 1.5"), "field 'recover'", "fraction"),
    (GOOD_RULE.replace("cpu.garbage_collection", "cpu.gc"), "field 'cause'", "unknown cause"),
    (GOOD_RULE + 'emulator_opt = "turbo"\n', "field 'emulator_opt'", "unknown emulator"),
    (GOOD_RULE + 'emulator_opt = "num_workers=lots"\n', "field 'emulator_opt'", "bad value"),
    (GOOD_RULE + 'hwo = "typo"\n', "field 'hwo'", "unknown field"),
    (GOOD_RULE + 'when = "a.b == 1"\n', "field 'when'", "Attribute"),
    (GOOD_RULE + GOOD_RULE, "rule #2 (x.one), field 'id'", "duplicate"),
    (GOOD_RULE.replace('how = "gc.freeze()"', 'how = "use {x"'), "field 'how'", "placeholder"),
])
def test_broken_rule_names_the_entry_and_field(tmp_path, text, where, what):
    with pytest.raises(RuleError) as exc:
        load_rules(write(tmp_path, text))
    msg = str(exc.value)
    assert where in msg and what in msg and str(tmp_path) in msg
    assert "\n" not in msg


def test_broken_toml_and_versions(tmp_path):
    with pytest.raises(RuleError, match="not valid TOML"):
        load_rules(write(tmp_path, "[[rule]\nid = 1"))
    p = tmp_path / "v.toml"
    p.write_text("version = 2\n" + GOOD_RULE)
    with pytest.raises(RuleError, match="version must be 1"):
        load_rules(p)
    with pytest.raises(RuleError, match="no rule for cause id"):
        load_rules(write(tmp_path, GOOD_RULE), require_all=True)
    assert len(load_rules(write(tmp_path, GOOD_RULE)).rules) == 1


def test_rule_table_ships_in_the_wheel():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert cfg["package-dir"]["hermes.rules"] == "rules"
    assert "*.toml" in cfg["package-data"]["hermes.rules"]
    assert (REPO / "rules" / "rules.toml").is_file()


def test_more_workers_from_a_single_process_loader():
    # num_workers=0 (the trace's _SingleProcessDataLoaderIter), 60 % waiting: the training
    # process loads a batch in 0.6 of the step; workers overlap it with the 0.4 of compute:
    # 0.6 / 0.4 = 1.5 workers, x1.25 -> ceil(1.875) = 2; wait left max(0, 0.6/2 - 0.4) = 0
    # -> all recovered -> 2.5x
    recs = by_rule(recommend(finding("io.slow_data_processing", 0.6, num_workers=0), ASCEND))
    rec = recs["io.processing_more_workers"]
    assert rec.estimated_speedup == 2.5
    assert "num_workers=2," in rec.how
    assert "(now 0 worker(s): loading in the training process)" in rec.how
    # 90 % waiting: 0.9 / 0.1 x 1.25 = 11.25 -> 12 workers; wait left max(0, 0.075 - 0.1) = 0
    rec = by_rule(recommend(finding("io.slow_data_processing", 0.9, num_workers=0),
                            ASCEND))["io.processing_more_workers"]
    assert "num_workers=12," in rec.how and rec.estimated_speedup == 10.0


def test_precision_advice_follows_the_recorded_matmul_dtype():
    """bf16 matmuls on an H100 are not told to use bf16: FP8 is their next step (fp8 peak
    1979 vs bf16 989.4 TFLOP/s: recover 1 - 989.4/1979 = 0.5, x0.4 share -> 1/(1-0.2) = 1.25);
    fp32 matmuls, or matmuls whose dtype the trace does not record, get the bf16/TF32 advice."""
    def rules(**ev: Any) -> list[str]:
        return [r.rule for r in recommend(finding("computation.compute_bound", 0.4, **ev), H100)]

    bf16 = recommend(finding("computation.compute_bound", 0.4, matmul_elem_B=2.0,
                             matmul_dtype_known_pct=100.0), H100)
    assert [r.rule for r in bf16] == ["computation.fp8_matmuls"]
    assert bf16[0].estimated_speedup == 1.25 and "already run in bf16" in bf16[0].how
    assert rules(matmul_elem_B=4.0, matmul_dtype_known_pct=90.0) == ["computation.low_precision"]
    assert rules() == ["computation.low_precision"]                       # dtype not recorded
    assert rules(matmul_elem_B=2.0, matmul_dtype_known_pct=10.0) == ["computation.low_precision"]
    assert rules(matmul_elem_B=1.0, matmul_dtype_known_pct=100.0) == []   # already 8-bit


def test_shipped_table_passes_every_check_and_loads_without_the_emulator(tmp_path):
    """``TABLE`` leaves the emulator_opt names to this test (the check imports hermes.npu,
    which ``hermes analyze`` does not need); the full check accepts the shipped table and
    gives the same rules."""
    import subprocess
    import sys

    from hermes.rules import RULES_PATH

    full = load_rules()
    assert [r.id for r in full.rules] == [r.id for r in TABLE.rules]
    assert any(r.emulator_opt for r in full.rules)
    # the same table with one unknown emulator option: only the full check refuses it
    p = tmp_path / "rules.toml"
    p.write_text(RULES_PATH.read_text().replace('emulator_opt = "', 'emulator_opt = "turbo', 1))
    assert len(load_rules(p, check_opts=False).rules) == len(TABLE.rules)
    with pytest.raises(RuleError, match="unknown emulator"):
        load_rules(p)
    res = subprocess.run([sys.executable, "-c", "import sys, hermes.rules\n"
                          "print(sorted(m for m in sys.modules if m.startswith('hermes.npu')))"],
                         capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]"
