"""The analysis contract: findings, results, the cause vocabulary and the analyzer registry.

Two kinds of analyzer, registered by name in ``ANALYZERS``:

* a **rank** analyzer is a pure function ``fn(ctx: RankContext) -> AnalyzerResult`` of one
  rank's events (plus the results of the analyzers it ``needs``, run earlier on the same rank);
* a **cluster** analyzer is a pure function ``fn(ctx: ClusterContext) -> AnalyzerResult`` of the
  per-rank results of all ranks (never of raw events), so it scales out (map per rank, reduce).

Tables are pandas DataFrames with units in column names (``dur_ns``, ``share_pct``,
``bw_GBps``). Analyzers never plot or print.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from hermes.errors import UsageError

#: DESIGN.md's cause vocabulary: category -> cause ids. A finding's id is "category.cause".
CAUSES: dict[str, tuple[str, ...]] = {
    "parallel": ("poor_parallelism",),
    "io": ("slow_data_reading", "slow_data_processing", "slow_data_fetching"),
    "cpu": ("operator_compilation", "operator_dispatch", "host_device_sync",
            "garbage_collection", "resource_contention", "environment_configuration"),
    "computation": ("compute_bound", "memory_bound", "underutilization", "slow_node"),
    "communication": ("synchronization_wait", "bandwidth_contention", "rdma_retransmission",
                      "small_packet", "byte_alignment", "network_configuration"),
}
CAUSE_IDS: tuple[str, ...] = tuple(f"{cat}.{c}" for cat, cs in CAUSES.items() for c in cs)

BOUNDS = ("host", "device", "io", "communication")
SEVERITIES = ("info", "low", "medium", "high")


def severity_for(time_share: float) -> str:
    """Severity from the fraction of step time a cause costs."""
    if time_share >= 0.20:
        return "high"
    if time_share >= 0.05:
        return "medium"
    if time_share >= 0.01:
        return "low"
    return "info"


@dataclass(frozen=True)
class Recommendation:
    rule: str
    optimization: str
    how: str
    estimated_speedup: float
    emulator_opt: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "optimization": self.optimization, "how": self.how,
                "estimated_speedup": round(float(self.estimated_speedup), 4),
                "emulator_opt": self.emulator_opt}


@dataclass(frozen=True)
class Finding:
    """One diagnosed cause. ``time_share`` is the fraction (0-1) of step time it costs."""

    category: str
    cause: str
    time_share: float
    summary: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    ranks: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()
    severity: str = ""
    recommendations: tuple[Recommendation, ...] = ()

    def __post_init__(self) -> None:
        if self.cause not in CAUSES.get(self.category, ()):
            raise ValueError(f"unknown cause id {self.category}.{self.cause}; "
                             f"valid: {', '.join(CAUSE_IDS)}")
        ts = float(self.time_share)
        if not 0.0 <= ts <= 1.0:
            raise ValueError(f"time_share {ts} of {self.id} outside [0, 1]")
        object.__setattr__(self, "time_share", ts)
        if not self.severity:
            object.__setattr__(self, "severity", severity_for(ts))

    @property
    def id(self) -> str:
        return f"{self.category}.{self.cause}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "category": self.category, "cause": self.cause,
            "severity": self.severity, "time_share": round(self.time_share, 6),
            "summary": self.summary, "evidence": dict(self.evidence),
            "ranks": [int(r) for r in self.ranks], "steps": [int(s) for s in self.steps],
            "recommendations": [r.to_dict() for r in self.recommendations],
        }


@dataclass
class AnalyzerResult:
    """An analyzer's output: named tables, findings and scalar metrics."""

    name: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class RankContext:
    """Input of a rank analyzer: one rank's events, the trace metadata, earlier results."""

    rank: int
    events: pd.DataFrame
    meta: Any  # hermes.trace.TraceMeta
    results: dict[str, AnalyzerResult] = field(default_factory=dict)

    @property
    def device(self) -> dict[str, Any]:
        return dict(getattr(self.meta, "device", {}) or {})


@dataclass
class ClusterContext:
    """Input of a cluster analyzer: per-rank results of every rank analyzer."""

    per_rank: dict[int, dict[str, AnalyzerResult]]
    meta: Any
    results: dict[str, AnalyzerResult] = field(default_factory=dict)


@dataclass(frozen=True)
class Analyzer:
    name: str
    scope: Literal["rank", "cluster"]
    fn: Callable[[Any], AnalyzerResult]
    needs: tuple[str, ...] = ()
    description: str = ""


ANALYZERS: dict[str, Analyzer] = {}


def register(name: str, scope: Literal["rank", "cluster"] = "rank", needs: tuple[str, ...] = (),
             description: str = "") -> Callable[[Callable[[Any], AnalyzerResult]],
                                                Callable[[Any], AnalyzerResult]]:
    """Decorator registering an analyzer function under ``name``."""

    def deco(fn: Callable[[Any], AnalyzerResult]) -> Callable[[Any], AnalyzerResult]:
        ANALYZERS[name] = Analyzer(name, scope, fn, needs, description or (fn.__doc__ or "")
                                   .strip().splitlines()[0] if fn.__doc__ else description)
        return fn

    return deco


def get(name: str) -> Analyzer:
    try:
        return ANALYZERS[name]
    except KeyError:
        raise UsageError(f"unknown analyzer {name!r}",
                         hint=f"valid: {', '.join(sorted(ANALYZERS))}") from None


def ordered(scope: str) -> list[Analyzer]:
    """Analyzers of one scope in dependency order (``needs`` first)."""
    pending = {a.name: a for a in ANALYZERS.values() if a.scope == scope}
    out: list[Analyzer] = []
    done: set[str] = set()
    while pending:
        ready = [a for a in pending.values()
                 if all(n in done or n not in pending for n in a.needs)]
        if not ready:
            raise RuntimeError(f"dependency cycle among analyzers {sorted(pending)}")
        for a in sorted(ready, key=lambda a: a.name):
            out.append(a)
            done.add(a.name)
            del pending[a.name]
    return out
