"""Which device ran a trace: hand-made device fields and kernel names, then the shared traces
(their device read independently from the JSON: deviceProperties or, without them, what the
kernel names allow)."""

from __future__ import annotations

import pytest

from hermes.devices.identify import identify
from tests.devices.kineto import read


def test_the_users_option_comes_first() -> None:
    got = identify({"name": "NVIDIA H100 80GB HBM3"}, ["volta_sgemm_128x64_nn"], option="t4")
    assert (got.profile.name, got.source) == ("t4", "user option")


def test_device_fields_name_the_device() -> None:
    got = identify({"name": "Tesla V100-SXM2-16GB"}, ["ampere_sgemm_128x64_nn"])
    assert (got.profile.name, got.source) == ("v100", "trace field")
    assert got.supports("bf16") is False and got.supports("fp16") is True


def test_numbers_decide_where_the_name_does_not() -> None:
    mi300 = {"name": "", "kineto": {"name": "", "computeMajor": 9, "computeMinor": 4,
                                    "numSms": 304, "warpSize": 64,
                                    "totalGlobalMem": 206141652992}}
    assert identify(mi300).profile.name == "mi300x"
    mi325 = {"kineto": {**mi300["kineto"], "totalGlobalMem": 274877906944}}
    assert identify(mi325).profile.name == "mi325x"  # same die, the memory tells
    shared = {"name": "AMD Instinct MI250X/MI250",
              "kineto": {"computeMajor": 9, "computeMinor": 0, "numSms": 110, "warpSize": 64}}
    assert identify(shared).profile.name == "mi250x"  # ROCm's shared name; 110 CUs per GCD
    gh200 = {"name": "NVIDIA GH200 480GB", "kineto": {"computeMajor": 9, "computeMinor": 0,
                                                      "numSms": 132, "warpSize": 32}}
    got = identify(gh200)  # no profile, but the architecture is known
    assert got.profile is None and got.arch == "hopper" and got.source == "trace field"
    assert got.supports("fp8") is True and got.supports("fp4") is False


def test_kernel_names_give_an_architecture_or_a_lower_bound() -> None:
    got = identify(None, ["ampere_sgemm_128x64_nn", "elementwise_kernel"])
    assert got.source == "kernel names" and got.profile is None and "or newer" in got.arch
    assert got.supports("tf32") is True and got.supports("fp8") is None  # A100 or H100?
    got = identify(None, ["nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT"])
    assert got.arch == "hopper" and got.supports("fp8") is True
    got = identify(None, ["sm100_xmma_gemm_bf16bf16_bf16f32"])
    assert got.arch == "blackwell" and got.supports("fp4") is True
    got = identify(None, ["volta_h884gemm_64x64_ldg8_nn"])
    assert got.supports("fp16") is True and got.supports("bf16") is None
    got = identify(None, ["Cijk_Alik_Bljk_BBS_BH_MT64x16_ISA942_IU1"])
    assert got.arch == "cdna3" and {p.name for p in got.candidates} == {"mi300x", "mi325x"}
    got = identify(None, ["MatMulV2"], core_types=["AI_CORE", "AI_VECTOR_CORE"])
    assert got.arch == "dav-c220" and got.supports("bf16") is True
    got = identify(None, ["my_kernel"])
    assert got.source == "unknown" and got.supports("bf16") is None


#: shared trace -> (profile or None, source, arch)
SHARED = {
    "kineto-h100/big_matmul.pt.trace.json.gz": ("h100", "trace field", "hopper"),
    "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz":
        ("a100-sxm4-40gb", "trace field", "ampere"),
    "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz":
        ("v100", "trace field", "volta"),
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz": ("mi250", "trace field", "cdna2"),
    "hta/trace_filter/sampled_rank-0.json.gz": (None, "kernel names", "ampere or newer"),
    "public/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz":
        ("h100", "trace field", "hopper"),
    "public/tracelens/mi210/gpu_only_trace/gpu_only_trace.json.gz":
        ("mi210", "trace field", "cdna2"),
    "public/tracelens/inference/vllm_decode_full/graph_execution.json.gz":
        ("mi300x", "trace field", "cdna3"),
}


@pytest.mark.parametrize("rel", sorted(SHARED))
def test_shared_traces(shared_traces, rel: str) -> None:
    device, kernels = read(shared_traces / rel)
    got = identify(device, kernels["name"])
    want = SHARED[rel]
    assert (got.profile.name if got.profile else None, got.source, got.arch) == want


#: shared trace -> arch its kernel names alone give (its device fields set aside)
BY_KERNELS = {
    "public/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz": "hopper",
    "kineto-h100/two_stream_prefetch.pt.trace.json.gz": "ampere or newer",  # fp32: sm80 names
    "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz":
        "ampere or newer",
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz": "cdna2",
    "public/tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz": "cdna3",
}


@pytest.mark.parametrize("rel", sorted(BY_KERNELS))
def test_shared_traces_by_kernel_names_alone(shared_traces, rel: str) -> None:
    device, kernels = read(shared_traces / rel)
    got = identify(None, kernels["name"])
    assert (got.source, got.arch) == ("kernel names", BY_KERNELS[rel])
    # what the names allow includes the device that ran the trace
    truth = identify(device).profile
    assert truth in got.candidates or got.profile is truth
