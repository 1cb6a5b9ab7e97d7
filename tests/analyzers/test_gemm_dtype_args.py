"""A GEMM's peak follows the dtype its args name (fp32 GEMMs run at the fp32 rate): its host
operator's args where it has an operator with args, else its own -- in a frame holding its args
and in one loaded from Parquet with its args left in the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes import devices
from hermes.analyzers.computation.analysis import computation
from hermes.analyzers.engine.base import RankContext
from hermes.trace import load
from hermes.trace.meta import TraceMeta
from hermes.trace.writer import TraceWriter
from tests.tracegen import ev, events

H100 = TraceMeta(device=devices.get("h100").to_meta())
FP32, BF16 = 6.69e13, 9.894e14  # h100.toml: dtype_flops fp32, peak_flops of the tensor cores
FL = 0.5 * FP32 * 1e-3  # FLOPs of a 1 ms GEMM at half the fp32 rate


def _rows() -> list[dict]:
    return [
        # the operator names fp32 (no Input type: the cost model gives no element size)
        ev("host_op", "aten::mm", 0, 10, external_id=1, args='{"dtype": "float32"}'),
        ev("kernel", "gemm_a", 100, 1_000_000, external_id=1, flops=FL, bytes=1e6,
           args='{"grid": [1, 1, 1]}'),
        # no operator: its own args name fp32
        ev("kernel", "gemm_b", 2_000_000, 1_000_000, flops=FL, bytes=1e6,
           args='{"dtype": "float32"}'),
        # the operator's args win over the kernel's
        ev("host_op", "aten::mm", 3_000_000, 10, external_id=3, args='{"dtype": "bfloat16"}'),
        ev("kernel", "gemm_c", 3_000_100, 1_000_000, external_id=3, flops=FL, bytes=1e6,
           args='{"dtype": "float32"}'),
    ]


@pytest.mark.parametrize("lazy", [False, True])
def test_gemm_peak_by_the_dtype_its_args_name(lazy: bool, tmp_path: Path) -> None:
    w = TraceWriter(tmp_path / "t.parquet", row_group_rows=2)
    w.write(events(*_rows()))
    tr = load(w.close(), lazy_args=lazy)
    assert ("args" in tr.events.columns) is not lazy
    k = computation(RankContext(0, tr.events, H100)).tables["tasks"].set_index("name")
    assert k.loc["gemm_a", "u_compute"] == pytest.approx(0.5)
    assert k.loc["gemm_b", "u_compute"] == pytest.approx(0.5)
    assert k.loc["gemm_c", "u_compute"] == pytest.approx(FL / 1e-3 / BF16)
