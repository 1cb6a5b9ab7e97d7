"""The models of the zoo, generated layer by layer from their published architectures.

Each ``_build_*`` returns one rank's step graph for a layout: forward ops, backward ops in
reverse order, then optimizer ops. Tensor parallelism splits matmul widths by ``tp`` and adds
an allreduce after the row-parallel matmuls; pipeline parallelism gives each stage a contiguous
slice of layers and send/recv at its borders.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from hermes.npu.graph import AI_CPU, BWD, DTYPE_BYTES, FWD, OPT, Graph, GraphBuilder
from hermes.npu.workloads.workload import Workload

Emit = Callable[[GraphBuilder, int], None]  # appends one layer's ops for a phase


def _stage_layers(n_layers: int, pp: int, stage: int) -> range:
    per = -(-n_layers // pp)
    return range(stage * per, min(n_layers, (stage + 1) * per))


def _assemble(layers: list[Emit], pre: Emit | None, post: Emit | None, stage: int, pp: int,
              act_bytes: float, params: float) -> Graph:
    """Forward (pre, layers, post), backward in reverse, then the optimizer for ``params``."""
    g = GraphBuilder()
    if stage > 0:
        g.comm("recv_activation", "recv", "pp_prev", act_bytes, FWD)
    if pre is not None and stage == 0:
        pre(g, FWD)
    for emit in layers:
        emit(g, FWD)
    if post is not None and stage == pp - 1:
        post(g, FWD)
        post(g, BWD)
    if stage < pp - 1:
        g.comm("send_activation", "send", "pp_next", act_bytes, FWD)
        g.comm("recv_grad", "recv", "pp_next", act_bytes, BWD)
    for emit in reversed(layers):
        emit(g, BWD)
    if pre is not None and stage == 0:
        pre(g, BWD)
    if stage > 0:
        g.comm("send_grad", "send", "pp_prev", act_bytes, BWD)
    # Fused Adam: reads/writes fp32 master weights and two moments (16 B/param) plus grads.
    g.eltwise("Adam", "ApplyAdam", params, OPT, flops_per=10, tensors=9, fusible=False)
    return g.build()


# -- transformers --------------------------------------------------------------------------
def _transformer_layer(g: GraphBuilder, phase: int, *, i: int, tokens: int, seq: int, h: int,
                       tp: int, ffn: int, small_ops: int, experts: int = 0) -> None:
    p = f"layer{i}."
    ln = partial(g.eltwise, optype="LayerNorm", elems=tokens * h, phase=phase, flops_per=8,
                 params=2 * h)
    ops: list[Callable[[], None]] = [
        lambda: ln(p + "ln1"),
        lambda: g.linear(p + "qkv", tokens, h, 3 * h // tp, phase),
        # FlashAttention: 4*T*S*h FLOPs forward (QK^T and PV), head dim 128 on the Cube.
        lambda: g._add(p + "flash_attention", "FlashAttention", 0,
               4.0 * tokens * seq * h / tp * (2 if phase == BWD else 1),
               4 * tokens * h / tp * DTYPE_BYTES, (tokens, seq, h // tp), phase, inner=128),
        lambda: g.linear(p + "proj", tokens, h // tp, h, phase),
    ]
    if tp > 1:
        ops.append(lambda: g.comm(p + "tp_allreduce_attn", "allreduce", "tp",
                                  tokens * h * DTYPE_BYTES, phase))
    ops += [lambda: g.eltwise(p + "residual1", "Add", tokens * h, phase, tensors=3),
            lambda: ln(p + "ln2")]
    if experts:
        ops.append(lambda: g.linear(p + "router", tokens, h, experts, phase))
        ops.append(lambda: g.comm(p + "dispatch_all_to_all", "alltoall", "ep",
                                  tokens * h * DTYPE_BYTES, phase))
    ops += [lambda: g.linear(p + "fc1", tokens, h, ffn // tp, phase),
            lambda: g.eltwise(p + "gelu", "Gelu", tokens * ffn // tp, phase, flops_per=8),
            lambda: g.linear(p + "fc2", tokens, ffn // tp, h, phase)]
    if experts:
        ops.append(lambda: g.comm(p + "combine_all_to_all", "alltoall", "ep",
                                  tokens * h * DTYPE_BYTES, phase))
    if tp > 1:
        ops.append(lambda: g.comm(p + "tp_allreduce_mlp", "allreduce", "tp",
                                  tokens * h * DTYPE_BYTES, phase))
    ops.append(lambda: g.eltwise(p + "residual2", "Add", tokens * h, phase, tensors=3))
    # Shape arithmetic, rotary index math, casts of scalars: the small-shape operators.
    for j in range(small_ops):
        ops.append(partial(g.small, f"{p}small{j}", ("Shape", "Range", "Gather", "Cast",
                                                      "Concat")[j % 5], phase, unit=AI_CPU))
    for op in (ops if phase != BWD else reversed(ops)):
        op()


def _transformer(tp: int, pp: int, stage: int, *, layers: int, h: int, seq: int, batch: int,
                 vocab: int, ffn_mult: float = 4.0, small_ops: int = 0, experts: int = 0,
                 micro: int = 1) -> Graph:
    tokens = batch * seq // micro
    ffn = int(h * ffn_mult)
    emits: list[Emit] = [
        partial(_transformer_layer, i=i, tokens=tokens, seq=seq, h=h, tp=tp, ffn=ffn,
                small_ops=small_ops, experts=experts) for i in _stage_layers(layers, pp, stage)]

    def pre(g: GraphBuilder, phase: int) -> None:
        g.eltwise("embedding", "Gather", tokens * h, phase, tensors=2,
                  params=vocab * h / tp, fusible=False)

    def post(g: GraphBuilder, phase: int) -> None:
        if phase == FWD:
            g.eltwise("final_ln", "LayerNorm", tokens * h, phase, flops_per=8)
        g.linear("lm_head", tokens, h, vocab // tp, phase)
        g.eltwise("cross_entropy", "SoftmaxCrossEntropy", tokens * vocab / tp, phase,
                  flops_per=5, fusible=False)
        if phase == FWD:  # reading the loss for logging: a .item()-style host sync
            g.small("loss_item", "ReduceMean", phase, sync=True)

    per_layer = (4 * h * h + 2 * h * ffn) * (max(experts, 1))
    params = (len(emits) * per_layer) / tp + vocab * h / tp
    return _assemble(emits, pre, post, stage, pp, tokens * h * DTYPE_BYTES, params)


# -- convolutional networks ----------------------------------------------------------------
def _conv_block(g: GraphBuilder, phase: int, *, name: str, n: int, hw: int, cin: int, cout: int,
                k: int, stride: int = 1, depthwise: bool = False) -> None:
    ho = max(hw // stride, 1)
    elems = n * ho * ho * cout
    ops: list[Callable[[], None]] = []
    if depthwise:  # depthwise convs run on the Vector unit: k*k MACs per output element
        ops.append(lambda: g.eltwise(name, "DepthwiseConv2D", elems, phase, flops_per=2 * k * k,
                                     tensors=2, params=k * k * cout, fusible=False))
    else:
        def conv() -> None:
            g.conv(name, n, hw, cin, cout, k, stride, phase, private_fmt=True)
        ops.append(conv)
    ops.append(lambda: g.eltwise(name + ".bn", "BatchNorm", elems, phase, flops_per=6,
                                 params=2 * cout, fusible=False))
    ops.append(lambda: g.eltwise(name + ".relu", "Relu", elems, phase))
    for op in (ops if phase != BWD else reversed(ops)):
        op()


def _convnet(tp: int, pp: int, stage: int, *, spec: list[dict], batch: int, fc: list[int],
             head_small: int = 0, syncs: int = 0) -> Graph:
    emits: list[Emit] = [partial(_conv_block, n=batch, **s) for s in spec]
    last = spec[-1]

    def post(g: GraphBuilder, phase: int) -> None:
        width = last["cout"] * (1 if len(fc) < 3 else 49)
        ops: list[Callable[[], None]] = []
        for j, out in enumerate(fc):
            ops.append(partial(g.linear, f"fc{j}", batch, width, out, phase))
            width = out
        ops.append(lambda: g.eltwise("softmax_loss", "SoftmaxCrossEntropy", batch * width,
                                     phase, fusible=False))
        # Detection heads: box decoding, anchor matching - many small-shape operators.
        for j in range(head_small):
            ops.append(partial(g.small, f"head.small{j}", ("Shape", "Slice", "Concat", "Cast",
                                                           "Greater")[j % 5], phase))
        if phase == FWD:
            for j in range(syncs + 1):  # loss.item() plus per-box count .item() calls
                ops.append(partial(g.small, f"item{j}", "ReduceSum", phase, sync=True))
        for op in (ops if phase != BWD else reversed(ops)):
            op()

    params = sum(s["k"] ** 2 * s["cin"] * s["cout"] for s in spec) + sum(fc) * last["cout"] * 49
    return _assemble(emits, None, post, stage, pp, 0.0, params)


def _resnet50_spec() -> list[dict]:
    spec = [dict(name="conv1", hw=224, cin=3, cout=64, k=7, stride=2)]
    hw, cin = 56, 64
    for si, (blocks, width) in enumerate([(3, 64), (4, 128), (6, 256), (3, 512)]):
        for b in range(blocks):
            stride = 2 if (b == 0 and si > 0) else 1
            p = f"layer{si + 1}.{b}."
            spec += [dict(name=p + "conv1", hw=hw, cin=cin, cout=width, k=1),
                     dict(name=p + "conv2", hw=hw, cin=width, cout=width, k=3, stride=stride)]
            hw = max(hw // stride, 1)
            spec.append(dict(name=p + "conv3", hw=hw, cin=width, cout=width * 4, k=1))
            cin = width * 4
    return spec


def _vgg16_spec() -> list[dict]:
    spec, hw, cin = [], 224, 3
    for si, (n, width) in enumerate([(2, 64), (2, 128), (3, 256), (3, 512), (3, 512)]):
        for b in range(n):
            stride = 2 if (b == n - 1) else 1  # pooling folded into the last conv's stride
            spec.append(dict(name=f"block{si + 1}.conv{b + 1}", hw=hw, cin=cin, cout=width, k=3,
                             stride=stride))
            hw, cin = max(hw // stride, 1), width
    return spec


def _mobilenet_ssd_spec() -> list[dict]:
    spec = [dict(name="conv0", hw=300, cin=3, cout=32, k=3, stride=2)]
    hw, cin = 150, 32
    for i, (cout, stride) in enumerate([(64, 1), (128, 2), (128, 1), (256, 2), (256, 1),
                                        (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]):
        spec.append(dict(name=f"dw{i}", hw=hw, cin=cin, cout=cin, k=3, stride=stride,
                         depthwise=True))
        hw = max(hw // stride, 1)
        spec.append(dict(name=f"pw{i}", hw=hw, cin=cin, cout=cout, k=1))
        cin = cout
    for i, cout in enumerate([512, 256, 256, 128]):  # SSD extra feature layers
        spec.append(dict(name=f"extra{i}", hw=hw, cin=cin, cout=cout, k=3, stride=2))
        hw, cin = max(hw // 2, 1), cout
    return spec


# -- recommendation models ----------------------------------------------------------------
def _recsys(tp: int, pp: int, stage: int, *, batch: int, tables: int, dim: int, mlp: list[int],
            top: list[int], alltoall: bool) -> Graph:
    def layer(g: GraphBuilder, phase: int) -> None:
        ops: list[Callable[[], None]] = []
        for t in range(tables):  # unsupported sparse dtype paths fall back to the AI CPU
            ops.append(partial(g.eltwise, f"emb{t}", "EmbeddingLookup", batch * dim, phase,
                               tensors=3, params=1e6 * dim / max(tables, 1), fusible=False,
                               aicpu=(t % 8 == 0)))
        if alltoall:
            ops.append(lambda: g.comm("emb_all_to_all", "alltoall", "ep",
                                      batch * tables * dim * DTYPE_BYTES, phase))
        width = tables * dim
        for j, out in enumerate(mlp + top):
            ops.append(partial(g.linear, f"mlp{j}", batch, width, out, phase))
            ops.append(partial(g.eltwise, f"mlp{j}.relu", "Relu", batch * out, phase))
            width = out
        if phase == FWD:
            ops.append(partial(g.small, "loss_item", "ReduceMean", phase, sync=True))
        for op in (ops if phase != BWD else reversed(ops)):
            op()

    params = tables * 1e6 * dim / 100 + sum(a * b for a, b in zip([tables * dim] + mlp + top,
                                                                   mlp + top, strict=False))
    return _assemble([layer], None, None, stage, pp, 0.0, params)


def _zoo() -> list[Workload]:
    """Every workload of the zoo, in the order ``hermes emulate --list`` shows them."""
    zoo: list[Workload] = []
    img: dict[str, Any] = dict(sample_storage_B=110e3, sample_device_B=224 * 224 * 3 * 2.0)
    zoo.append(Workload("resnet50", "ResNet-50 on ImageNet, batch 64 per device",
                        partial(_convnet, spec=_resnet50_spec(), batch=64, fc=[1000]),
                        64, None, process_s=1.1e-3, **img))
    zoo.append(Workload("vgg16", "VGG-16 on ImageNet, batch 128 per device (138M parameters)",
                        partial(_convnet, spec=_vgg16_spec(), batch=128, fc=[4096, 4096, 1000]),
                        128, None, process_s=2.0e-4, **img))
    zoo.append(Workload("mobilenetv1-ssd", "MobileNetV1-SSD300 detection, batch 128 per device",
                        partial(_convnet, spec=_mobilenet_ssd_spec(), batch=128, fc=[128],
                                head_small=60, syncs=0),
                        128, None, sample_storage_B=150e3, sample_device_B=300 * 300 * 3 * 2.0,
                        process_s=3.0e-4))
    txt: dict[str, Any] = dict(sample_device_B=0.0, process_s=2.0e-5)
    zoo.append(Workload("bert-large", "BERT-Large pre-training, seq 512, batch 32 per device",
                        partial(_transformer, layers=24, h=1024, seq=512, batch=32, vocab=30522),
                        32, 32 * 512, sample_storage_B=512 * 4.0, **txt))
    zoo.append(Workload("pangu-1.3b", "PanGu-alpha 1.3B (GPT-style), seq 1024, batch 8",
                        partial(_transformer, layers=24, h=2048, seq=1024, batch=8, vocab=40000),
                        8, 8 * 1024, sample_storage_B=1024 * 4.0, **txt))
    zoo.append(Workload("llama2-7b", "LLaMA2-7B-like, seq 4096, batch 1, ~650 small-shape ops",
                        partial(_transformer, layers=32, h=4096, seq=4096, batch=1, vocab=32000,
                                ffn_mult=2.6875, small_ops=10),
                        1, 4096, sample_storage_B=4096 * 4.0, **txt))
    zoo.append(Workload("gpt3-13b", "GPT3-13B, seq 2048, 4 microbatches, tensor+pipeline parallel",
                        partial(_transformer, layers=40, h=5120, seq=2048, batch=4, vocab=50257,
                                micro=4),
                        4, 4 * 2048, sample_storage_B=2048 * 4.0, microbatches=4, max_tp=8,
                        max_pp=4, **txt))
    rec: dict[str, Any] = dict(sample_device_B=40 * 4.0, process_s=2.0e-7)
    zoo.append(Workload("deepfm", "DeepFM CTR model, 39 fields, batch 131072",
                        partial(_recsys, batch=131072, tables=39, dim=16, mlp=[400, 400, 400],
                                top=[1], alltoall=False),
                        131072, None, sample_storage_B=40.0, **rec))
    zoo.append(Workload("dlrm", "DLRM (Criteo), 26 tables, all-to-all of embeddings",
                        partial(_recsys, batch=32768, tables=26, dim=128, mlp=[512, 256, 128],
                                top=[1024, 1024, 512, 256, 1], alltoall=True),
                        32768, None, sample_storage_B=40.0, expert_parallel=True, **rec))
    zoo.append(Workload("moe", "GPT-style MoE, 8 experts, all-to-all dispatch/combine",
                        partial(_transformer, layers=12, h=2048, seq=2048, batch=4, vocab=50257,
                                experts=8),
                        4, 4 * 2048, sample_storage_B=2048 * 4.0, expert_parallel=True, **txt))
    return zoo


ZOO: tuple[Workload, ...] = tuple(_zoo())
