"""FLOPs and HBM bytes of PyTorch host operators from their recorded input shapes and dtypes.

Kineto with ``record_shapes`` stores, per ``cpu_op``, ``Input Dims`` (one shape per input; a
``TensorList`` as a list of shapes, or ``[]`` when not recorded), ``Input type`` (``float``,
``c10::BFloat16``, ``Scalar``, ...) and ``Concrete Inputs`` (scalar arguments as strings). From them
``op_costs`` derives, once per distinct (operator, dims, types, concrete inputs) signature:

* ``flops``: the operator's arithmetic (formulas per family below; NaN when the shapes do not
  determine it);
* ``bytes``: the minimum HBM traffic: every tensor input read once, every output written once;
* ``elem``: the element size (bytes) of the first tensor input, used to pick the dtype's peak;
* ``family``: ``gemm``, ``conv``, ``attention``, ``elementwise``, ``reduction``, ``norm``,
  ``softmax``, ``embedding``, ``copy`` (NaN for operators without a formula).

Formulas (multiply-add = 2 FLOPs):

* GEMM ``mm/matmul/bmm/addmm/baddbmm/linear/_scaled_mm``: 2 x batch x M x N x K;
* convolution: 2 x N x C_out x prod(output spatial) x (C_in / groups) x prod(kernel), output
  spatial = floor((in + 2 pad - dil (k - 1) - 1) / stride) + 1 (PyTorch's Conv2d doc);
  ``convolution_backward`` = 2 x that (input and weight gradients);
* attention (SDPA and its flash / efficient / cudnn kernels): 4 x B x H x Lq x Lk x D (QK^T and
  PV), halved when causal; backward 2.5 x forward (FlashAttention-2 paper, sec. 4: the backward
  pass does 5 matmuls to the forward's 2);
* elementwise and ``_foreach_*``: 1 FLOP per output element;
* reductions: 1 FLOP per input element; norms: 5 per element forward (fvcore's norm handler:
  mean, variance, normalize, scale, shift), 2 x that backward; softmax: 5 per element (max,
  subtract, exp, sum, divide), backward 4;
* embedding / gather / index_select and copies: no FLOPs, bytes only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

#: bytes per element by Kineto ``Input type`` spelling (C++ type names as PyTorch prints them)
DTYPE_BYTES: dict[str, int] = {
    "double": 8, "float": 4, "c10::half": 2, "c10::bfloat16": 2, "long int": 8, "long": 8,
    "int": 4, "short int": 2, "short": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::half>": 4,
    "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1, "c10::float8_e4m3fnuz": 1,
    "c10::float8_e5m2fnuz": 1, "c10::float8_e8m0fnu": 1, "c10::float4_e2m1fn_x2": 1,
    "c10::qint8": 1, "c10::quint8": 1, "c10::qint32": 4, "uint8": 1, "int8": 1,
}
#: torch.ScalarType codes (c10/core/ScalarType.h order) -> bytes, for ``_to_copy``'s dtype argument
SCALAR_TYPE_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 8: 4, 9: 8, 10: 16, 11: 1,
                     12: 1, 13: 1, 14: 4, 15: 2, 23: 1, 24: 1, 25: 1, 26: 1}

Shape = tuple[int, ...]


class Op:
    """One operator call's inputs: shapes (a TensorList as a list of shapes), element sizes
    (NaN for non-tensors) and concrete scalar arguments."""

    def __init__(self, dims: list[Any], types: list[str], concrete: list[str]) -> None:
        self.dims, self.types, self.concrete = dims, types, concrete

    def elem(self, i: int) -> float:
        t = self.types[i].strip().lower() if i < len(self.types) else ""
        return float(DTYPE_BYTES.get(t, math.nan))

    def shape(self, i: int) -> Shape | None:
        """Shape of tensor input ``i`` (None when absent, not a tensor, or a TensorList)."""
        if i >= len(self.dims) or not isinstance(self.dims[i], list):
            return None
        d = self.dims[i]
        if not all(isinstance(x, int) for x in d) or math.isnan(self.elem(i)):
            return None
        return tuple(d)

    def numel(self, i: int) -> float:
        s = self.shape(i)
        return float(np.prod(s)) if s is not None else math.nan

    def nbytes(self, i: int) -> float:
        return self.numel(i) * self.elem(i)

    def tensors(self) -> list[int]:
        return [i for i in range(len(self.dims)) if self.shape(i) is not None]

    def lists(self) -> list[list[Shape]]:
        """TensorList inputs whose shapes were recorded (lists of shapes)."""
        return [[tuple(s) for s in d] for d in self.dims
                if isinstance(d, list) and d and all(isinstance(s, list) for s in d)]

    def first_elem(self) -> float:
        for i in range(len(self.types)):
            if not math.isnan(self.elem(i)):
                return self.elem(i)
        return math.nan

    def scalar(self, i: int) -> str:
        return self.concrete[i].strip().lower() if i < len(self.concrete) else ""

    def ints(self, i: int) -> list[int] | None:
        try:
            v = json.loads(self.scalar(i)) if self.scalar(i) else None
        except ValueError:
            return None
        if isinstance(v, int):
            return [v]
        return v if isinstance(v, list) and all(isinstance(x, int) for x in v) else None


Cost = tuple[float, float]  # (flops, bytes)
NAN2: Cost = (math.nan, math.nan)


# ---------------------------------------------------------------- matrix operators

#: operator -> (index of A, index of B, B laid out as (N, K) like a Linear weight, bias index)
GEMM_OPS: dict[str, tuple[int, int, bool, int | None]] = {
    "mm": (0, 1, False, None), "matmul": (0, 1, False, None), "bmm": (0, 1, False, None),
    "addmm": (1, 2, False, 0), "baddbmm": (1, 2, False, 0), "addbmm": (1, 2, False, 0),
    "linear": (0, 1, True, 2), "_scaled_mm": (0, 1, False, None), "addmv": (1, 2, False, 0),
    "mv": (0, 1, False, None), "_addmm_activation": (1, 2, False, 0), "dot": (0, 1, False, None),
}


def _gemm(name: str, op: Op) -> Cost:
    ia, ib, transposed, ibias = GEMM_OPS[name]
    a, b = op.shape(ia), op.shape(ib)
    if a is None or b is None or not a or not b:
        return NAN2
    k = a[-1]
    if len(b) == 1:                       # matrix-vector
        n, bbatch = 1, ()
    else:
        n = b[0] if transposed else b[-1]
        bbatch = () if transposed else b[:-2]
    m_rows = float(np.prod(a[:-1])) if len(a) > 1 else 1.0  # batch x M of A
    # a batched B (bmm/baddbmm/matmul 3-D x 3-D) broadcasts against A's batch dims
    extra = float(np.prod(bbatch)) if len(a) <= 2 and bbatch else 1.0
    rows = m_rows * extra
    flops = 2.0 * rows * n * k
    out_elem = op.elem(ia)
    if name == "_scaled_mm":  # fp8 inputs, bf16/fp32 output (out_dtype): count 2 B
        out_elem = 2.0
    byts = op.nbytes(ia) + op.nbytes(ib) + rows * n * out_elem
    if ibias is not None and op.shape(ibias) is not None:
        byts += op.nbytes(ibias)
    return flops, byts


# ---------------------------------------------------------------- convolution

#: operator -> (stride, padding, dilation, transposed, groups) argument indices (None: absent)
CONV_ARGS: dict[str, tuple[int, int, int, int | None, int | None]] = {
    "convolution": (3, 4, 5, 6, 8), "_convolution": (3, 4, 5, 6, 8),
    "conv1d": (3, 4, 5, None, 6), "conv2d": (3, 4, 5, None, 6), "conv3d": (3, 4, 5, None, 6),
    "cudnn_convolution": (3, 2, 4, None, 5), "miopen_convolution": (4, 3, 5, None, 6),
    "mkldnn_convolution": (4, 3, 5, None, 6), "cudnn_convolution_transpose": (4, 3, 5, None, 6),
    "miopen_convolution_transpose": (5, 3, 6, None, 7),
}


def _conv_out(inp: Shape, w: Shape, stride: list[int], pad: list[int], dil: list[int]
              ) -> list[int]:
    nd = len(w) - 2
    def at(v: list[int], i: int, d: int) -> int:
        return v[i] if len(v) > i else (v[0] if v else d)
    return [(inp[2 + i] + 2 * at(pad, i, 0) - at(dil, i, 1) * (w[2 + i] - 1) - 1)
            // at(stride, i, 1) + 1 for i in range(nd)]


def _conv(name: str, op: Op) -> Cost:
    x, w = op.shape(0), op.shape(1)
    if x is None or w is None or len(x) != len(w) or len(x) < 3:
        return NAN2
    si, pi, di, ti, gi = CONV_ARGS[name]
    transposed = name.endswith("_transpose") or (ti is not None and op.scalar(ti) == "true")
    groups = (op.ints(gi) or [1])[0] if gi is not None else 1
    stride, pad, dil = op.ints(si) or [1], op.ints(pi) or [0], op.ints(di) or [1]
    if transposed:  # weight (C_in, C_out/g, k...): the forward of the adjoint conv
        macs = float(np.prod(x)) * w[1] * float(np.prod(w[2:]))
        out = float(np.prod(x[:1])) * w[1] * groups * float(np.prod(
            [(x[2 + i] - 1) * (stride[i] if len(stride) > i else stride[0]) + w[2 + i]
             for i in range(len(w) - 2)]))
    else:
        sp = _conv_out(x, w, stride, pad, dil)
        if min(sp, default=1) <= 0:
            return NAN2
        out = float(x[0]) * w[0] * float(np.prod(sp))
        macs = out * w[1] * float(np.prod(w[2:]))  # w[1] = C_in / groups
    byts = op.nbytes(0) + op.nbytes(1) + out * op.elem(0)
    if op.shape(2) is not None and name not in ("cudnn_convolution",):
        byts += op.nbytes(2)
    return 2.0 * macs, byts


def _conv_backward(name: str, op: Op) -> Cost:
    # convolution_backward(grad_output, input, weight, ...): input and weight gradients, each
    # as much arithmetic as the forward
    g, x, w = op.shape(0), op.shape(1), op.shape(2)
    if g is None or x is None or w is None or len(g) < 3:
        return NAN2
    macs = float(np.prod(g)) * w[1] * float(np.prod(w[2:]))
    return 4.0 * macs, op.nbytes(0) + 2 * op.nbytes(1) + 2 * op.nbytes(2)


# ---------------------------------------------------------------- attention

#: operator -> (index of q, layout "bhsd" or "bshd", index of is_causal / mask type, backward)
ATTN_OPS: dict[str, tuple[int, str, int | None, bool]] = {
    "scaled_dot_product_attention": (0, "bhsd", 5, False),
    "_scaled_dot_product_flash_attention": (0, "bhsd", 4, False),
    "_scaled_dot_product_efficient_attention": (0, "bhsd", 6, False),
    "_scaled_dot_product_cudnn_attention": (0, "bhsd", 6, False),
    "_scaled_dot_product_flash_attention_for_cpu": (0, "bhsd", 4, False),
    "_flash_attention_forward": (0, "bshd", 8, False),
    "_efficient_attention_forward": (0, "bshd", 9, False),
    "_cudnn_attention_forward": (0, "bhsd", 10, False),
    "_scaled_dot_product_flash_attention_backward": (1, "bhsd", None, True),
    "_scaled_dot_product_efficient_attention_backward": (1, "bhsd", None, True),
    "_scaled_dot_product_cudnn_attention_backward": (1, "bhsd", None, True),
    "_flash_attention_backward": (1, "bshd", None, True),
    "_efficient_attention_backward": (1, "bshd", None, True),
    "_cudnn_attention_backward": (1, "bhsd", None, True),
}


def _attention(name: str, op: Op) -> Cost:
    iq, layout, icausal, backward = ATTN_OPS[name]
    q, k, v = op.shape(iq), op.shape(iq + 1), op.shape(iq + 2)
    if q is None or k is None or v is None or len(q) != 4 or len(k) != 4:
        return NAN2
    lk = k[2] if layout == "bhsd" else k[1]
    flops = 2.0 * float(np.prod(q[:-1])) * lk * (q[-1] + v[-1])
    if icausal is not None and op.scalar(icausal) in ("true", "1"):
        flops /= 2.0  # only the lower triangle of the score matrix is computed
    io = op.nbytes(iq) * 2 + op.nbytes(iq + 1) + op.nbytes(iq + 2)  # q, k, v read; out written
    if backward:  # reads grad_out, q, k, v, out; writes dq, dk, dv
        return 2.5 * flops, op.nbytes(0) + 2 * io
    return flops, io


# ---------------------------------------------------------------- memory-bound families

def _elementwise(name: str, op: Op) -> Cost:
    ts = op.tensors()
    lists = op.lists()
    if lists:  # _foreach_* / fused optimizers: every list read, the first written back
        # a TensorList's dtype is not recorded ("TensorList"): bytes only with a typed input
        e = op.first_elem()
        sizes = [sum(float(np.prod(s)) for s in lst) for lst in lists]
        return sizes[0], (sum(sizes) + sizes[0]) * e
    if not ts:
        return NAN2
    shapes = [op.shape(i) for i in ts]
    try:
        out = float(np.prod(np.broadcast_shapes(*shapes)))  # type: ignore[arg-type]
    except ValueError:
        out = max(op.numel(i) for i in ts)
    if name.endswith("_") and not name.startswith("_"):
        out = op.numel(ts[0])  # in-place: written into the first input
    reads = sum(op.nbytes(i) for i in ts)
    if name in ("fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_"):
        reads = 0.0  # writes only
    return out, reads + out * op.elem(ts[0])


def _reduction(name: str, op: Op) -> Cost:
    x = op.shape(0)
    if x is None:
        return NAN2
    n = float(np.prod(x))
    dims = op.ints(1)
    out = 1.0
    if dims:
        keep = [d for i, d in enumerate(x) if i not in {j % max(len(x), 1) for j in dims}]
        out = float(np.prod(keep))
    return n, op.nbytes(0) + out * op.elem(0)


def _norm(name: str, op: Op) -> Cost:
    x = op.shape(0)
    if x is None:
        return NAN2
    n = float(np.prod(x))
    params = sum(op.nbytes(i) for i in op.tensors()[1:] if op.numel(i) < n)
    if "backward" in name:  # reads grad_out and x, writes grad_x (+ weight / bias grads)
        return 10.0 * n, 3 * n * op.elem(0) + 2 * params
    return 5.0 * n, 2 * n * op.elem(0) + params


def _softmax(name: str, op: Op) -> Cost:
    x = op.shape(0)
    if x is None:
        return NAN2
    n = float(np.prod(x))
    if "backward" in name:  # reads grad_out and out, writes grad_in
        return 4.0 * n, 3 * n * op.elem(0)
    return 5.0 * n, 2 * n * op.elem(0)


def _embedding(name: str, op: Op) -> Cost:
    if name == "embedding_dense_backward":  # (grad_output, indices, num_weights, ...)
        g, rows = op.shape(0), op.ints(2)
        if g is None:
            return NAN2
        table = (rows[0] if rows else 0) * g[-1] * op.elem(0)
        return op.numel(0), op.nbytes(0) + op.nbytes(1) + table
    # embedding(weight, indices) / index_select(self, dim, index) / gather(self, dim, index)
    w, iidx = op.shape(0), (1 if name == "embedding" else 2)
    idx = op.shape(iidx)
    if w is None or idx is None:
        return NAN2
    row = float(np.prod(w[1:])) if name in ("embedding", "index_select") else 1.0
    out = float(np.prod(idx)) * row
    return 0.0, op.nbytes(iidx) + 2 * out * op.elem(0)


def _copy(name: str, op: Op) -> Cost:
    ts = op.tensors()
    lists = op.lists()
    if name in ("cat", "stack", "_cat") and lists:
        e = op.first_elem()
        n = sum(float(np.prod(s)) for s in lists[0])
        return 0.0, 2 * n * e
    if not ts:
        return NAN2
    if name == "copy_" and len(ts) >= 2:  # self <- src: read src, write self (dtypes may differ)
        return 0.0, op.nbytes(ts[1]) + op.nbytes(ts[0])
    out_elem = op.elem(ts[0])
    if name == "_to_copy":
        code = op.ints(1)
        out_elem = float(SCALAR_TYPE_BYTES.get(code[0], out_elem)) if code else out_elem
    return 0.0, op.nbytes(ts[0]) + op.numel(ts[0]) * out_elem


ELEMENTWISE = frozenset(
    "add add_ sub sub_ mul mul_ div div_ neg neg_ abs abs_ pow pow_ exp exp_ log log_ log1p "
    "sqrt sqrt_ rsqrt rsqrt_ reciprocal reciprocal_ sigmoid sigmoid_ tanh tanh_ relu relu_ gelu "
    "gelu_ silu silu_ mish hardswish hardsigmoid hardtanh hardtanh_ leaky_relu leaky_relu_ elu "
    "softplus threshold threshold_ threshold_backward gelu_backward silu_backward "
    "sigmoid_backward tanh_backward clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_ "
    "where masked_fill masked_fill_ maximum minimum eq ne gt lt ge le lerp lerp_ addcmul "
    "addcmul_ addcdiv addcdiv_ sign floor ceil round trunc erf sin cos fill_ zero_ "
    "native_dropout native_dropout_backward bitwise_and bitwise_or bitwise_not logical_and "
    "logical_or logical_not square mul_scalar add_scalar rsub fmod remainder isnan nan_to_num "
    "normal_ uniform_ bernoulli_ exponential_ random_ _fused_adam_ _fused_adamw_ "
    "_fused_sgd_".split())
REDUCTIONS = frozenset(
    "sum mean max min amax amin argmax argmin prod norm linalg_vector_norm var std var_mean "
    "std_mean logsumexp all any count_nonzero cumsum cumprod nansum".split())
NORMS = frozenset(
    "layer_norm native_layer_norm native_layer_norm_backward rms_norm _fused_rms_norm "
    "_fused_rms_norm_backward group_norm native_group_norm native_group_norm_backward batch_norm "
    "native_batch_norm native_batch_norm_backward cudnn_batch_norm cudnn_batch_norm_backward "
    "miopen_batch_norm miopen_batch_norm_backward _batch_norm_impl_index "
    "_native_batch_norm_legit _native_batch_norm_legit_no_training instance_norm "
    "_groupnorm_run rmsnorm rms_norm_fwd".split())
SOFTMAX = frozenset("softmax _softmax log_softmax _log_softmax _softmax_backward_data "
                    "_log_softmax_backward_data _safe_softmax".split())
EMBEDDING = frozenset("embedding embedding_dense_backward index_select gather".split())
COPIES = frozenset("copy_ _to_copy to contiguous clone cat stack _cat".split())

Handler = Callable[[str, Op], Cost]
_FAMILIES: list[tuple[str, Callable[[str], bool], Handler]] = [
    ("gemm", GEMM_OPS.__contains__, _gemm),
    ("conv", CONV_ARGS.__contains__, _conv),
    ("conv", lambda n: n == "convolution_backward", _conv_backward),
    ("attention", ATTN_OPS.__contains__, _attention),
    ("norm", NORMS.__contains__, _norm),
    ("softmax", SOFTMAX.__contains__, _softmax),
    ("reduction", REDUCTIONS.__contains__, _reduction),
    ("embedding", EMBEDDING.__contains__, _embedding),
    ("copy", COPIES.__contains__, _copy),
    ("elementwise", lambda n: n in ELEMENTWISE or n.startswith("_foreach_"), _elementwise),
]


def base_name(name: str) -> str:
    """``aten::add_.Tensor`` -> ``add_``; ``aiter::_groupnorm_run`` -> ``_groupnorm_run``."""
    return str(name).split("::")[-1].split(".")[0]


def family_of(name: str) -> tuple[str, Handler] | None:
    b = base_name(name)
    for fam, test, fn in _FAMILIES:
        if test(b):
            return fam, fn
    return None


def _load(raw: Any) -> list[Any]:
    if not isinstance(raw, str) or not raw:
        return []
    try:
        v = json.loads(raw)
    except ValueError:
        return []
    return v if isinstance(v, list) else []


@lru_cache(maxsize=65536)
def one_cost(name: str, dims: Any, types: Any, concrete: Any) -> tuple[float, float, float, Any]:
    """(flops, bytes, elem, family) of one operator signature (raw JSON list strings); kept, so
    the ranks of one job (the same operators) derive each signature once per process."""
    fam = family_of(name)
    if fam is None:
        return math.nan, math.nan, math.nan, None
    op = Op(_load(dims), [str(t) for t in _load(types)], [str(c) for c in _load(concrete)])
    try:
        flops, byts = fam[1](base_name(name), op)
    except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError):
        flops, byts = NAN2
    return float(flops), float(byts), op.first_elem(), fam[0]


DIMS_RE = re.compile(r'"Input Dims"\s*:\s*(\[[^"]*\])')
TYPES_RE = re.compile(r'"Input type"\s*:\s*(\[[^\]]*\])')
CONCRETE_RE = re.compile(r'"Concrete Inputs"\s*:\s*(\[(?:"(?:[^"\\]|\\.)*"|[^\]"])*\])')


def op_costs(names: pd.Series, args: pd.Series) -> pd.DataFrame:
    """Columns ``flops``, ``bytes``, ``elem``, ``family`` for host operators (rows of ``names``
    / ``args``), computed once per distinct (name, dims, types, concrete inputs)."""
    out = pd.DataFrame({"flops": np.nan, "bytes": np.nan, "elem": np.nan, "family": None},
                       index=names.index)
    if len(names) == 0:
        return out
    nm = names.astype(str)
    fams = {n: (f[0] if (f := family_of(n)) else None) for n in pd.unique(nm)}
    out["family"] = nm.map(fams).to_numpy(object)  # by name, with or without shapes
    sel = out["family"].notna().to_numpy() & args.notna().to_numpy()
    if not sel.any():
        return out
    s = args[sel].astype("string[pyarrow]")
    sig = pd.DataFrame({"n": names[sel].astype(str).to_numpy(),
                        "d": s.str.extract(DIMS_RE, expand=False).to_numpy(object),
                        "t": s.str.extract(TYPES_RE, expand=False).to_numpy(object),
                        "c": s.str.extract(CONCRETE_RE, expand=False).to_numpy(object)},
                       index=s.index)
    codes, uniq_sig = pd.factorize(pd.MultiIndex.from_frame(sig.fillna("")))
    vals = [one_cost(*u) for u in uniq_sig]
    table = pd.DataFrame(vals, columns=["flops", "bytes", "elem", "family"])
    got = table.iloc[codes].set_axis(sig.index)
    out.loc[sig.index, ["flops", "bytes", "elem"]] = got[["flops", "bytes", "elem"]].to_numpy(
        np.float64)
    return out
