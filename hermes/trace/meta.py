"""Trace-level metadata, stored as Parquet key-value metadata (see ``schema.METADATA_KEYS``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from hermes.trace.schema import SCHEMA_VERSION
from hermes.trace.textsafe import clean_text, dumps


def _version() -> str:
    from hermes import __version__

    return __version__


INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1


def strict_int(value: Any, what: str, lo: int = -INT64_MAX - 1, hi: int = INT64_MAX) -> int:
    """``value`` as an int in [lo, hi], or ValueError naming ``what``: refuses bools, fractions,
    NaN/Infinity and Unicode digits such as '²' (``str.isdigit`` is true, ``int`` fails)."""
    if isinstance(value, bool):
        raise ValueError(f"{what} is a boolean, not an integer")
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")) or not value.is_integer():
            raise ValueError(f"{what} = {value!r} is not an integer")
        value = int(value)
    elif isinstance(value, str):
        text = value.strip()
        body = text[1:] if text[:1] in "+-" else text
        if not body.isascii() or not body.isdigit() or len(body) > 20:
            raise ValueError(f"{what} = {value[:40]!r} is not an integer")
        value = int(text)
    elif not isinstance(value, int):
        raise ValueError(f"{what} is {type(value).__name__}, not an integer")
    if not lo <= value <= hi:
        raise ValueError(f"{what} = {value} is out of range [{lo}, {hi}]")
    return value


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is {type(value).__name__}, not a number")
    if value != value or value in (float("inf"), float("-inf")) or abs(value) > 1e30:
        raise ValueError(f"{what} = {value!r} is not a finite number")
    return float(value)


def _text(value: str) -> str:
    """Metadata text without control characters (they would break one-line messages)."""
    return "".join(c if c.isprintable() else "?" for c in value)[:200]


def _json_of(kv: dict[str, str], key: str, typ: type, default: Any) -> Any:
    """The JSON value of ``key``, which must be of ``typ`` (missing/empty: ``default``)."""
    raw = kv.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        raise ValueError(f"{key} is not valid JSON") from None
    if value is None:
        return default
    if not isinstance(value, typ):
        raise ValueError(f"{key} is a JSON {type(value).__name__}, expected "
                         f"{'an object' if typ is dict else 'a list'}")
    return value


@dataclass(frozen=True)
class TraceMeta:
    """What a trace says about itself. Unknown keys survive a round trip in ``extra``."""

    schema_version: int = SCHEMA_VERSION
    source: str = "unknown"
    created_by: str = field(default_factory=lambda: f"hermes-profiler {_version()}")
    device: dict[str, Any] = field(default_factory=dict)
    clock_offsets_ns: dict[int, int] = field(default_factory=dict)
    collector: dict[str, Any] = field(default_factory=dict)
    ranks: tuple[int, ...] = ()
    import_summary: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def with_(self, **changes: Any) -> TraceMeta:
        return replace(self, **changes)

    def to_kv(self) -> dict[str, str]:
        """The metadata as Parquet key-value pairs: valid UTF-8 and strict JSON (a NaN or a
        lone surrogate in a caller's figures is stored as null / U+FFFD)."""
        kv = {
            "hermes.schema_version": str(self.schema_version),
            "hermes.source": clean_text(self.source),
            "hermes.created_by": clean_text(self.created_by),
            "hermes.device": dumps(self.device, sort_keys=True, ensure_ascii=True),
            "hermes.clock_offsets_ns": json.dumps(
                {str(k): int(v) for k, v in sorted(self.clock_offsets_ns.items())}),
            "hermes.collector": dumps(self.collector, sort_keys=True, ensure_ascii=True),
            "hermes.ranks": json.dumps([int(r) for r in self.ranks]),
            "hermes.import": dumps(self.import_summary, sort_keys=True, ensure_ascii=True),
            "hermes.extra": dumps(self.extra, sort_keys=True, ensure_ascii=True),
        }
        return kv

    @classmethod
    def from_kv(cls, kv: dict[str, str]) -> TraceMeta:
        """Parse metadata; keys an older version did not write take their defaults.

        Every value is type- and range-checked: a wrong JSON type (a device that is a list,
        ranks that are text), a non-ASCII digit or a number beyond int64 raises ValueError
        naming the key (the reader turns it into a one-line TraceFormatError).
        """
        version = strict_int(kv.get("hermes.schema_version", "0") or "0",
                             "hermes.schema_version", hi=INT32_MAX)
        offsets_raw = _json_of(kv, "hermes.clock_offsets_ns", dict, {})
        offsets = {strict_int(k, "hermes.clock_offsets_ns key", hi=INT32_MAX):
                   strict_int(v, "hermes.clock_offsets_ns") for k, v in offsets_raw.items()}
        ranks = _json_of(kv, "hermes.ranks", list, [])
        device = _json_of(kv, "hermes.device", dict, {})
        for key in ("peak_flops", "dtype_flops"):
            if key in device and not isinstance(device[key], dict):
                raise ValueError(f"hermes.device {key} is {type(device[key]).__name__}, "
                                 "not an object")
            for name, value in (device.get(key) or {}).items():
                _finite(value, f"hermes.device {key}.{name}")
        for key in ("hbm_bw_Bps", "hbm_capacity_B"):
            if device.get(key) is not None:
                _finite(device[key], f"hermes.device {key}")
        return cls(
            schema_version=version,
            source=_text(kv.get("hermes.source", "unknown")),
            created_by=_text(kv.get("hermes.created_by", "unknown")),
            device=device,
            clock_offsets_ns=offsets,
            collector=_json_of(kv, "hermes.collector", dict, {}),
            ranks=tuple(strict_int(r, "hermes.ranks", hi=INT32_MAX) for r in ranks),
            import_summary=_json_of(kv, "hermes.import", dict, {}),
            extra=_json_of(kv, "hermes.extra", dict, {}),
        )

    @staticmethod
    def merge(metas: list[TraceMeta]) -> TraceMeta:
        """Combine the metadata of per-rank files of one trace."""
        if not metas:
            return TraceMeta()
        first = metas[0]
        ranks = sorted({r for m in metas for r in m.ranks})
        offsets: dict[int, int] = {}
        device: dict[str, Any] = {}
        for m in metas:
            offsets.update(m.clock_offsets_ns)
            device = device or m.device
        return replace(first, ranks=tuple(ranks), clock_offsets_ns=offsets, device=device)
