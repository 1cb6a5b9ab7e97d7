"""Kernel families by name, the kernel summary table, MFU, and device-bound real traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from hermes import devices
from hermes.analyzers.computation import families
from hermes.analyzers.computation.analysis import computation
from hermes.analyzers.engine.base import RankContext
from hermes.trace.meta import TraceMeta
from hermes.trace.reader import table_to_pandas
from hermes.trace.writer import to_table
from tests.tracegen import ev, events

H100 = TraceMeta(device=devices.get("h100").to_meta())
PEAK = 9.894e14  # h100.toml bf16 dense peak


def run(*rows: dict, meta: TraceMeta = H100):
    df = table_to_pandas(to_table(events(*rows)))
    return computation(RankContext(0, df, meta))


@pytest.mark.parametrize(("name", "family"), [
    ("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NTT", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "gemm"),
    ("ampere_sgemm_128x64_nn", "gemm"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1>(...)", "gemm"),
    # rocBLAS / hipBLASLt Tensile kernels
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x192x64_MI16x16x1_SN_LDSB1", "gemm"),
    ("fc-dtype_Float", "gemm"),                                   # MTIA fully connected
    ("triton_tem_fused_mm_0", "gemm"),
    ("triton_poi_fused__scaled_dot_product_flash_attention_cat_10", "elementwise"),
    ("triton_red_fused_add_mean_mul_pow_rsqrt_0", "reduction"),
    ("triton_per_fused_native_layer_norm_3", "reduction"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26", "attention"),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4> >", "attention"),
    ("sage_fwd", "attention"),
    ("igemm_fwd_gtcx2_nhwc_bf16_bx0_ex1_bt32x256x32", "conv"),      # MIOpen implicit GEMM
    ("sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", "conv"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>", "norm"),
    ("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16b", "norm"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >",
     "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<8, bfloat16_copy_kernel_cuda>", "copy"),
    ("batched_transpose_16x64_pack_1x4_ediv_1x2_half", "copy"),
    ("void at::native::reduce_kernel<512, 1, ReduceOp<float, MeanOps<float> > >", "reduction"),
    ("void split_embedding_codegen_forward_unweighted_kernel<c10::Half>", "embedding"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "communication"),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>", "elementwise"),
    ("some_custom_kernel", "other"),
])
def test_family_by_name(name: str, family: str) -> None:
    assert families.classify(pd.Series([name])).iloc[0] == family


def test_family_bounds() -> None:
    assert [families.bound_of(f) for f in ("gemm", "attention", "conv", "elementwise", "copy",
                                           "communication", "other")] == \
        ["compute_bound", "compute_bound", "compute_bound", "memory_bound", "memory_bound",
         "communication", "unknown"]


def test_kernel_table_by_hand() -> None:
    # one 1 ms step; gemm_a twice (100 + 300 us), ew_add once (100 us): 500 us of kernels
    r = run(ev("step", "ProfilerStep#1", 0, 1_000_000, step=1),
            ev("kernel", "gemm_a", 0, 100_000),
            ev("kernel", "gemm_a", 200_000, 300_000),
            ev("kernel", "ew_add", 600_000, 100_000))
    t = r.tables["kernels"].set_index("name")
    assert list(t.index) == ["gemm_a", "ew_add"]              # by total time
    g = t.loc["gemm_a"]
    assert (g["count"], g["total_ns"], g["mean_ns"], g["med_ns"], g["min_ns"], g["max_ns"],
            g["std_ns"]) == (2, 400_000, 200_000, 200_000, 100_000, 300_000, 100_000)
    assert g["share_pct"] == pytest.approx(80.0)
    assert (g["family"], g["bound"]) == ("gemm", "compute_bound")   # by family: no FLOPs
    assert (t.loc["ew_add", "family"], t.loc["ew_add", "bound"]) == ("elementwise",
                                                                     "memory_bound")
    fam = r.tables["families"].set_index("family")
    assert fam.loc["gemm", "share_pct"] == pytest.approx(80.0)
    # no FLOPs anywhere: MFU unknown, not zero
    assert r.metrics["mfu"] is None and r.metrics["achieved_tflops"] is None
    (cb,) = [f for f in r.findings if f.cause == "compute_bound"]
    assert cb.time_share == pytest.approx(0.4)                 # 400 us of the 1 ms step
    assert cb.evidence["families"][0]["family"] == "gemm"
    assert cb.evidence["family_basis_pct"] == 100.0


def test_absurd_flop_counts_give_no_mfu_and_no_numpy_warning() -> None:
    """Two kernels of 1e308 FLOPs each: their sum is past float64 (inf), so no rate is
    stated (MFU unknown, not infinite), and numpy prints nothing on stderr."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = run(ev("step", "ProfilerStep#1", 0, 1_000_000, step=1),
                ev("kernel", "nvjet_gemm", 0, 400_000, flops=1e308),
                ev("kernel", "nvjet_gemm", 500_000, 400_000, flops=1e308))
    assert r.metrics["mfu"] is None and r.metrics["achieved_tflops"] is None
    assert r.metrics["flops_known_pct"] == pytest.approx(100.0)


def test_mfu_by_hand() -> None:
    # one 1 ms step; a GEMM doing 0.5 x peak x 1 ms of FLOPs in 625 us (0.8 of peak while it
    # runs): achieved over the step = 0.5 x 989.4 = 494.7 TFLOP/s, MFU 0.5; a kernel of unknown
    # FLOPs runs 125 us -> FLOPs known for 625 / 750 of kernel time
    fl = 0.5 * PEAK * 1e-3
    r = run(ev("step", "ProfilerStep#1", 0, 1_000_000, step=1),
            ev("kernel", "nvjet_gemm", 0, 625_000, flops=fl, bytes=1e6),
            ev("kernel", "mystery", 700_000, 125_000))
    m = r.metrics
    assert m["mfu"] == pytest.approx(0.5)
    assert m["achieved_tflops"] == pytest.approx(494.7)
    assert m["mfu_peak_tflops"] == pytest.approx(989.4)
    assert m["flops_known_pct"] == pytest.approx(100 * 625 / 750)
    k = r.tables["kernels"].set_index("name")
    assert k.loc["nvjet_gemm", "tflops"] == pytest.approx(fl / 625e-6 / 1e12)
    assert k.loc["nvjet_gemm", "bound"] == "compute_bound"     # 0.8 of peak >= U
    assert k.loc["mystery", "bound"] == "no_data"              # unknown family: not judged


def test_flops_from_shapes_reach_the_kernel_through_the_launch() -> None:
    # a kernel without an external id is linked through its launch's correlation id
    args = json.dumps({"Input Dims": [[16, 256, 512], [1, 256, 512], []],
                       "Input type": ["float", "float", "Scalar"]})
    n = 16 * 256 * 512
    r = run(ev("host_op", "aten::add", 0, 10_000, external_id=4, args=args),
            ev("launch", "cudaLaunchKernel", 1_000, 2_000, external_id=4, corr_id=77),
            ev("kernel", "void at::native::vectorized_elementwise_kernel<4, add>", 20_000, 10_000,
               corr_id=77))
    k = r.tables["tasks"].iloc[0]
    assert k["flops"] == n
    assert k["bytes"] == (n + 131072) * 4 + n * 4
    # 17.3 MB in 10 us = 1.73 TB/s = 0.52 of HBM: below U -> underutilized, judged by roofline
    assert k["u_bandwidth"] == pytest.approx(((n + 131072) * 4 + n * 4) / 10e-6 / 3.35e12)
    assert (k["class"], k["basis"], k["family"]) == ("underutilized", "roofline", "elementwise")


def test_profiles_of_the_shared_gpus() -> None:
    assert devices.match("AMD Instinct MI300X").peak_flops["sm"] == pytest.approx(1.3074e15)
    assert devices.match("AMD Instinct MI210").hbm_bw_Bps == pytest.approx(1.6384e12)
    assert devices.match("Tesla V100-SXM2-32GB").name == "v100"


def _measured_gemm_tflops(path: Path) -> float:
    """Independently of Hermes: FLOP/s of big_matmul's GEMM kernels from the raw Kineto JSON
    (each nvjet kernel is one 8192^3 bf16 matmul: 2 x 8192^3 FLOP)."""
    with gzip.open(path, "rt") as fh:
        evs = json.load(fh)["traceEvents"]
    durs = [e["dur"] for e in evs if e.get("cat") == "kernel" and e["name"].startswith("nvjet")]
    return 2 * 8192 ** 3 * len(durs) / (sum(durs) * 1e-6) / 1e12


def test_big_matmul_leads_with_gemm(shared_traces: Path, tmp_path: Path) -> None:
    import hermes
    from hermes.collectors import importers

    src = shared_traces / "kineto-h100" / "big_matmul.pt.trace.json.gz"
    out = tmp_path / "big.parquet"
    importers.get("kineto").run([src], out, {})
    a = hermes.analyze(out)
    assert a.bound == "device"
    comp = [f for f in a.findings if f.category == "computation"]
    assert comp and comp[0].cause == "compute_bound"
    fam = comp[0].evidence["families"][0]
    assert fam["family"] == "gemm"
    measured = _measured_gemm_tflops(src)        # 779.7 TFLOP/s (h100_calibration: ~795)
    assert fam["tflops"] == pytest.approx(measured, rel=0.02)
    kt = a.tables["computation.kernels"]
    assert kt.iloc[0]["family"] == "gemm" and kt.iloc[0]["name"].startswith("nvjet")
    m = a.per_rank[0]["computation"].metrics
    # 11 GEMMs of 1.1e12 FLOP per ~18 ms step: ~670 TFLOP/s, MFU ~0.68 of 989.4
    assert 600 < m["achieved_tflops"] < 740 and 0.6 < m["mfu"] < 0.75


DEVICE_BOUND = ["hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                "hta/mtia_trace_single_rank/mtia_rank_0.json.gz",
                "public/tracelens/inference/xdit_flux.1_aiter_sage/profile_trace_rank_0.json.gz",
                "public/tracelens/inference/vllm_decode_full/graph_execution.json.gz",
                "public/tracelens/mi210/gpu_only_trace/gpu_only_trace.json.gz",
                "public/tracelens/torch_compile_triton/trace.json.gz",
                "kineto-h100/two_stream_prefetch.pt.trace.json.gz"]


@pytest.mark.parametrize("rel", DEVICE_BOUND)
def test_device_bound_verdict_has_computation_findings(shared_traces: Path, tmp_path: Path,
                                                       rel: str) -> None:
    import hermes
    from hermes.collectors import importers

    src = shared_traces / rel
    if not src.exists():
        pytest.skip(f"{rel} not in this checkout")
    out = tmp_path / "t.parquet"
    importers.get("kineto").run([src], out, {})
    a = hermes.analyze(out)
    if a.bound != "device":
        pytest.skip(f"verdict {a.bound}: not a device-bound run here")
    comp = [f for f in a.findings if f.category == "computation"]
    assert comp, "a device-bound verdict comes with computation findings"
    assert comp[0] is a.findings[0] or comp[0].time_share >= 0.3
    for f in comp:  # never more than the device computes
        assert f.time_share <= a.verdict.device + 1e-9
        assert f.evidence["families"]
