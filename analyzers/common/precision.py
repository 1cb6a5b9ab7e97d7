"""What a rank's trace shows about the machine and the job, for advice that fits them: the device
(``hermes.devices.identify``: trace fields, else kernel names), the matmul dtype mix
(``hermes.devices.dtypes``), and the evidence rule preconditions need: an accelerator at all,
collectives, a data loader, pipeline stages (point-to-point send/recv, stage annotations,
process-group names) and tensor parallelism (its process-group names).

All on distinct names and group names (categoricals' values), never per event.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common.names import is_
from hermes.analyzers.common.opinfo import arg_values
from hermes.analyzers.engine.base import RankContext
from hermes.devices.dtypes import is_matmul, matmul_mix
from hermes.devices.identify import identify
from hermes.trace.args import args_of, has_args

#: Matrix-unit kernel families (analyzers/computation/families.toml).
MATRIX_FAMILIES = ("gemm", "conv", "attention")
#: A recorded input element size -> its dtype class, where the kernel name names no dtype.
ELEM_DTYPE = {8.0: "fp64", 4.0: "fp32", 2.0: "fp16/bf16", 1.0: "fp8/int8"}
#: Point-to-point communication (pipeline stages send activations to the next stage).
P2P = (r"(?:^|[^a-z])(?:nccl|gloo|c10d|hccl|rccl|mpi)[:_]+(?:i?send|i?recv|batch_isend_irecv)"
       r"|hcom_send|hcom_receive|hcclsend|hcclrecv|(?:^|[^a-z])p2p(?:$|[^a-z])")
#: Stage annotations and process-group names of pipeline / tensor parallelism.
PIPELINE_NAMES = (r"pipeline|pp_stage|pipe_stage|stage_id|(?:^|[^a-z])pp(?:_|$|\d)|"
                  r"(?:send|recv)_(?:forward|backward)")
TP_GROUPS = r"(?:^|[^a-z])tp(?:_|$|\d)|tensor|model_parallel|mp_group"
LOADER = r"dataloader|_multiprocessingdataloaderiter|_singleprocessdataloaderiter"
_P2P_RE, _PIPELINE_RE, _TP_RE, _LOADER_RE = (re.compile(p) for p in (P2P, PIPELINE_NAMES, TP_GROUPS,
                                                                    LOADER))


def _distinct(ev: pd.DataFrame, col: str, rows: np.ndarray | None = None) -> list[str]:
    """The distinct values of ``ev[col]`` (of the ``rows`` mask only, if given), lower-case
    text, in order of first appearance; a categorical's from its codes."""
    if col not in ev.columns:
        return []
    s = ev[col]
    if isinstance(s.dtype, pd.CategoricalDtype):
        codes = s.cat.codes.to_numpy()
        if rows is not None:
            codes = codes[rows]
        vals = s.cat.categories[pd.unique(codes[codes >= 0])]
    else:
        vals = pd.unique((s[rows] if rows is not None else s).dropna())
    return [str(v).lower() for v in np.asarray(vals, dtype=object)]


def _matching(values: list[str], pattern: re.Pattern[str]) -> list[str]:
    """``values`` that ``pattern`` finds something in (few: distinct names, group names)."""
    return [v for v in values if pattern.search(v)]


def _recorded(ev: pd.DataFrame, k: pd.DataFrame, mm: np.ndarray,
              args: pd.Series | None = None) -> pd.Series:
    """Per task: the ``Input type`` list its host operator recorded (``record_shapes``, read
    once per distinct host operator row), else the task's own recorded input dtypes (Ascend
    ``Input Data Types``: ``args``, the task table's args indexed by task position), else None."""
    out = np.full(len(k), None, object)
    if args is not None and len(args):
        own = arg_values(args, "input_data_types", "Input Data Types")
        pos = args.index.to_numpy(np.int64)
        ok = (pos < len(k)) & own.notna().to_numpy(bool)
        out[pos[ok]] = own.to_numpy(object)[ok]
    if "host_row" not in k.columns or not has_args(ev):
        return pd.Series(out, dtype=object)
    hr = k["host_row"].to_numpy(np.int64)
    ok = mm & (hr >= 0) & (hr < len(ev))
    if ok.any():
        rows, inv = np.unique(hr[ok], return_inverse=True)
        txt = pd.Series(np.asarray(args_of(ev, rows).array, dtype=object), dtype=object
                        ).astype(str)
        out[ok] = txt.str.extract(r'"Input type"\s*:\s*(\[[^\]]*\])', expand=False
                                  ).to_numpy(object)[inv]
    return pd.Series(out, dtype=object)


def facts(ctx: RankContext, k: pd.DataFrame, args: pd.Series | None = None) -> dict[str, Any]:
    """The device, the matmul dtype mix and the parallelism the trace shows, for rank ``ctx``
    whose device tasks are ``k`` (name, family, dur_ns, elem, unit)."""
    ev = ctx.events
    names = k["name"] if len(k) else pd.Series([], dtype=object)
    if not isinstance(names.dtype, pd.CategoricalDtype):  # (distinct names: codes, not text)
        names = names.astype(object).astype("category")
    src = str(getattr(ctx.meta, "source", "") or "")
    cores = None
    if src == "ascend" and "unit" in k.columns:  # cube / vector / mix tasks of the importer
        cores = k["unit"].astype(object).map({"vector": "AI_VECTOR_CORE", "mix": "MIX_AIC"})
    used = names.cat.codes.to_numpy()
    present = np.asarray(names.cat.categories, dtype=object)[pd.unique(used[used >= 0])]
    device = identify(ctx.device, present, core_types=cores)
    mix: dict[str, Any] = {"matmul_ns": 0.0, "kernels": 0, "shares": {}, "unknown_share": 0.0,
                           "source": {"recorded": 0.0, "kernel names": 0.0}, "top": None}
    if len(k):
        fam = is_(k, "family", *MATRIX_FAMILIES) if "family" in k.columns \
            else np.zeros(len(k), bool)
        mm = fam | is_matmul(names)
        elem = np.full(len(k), None, object)
        if "elem" in k.columns:
            size = k["elem"].to_numpy(np.float64)
            for b, label in ELEM_DTYPE.items():
                elem[size == b] = label
        mix = matmul_mix(names, k["dur_ns"].to_numpy(np.float64),
                         recorded=_recorded(ev, k, mm, args),
                         matmul=mm, fallback=elem)
    all_names = _distinct(ev, "name")
    # host-side names only for annotations (kernel names carry tile "stage" counts, CK's
    # "...Pipeline..." templates), and no Python stack frame: a frame names where the code is
    # ("transformers/pipelines/base.py(1306): __call__", vLLM's "get_pp_group" that runs at
    # any pipeline degree), not stages the job has
    host_names = all_names
    if "kind" in ev.columns and "name" in ev.columns:
        annotation = ~is_(ev, "kind", "kernel", "python")
        host_names = _distinct(ev, "name", annotation)
    groups = _distinct(ev, "coll_group")
    kinds = set(_distinct(ev, "kind"))
    p2p = _matching(all_names, _P2P_RE)
    stage = _matching(host_names, _PIPELINE_RE)
    pp_groups = _matching(groups, _PIPELINE_RE)
    tp_groups = _matching(groups, _TP_RE)
    loader = bool(kinds & {"data_read", "data_process", "data_fetch", "data_wait"}) or \
        any(_LOADER_RE.search(n) for n in all_names)
    return {
        "device": device.to_dict(), "matmul_mix": mix,
        "kernel_ns": float(k["dur_ns"].sum()) if len(k) else 0.0,
        "accelerator": bool(len(k)) or bool(kinds & {"kernel", "memcpy_h2d", "memcpy_d2h"}),
        "collectives": "collective" in kinds,
        "loader": loader,
        "pipeline": bool(len(p2p) or len(stage) or len(pp_groups)),
        "tensor_parallel": bool(len(tp_groups)),
        "parallel_evidence": {"p2p": p2p[:3], "stage_names": stage[:3], "groups": groups[:8]},
    }


def combine(per_rank: dict[int, dict[str, Any]], option: str | None = None) -> dict[str, Any]:
    """The analysis-wide facts from the ranks' ``precision`` metrics: the device (the user's
    ``--device`` over what the first rank's trace shows), the matmul dtype mix over all ranks
    (weighted by their matmul time) and what any rank shows of the job's parallelism."""
    got = [rr["computation"].metrics.get("precision") for _, rr in sorted(per_rank.items())
           if "computation" in rr]
    got = [g for g in got if g]
    if option:
        device = identify(option=option).to_dict()
    elif got:
        device = dict(got[0]["device"])
    else:
        device = identify().to_dict()
    total = sum(float(g["matmul_mix"]["matmul_ns"]) for g in got)
    shares: dict[str, float] = {}
    unknown = 0.0
    rec = names = 0.0
    for g in got:
        m, w = g["matmul_mix"], float(g["matmul_mix"]["matmul_ns"]) / total if total else 0.0
        for d, v in m["shares"].items():
            shares[d] = shares.get(d, 0.0) + w * v
        unknown += w * m["unknown_share"]
        rec += w * m["source"]["recorded"]
        names += w * m["source"]["kernel names"]
    shares = dict(sorted(shares.items(), key=lambda kv: -kv[1]))
    kernel_ns = sum(float(g.get("kernel_ns", 0.0)) for g in got)
    mix = {"matmul_ms": round(total / 1e6, 3),
           "device_share": round(total / kernel_ns, 4) if kernel_ns else 0.0,
           "shares": {d: round(v, 4) for d, v in shares.items()},
           "unknown_share": round(unknown, 4) if total else 0.0,
           "source": {"recorded": round(rec, 4), "kernel names": round(names, 4)},
           "top": next(iter(shares), None)}
    shown = {key: any(bool(g.get(key)) for g in got)
             for key in ("accelerator", "collectives", "loader", "pipeline", "tensor_parallel")}
    return {"device": device, "matmul_mix": mix, "shown": shown}
