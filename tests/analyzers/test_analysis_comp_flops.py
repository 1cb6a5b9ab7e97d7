"""FLOPs and bytes of PyTorch operators from record_shapes (``analyzers/computation/opcost.py``), by hand."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from hermes.analyzers.computation.opcost import one_cost, op_costs

BF16, F32, I64 = "c10::BFloat16", "float", "long int"


def cost(name: str, dims: list, types: list, concrete: list | None = None) -> tuple:
    return one_cost(name, json.dumps(dims), json.dumps(types),
                    json.dumps(concrete) if concrete is not None else None)


def test_matrix_ops() -> None:
    # mm (64x128)(128x32) bf16: 2*64*32*128 FLOP; A + B + C = (8192 + 4096 + 2048) x 2 B
    assert cost("aten::mm", [[64, 128], [128, 32]], [BF16, BF16])[:2] == (524288.0, 28672.0)
    # bmm 4 x (64x128)(128x32) fp32: 2*4*64*32*128; (32768 + 16384 + 8192) x 4 B
    assert cost("aten::bmm", [[4, 64, 128], [4, 128, 32]], [F32, F32])[:2] == \
        (2097152.0, 229376.0)
    # linear(x[8,64,128], W[32,128], b[32]) bf16: 2*512*32*128; x + W + out + b
    fl, by, elem, fam = cost("aten::linear", [[8, 64, 128], [32, 128], [32]], [BF16] * 3)
    assert (fl, by, elem, fam) == (4194304.0, 131072 + 8192 + 32768 + 64.0, 2.0, "gemm")
    # addmm(bias, A, B): A and B are inputs 1 and 2
    assert cost("aten::addmm", [[32], [64, 128], [128, 32], [], []],
                [BF16, BF16, BF16, "Scalar", "Scalar"])[0] == 524288.0


def test_convolution() -> None:
    # x[2,3,32,32] * w[16,3,3,3], stride 1, pad 1: out 2x16x32x32 = 32768 outputs,
    # 27 MACs each -> 2 * 32768 * 27 FLOP; bytes (fp32) x 6144 + w 432 + out 32768 + b 16, x4 B
    args = [[2, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], [], [], []]
    types = [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList",
             "Scalar"]
    conc = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    assert cost("aten::convolution", args, types, conc)[:2] == (1769472.0, 157440.0)
    # stride 2: out (32 + 2 - 2 - 1) // 2 + 1 = 16 per side -> 2*16*16*16 outputs
    conc2 = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    assert cost("aten::convolution", args, types, conc2)[0] == 2 * 8192 * 27
    # depthwise: x[1,8,10,10] * w[8,1,3,3], groups 8, pad 0 -> out 8x8x8, 9 MACs each
    dw = cost("aten::convolution", [[1, 8, 10, 10], [8, 1, 3, 3], [], [], [], [], [], [], []],
              types, ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "8"])
    assert dw[0] == 2 * 512 * 9
    # cudnn_convolution(self, weight, padding, stride, dilation, groups, ...): padding first
    cu = cost("aten::cudnn_convolution", [[2, 3, 32, 32], [16, 3, 3, 3], [], [], [], []],
              [F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar"],
              ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1"])
    assert cu[0] == 2 * 8192 * 27


def test_attention() -> None:
    q = [2, 4, 128, 64]  # (B, H, L, D)
    types = [BF16] * 3 + ["", "Scalar", "Scalar"]
    # 4 * B * H * Lq * Lk * D (QK^T and PV); q, k, v read and out written: 4 x 65536 x 2 B
    full = cost("aten::scaled_dot_product_attention", [q, q, q, [], [], []], types,
                ["", "", "", "", "0.", "False"])
    assert full[:2] == (4 * 2 * 4 * 128 * 128 * 64.0, 524288.0)
    assert full[3] == "attention"
    causal = cost("aten::scaled_dot_product_attention", [q, q, q, [], [], []], types,
                  ["", "", "", "", "0.", "True"])
    assert causal[0] == full[0] / 2
    # flash layout (B, S, H, D) as recorded for aten::_flash_attention_forward; is_causal at 8
    f = [1, 77, 12, 64]
    fl = cost("aten::_flash_attention_forward", [f, f, f] + [[]] * 8, [BF16] * 3 + [""] * 8,
              ["", "", "", "", "", "77", "77", "0.", "True", "False", "0.125"])
    assert fl[0] == 4 * 77 * 12 * 77 * 64 / 2
    # backward: 2.5 x forward (FlashAttention-2: 5 matmuls against 2)
    bw = cost("aten::_scaled_dot_product_flash_attention_backward", [q, q, q, q, q],
              [BF16] * 5)
    assert bw[0] == 2.5 * full[0]


def test_memory_bound_families() -> None:
    # layer norm over 16x256x512 fp32: 5 FLOP/element (fvcore); x read + y written + w, b
    n = 16 * 256 * 512
    ln = cost("aten::native_layer_norm", [[16, 256, 512], [], [512], [512], []],
              [F32, "ScalarList", F32, F32, "Scalar"], ["", "[512]", "", "", "1e-05"])
    assert ln == (5.0 * n, 2 * n * 4 + 2 * 512 * 4.0, 4.0, "norm")
    # broadcast add: out 16x256x512; reads (n + 256*512) x 4 B, writes n x 4 B
    add = cost("aten::add", [[16, 256, 512], [1, 256, 512], []], [F32, F32, "Scalar"])
    assert add[:2] == (float(n), (n + 131072) * 4 + n * 4.0)
    # in-place add_ of int64: reads both, writes the first
    assert cost("aten::add_", [[512, 512], [512, 512], []], [I64, I64, "Scalar"])[1] == \
        3 * 262144 * 8.0
    # copy_ fp32 -> bf16: read 4 B, write 2 B per element, no FLOPs
    assert cost("aten::copy_", [[4096, 8192], [4096, 8192], []], [BF16, F32, "Scalar"])[:2] == \
        (0.0, 4096 * 8192 * 6.0)
    # sum over dim 0 of 4096x8192 bf16: 1 FLOP/element; output 8192 elements
    s = cost("aten::sum", [[4096, 8192], [], [], []], [BF16, "ScalarList", "Scalar", ""],
             ["", "[0]", "True", ""])
    assert s[:2] == (4096 * 8192.0, (4096 * 8192 + 8192) * 2.0)
    sm = cost("aten::_softmax", [[1, 64, 512, 512], [], []], [F32, "Scalar", "Scalar"])
    assert sm[:2] == (5.0 * 16777216, 2 * 16777216 * 4.0)
    # embedding: 8x32 indices into a 1000x64 fp32 table: rows read and written, no FLOPs
    em = cost("aten::embedding", [[1000, 64], [8, 32]], [F32, I64])
    assert em[:2] == (0.0, 256 * 8 + 2 * 256 * 64 * 4.0)
    # foreach over recorded TensorLists: FLOPs = elements of the first list; dtype unknown
    fe = cost("aten::_foreach_add_", [[[10], [20]], [[10], [20]], []],
              ["TensorList", "TensorList", "Scalar"])
    assert fe[0] == 30.0 and math.isnan(fe[1])


def test_unknown_and_vectorized() -> None:
    assert math.isnan(cost("aten::mystery", [[4]], [F32])[0])
    args = pd.Series([json.dumps({"Input Dims": [[64, 128], [128, 32]],
                                  "Input type": [BF16, BF16], "External id": i}) for i in (1, 2)]
                     + [json.dumps({"External id": 3}), None])
    names = pd.Series(["aten::mm", "aten::mm", "aten::relu", "aten::mm"])
    got = op_costs(names, args)
    assert got["flops"].tolist()[:2] == [524288.0, 524288.0]
    assert got["family"].tolist() == ["gemm", "gemm", "elementwise", "gemm"]
    assert got["flops"].isna().tolist()[2:] == [True, True]


@pytest.mark.parametrize("dims", ["[[[4], [1]], []]", "[]", "not json"])
def test_odd_dims_do_not_raise(dims: str) -> None:
    fl, by, _, fam = one_cost("aten::cat", dims, '["TensorList", "Scalar"]', None)
    assert fam == "copy"
    assert fl == 0.0 or math.isnan(fl)
