"""The device table (hermes/devices/*.toml): every file loads with its sources, names map back to
their profile, and the figures the analyzers and the emulator read for the seven profiles that
existed before the table grew are unchanged (hand-copied from the files as they were)."""

from __future__ import annotations

import json

import pytest

from hermes import devices
from hermes.devices import DTYPES, match, profiles
from tests.conftest import run_cli

#: The figures consumers read (peak_flops, dtype_flops max and fp32, HBM) of the seven original
#: profiles, copied from the files before this table grew.
BEFORE = {
    "h100": ({"sm": 9.894e14, "vector": 6.69e13}, 1.979e15, 6.69e13, 3.35e12),
    "v100": ({"sm": 1.25e14, "vector": 1.57e13}, 1.25e14, 1.57e13, 9.0e11),
    "mi210": ({"sm": 1.81e14, "vector": 2.26e13}, 1.81e14, 4.53e13, 1.6384e12),
    "mi250": ({"sm": 1.8105e14, "vector": 2.265e13}, 1.8105e14, 4.525e13, 1.6384e12),
    "mi300x": ({"sm": 1.3074e15, "vector": 1.634e14}, 2.6149e15, 1.634e14, 5.3e12),
    "ascend910a": ({"cube": 2.56e14, "vector": 8.0e12, "ai_cpu": 5.0e10}, 5.12e14, 6.4e13, 1.2e12),
    "ascend910b": ({"cube": 3.2e14, "vector": 1.0e13, "ai_cpu": 6.0e10}, 6.4e14, 8.0e13, 1.6e12),
}

#: Device names as CUDA / HIP / torch_npu report them -> profile.
NAMES = {
    "NVIDIA H100 80GB HBM3": "h100", "NVIDIA H100 PCIe": "h100-pcie", "NVIDIA H200": "h200",
    "NVIDIA A100-SXM4-80GB": "a100-sxm4-80gb", "NVIDIA A100-SXM4-40GB": "a100-sxm4-40gb",
    "NVIDIA A100-PG509-200": "a100-sxm4-40gb", "NVIDIA A100-PCIE-40GB": "a100-pcie-40gb",
    "NVIDIA A100 80GB PCIe": "a100-pcie-80gb", "NVIDIA A10": "a10", "NVIDIA L4": "l4",
    "NVIDIA L40S": "l40s", "Tesla T4": "t4", "Tesla V100-SXM2-32GB": "v100",
    "Tesla V100-PCIE-16GB": "v100-pcie", "Tesla P100-PCIE-16GB": "p100-pcie",
    "NVIDIA GeForce RTX 2080 Ti": "rtx2080ti", "NVIDIA GeForce RTX 3090": "rtx3090",
    "NVIDIA GeForce RTX 4090": "rtx4090", "NVIDIA B200": "b200", "NVIDIA GB200": "gb200",
    "AMD Instinct MI100": "mi100", "AMD Instinct MI210": "mi210",
    "AMD Instinct MI250X/MI250": "mi250", "AMD Instinct MI250X": "mi250x",
    "AMD Instinct MI300X": "mi300x", "AMD Instinct MI300X VF": "mi300x",
    "AMD Instinct MI325X": "mi325x", "AMD Instinct MI355X": "mi355x",
    "Ascend910A": "ascend910a", "Ascend910B3": "ascend910b", "Ascend910_9392": "ascend910c",
    "HL-225": "gaudi2", "GAUDI3": "gaudi3",
}
#: Names no profile may claim (a different part that merely contains a profile's name).
NOT_THEIRS = ["NVIDIA A10G", "NVIDIA GH200 480GB", "Tesla V100S-PCIE-32GB", "AMD Radeon Graphics"]


def test_every_file_loads_with_sources_and_known_dtypes() -> None:
    ps = profiles()
    assert len(ps) == 32
    for p in ps.values():
        assert p.sources and all(s.startswith("https://") for s in p.sources), p.name
        assert p.arch and p.arch_id and p.vendor in ("nvidia", "amd", "huawei", "intel"), p.name
        assert set(p.dtype_flops) <= set(DTYPES), p.name
        assert all(v > 0 for v in p.dtype_flops.values()), p.name
        assert p.hbm_bw_Bps > 0 and p.hbm_capacity_B > 0 and p.peak_flops, p.name
        # the matrix unit's peak is its best 16-bit figure
        best16 = max(p.dtype_flops.get("bf16", 0), p.dtype_flops.get("fp16", 0))
        assert max(p.peak_flops.values()) == pytest.approx(best16), p.name
        if p.vendor == "nvidia":
            assert p.fields["compute_capability"].replace(".", "") == p.arch_id[2:], p.name


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_the_original_profiles_keep_the_figures_consumers_read(name: str) -> None:
    pf, best, fp32, hbm = BEFORE[name]
    p = devices.get(name)
    assert p.peak_flops == pf
    assert max(p.dtype_flops.values()) == best  # whatif.fusion's fastest dtype
    assert p.dtype_flops["fp32"] == fp32        # the roofline's fp32 GEMM peak
    assert p.hbm_bw_Bps == hbm


def test_names_and_aliases_come_back_to_their_profile() -> None:
    for p in profiles().values():
        for n in (p.name, p.display_name, *p.fields.get("aliases", [])):
            assert match(n) is p, (n, match(n) and match(n).name)
    for text, want in NAMES.items():
        assert match(text) is not None and match(text).name == want, text
    for text in NOT_THEIRS:
        assert match(text) is None, text


def test_supported_dtypes_follow_the_table() -> None:
    assert not devices.get("v100").supports("bf16") and devices.get("v100").supports("fp16")
    assert not devices.get("t4").supports("tf32")
    assert devices.get("a100-sxm4-80gb").supports("tf32")
    assert not devices.get("a100-sxm4-80gb").supports("fp8")
    assert devices.get("h100").supports("fp8") and devices.get("rtx4090").supports("fp8")
    assert devices.get("b200").supports("fp4") and not devices.get("h100").supports("fp4")
    assert not devices.get("ascend910a").supports("bf16")
    assert not devices.get("mi355x").supports("tf32")
    g = devices.get("gaudi2")  # fp32 has no published figure: supported all the same
    assert g.supports("fp32") and g.matmul_flops("fp32") is None
    assert devices.get("h100").dtypes[0] == "fp8"


def test_the_devices_command_lists_shows_and_refuses() -> None:
    code, out, _ = run_cli("devices")
    assert code == 0 and out.count("\n") == 32 + 3 and "a100-sxm4-80gb" in out
    code, out, _ = run_cli("devices", "--format", "json")
    rows = json.loads(out)
    assert code == 0 and {r["name"] for r in rows} == set(profiles())
    h = next(r for r in rows if r["name"] == "h100")
    assert h["matmul_flops"]["bf16"] == 9.894e14 and h["sources"]
    code, out, _ = run_cli("devices", "Tesla T4")
    assert code == 0 and "not supported: tf32, bf16, fp8, fp6, fp4" in out
    assert "https://" in out
    code, out, err = run_cli("devices", "tpu-v9")
    assert code == 2 and out == "" and err.count("\n") == 1 and "unknown device" in err
