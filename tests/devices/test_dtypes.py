"""Precision in use: matmul kernels' dtypes from hand-made names and recorded dtypes, and the
matmul dtype mix of shared traces (by their kernel names, read straight from the JSON)."""

from __future__ import annotations

import pandas as pd
import pytest

from hermes.devices.dtypes import is_matmul, matmul_mix, name_dtypes, recorded_dtypes
from tests.devices.kineto import read

NAMES = {
    "volta_sgemm_128x32_nt": "fp32",
    "ampere_sgemm_32x32_sliced1x4_tn": "fp32",
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(x::Params)": "fp32",
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_ffma_aligna4": "fp32",
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw": "tf32",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(p)": "tf32",
    "cutlass_75_tensorop_s1688gemm_128x128_nn": "fp16",  # Turing has no TF32
    "volta_h884gemm_64x64_ldg8_nn": "fp16",
    "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn": "fp16",
    "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_nn": "fp16",
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x64>(p)": "bf16",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64": "bf16",
    "sm90_xmma_gemm_e4m3e4m3_bf16f32_f32_tn_n": "fp8",
    "sm80_xmma_gemm_i8i8_i8i32_f32_tn_n": "int8",
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_ISA90a": "fp32",
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64": "bf16",
    "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT64x32x128": "bf16",
    "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32": "fp16",
    "Cijk_Alik_Bljk_F8F8S_BH_MT256x256x64": "fp8",
    "Cijk_Ailk_Bljk_4xi8I_BH_MT64x64x64": "int8",
    "Cijk_Ailk_Bljk_DB_MT64x64x8": "fp64",
    "igemm_fwd_gtcx2_nhwc_bf16_bx0_ex1_bt32x256x32": "bf16",
    "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1": "bf16",  # fp4 weights, bf16 math
    "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NTT": None,  # the name carries no dtype
    "aclnnMm_MatMulCommon_MatMulV2": None,
}
NOT_MATMUL = ["void fbgemm_gpu::permute_2D_data_kernel<false, int>(int)",
              "void at::native::vectorized_elementwise_kernel<4, float>", "aclnnMm_CastAiCore_Cast",
              "ncclDevKernel_AllReduce_Sum_f32_RING_LL"]


def test_kernel_names_give_their_dtype() -> None:
    s = pd.Series(list(NAMES))
    assert is_matmul(s).all()
    assert dict(zip(NAMES, name_dtypes(s), strict=True)) == NAMES
    assert not is_matmul(pd.Series(NOT_MATMUL)).any()


def test_recorded_dtypes() -> None:
    rec = ["['c10::BFloat16', 'c10::BFloat16', '']", "['float', 'float']", "FLOAT16;FLOAT16",
           "DT_BF16;DT_BF16", "['c10::Half']", "['signed char']", "['c10::Float8_e4m3fn']",
           None, "['double', 'double']"]
    assert recorded_dtypes(pd.Series(rec)).tolist() == \
        ["bf16", "fp32", "fp16", "bf16", "fp16", "int8", "fp8", None, "fp64"]


def test_the_mix_is_shares_of_matmul_time_with_the_unknown_share() -> None:
    names = pd.Series(["ampere_sgemm_a", "sm80_xmma_gemm_tf32f32", "nvjet_sm90_x", "nvjet_sm90_y",
                       "elementwise_kernel"])
    rec = pd.Series([None, "['float']", "['c10::BFloat16']", None, None])
    mix = matmul_mix(names, [100, 300, 500, 100, 9000], recorded=rec)
    # 1000 ns of matmuls: fp32 100, tf32 300 (recorded fp32, ran as TF32), bf16 500, unknown 100
    assert mix["matmul_ns"] == 1000 and mix["kernels"] == 4
    assert mix["shares"] == pytest.approx({"bf16": 0.5, "tf32": 0.3, "fp32": 0.1})
    assert mix["unknown_share"] == pytest.approx(0.1) and mix["top"] == "bf16"
    assert mix["source"] == pytest.approx({"recorded": 0.8, "kernel names": 0.1})
    empty = matmul_mix(pd.Series(["elementwise_kernel"]), [5])
    assert empty["matmul_ns"] == 0 and empty["shares"] == {} and empty["top"] is None


#: shared trace -> (dtype with the largest share by kernel names, its least share, most unknown)
SHARED = {
    "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": ("fp32", 0.9, 0.1),
    "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz":
        ("fp32", 0.5, 0.01),
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz": ("fp32", 0.99, 0.01),
    "public/tracelens/mi210/gpu_only_trace/gpu_only_trace.json.gz": ("bf16", 0.9, 0.1),
    "public/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz": ("bf16", 0.9, 0.1),
    "kineto-h100/two_stream_prefetch.pt.trace.json.gz": ("fp32", 0.99, 0.01),
    "kineto-h100/big_matmul.pt.trace.json.gz": (None, 0.0, 1.0),  # nvjet names only
}


@pytest.mark.parametrize("rel", sorted(SHARED))
def test_shared_traces_mix_by_kernel_names(shared_traces, rel: str) -> None:
    _, k = read(shared_traces / rel)
    mix = matmul_mix(k["name"], k["dur_us"] * 1e3)
    top, least, unknown = SHARED[rel]
    assert mix["matmul_ns"] > 0 and mix["top"] == top
    assert (mix["shares"].get(top, 0.0) if top else 0.0) >= least
    assert mix["unknown_share"] <= unknown
    assert sum(mix["shares"].values()) + mix["unknown_share"] == pytest.approx(1.0)
