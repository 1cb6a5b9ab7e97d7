"""Trace-level metadata, stored as Parquet key-value metadata (see ``schema.METADATA_KEYS``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from hermes.trace.schema import SCHEMA_VERSION


def _version() -> str:
    from hermes import __version__

    return __version__


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
        kv = {
            "hermes.schema_version": str(self.schema_version),
            "hermes.source": self.source,
            "hermes.created_by": self.created_by,
            "hermes.device": json.dumps(self.device, sort_keys=True),
            "hermes.clock_offsets_ns": json.dumps(
                {str(k): int(v) for k, v in sorted(self.clock_offsets_ns.items())}),
            "hermes.collector": json.dumps(self.collector, sort_keys=True),
            "hermes.ranks": json.dumps([int(r) for r in self.ranks]),
            "hermes.import": json.dumps(self.import_summary, sort_keys=True),
            "hermes.extra": json.dumps(self.extra, sort_keys=True),
        }
        return kv

    @classmethod
    def from_kv(cls, kv: dict[str, str]) -> TraceMeta:
        """Parse metadata; keys an older version did not write take their defaults."""

        def js(key: str, default: Any) -> Any:
            raw = kv.get(key)
            if raw is None or raw == "":
                return default
            try:
                return json.loads(raw)
            except json.JSONDecodeError:
                return default

        version = int(kv.get("hermes.schema_version", "0") or 0)
        offsets = {int(k): int(v) for k, v in (js("hermes.clock_offsets_ns", {}) or {}).items()}
        return cls(
            schema_version=version,
            source=kv.get("hermes.source", "unknown"),
            created_by=kv.get("hermes.created_by", "unknown"),
            device=js("hermes.device", {}) or {},
            clock_offsets_ns=offsets,
            collector=js("hermes.collector", {}) or {},
            ranks=tuple(int(r) for r in (js("hermes.ranks", []) or [])),
            import_summary=js("hermes.import", {}) or {},
            extra=js("hermes.extra", {}) or {},
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
