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

import threading
from collections import OrderedDict
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


#: What one analysis run keeps for the stages after it, in :class:`Keep`'s units (the critical
#: path's step graphs: their events)
KEEP_LIMIT = 500_000


class Keep:
    """Products of the analyzers handed to the stages after the analysis -- the critical path's
    step graphs, which the advisor's replay (``hermes.whatif.graphs(..., keep=)``) takes instead
    of building them again. One run of :func:`hermes.analyzers.engine.run.analyze` makes one
    (``Analysis.keep``) and gives it to each rank's analyzers (``RankContext.keep``); nothing is
    kept from one run to the next. At most ``limit`` units in all (an entry's ``size``; the
    least recently used go first); safe across threads. Not pickled with its entries (a copy
    in another process starts empty)."""

    def __init__(self, limit: int = KEEP_LIMIT) -> None:
        self.limit = int(limit)
        self._entries: OrderedDict[int, tuple[int, Any]] = OrderedDict()
        self._next = 0
        self._lock = threading.Lock()

    def add(self, value: Any, size: int) -> None:
        """Keep ``value`` (``size`` units), dropping the least recently used over the limit."""
        with self._lock:
            self._entries[self._next] = (int(size), value)
            self._next += 1
            while sum(n for n, _ in self._entries.values()) > self.limit:
                self._entries.popitem(last=False)

    def find(self, match: Callable[[Any], bool]) -> Any | None:
        """The first kept value (least recently used first) for which ``match`` is true, made
        the most recently used; None when none is. ``match`` runs outside the lock."""
        with self._lock:
            entries = list(self._entries.items())
        for key, (_, value) in entries:
            if match(value):
                with self._lock:
                    if key in self._entries:
                        self._entries.move_to_end(key)
                return value
        return None

    def values(self) -> list[Any]:
        """The kept values, least recently used first."""
        with self._lock:
            return [v for _, v in self._entries.values()]

    def clear(self) -> None:
        """Drop every entry (their memory is freed once no user holds them)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __getstate__(self) -> dict[str, Any]:
        return {"limit": self.limit}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["limit"])  # type: ignore[misc]


@dataclass
class RankContext:
    """Input of a rank analyzer: one rank's events, the trace metadata, earlier results, and
    the run's :class:`Keep` (None: nothing is handed past the analysis, e.g. in a worker)."""

    rank: int
    events: pd.DataFrame
    meta: Any  # hermes.trace.TraceMeta
    results: dict[str, AnalyzerResult] = field(default_factory=dict)
    keep: Keep | None = None

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
