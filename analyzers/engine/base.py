"""The analysis contract: analyzer results, their inputs and the analyzer registry.

The cause vocabulary and ``Finding`` live on the ground floor (:mod:`hermes.findings`).

Two kinds of analyzer, registered by name in ``ANALYZERS``:

* a **rank** analyzer is a pure function ``fn(ctx: RankContext) -> AnalyzerResult`` of one
  rank's events (plus the results of the analyzers it ``needs``, run earlier on the same rank);
* a **cluster** analyzer is a pure function ``fn(ctx: ClusterContext) -> AnalyzerResult`` of the
  per-rank results of all ranks (never of raw events), so it scales out (map per rank, reduce).

Tables are pandas DataFrames with units in column names (``dur_ns``, ``share_pct``,
``bw_GBps``). Analyzers never plot or print.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from hermes.findings import Finding
from hermes.registry import Registry


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


ANALYZERS: Registry[Analyzer] = Registry("analyzer")


def register(name: str, scope: Literal["rank", "cluster"] = "rank", needs: tuple[str, ...] = (),
             description: str = "") -> Callable[[Callable[[Any], AnalyzerResult]],
                                                Callable[[Any], AnalyzerResult]]:
    """Decorator registering an analyzer function under ``name``."""

    def deco(fn: Callable[[Any], AnalyzerResult]) -> Callable[[Any], AnalyzerResult]:
        ANALYZERS.add(name, Analyzer(name, scope, fn, needs, description or (fn.__doc__ or "")
                                   .strip().splitlines()[0] if fn.__doc__ else description))
        return fn

    return deco


def get(name: str) -> Analyzer:
    return ANALYZERS.get(name)


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
