"""Device profiles: published peak figures of accelerators, as data files (``*.toml`` here).

Used by the emulated runtime's cost model and by the analyzers (roofline ridge point, link
bandwidth). ``get(name)`` looks a profile up by name or alias; ``match(text)`` finds the
profile for a device name found in a trace (``deviceProperties``, ``hermes.device``).
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

    def ridge_point(self, unit: str) -> float:
        """Arithmetic intensity (FLOP/B) where the roofline turns: peak / HBM bandwidth."""
        return self.peak_flops[unit] / self.hbm_bw_Bps

    def to_meta(self) -> dict[str, Any]:
        """The dict stored as ``hermes.device`` in trace metadata."""
        return {"name": self.name, "display_name": self.display_name, "vendor": self.vendor,
                "kind": self.kind, "peak_flops": dict(self.peak_flops),
                "dtype_flops": dict(self.dtype_flops), "hbm_bw_Bps": self.hbm_bw_Bps,
                "hbm_capacity_B": self.hbm_capacity_B, **self.fields}


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
    contained in it (longest alias wins); None when nothing matches."""
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
            if n in t and (best is None or len(n) > best[0]):
                best = (len(n), p)
    return best[1] if best else None
