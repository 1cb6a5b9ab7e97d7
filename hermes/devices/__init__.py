"""Device profiles: published peak figures of accelerators, as data files (``*.toml`` here), one
file per accelerator, each citing its sources (``sources``; docs/devices.md lists them).

Used by the emulated runtime's cost model, by the analyzers (roofline ridge point, link
bandwidth) and by the advisor (which matmul dtypes a device has, and how much faster each is).
``get(name)`` looks a profile up by name or alias; ``match(text)`` finds the profile for a device
name found in a trace (``deviceProperties``, ``hermes.device``); ``identify`` (its own module)
says which device ran a trace and how it knows.

A file's keys: ``name``, ``display_name``, ``vendor`` (nvidia, amd, huawei, intel), ``kind`` (gpu,
npu, hpu), ``arch`` (volta, ampere, hopper, cdna3, dav-c220, ...), ``arch_id`` (what compilers and
kernel names call it: sm80, gfx942, ascend910b), ``compute_capability`` (NVIDIA), ``aliases``,
``sources``, ``peak_flops`` (FLOP/s per compute unit: ``sm``/``cube``/``mme`` at the best dense
matrix dtype, ``vector`` the non-matrix fp32 rate), ``dtype_flops`` (dense matrix FLOP/s per dtype
among fp64, fp32, tf32, fp16, bf16, fp8, fp6, fp4, int8; a dtype missing there is not supported,
except those listed in ``unpublished``: supported, no published figure), ``hbm_bw_Bps``,
``hbm_capacity_B``, ``memory_type``, ``host_link`` / ``host_link_bw_Bps`` and
``intra_node_link`` / ``intra_node_link_version`` / ``intra_node_bw_Bps`` (bandwidths per
direction), and the emulator's host-side figures where known.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from hermes.errors import UsageError


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    display_name: str
    vendor: str
    kind: str
    peak_flops: dict[str, float]        # FLOP/s per compute unit
    dtype_flops: dict[str, float]       # matrix FLOP/s per dtype
    hbm_bw_Bps: float
    hbm_capacity_B: int
    fields: dict[str, Any] = field(default_factory=dict)  # every other key of the file

    def __getattr__(self, key: str) -> Any:  # other keys: profile.intra_node_bw_Bps, ...
        f = self.__dict__.get("fields", {})
        if key in f:
            return f[key]
        raise AttributeError(key)

    @property
    def arch(self) -> str:
        return str(self.fields.get("arch", ""))

    @property
    def arch_id(self) -> str:
        return str(self.fields.get("arch_id", ""))

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(self.fields.get("sources", ()))

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The matmul dtypes the device supports, fastest first (fp32 always)."""
        return supported_dtypes(self.dtype_flops, self.fields.get("unpublished", ()))

    def supports(self, dtype: str) -> bool:
        return dtype in self.dtypes

    def matmul_flops(self, dtype: str) -> float | None:
        """Dense matrix FLOP/s in ``dtype``; None where unsupported or not published."""
        v = self.dtype_flops.get(dtype)
        return float(v) if v else None

    def ridge_point(self, unit: str) -> float:
        """Arithmetic intensity (FLOP/B) where the roofline turns: peak / HBM bandwidth."""
        return self.peak_flops[unit] / self.hbm_bw_Bps

    def to_meta(self) -> dict[str, Any]:
        """The dict stored as ``hermes.device`` in trace metadata."""
        return {"name": self.name, "display_name": self.display_name, "vendor": self.vendor,
                "kind": self.kind, "peak_flops": dict(self.peak_flops),
                "dtype_flops": dict(self.dtype_flops), "hbm_bw_Bps": self.hbm_bw_Bps,
                "hbm_capacity_B": self.hbm_capacity_B, **self.fields}


#: Matmul dtypes from widest to narrowest (the order of ``DeviceProfile.dtypes`` among equals).
DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8")


def supported_dtypes(dtype_flops: dict[str, float], unpublished: Any = ()) -> tuple[str, ...]:
    """Dtypes with a figure (fastest first; ties in ``DTYPES`` order), then the ``unpublished``
    ones; fp32 is always supported."""
    rank = {d: i for i, d in enumerate(DTYPES)}
    known = sorted((d for d, v in dtype_flops.items() if v), key=lambda d: (-float(dtype_flops[d]),
                                                                         rank.get(d, 99)))
    rest = [d for d in (*unpublished, "fp32") if d not in known]
    return tuple(dict.fromkeys([*known, *rest]))


@cache
def profiles() -> dict[str, DeviceProfile]:
    out: dict[str, DeviceProfile] = {}
    for entry in sorted(resources.files(__package__).iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".toml"):
            continue
        data = tomllib.loads(entry.read_text(encoding="utf-8"))
        core = {k: data.pop(k) for k in ("name", "display_name", "vendor", "kind", "peak_flops",
                                          "dtype_flops", "hbm_bw_Bps", "hbm_capacity_B")}
        out[core["name"]] = DeviceProfile(**core, fields=data)
    return out


def get(name: str) -> DeviceProfile:
    """A profile by name or alias (case-insensitive)."""
    p = match(name)
    if p is None:
        raise UsageError(f"unknown device {name!r}", hint=f"valid: {', '.join(profiles())}")
    return p


def match(text: str | None) -> DeviceProfile | None:
    """The profile whose name or an alias matches ``text`` exactly, else one whose alias is
    contained in it as a whole word (not followed or preceded by a letter or digit: "NVIDIA A10"
    is not in "NVIDIA A100", "H200" not in "GH200"; longest alias wins); None when nothing
    matches."""
    if not text:
        return None
    t = text.strip().lower()
    best: tuple[int, DeviceProfile] | None = None
    for p in profiles().values():
        names = [p.name, p.display_name, *p.fields.get("aliases", [])]
        for n in names:
            n = n.lower()
            if t == n:
                return p
            if len(n) > (best[0] if best else 0) and _contains_word(t, n):
                best = (len(n), p)
    return best[1] if best else None


def _contains_word(text: str, word: str) -> bool:
    start = text.find(word)
    while start >= 0:
        end = start + len(word)
        if (start == 0 or not text[start - 1].isalnum()) and \
                (end == len(text) or not text[end].isalnum()):
            return True
        start = text.find(word, start + 1)
    return False
