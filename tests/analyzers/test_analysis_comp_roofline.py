"""Diff tests of the ``computation`` analyzer: tiny traces, tables computed by hand."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from hermes import devices
from hermes.analyzers.computation.analysis import U_THRESHOLD, computation
from hermes.analyzers.engine.base import RankContext
from hermes.trace.meta import TraceMeta
from hermes.trace.reader import table_to_pandas
from hermes.trace.schema import arrow_schema
from hermes.trace.writer import to_table
from tests.tracegen import ev, events

H100 = TraceMeta(device=devices.get("h100").to_meta())
A910B = TraceMeta(device={"name": "Ascend910B"})  # partial device dict, as importers write it
PEAK, HBM = 9.894e14, 3.35e12


def frame(*rows: dict) -> pd.DataFrame:
    if not rows:
        return table_to_pandas(arrow_schema().empty_table())
    return table_to_pandas(to_table(events(*rows)))


def run(df: pd.DataFrame, meta: TraceMeta = H100):
    return computation(RankContext(0, df, meta))


def check(result) -> None:
    try:
        from hermes.analyzers.engine.invariants import check_result
    except ImportError:  # B's checker not merged yet: the basic invariants by hand
        for f in result.findings:
            assert 0.0 <= f.time_share <= 1.0
        for t in result.tables.values():
            if "dur_ns" in t:
                assert (t["dur_ns"] >= 0).all()
        return
    check_result(result)


def test_roofline_classes_by_hand() -> None:
    # one 1 ms step; four 100 us kernels on an H100 (ridge = 9.894e14 / 3.35e12 = 295.3 FLOP/B)
    df = frame(
        ev("step", "ProfilerStep#1", 0, 1_000_000, step=1),
        # AI = 7.9e10 / 1e6 >> ridge; FLOP/s = 0.8 peak >= U -> compute-bound
        ev("kernel", "gemm", 0, 100_000, flops=0.8 * PEAK * 1e-4, bytes=1_000_000, unit="sm"),
        # AI = 1e6 / 2.68e8 << ridge; B/s = 0.8 HBM >= U -> memory-bound
        ev("kernel", "add", 200_000, 100_000, flops=1e6, bytes=0.8 * HBM * 1e-4, unit="sm"),
        # AI = 1 <= ridge but 1e10 B/s is far below HBM -> underutilized
        ev("kernel", "x", 400_000, 100_000, flops=1e6, bytes=1e6, unit="sm"),
        ev("kernel", "y", 600_000, 100_000),  # nothing known -> no_data
    )
    r = run(df)
    check(r)
    got = r.tables["classes"].set_index("class")
    want = pd.DataFrame({"class": ["compute_bound", "memory_bound", "underutilized", "no_data"],
                         "kernels": [1, 1, 1, 1],
                         "device_time_ns": [100_000] * 4,
                         "share_pct": [25.0] * 4,
                         "step_share": [0.1] * 4}).set_index("class")
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    k = r.tables["tasks"].set_index("name")
    assert k.loc["gemm", "u_compute"] == pytest.approx(0.8)
    assert k.loc["add", "u_bandwidth"] == pytest.approx(0.8)
    assert k.loc["x", "ai_flop_per_B"] == pytest.approx(1.0)
    assert k.loc["gemm", "ridge_flop_per_B"] == pytest.approx(PEAK / HBM)
    ids = sorted(f.cause for f in r.findings)
    assert ids == ["compute_bound", "memory_bound", "underutilization"]
    assert all(f.time_share == pytest.approx(0.1) for f in r.findings)
    assert r.metrics["device_idle_pct"] == pytest.approx(60.0)
    assert r.metrics["no_data_pct"] == pytest.approx(25.0)


def test_below_threshold_is_underutilized() -> None:
    u = U_THRESHOLD * 0.9
    df = frame(ev("kernel", "gemm", 0, 100_000, flops=u * PEAK * 1e-4, bytes=1e6, unit="sm"))
    r = run(df)
    assert r.tables["tasks"]["class"].tolist() == ["underutilized"]
    # whole-trace window = the kernel itself: share 1.0
    assert [f.cause for f in r.findings] == ["underutilization"]
    assert r.findings[0].time_share == pytest.approx(1.0)


def test_flops_and_shapes_from_launching_host_op() -> None:
    # Kineto: the kernel has no flops; aten::mm (same external id) has flops and Input Dims.
    n = 8192
    fl = 2.0 * n ** 3
    args = json.dumps({"Input Dims": [[n, n], [n, n]], "Input type": ["c10::BFloat16"] * 2})
    df = frame(
        ev("host_op", "aten::mm", 0, 10_000, external_id=5, flops=fl, args=args),
        ev("kernel", "sm90_xmma_gemm_bf16", 20_000, 1_400_000, external_id=5),
        ev("kernel", "elementwise", 1_500_000, 100_000),
    )
    r = run(df)
    k = r.tables["tasks"].set_index("name")
    assert k.loc["sm90_xmma_gemm_bf16", "flops"] == fl
    # bytes estimated: (n*n + n*n + n*n) elements of 2 B
    assert k.loc["sm90_xmma_gemm_bf16", "bytes"] == 3 * n * n * 2
    # 1.1e12 FLOP in 1.4 ms = 7.85e14 FLOP/s = 0.794 of peak -> compute-bound
    assert k.loc["sm90_xmma_gemm_bf16", "class"] == "compute_bound"
    # no FLOP/byte data: judged by its kernel family's usual bound (families.toml)
    assert k.loc["elementwise", "class"] == "memory_bound"
    assert k.loc["elementwise", "basis"] == "family"
    top = max(r.findings, key=lambda f: f.time_share)
    assert top.id == "computation.compute_bound"
    assert top.evidence["top_ops"][0]["name"] == "sm90_xmma_gemm_bf16"


def _asc(name: str, ts: int, dur: int, unit: str, **a) -> dict:
    return ev("kernel", name, ts, dur, unit=unit, args=json.dumps(a))


def test_underutilization_causes_ascend_style() -> None:
    df = frame(
        ev("step", "step 1", 0, 1_000_000, step=1),
        _asc("Cast1", 0, 30_000, "ai_cpu", **{"Type": "Cast"}),            # AI CPU > 20 us
        _asc("Cast2", 40_000, 10_000, "ai_cpu", **{"Type": "Cast"}),       # AI CPU, short: not
        _asc("MatMul1", 100_000, 50_000, "cube",                          # 15365 % 256 != 0
             **{"Type": "MatMulV3", "Input Shapes": "\"8192,15365;8192,4096\"",
                "OP State": "dynamic"}),
        _asc("MatMul2", 200_000, 50_000, "cube",                          # aligned
             **{"Type": "MatMulV2", "Input Shapes": "\"81920,4096;8192,512\""}),
        _asc("FA", 300_000, 40_000, "mix",                                # 511 % 128 != 0
             **{"Type": "FlashAttentionScore", "Input Shapes": "\"4096,2,511;4096,2,512\""}),
        _asc("TransData7", 400_000, 20_000, "vector", **{"Type": "TransData"}),
    )
    r = run(df, A910B)
    check(r)
    (u,) = [f for f in r.findings if f.cause == "underutilization"]   # one finding, causes inside
    by = {k: SimpleNamespace(time_share=v["share"], evidence=v)
          for k, v in u.evidence["causes"].items()}
    assert u.evidence["reason"] == "shape_affinity"                   # the largest named cause
    assert by["ai_cpu"].evidence["operators"] == ["Cast1"]
    assert by["ai_cpu"].time_share == pytest.approx(0.03)
    assert sorted(by["shape_affinity"].evidence["operators"]) == ["FA", "MatMul1"]
    assert by["shape_affinity"].time_share == pytest.approx(0.09)
    assert by["private_format"].evidence["operators"] == ["TransData7"]
    assert by["dynamic_shape"].evidence["operators"] == ["MatMul1"]
    causes = r.tables["causes"]
    assert set(causes["cause"]) == {"ai_cpu", "shape_affinity", "private_format",
                                    "dynamic_shape"}


def test_pipe_ratios_classify_tasks_without_flops() -> None:
    df = frame(_asc("mm", 0, 100, "cube", aic_mac_ratio=0.82, aic_mte2_ratio=0.96),
               _asc("fa", 100, 100, "mix", aic_mac_ratio=0.35, aic_mte2_ratio=0.87),
               _asc("add", 200, 100, "vector", aiv_vec_ratio=0.25, aiv_mte2_ratio=0.1))
    r = run(df, A910B)
    assert r.tables["tasks"]["class"].tolist() == ["compute_bound", "memory_bound",
                                                     "underutilized"]


def test_frequency_drop() -> None:
    # H100 nominal 1980 MHz; samples average 1782 MHz = 10 % drop; device busy 50 % of the step.
    # The GEMM reaches 0.675 of the nominal peak (< U) but 0.75 of the peak at 1782 MHz: it is
    # judged at its clock -> compute-bound
    df = frame(ev("step", "s", 0, 1_000_000, step=1),
               ev("kernel", "k", 0, 500_000, flops=0.675 * PEAK * 5e-4, bytes=1e6, unit="sm"),
               ev("counter", "GPU frequency (MHz)", 0, 0, lane_kind="counter", lane="c",
                  value=1782.0),
               ev("counter", "GPU frequency (MHz)", 500_000, 0, lane_kind="counter", lane="c",
                  value=1782.0))
    r = run(df)
    (f,) = [f for f in r.findings if f.cause == "underutilization"]
    assert f.evidence["reason"] == "frequency_drop"
    assert f.evidence["causes"]["frequency_drop"]["drop"] == pytest.approx(0.1)
    assert f.time_share == pytest.approx(0.5 * 0.1)
    # the GEMM's time at the nominal clock is compute-bound; the rest is the frequency drop's
    (cb,) = [f for f in r.findings if f.cause == "compute_bound"]
    assert cb.time_share == pytest.approx(0.5 * 0.9)
    k = r.tables["tasks"].iloc[0]
    assert k["u_compute"] == pytest.approx(0.75)
    assert k["class"] == "compute_bound"


@pytest.mark.parametrize("rows", [(), (ev("kernel", "k", 0, 10),),
                                  (ev("host_op", "op", 0, 10),)])
def test_empty_and_one_event(rows) -> None:
    for meta in (H100, TraceMeta()):
        r = run(frame(*rows), meta)
        check(r)
        assert r.findings == []
        assert set(r.tables) >= {"kernels", "classes", "top_ops", "causes"}
