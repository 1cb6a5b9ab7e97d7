"""Rule preconditions: what must hold for a rule's advice to apply, named in a rule's ``requires``
list (rules.toml) and evaluated by the advisor against what the trace shows (the analysis'
``device`` and ``computation.matmul_dtypes``: ``analyzers/common/precision.py``).

Each precondition is True (the rule may be shown), False (it is not: advice the run cannot apply)
or None (unknown: the device could not be identified; the rule is shown as conditional, with
what to check). ``docs/rules.md`` lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: Floating-point matmul dtypes for training, slowest to fastest class (fp8 needs scaling).
TRAIN_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")
#: A dtype class the trace records only by its width -> the dtypes it may be.
WIDTH_CLASSES = {"fp16/bf16": ("fp16", "bf16"), "fp8/int8": ("fp8", "int8")}
#: Share of matmul time below which no precision advice is given (too little to gain).
MIN_MATMUL_SHARE = 0.05
#: FP8 is proposed only where matmuls are a large share of device time.
FP8_MIN_MATMUL_SHARE = 0.3
#: Architectures whose FP8 training is supported by the vendor's libraries (Transformer Engine,
#: torchao float8, hipBLASLt FP8): Ada, Hopper, Blackwell, CDNA 3/4, Gaudi 2/3.
FP8_TRAINING_ARCHS = ("ada", "hopper", "blackwell", "cdna3", "cdna4", "gaudi2", "gaudi3")


@dataclass(frozen=True)
class Precondition:
    name: str
    what: str                                   # what must hold, for docs/rules.md
    check: Callable[[Mapping[str, Any]], bool | None]
    #: what to check by hand where the trace cannot tell (vendor -> text; "" any vendor)
    verify: Mapping[str, str]


def _shown(key: str) -> Callable[[Mapping[str, Any]], bool | None]:
    return lambda f: bool(f.get("shown", {}).get(key))


def _accelerator(f: Mapping[str, Any]) -> bool | None:
    return bool(f.get("shown", {}).get("accelerator"))


def precision_plan(f: Mapping[str, Any]) -> dict[str, Any]:
    """The precision move the device table allows for the matmul dtype in use: ``current``,
    ``target`` (None: no faster dtype), ``ratio`` (dense peak target / current, the smallest
    over the candidate devices; None where a figure is missing), ``known`` (True / False / None
    as the preconditions) and ``why``."""
    dev, mix = f.get("device", {}), f.get("matmul_mix", {})
    cur = mix.get("top")
    share = float(f.get("matmul_device_share", 1.0))
    out: dict[str, Any] = {"current": cur, "target": None, "ratio": None, "known": False,
                           "why": ""}
    if not cur or share < MIN_MATMUL_SHARE:
        out["why"] = "no matmul time with a known dtype" if not cur else "few matmuls"
        return out
    supports: Callable[[str], bool | None] = f.get("supports") or (lambda d: None)
    if cur in ("fp32", "tf32"):
        # Volta / Turing (no bf16): fp16 with loss scaling; bf16 wherever the device has it
        bf16 = supports("bf16")
        out["target"] = "bf16" if bf16 is not False else "fp16"
        out["known"] = True if bf16 is not None else None
        if bf16 is False and supports("fp16") is False:
            out.update(target=None, known=False, why="no 16-bit matrix units")
    elif cur in ("fp16", "bf16", "fp16/bf16"):
        arch = str(dev.get("arch") or "")
        fp8 = supports("fp8")
        fp8_arch = any(arch.startswith(a) for a in FP8_TRAINING_ARCHS)
        if fp8 is False or share < FP8_MIN_MATMUL_SHARE:
            out["why"] = "no fp8 matrix units" if fp8 is False else "matmuls are a small share"
            return out
        out["target"] = "fp8"
        out["known"] = True if fp8 and fp8_arch else None
    else:
        out["why"] = f"{cur} is the device's fastest matmul dtype class"
        return out
    ratio = f.get("speedup")
    if ratio is not None:
        base = "bf16" if cur == "fp16/bf16" else cur
        out["ratio"] = ratio(base, out["target"])
        if out["ratio"] is not None and out["ratio"] <= 1.05:
            out.update(why=f"{out['target']} is no faster here", target=None, known=False)
    return out


def _faster(f: Mapping[str, Any]) -> bool | None:
    p = precision_plan(f)
    return p["known"] if p["target"] else False


SMI = {"nvidia": "nvidia-smi --query-gpu=name,compute_cap --format=csv",
       "amd": "rocm-smi --showproductname", "huawei": "npu-smi info",
       "intel": "hl-smi -Q name --format=csv"}

PRECONDITIONS: dict[str, Precondition] = {p.name: p for p in (
    Precondition("accelerator", "the trace shows work on an accelerator (kernels or device "
                 "collectives)", _accelerator, {"": "that the job runs on an accelerator"}),
    Precondition("cpu_only", "the trace records no accelerator: a CPU-only run (run kind "
                 "cpu_only)", lambda f: f.get("run_kind") == "cpu_only",
                 {"": "that the job runs on the CPU only"}),
    Precondition("collectives", "the trace shows collective or point-to-point communication",
                 _shown("collectives"), {"": "that the job communicates between ranks"}),
    Precondition("loader", "the trace shows a data loader (data-loading events or "
                 "DataLoader calls)", _shown("loader"), {"": "that a data loader feeds the step"}),
    Precondition("pipeline", "the trace shows pipeline stages: stage-to-stage send/recv, stage "
                 "annotations or pipeline process-group names", _shown("pipeline"),
                 {"": "that the job uses pipeline parallelism"}),
    Precondition("tensor_parallel", "the trace shows tensor-parallel collectives (their "
                 "process-group names)", _shown("tensor_parallel"),
                 {"": "that the job uses tensor parallelism"}),
    Precondition("faster_matmul_dtype", "the device has a faster matmul dtype than the one "
                 "the matmuls use (device table), and matmuls are a large enough share",
                 _faster, {v: f"that the device has {{precision_target}} matrix units "
                           f"({cmd})" for v, cmd in SMI.items()} |
                 {"": "that the device has {precision_target} matrix units (its model)"}),
)}


def evaluate(names: tuple[str, ...], facts: Mapping[str, Any]) -> tuple[bool | None, list[str]]:
    """(False if any precondition fails, None if none fails but some are unknown, else True;
    the names of the unknown ones)."""
    unknown = []
    for n in names:
        got = PRECONDITIONS[n].check(facts)
        if got is False:
            return False, []
        if got is None:
            unknown.append(n)
    return (None if unknown else True), unknown


def verify_text(names: list[str], vendor: str) -> str:
    """What to check by hand for the unknown preconditions ``names`` (the vendor's tool)."""
    return "; ".join(PRECONDITIONS[n].verify.get(vendor) or PRECONDITIONS[n].verify[""]
                     for n in names)
