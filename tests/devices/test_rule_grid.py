"""Every rule over a grid of hand-made traces (device family x matmul dtype x parallelism shown,
tests/devices/grid.py): no advice needs a capability the device lacks (bf16, fp8, TF32), a
parallelism the trace does not show (pipeline), or names another vendor's tools; precision advice
follows the device; estimates are the device table's peak ratio on the matmul share."""

from __future__ import annotations

import pytest

from hermes.rules import TABLE
from tests.devices.grid import DTYPES, FAMILIES, PARALLEL, advice, violations

SHOWN: set[str] = set()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_advice_needs_what_the_device_or_the_trace_lacks(family: str) -> None:
    bad = []
    for dtype in DTYPES:
        for parallel in PARALLEL:
            f, recs = advice(family, dtype, parallel)
            bad += [f"{family} {dtype} {parallel}: {b}" for b in violations(f, recs)]
            SHOWN.update(r.rule for _, r in recs)
            rules = {r.rule for _, r in recs}
            assert ("parallel.pipeline_interleave" in rules) == (parallel == "pipeline")
            if family == "cpu-only":
                req = {r.id for r in TABLE.rules if "accelerator" in r.requires}
                assert not rules & req
    assert bad == []


def _how(family: str, dtype: str, rule: str) -> list:
    _, recs = advice(family, dtype, "none")
    return [r for cid, r in recs if r.rule == rule and cid == "computation.compute_bound"]


def test_precision_advice_follows_the_device() -> None:
    # Volta / Turing fp32: fp16 with loss scaling, never bf16
    for fam in ("volta", "turing"):
        (r, *_) = _how(fam, "fp32", "computation.low_precision")
        assert "torch.float16" in r.how and "GradScaler" in r.how and "bfloat16" not in r.how
    # Ampere fp32: bf16 or TF32, never FP8; Ampere bf16: nothing (no faster dtype)
    (r, *_) = _how("ampere", "fp32", "computation.low_precision")
    assert "torch.bfloat16" in r.how and "allow_tf32" in r.how and "FP8" not in r.how
    assert not _how("ampere", "bf16", "computation.fp8_matmuls")
    assert not _how("ampere", "bf16", "computation.low_precision")
    assert not _how("cdna2", "bf16", "computation.fp8_matmuls")  # MI210: no fp8
    # Hopper / Blackwell / CDNA 3 bf16: FP8, the matmuls being 97% of device time here
    for fam in ("hopper", "blackwell", "cdna3", "ada"):
        assert _how(fam, "bf16", "computation.fp8_matmuls"), fam
        assert not _how(fam, "bf16", "computation.low_precision"), fam
    # already fp8: no precision advice at all
    for fam in ("hopper", "blackwell"):
        assert not _how(fam, "fp8", "computation.fp8_matmuls")
        assert not _how(fam, "fp8", "computation.low_precision")
    # an unknown device: conditional, saying what to check
    (r, *_) = _how("unknown", "fp32", "computation.low_precision")
    assert r.how.startswith("Conditional:") and "bf16 matrix units" in r.how


def test_estimates_are_the_peak_ratio_on_the_matmul_share() -> None:
    # H100: fp8 1979 / bf16 989.4 TFLOP/s = 2.0; matmuls 4 x 1.8 ms of 7.4 ms device time;
    # the finding is half the step: 1 / (1 - 0.5 * (1 - 1/2.0) * 7.2/7.4) = 1.32
    (r,) = _how("hopper", "bf16", "computation.fp8_matmuls")[:1]
    assert r.estimated_speedup == pytest.approx(1 / (1 - 0.5 * (1 - 989.4 / 1979) * 7.2 / 7.4),
                                                abs=0.005)
    # V100: fp16 125 / fp32 15.7 TFLOP/s = 7.96x
    (r,) = _how("volta", "fp32", "computation.low_precision")[:1]
    assert r.estimated_speedup == pytest.approx(1 / (1 - 0.5 * (1 - 15.7 / 125) * 7.2 / 7.4),
                                                abs=0.005)
    assert "fp16 8.0x the fp32 matrix peak" in r.how


def test_every_rule_ran_on_the_grid() -> None:
    if not SHOWN:
        for fam in FAMILIES:
            for dtype in DTYPES:
                for parallel in PARALLEL:
                    SHOWN.update(r.rule for _, r in advice(fam, dtype, parallel)[1])
    assert {r.id for r in TABLE.rules} - SHOWN == set()
