"""The fusion what-if's compute floor of a fused kernel with no unit recorded is FLOPs over the
peak of the fastest dtype a training step's matmuls could use under the precision rules — not
the table's fastest dtype overall (fp4 on B200 / GB200, fp6 on MI355X, int8 on A100)."""

from __future__ import annotations

import math

import pytest

from hermes import devices
from hermes.trace.meta import TraceMeta
from hermes.whatif.fusion import training_peak
from tests.whatif.test_whatif_transforms import FUSE, frame, step_ns


@pytest.mark.parametrize(("name", "want", "dtype", "over"), [
    ("b200", 4.5e15, "fp8", "fp4"), ("gb200", 5.0e15, "fp8", "fp4"),
    ("mi355x", 5.0e15, "fp8", "fp6"), ("h100", 1.979e15, "fp8", "fp8"),
    ("a100-sxm4-80gb", 3.12e14, "bf16", "int8"), ("t4", 6.5e13, "fp16", "int8"),
    ("ascend910b", 3.2e14, "bf16", "int8")])
def test_training_peak_is_a_training_dtype(name: str, want: float, dtype: str,
                                           over: str) -> None:
    meta = devices.get(name).to_meta()
    flops = meta["dtype_flops"]
    # the figure is the table's own for that dtype, and the table's fastest is `over`
    assert training_peak(meta) == pytest.approx(want) == pytest.approx(flops[dtype])
    assert max(flops, key=flops.get) == over


def test_fp8_counts_only_where_its_libraries_train() -> None:
    # an fp8 figure on an architecture outside FP8_TRAINING_ARCHS: the 16-bit peak
    dev = {"arch": "ampere", "dtype_flops": {"fp32": 1e13, "bf16": 3e14, "fp8": 6e14}}
    assert training_peak(dev) == 3e14
    assert training_peak({"arch": "hopper", **{k: v for k, v in dev.items() if k != "arch"}}) \
        == 6e14
    # no training dtype in the table: no peak (the fused kernel's compute floor is then 0)
    assert math.isnan(training_peak({"dtype_flops": {"int8": 1e15, "fp4": 2e15}}))


def test_fused_relu_keeps_its_compute_at_b200_fp8_peak() -> None:
    # test_whatif_transforms' FUSE step (200 ns -> 160 ns with relu's 20 ns of compute left)
    # with relu's FLOPs set to 20 ns at B200's fp8 peak (9e7 / 4.5e15 s): 160 ns again; at the
    # fp4 peak (9e15) relu would keep 10 ns and the step would be 150 ns
    rows = [dict(r, flops=9e7) if r["name"] == "relu" else r for r in FUSE]
    meta = TraceMeta(device=devices.get("b200").to_meta())
    m, p, unknown, _ = step_ns(frame(*rows), "fusion", meta)
    assert not unknown
    assert (m, p) == pytest.approx((200, 160))
