"""The vocabulary every stage shares: cause ids, ``Finding``, ``Recommendation``, severities.

This module is the ground floor (DESIGN.md, "Stages and the one-way rule"): analyzers emit
:class:`Finding`\\ s, the advisor attaches :class:`Recommendation`\\ s, the rule table keys on
:data:`CAUSE_IDS`, the emulator injects causes by these ids, renderers and checks read them. It
imports nothing of Hermes but the error type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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

#: The run-level verdicts of ``hermes analyze`` (``bound``).
BOUNDS = ("host", "device", "io", "communication")
SEVERITIES = ("info", "low", "medium", "high")

#: Smallest fraction of step time a finding must cost to be reported (1 %); analyses that fold
#: or subtract shares drop what falls below it.
MIN_SHARE = 0.01


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
    """One optimization for a finding. ``estimated_speedup`` is step time before / after."""

    rule: str
    optimization: str
    how: str
    estimated_speedup: float
    emulator_opt: str | None = None
    #: "replay": ``estimated_speedup`` came from replaying the step graph (hermes.whatif);
    #: "formula": from the rule's recover fraction (no transform for it, or no trace)
    estimate: str = "formula"
    #: the replayed step before / after where it exceeds the bound ``estimated_speedup`` is
    #: capped at (the shares of the findings the change removes, docs/rules.md): the transform
    #: also removes time the analysis gives other causes; else None
    replayed_speedup: float | None = None
    #: where ``estimated_speedup`` is above ``1 / (1 - time_share)`` of its finding: the
    #: findings whose time the replayed change removes (id -> time_share, its own included) and
    #: ``saved_share``, the share of the run's step time (all steps) it removes, at most their
    #: sum; the median step gains more than the average one (docs/rules.md); else None
    claims: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "rule": self.rule, "optimization": self.optimization, "how": self.how,
            "estimated_speedup": round(float(self.estimated_speedup), 4),
            "emulator_opt": self.emulator_opt, "estimate": self.estimate}
        if self.replayed_speedup is not None:
            d["replayed_speedup"] = round(float(self.replayed_speedup), 4)
        if self.claims is not None:
            d["claims"] = {"findings": {k: round(float(v), 6)
                                        for k, v in self.claims["findings"].items()},
                           "saved_share": round(float(self.claims["saved_share"]), 6)}
        return d


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
