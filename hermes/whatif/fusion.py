"""Memory-bound fusion: what folding elementwise kernels into their producers and moving each
kernel's data once does to a step graph (the ``fuse_elementwise`` transform; registered in
:mod:`hermes.whatif.transforms`). See :func:`fuse_elementwise` for the model."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common import opinfo
from hermes.analyzers.computation import families
from hermes.rules.preconditions import FP8_TRAINING_ARCHS, TRAIN_DTYPES
from hermes.whatif.facts import args_at, args_mention, duration, number
from hermes.whatif.replay import Change, StepGraph

#: host-side kinds whose time is the framework's dispatch cost per operator
DISPATCH_KINDS = ("host_op", "python", "infer_shape", "tiling", "launch", "runtime", "alloc")
#: device-side kinds: one launch each (``launch`` / ``runtime`` host calls launch them)
LAUNCH_KINDS = ("launch", "runtime")


def training_peak(device: Mapping[str, Any]) -> float:
    """The profile's peak FLOP/s (``dtype_flops``) of the fastest dtype a training step's
    matmuls could use under the precision rules (``rules.preconditions``): a floating-point
    training dtype (``TRAIN_DTYPES``), fp8 only on an architecture whose libraries train in it
    (``FP8_TRAINING_ARCHS``); never fp6 / fp4 / int8 (B200, MI355X: 2-4x the bf16 peak). NaN
    when the profile gives none."""
    flops = dict(device.get("dtype_flops") or {})
    arch = str(device.get("arch") or "")
    fp8 = any(arch.startswith(a) for a in FP8_TRAINING_ARCHS)
    return max((float(flops[d]) for d in TRAIN_DTYPES if d in flops and (d != "fp8" or fp8)),
               default=np.nan)


def _peak(device: Mapping[str, Any], units: np.ndarray) -> np.ndarray:
    """Peak FLOP/s per event from the device profile: its unit's (``peak_flops``), else
    :func:`training_peak`; NaN when the profile gives none."""
    peaks = dict(device.get("peak_flops") or {})
    out = np.full(units.size, training_peak(device))
    for u, v in peaks.items():
        out[units == u] = float(v)
    return out


def _isin(sg: StepGraph, col: str, *values: str) -> np.ndarray:
    """Per event: column ``col`` is one of ``values`` (on a categorical column, compared by
    code: no string per event)."""
    if col not in sg.info.columns:
        return np.zeros(len(sg.info), bool)
    c = sg.info[col]
    if isinstance(c.dtype, pd.CategoricalDtype):
        hit = np.append(np.asarray(c.cat.categories.isin(values), bool), False)
        return hit[c.cat.codes.to_numpy()]
    return np.asarray(c.isin(values), bool)


def _producer(sg: StepGraph, ker: np.ndarray, memory: np.ndarray) -> np.ndarray:
    """Per event: the latest device task before it on its lane in the same step that is not
    memory-bound (``memory`` mask; ``ker`` the device kernels' positions): the producer a
    memory-bound chain fuses into (-1: none)."""
    lane = sg.g.lane[sg.g.event_start[ker]]  # lanes are per (step, lane)
    order = np.lexsort((sg.info["start"].to_numpy()[ker], lane))
    o, lane = ker[order], lane[order]
    pos = np.arange(o.size)
    # position of the latest producer at or before each position, restarted per lane
    last = np.maximum.accumulate(np.where(~memory[o], pos, -1)) if o.size else pos
    lane_start = np.maximum.accumulate(np.where(np.r_[True, lane[1:] != lane[:-1]],
                                                pos, 0)) if o.size else pos
    prev = np.full(len(sg.info), -1, np.int64)
    ok = (last >= lane_start) & (last < pos)
    prev[o[ok]] = o[last[ok]]
    return prev


def _name_list(sg: StepGraph, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Codes of the names of events ``rows`` and the distinct names they index, as a list (a
    few names: Python string work on them costs microseconds, a pandas string method a
    millisecond each)."""
    name = sg.info["name"]
    if isinstance(name.dtype, pd.CategoricalDtype):
        return (name.cat.codes.to_numpy()[rows].astype(np.int64),
                [str(c) for c in name.cat.categories.tolist()])
    codes, uniq = pd.factorize(name.iloc[rows].astype(str), use_na_sentinel=False)
    return np.asarray(codes, np.int64), [str(u) for u in uniq]


#: a backward kernel's suffix (``relu.grad`` -> relu): pandas' ``str.replace`` of it with
#: ``case=False`` is this ``re.sub``
_GRAD = re.compile(r"[._\-]?(grad|backward|bwd)$", re.IGNORECASE)


def _memory_family(names: list[str]) -> np.ndarray:
    """:func:`_fam_codes` of ``families.classify(names)``, name by name (``classify`` is
    ``families_of`` the distinct names)."""
    code = {f: i for i, f in enumerate(MEMORY_FAMILIES)}
    return np.array([code.get(f, -1) for f in families.families_of(names)], np.int8)


def _fam_codes(fam: pd.Series | np.ndarray) -> np.ndarray:
    """Index of each family in :data:`MEMORY_FAMILIES` (-1: none of them)."""
    f = np.asarray(fam, dtype=object).astype(str)
    out = np.full(f.size, -1, np.int8)
    for i, name in enumerate(MEMORY_FAMILIES):
        out[f == name] = i
    return out


def _families(sg: StepGraph, rows: np.ndarray, args: pd.Series | None) -> np.ndarray:
    """Memory family code (:func:`_fam_codes`) of events ``rows`` by name; a name under a
    module / scope path (``layer1.relu``, ``Default/net/ReLU-op1``) whose whole name says
    nothing memory-bound: by its leaf; where neither does, by the operator type the profiler
    recorded (Ascend kernel_details ``Type``: ``Add``, ``LayerNorm``, ...; ``args``: those
    of ``rows``)."""
    # the string work runs once per distinct name, not per event
    codes, names = _name_list(sg, rows)
    if not len(codes):
        return np.empty(0, np.int8)
    whole = _memory_family(names)
    # (a backward kernel's leaf is the operator it differentiates: ``relu.grad`` -> relu)
    leaf = [_GRAD.sub("", n).rsplit("/", 1)[-1].rsplit(".", 1)[-1] for n in names]
    fam = np.where(whole >= 0, whole, _memory_family(leaf))[codes]
    other = np.flatnonzero(fam < 0)
    typ = _arg(args, other, "Type")
    if typ is not None:
        known = np.flatnonzero(typ.notna().to_numpy())
        tcodes, tuniq = pd.factorize(typ.iloc[known].astype(str), use_na_sentinel=False)
        by_type = _fam_codes(families.classify(pd.Series(tuniq, dtype=object)))[tcodes]
        fam[other[known]] = by_type
    return fam


#: the args keys the lookups below read (:func:`_families`, :func:`_shape_bytes`)
ARG_KEYS = ("Type", "Input Shapes", "Output Shapes")


def _arg(args: pd.Series | None, pos: np.ndarray, key: str) -> pd.Series | None:
    """The string value of args key ``key`` at positions ``pos`` of ``args`` (NaN where
    absent; None when none has it). A literal pre-filter keeps the regex to args with the key
    (Kineto kernels' args carry none of these keys)."""
    if args is None or pos.size == 0:
        return None
    has = np.asarray(args.iloc[pos].str.contains(f'"{key}"', regex=False).fillna(False), bool)
    if not has.any():
        return None
    out = pd.Series(np.nan, index=np.arange(pos.size), dtype=object)
    out[has] = opinfo.arg_values(args.iloc[pos[has]].astype(object), key).to_numpy()
    return out


#: optimizer-step kernels (by name): elementwise over the parameters and their state, not over
#: the previous kernel's output, so they have no producer to fold into
OPTIMIZER_NAME = (r"adam|\bsgd|lamb\b|lars\b|adagrad|rmsprop|momentum|optimi[sz]er"
                  r"|multi_tensor_apply")


#: :data:`OPTIMIZER_NAME`, case-insensitive (what pandas' ``str.contains(case=False)`` matches)
_OPTIMIZER = re.compile(OPTIMIZER_NAME, re.IGNORECASE)


#: kernel families of few FLOPs per element (elementwise folds into a producer; a norm or
#: reduction needs its whole input first)
MEMORY_FAMILIES = ("elementwise", "norm", "reduction")


def _shape_bytes(args: pd.Series | None, rows: np.ndarray) -> np.ndarray:
    """Per position of ``rows`` in ``args``: the bytes its recorded input and output shapes
    hold (Ascend ``Input Shapes`` / ``Output Shapes`` with their data types: every input read
    once, every output written once); NaN where the trace records no such shapes. Parsed once
    per distinct shape text."""
    out = np.full(rows.size, np.nan)
    ins = _arg(args, rows, "Input Shapes")
    outs = _arg(args, rows, "Output Shapes") if ins is not None else None
    if ins is None or outs is None:
        return out
    both = np.flatnonzero(ins.notna().to_numpy() & outs.notna().to_numpy())
    if both.size == 0:
        return out
    assert args is not None
    elem = opinfo.dtype_bytes(args.iloc[rows[both]].astype(object)).to_numpy()
    key = ins.iloc[both].astype(str) + "|" + outs.iloc[both].astype(str)
    codes, uniq = pd.factorize(key, use_na_sentinel=False)
    held = np.array([sum(float(np.prod(d)) for part in u.split("|") for d in opinfo.shapes(part))
                     for u in uniq])
    out[both] = held[codes] * elem
    return out


def fuse_elementwise(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Memory-bound fusion: a memory-bound kernel that follows a producer on its stream is
    fused with it, so the intermediate tensors stay on chip and bytes are moved once.
    An elementwise kernel (its family by name, else by its recorded operator type; not an
    optimizer step, which reads the parameters, not the producer's output) folds into the
    producer: what is left of it is its compute, ``FLOPs / peak`` of its unit (device profile;
    0 when unknown), and its launch goes: the host events of its launch (same correlation id)
    and of its operator (same name in the step) take no time. A norm / reduction (or other
    Vector-unit) kernel needs its whole input first, so it stays a kernel, moving its data
    once: where the trace records its input / output shapes (``S`` bytes) and its traffic
    (``bytes``, ``B``), what it moves beyond its tensors (unfused intermediates) goes: its
    time x ``S / B``; without shapes, its input is at most the producer's output: at most
    ``2 x producer bytes`` of ``B`` stay, its time scaled by the bytes left. Neither goes
    below its compute. Work is on the device kernels only (no string per event)."""
    host = sg.info["host"].to_numpy(bool)
    ker = np.flatnonzero(_isin(sg, "kind", "kernel") & ~host)
    if ker.size == 0:
        return
    n = len(sg.info)
    # the kernels' args, taken once (the lookups below pre-filter them by a literal), where
    # any event's args name a key they look up (Kineto kernels' name none of them)
    args = args_at(sg, ker) if args_mention(sg, ARG_KEYS) else None
    fam = np.full(n, -1, np.int8)
    fam[ker] = _families(sg, ker, args)
    vector = _isin(sg, "unit", "vector")[ker]  # (absent: none)
    memory = np.zeros(n, bool)
    memory[ker] = (fam[ker] >= 0) | vector
    prod = _producer(sg, ker, memory)
    has = prod >= 0
    nbytes = number(sg, "bytes")
    mem = np.flatnonzero(memory)
    shaped = np.full(n, np.nan)
    shaped[mem] = _shape_bytes(args, np.flatnonzero(memory[ker]))
    sized = (shaped > 0) & (nbytes > 0)
    optimizer = np.zeros(n, bool)
    codes, names = _name_list(sg, mem)
    optimizer[mem] = np.array([_OPTIMIZER.search(x) is not None for x in names], bool)[codes] \
        if len(codes) else np.zeros(0, bool)
    fold = memory & has & (fam == MEMORY_FAMILIES.index("elementwise")) & ~optimizer
    once = memory & (has | sized) & ~fold
    if not (fold.any() or once.any()):
        return
    dur = np.maximum(duration(sg), 1.0)
    units = _texts(sg.info["unit"], mem) if "unit" in sg.info.columns else \
        np.full(mem.size, "", dtype=object)
    compute = np.zeros(n)
    compute[mem] = number(sg, "flops")[mem] / _peak(params.get("device") or {}, units) * 1e9
    compute = np.where(np.isfinite(compute) & (compute > 0), compute, 0.0)
    ch.scale[fold] *= np.minimum(compute[fold] / dur[fold], 1.0)
    moved = np.where(sized, shaped, np.minimum(nbytes, 2.0 * nbytes[np.maximum(prod, 0)]))
    keep = np.where(nbytes > 0, moved / np.where(nbytes > 0, nbytes, 1.0), 1.0)
    keep = np.nan_to_num(np.maximum(keep, compute / dur), nan=1.0)
    ch.scale[once] *= np.clip(keep[once], 0.0, 1.0)
    _drop_launches(sg, ch, np.flatnonzero(fold), host)


def _texts(col: pd.Series, rows: np.ndarray) -> np.ndarray:
    """``col`` at ``rows`` as strings ("" where missing); a categorical's by its categories."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = np.array([str(c) for c in col.cat.categories.tolist()] + [""], dtype=object)
        return cats[col.cat.codes.to_numpy()[rows]]  # code -1 (missing) picks the trailing ""
    return col.iloc[rows].astype(object).fillna("").astype(str).to_numpy()


def _drop_launches(sg: StepGraph, ch: Change, fold: np.ndarray, host: np.ndarray) -> None:
    """The host events of folded kernels take no time: their launches (same correlation id)
    and their operator's dispatch (same name in the same step)."""
    if fold.size == 0:
        return
    corr = number(sg, "corr_id")
    fc = corr[fold]
    launch = np.flatnonzero(host & _isin(sg, "kind", *LAUNCH_KINDS))
    ch.scale[launch[np.isin(corr[launch], fc[~np.isnan(fc)])]] = 0.0
    cand = np.flatnonzero(host & ~sg.info["loader"].to_numpy(bool)
                          & _isin(sg, "kind", *DISPATCH_KINDS))
    both = np.concatenate([fold, cand])
    name = sg.info["name"]
    if isinstance(name.dtype, pd.CategoricalDtype):
        codes = name.cat.codes.to_numpy()[both].astype(np.int64)
    else:
        codes, _ = pd.factorize(name.iloc[both].astype(object), use_na_sentinel=False)
    win = sg.info["win"].to_numpy(np.int64)[both]
    key = win * (int(codes.max()) + 2 if codes.size else 1) + codes
    ch.scale[cand[np.isin(key[fold.size:], np.unique(key[:fold.size]))]] = 0.0
