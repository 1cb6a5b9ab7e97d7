"""A CPU-only run's operator time: where the CPU's time goes, by operator (self time).

``cpu_profile(events, ops, self_ns, step_total) -> (table, evidence)``, for the ``cpu``
analyzer of a ``cpu_only`` run (``runkind``): the operators by self time, and the evidence CPU
advice keys on (rules.toml ``cpu.cpu_*``) -- the host threads that run operators, the shares of
operator self time in convolutions (channels-last), matmuls (oneDNN/MKL) and elementwise
operators (torch.compile fuses them), oneDNN operators and compiled regions already present.
Pure functions of event columns; none registers an analyzer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common.names import is_, name_matches

#: Operator families of a CPU-only run's operator time (CPU advice needs them as evidence).
CONV_NAME = r"(?i)conv|mkldnn_convolution"
MATMUL_NAME = (r"(?i)(^|::)(mm|bmm|addmm|addbmm|baddbmm|matmul|linear|addmv|mv|einsum)$|gemm|"
               r"mkldnn_linear|_mkl_")
ELTWISE_NAME = (r"(?i)^aten::(add|sub|mul|div|neg|abs|exp|log|pow|sqrt|rsqrt|reciprocal|sign|"
                r"erf|sin|cos|floor|ceil|round|clamp|clamp_min|clamp_max|maximum|minimum|where|"
                r"relu|gelu|silu|sigmoid|tanh|hardtanh|hardswish|hardsigmoid|leaky_relu|elu|"
                r"softplus|mish|threshold|eq|ne|lt|gt|le|ge|logical_\w+|bitwise_\w+|masked_fill|"
                r"copy|to|_to_copy|fill|zero|dropout|native_dropout|"
                r"(threshold|gelu|silu|sigmoid|tanh|hardtanh|hardswish|leaky_relu|elu)_backward"
                r")_?$")
#: torch.compile's compiled regions and Inductor's fused C++ kernels on the CPU
COMPILED_NAME = r"(?i)CompiledFunction|CompiledFxGraph|Torch-Compiled Region|cpp_fused|inductor"
ONEDNN_NAME = r"(?i)mkldnn|onednn|dnnl"
#: Top operators of a CPU-only run's ``operators`` table.
TOP_OPERATORS = 20


def cpu_profile(ev: pd.DataFrame, ops: np.ndarray, self_w: np.ndarray, step_total: int
                ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A CPU-only run's operators by self time (``name``, ``calls``, ``self_ns``,
    ``share_pct`` of step time; the ``TOP_OPERATORS`` largest) and the evidence CPU advice keys
    on: the host threads that run operators, the shares of operator self time in convolutions,
    matmuls and elementwise operators, oneDNN operators and compiled regions seen.
    ``ops``: the operator events, ``self_w``: every event's self time."""
    cols = ["name", "calls", "self_ns", "share_pct"]
    w = self_w[ops].astype(np.int64)
    total = float(w.sum())
    if not ops.any() or total <= 0:
        return pd.DataFrame({c: [] for c in cols}), {
            "cpu_op_threads": 0, "cpu_conv_share": 0.0, "cpu_matmul_share": 0.0,
            "cpu_eltwise_share": 0.0, "cpu_onednn_ops": 0, "cpu_compiled": 0}
    names = ev["name"]

    def share(pattern: str) -> float:
        return round(float(self_w[ops & name_matches(names, pattern)].sum()) / total, 4)

    lanes = ev["lane"][ops].astype(str).to_numpy()
    threads = int(np.unique(lanes[w > 0]).size)
    top = pd.DataFrame({"name": names[ops].astype(str).to_numpy(), "self_ns": w}).groupby(
        "name", sort=False)["self_ns"].agg(["count", "sum"])
    top = top.sort_values("sum", ascending=False, kind="stable").head(TOP_OPERATORS)
    table = pd.DataFrame({"name": top.index.astype(str), "calls": top["count"].to_numpy(np.int64),
                          "self_ns": top["sum"].to_numpy(np.int64)})
    table["share_pct"] = 100.0 * table["self_ns"] / step_total if step_total else 0.0
    host = is_(ev, "lane_kind", "host")
    return table.reset_index(drop=True), {
        "cpu_op_threads": threads, "cpu_conv_share": share(CONV_NAME),
        "cpu_matmul_share": share(MATMUL_NAME), "cpu_eltwise_share": share(ELTWISE_NAME),
        "cpu_onednn_ops": int((host & name_matches(names, ONEDNN_NAME)).sum()),
        "cpu_compiled": int((host & name_matches(names, COMPILED_NAME)).sum())}
