"""Which device ran a trace, and how Hermes knows: a pure function of the trace's own device fields,
its kernel names and the user's ``--device`` option.

Order: the user's option (``source = "user option"``), else the trace's device fields (Kineto
``deviceProperties`` name, compute capability, SM/CU count and memory; the older
``computeProperties``; ROCm's names; the Ascend chip from ``profiler_info``, stored by the
importer; ``source = "trace field"``), else kernel names (``volta_``/``turing_``/``ampere_``,
``sm70``..``sm100``, ``cutlass_80``, Tensile's ``ISA90a``/``gfx942``, Ascend's separate cube and
vector cores; ``source = "kernel names"``), else ``"unknown"``.

Kernel names give a lower bound more often than a device: cuBLAS runs ``sm80`` kernels on an H100
(fp32 GEMMs of ``kineto-h100/two_stream_prefetch``), so ``ampere_sgemm`` says "Ampere or newer".
Kernels built for one architecture only (``sm90`` with wgmma, ``sm100``, Tensile's per-ISA code
objects) name it. Where the evidence fits several profiles, the result keeps them all as
``candidates``; a capability holds when it holds for every candidate, fails when it fails for all,
and is unknown otherwise (``supports``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from hermes.devices import DeviceProfile, get, match, profiles, supported_dtypes

SOURCES = ("user option", "trace field", "kernel names", "unknown")

#: NVIDIA compute capability (major, minor) -> architecture; a major alone covers its minors.
NVIDIA_ARCH = {(6, None): "pascal", (7, 0): "volta", (7, 2): "volta", (7, 5): "turing",
               (8, 9): "ada", (8, None): "ampere", (9, None): "hopper", (10, None): "blackwell",
               (12, None): "blackwell"}
#: ROCm reports gfx9 devices as 9.x; the minor tells CDNA 3 and 4 apart, CU counts the rest.
AMD_ARCH = {(9, 4): "gfx942", (9, 5): "gfx950"}
#: Kernel-name evidence: (pattern, vendor, arch_id or None for "this architecture or newer"
#: levels, level, exact). Level orders NVIDIA architectures; exact: the kernel runs there only.
KERNEL_HINTS = (
    (r"(?:^|[^a-z0-9])(?:sm_?100a?|cutlass_100|sm10\d_)", "nvidia", "sm100", 100, True),
    (r"(?:^|[^a-z0-9])(?:sm_?90a?|cutlass_90|cutlass3x_sm90|wgmma)", "nvidia", "sm90", 90, True),
    (r"(?:^|[^a-z0-9])sm_?89", "nvidia", "sm89", 89, False),
    (r"(?:^|[^a-z0-9])sm_?86", "nvidia", "sm86", 86, False),
    (r"(?:^|[^a-z0-9])(?:ampere_|sm_?80|cutlass_80|cutlass_tensorop_(?:bf16|tf32))", "nvidia",
     "sm80", 80, False),
    (r"(?:^|[^a-z0-9])(?:turing_|sm_?75|cutlass_75)", "nvidia", "sm75", 75, False),
    (r"(?:^|[^a-z0-9])(?:volta_|sm_?70|cutlass_70)", "nvidia", "sm70", 70, False),
    (r"(?:isa|gfx)950", "amd", "gfx950", 0, True),
    (r"(?:isa|gfx)942", "amd", "gfx942", 0, True),
    (r"(?:isa|gfx)90a", "amd", "gfx90a", 0, True),
    (r"(?:isa|gfx)908", "amd", "gfx908", 0, True),
)
#: NVIDIA arch_id -> level (for "or newer" candidates).
NVIDIA_LEVEL = {"sm60": 60, "sm70": 70, "sm75": 75, "sm80": 80, "sm86": 86, "sm89": 89,
                "sm90": 90, "sm100": 100}
#: Ascend task core types that only the separated cube/vector cores of dav-c220 (910B, 910C) have.
ASCEND_C220_CORES = ("AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AIV", "MIX")


@dataclass(frozen=True)
class Identified:
    """The device of a trace: its profile where one fits, else the profiles the evidence allows."""

    profile: DeviceProfile | None
    source: str
    evidence: str
    vendor: str | None = None
    arch: str | None = None
    candidates: tuple[DeviceProfile, ...] = field(default=())

    @property
    def name(self) -> str:
        if self.profile is not None:
            return self.profile.display_name
        if self.arch:
            return f"unknown {self.vendor or ''} {self.arch} device".replace("  ", " ")
        return f"unknown {self.vendor} device" if self.vendor else "unknown device"

    @property
    def known(self) -> bool:
        return self.profile is not None

    def _pool(self) -> tuple[DeviceProfile, ...]:
        return (self.profile,) if self.profile is not None else self.candidates

    def supports(self, dtype: str) -> bool | None:
        """True where every candidate has a ``dtype`` matmul, False where none has, else None."""
        pool = self._pool()
        if not pool:
            return True if dtype == "fp32" else None
        has = [p.supports(dtype) for p in pool]
        return True if all(has) else False if not any(has) else None

    def speedup(self, from_dtype: str, to_dtype: str) -> float | None:
        """Ratio of dense matmul peaks ``to / from`` (the smallest over the candidates); None where
        a figure is missing."""
        ratios = []
        for p in self._pool():
            a, b = p.matmul_flops(from_dtype), p.matmul_flops(to_dtype)
            if not a or not b:
                return None
            ratios.append(b / a)
        return min(ratios) if ratios else None

    def fastest(self, among: Iterable[str]) -> str | None:
        """The fastest of ``among`` every candidate supports (by the first candidate's peaks)."""
        pool = self._pool()
        ok = [d for d in among if self.supports(d)]
        if not pool or not ok:
            return None
        return next((d for d in pool[0].dtypes if d in ok), None)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Identified:
        """Back from :meth:`to_dict` (profiles by name)."""
        ps = profiles()
        return cls(ps.get(str(d.get("profile"))), str(d.get("source") or "unknown"),
                   str(d.get("evidence") or ""), d.get("vendor"), d.get("arch"),
                   tuple(ps[c] for c in d.get("candidates") or () if c in ps))

    def to_dict(self) -> dict[str, Any]:
        pool = self._pool()
        dtypes = [d for d in supported_dtypes(pool[0].dtype_flops) if self.supports(d)] \
            if pool else []
        return {"name": self.name, "profile": self.profile.name if self.profile else None,
                "source": self.source, "evidence": self.evidence, "vendor": self.vendor,
                "arch": self.arch, "candidates": [p.name for p in self.candidates],
                "matmul_dtypes": dtypes}


def identify(device: Mapping[str, Any] | None = None, kernel_names: Iterable[str] | None = None,
             option: str | None = None, core_types: Iterable[str] | None = None) -> Identified:
    """The device of a trace from ``option`` (``--device``), the trace's device dict ``device``
    (``TraceMeta.device``: ``name``, ``kineto`` = deviceProperties[0], the importer's profile
    fields), its ``kernel_names`` and, for Ascend, its tasks' ``core_types``."""
    if option:
        p = get(option)
        return Identified(p, "user option", f"--device {option}", p.vendor, p.arch)
    got = _from_fields(dict(device or {}))
    if got is not None:
        return got
    got = _from_kernels(_unique(kernel_names), _unique(core_types))
    return got if got is not None else Identified(None, "unknown", "no device fields, no "
                                                  "kernel name that names an architecture")


def _unique(values: Iterable[str] | None) -> pd.Series:
    if values is None:
        return pd.Series([], dtype=object)
    s = values if isinstance(values, pd.Series) else pd.Series(list(values), dtype=object)
    return pd.Series(pd.unique(s.dropna().astype(str)), dtype=object)


def _props(device: dict[str, Any]) -> dict[str, Any]:
    for key in ("kineto", "deviceProperties", "computeProperties"):
        v = device.get(key)
        if isinstance(v, list) and v and isinstance(v[0], dict):
            v = v[0]
        if isinstance(v, dict) and v:
            return v
    return {}


def _from_fields(device: dict[str, Any]) -> Identified | None:
    props = _props(device)
    names = [str(device.get(k) or "") for k in ("name", "display_name")] + \
        [str(props.get("name") or "")]
    named = next((p for p in map(match, names) if p is not None), None)
    by_props = _by_props(props)
    if named is not None:
        # a name two parts share ("AMD Instinct MI250X/MI250"): the CU count decides
        sms = int(props.get("numSms") or 0)
        if by_props and len(by_props[1]) == 1 and by_props[1][0].arch == named.arch and sms and \
                int(named.fields.get("compute_units", sms)) != sms:
            named = by_props[1][0]
        text = next(n for n in names if n and match(n) is not None)
        return Identified(named, "trace field", f"device name {text!r}", named.vendor, named.arch)
    if by_props is None:
        return None
    (vendor, arch, what), cands = by_props
    if len(cands) == 1:
        return Identified(cands[0], "trace field", what, vendor, cands[0].arch)
    return Identified(None, "trace field", what, vendor, arch, tuple(cands))


def _by_props(props: dict[str, Any]) -> tuple[tuple[str, str, str], list[DeviceProfile]] | None:
    """((vendor, arch, evidence), fitting profiles) from deviceProperties' numbers."""
    try:
        major, minor = int(props["computeMajor"]), int(props["computeMinor"])
    except (KeyError, TypeError, ValueError):
        return None
    sms = int(props.get("numSms") or 0)
    mem = float(props.get("totalGlobalMem") or 0)
    amd = int(props.get("warpSize") or 32) == 64
    if amd:
        arch_id = AMD_ARCH.get((major, minor))
        pool = [p for p in profiles().values() if p.vendor == "amd" and
                (p.arch_id == arch_id if arch_id else p.arch_id.startswith(f"gfx{major}"))]
        arch = next((p.arch for p in pool if p.arch_id == arch_id), None) if arch_id else None
        what = f"deviceProperties: gfx{major}.{minor}, {sms} CUs"
    else:
        arch = NVIDIA_ARCH.get((major, minor)) or NVIDIA_ARCH.get((major, None))
        cc = f"{major}.{minor}"
        pool = [p for p in profiles().values() if p.fields.get("compute_capability") == cc]
        what = f"deviceProperties: compute capability {cc}, {sms} SMs"
        if not pool and arch:
            pool = [p for p in profiles().values() if p.arch == arch]
    if sms:
        fit = [p for p in pool if int(p.fields.get("compute_units", 0)) == sms]
        pool = fit or ([] if amd and not arch else pool)
        if pool and not arch:
            arch = pool[0].arch
    if len(pool) > 1 and mem:
        near = [p for p in pool if abs(p.hbm_capacity_B - mem) <= 0.1 * p.hbm_capacity_B]
        pool = near or pool
    if len(pool) > 1:  # the profile that claims these numbers (``kineto_props``) among equals
        own = [p for p in pool if (want := p.fields.get("kineto_props")) and
               all(props.get(k) == v for k, v in want.items())]
        pool = own if len(own) == 1 else pool
    return ("amd" if amd else "nvidia", arch or "", what), pool


def _from_kernels(names: pd.Series, cores: pd.Series) -> Identified | None:
    if len(cores) and cores.str.upper().isin(ASCEND_C220_CORES).any():
        pool = tuple(p for p in profiles().values() if p.arch == "dav-c220")
        return Identified(None, "kernel names", "tasks on separate AI Cube / AI Vector cores "
                          "(dav-c220: Ascend 910B / 910C)", "huawei", "dav-c220", pool)
    if not len(names):
        return None
    low = names.str.lower()
    for pattern, vendor, arch_id, level, exact in KERNEL_HINTS:
        hit = low.str.contains(pattern, regex=True)
        if not hit.any():
            continue
        example = str(names[hit.to_numpy()].iloc[0])[:80]
        if vendor == "amd" or exact:
            pool = tuple(p for p in profiles().values() if p.arch_id == arch_id)
            arch = pool[0].arch if pool else arch_id
            note = f"kernel names built for {arch_id} only (e.g. {example!r})"
        else:
            pool = tuple(p for p in profiles().values() if p.vendor == "nvidia" and
                         NVIDIA_LEVEL.get(p.arch_id, 0) >= level)
            arch = f"{_level_arch(level)} or newer"
            note = f"kernel names of {arch_id} (e.g. {example!r}), which also run on newer GPUs"
        if len(pool) == 1:
            return Identified(pool[0], "kernel names", note, vendor, pool[0].arch)
        return Identified(None, "kernel names", note, vendor, arch, pool)
    return None


def _level_arch(level: int) -> str:
    majors = {70: (7, 0), 75: (7, 5), 80: (8, 0), 86: (8, 6), 89: (8, 9)}
    mj = majors.get(level, (level // 10, level % 10))
    return NVIDIA_ARCH.get(mj) or NVIDIA_ARCH.get((mj[0], None)) or f"sm{level}"


def summary(ident: Identified) -> str:
    """One line: the device and how Hermes knows."""
    return f"{ident.name} ({ident.source}: {ident.evidence})"


__all__ = ["Identified", "identify", "summary", "SOURCES"]
