"""The ``computation`` analyzer on a real H100 Kineto trace and GEMM FLOPs from shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hermes.analyzers.common.opinfo import gemm_flops
from hermes.analyzers.computation.analysis import computation
from hermes.analyzers.engine.base import RankContext
from hermes.trace.meta import TraceMeta
from hermes.trace.reader import table_to_pandas
from hermes.trace.writer import to_table
from tests.tracegen import ev, events


def test_gemm_flops_from_input_dims() -> None:
    dims = [json.dumps(d) for d in ([[64, 128], [128, 32]],            # mm: 2*64*32*128
                                    [[32], [64, 128], [128, 32]],      # addmm(bias, A, B)
                                    [[4, 64, 128], [4, 128, 32]],      # bmm
                                    [[8, 64, 128], [32, 128], [32]],   # linear(x, W[N,K], b)
                                    [[64, 128]])]                      # relu: not a GEMM
    names = pd.Series(["aten::mm", "aten::addmm", "aten::bmm", "aten::linear", "aten::relu"])
    got = gemm_flops(names, pd.Series(dims)).tolist()
    assert got[:4] == [2 * 64 * 32 * 128, 2 * 64 * 32 * 128, 2 * 4 * 64 * 32 * 128,
                       2 * 8 * 64 * 32 * 128]
    assert pd.isna(got[4])


def test_flops_estimated_when_the_trace_has_none() -> None:
    from hermes import devices

    args = json.dumps({"Input Dims": [[4096, 4096], [4096, 4096]],
                       "Input type": ["c10::BFloat16", "c10::BFloat16"]})
    df = table_to_pandas(to_table(events(
        ev("host_op", "aten::mm", 0, 5_000, external_id=9, args=args),
        ev("kernel", "nvjet_sm90_gemm", 10_000, 200_000, external_id=9))))
    r = computation(RankContext(0, df, TraceMeta(device=devices.get("h100").to_meta())))
    k = r.tables["tasks"].iloc[0]
    assert k["flops"] == 2 * 4096 ** 3
    # 1.37e11 FLOP in 200 us = 6.87e14 FLOP/s = 0.695 of 9.894e14 -> just under U = 0.7
    assert k["u_compute"] == pytest.approx(2 * 4096 ** 3 / 200e-6 / 9.894e14)
    assert k["class"] == "underutilized"


def test_big_matmul_is_compute_bound(shared_traces: Path, tmp_path: Path) -> None:
    import hermes
    from hermes.collectors import importers

    try:
        imp = importers.get("kineto")
    except Exception:
        pytest.skip("Kineto importer not registered")
    out = tmp_path / "big.parquet"
    imp.run([shared_traces / "kineto-h100" / "big_matmul.pt.trace.json.gz"], out, {})
    tr = hermes.load(out)
    r = computation(RankContext(0, tr.events, tr.meta))
    top = max(r.findings, key=lambda f: f.time_share)
    assert top.id == "computation.compute_bound"
    assert top.time_share > 0.8
    k = r.tables["tasks"]
    gemm = k[k["name"].str.startswith("nvjet")]
    # four 8192^3 bf16 matmuls per step at ~795 TFLOP/s (h100_calibration.json: 795.3)
    assert (gemm["flops"] == 2 * 8192 ** 3).all()
    assert gemm["u_compute"].median() == pytest.approx(795.3e12 / 9.894e14, abs=0.03)
    assert r.metrics["no_data_pct"] < 15
