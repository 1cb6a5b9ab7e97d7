"""The result of analysis: :class:`Analysis`, and the JSON document it becomes.

``Analysis`` holds every analyzer's per-rank and cluster results, the merged findings, the verdict
and the breakdown rows; ``to_dict()`` / ``to_json()`` build the ``hermes analyze --format json``
document of DESIGN.md (``schema: "hermes.analysis/1"``). Findings carry recommendations only once
the advisor has attached them (``hermes.advisor.Advice.attach``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.base import AnalyzerResult
from hermes.analyzers.verdict import Verdict
from hermes.errors import UsageError
from hermes.findings import Finding

SCHEMA = "hermes.analysis/1"

#: Keys of ``breakdown.per_rank`` taken from the overlap analyzer's metrics (percent of step time).
BREAKDOWN_KEYS = ("computation_only_pct", "communication_only_pct", "overlapped_pct",
                  "host_bound_pct", "free_pct", "idle_pct", "compute_pct", "non_compute_pct",
                  "comm_comp_overlap_pct")
TOP_OPS_N = 10
#: Per-rank figures of the computation analyzer in the JSON document (``computation.per_rank``).
MFU_KEYS = ("mfu", "achieved_tflops", "mfu_peak_tflops", "flops_known_pct")
#: Columns of the top-kernel table (``computation.top_kernels``), over all ranks.
KERNEL_KEYS = ("count", "total_ns", "mean_ns", "max_ns", "share_pct", "family", "bound")
TOP_KERNELS_N = 20
#: Per-rank memory figures of the JSON document (``memory.per_rank``).
MEMORY_KEYS = ("device", "peak_allocated_bytes", "peak_reserved_bytes", "samples")


def _steps(per_rank: dict[int, dict[str, AnalyzerResult]]) -> dict[str, Any]:
    """Step count and median/p90 wall time (ms); a step's time is its slowest rank's."""
    frames = [rr["steps"].tables["windows"] for rr in per_rank.values() if "steps" in rr]
    frames = [f for f in frames if len(f)]
    if not frames:
        return {"count": 0, "median_ms": 0.0, "p90_ms": 0.0}
    df = pd.concat(frames, ignore_index=True)
    per_step = df.groupby("step")["dur_ns"].max().to_numpy(np.float64)
    return {"count": int(per_step.size), "median_ms": float(np.median(per_step) / 1e6),
            "p90_ms": float(np.percentile(per_step, 90) / 1e6)}


def jsonable(x: Any) -> Any:
    """Plain JSON values from numpy/pandas ones (NaN -> None, DataFrame -> records)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [jsonable(v) for v in x]
    if isinstance(x, pd.DataFrame):
        return [jsonable(r) for r in x.to_dict("records")]
    if isinstance(x, np.ndarray):
        return [jsonable(v) for v in x.tolist()]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if x is pd.NA or x is pd.NaT:
        return None
    return x


@dataclass
class Analysis:
    """The result of :func:`analyze`: tables, findings, verdict, steps, breakdown, critical path."""

    ranks: list[int]
    meta: Any
    per_rank: dict[int, dict[str, AnalyzerResult]]
    cluster: dict[str, AnalyzerResult]
    findings: list[Finding]
    verdict: Verdict
    breakdown_rows: list[dict[str, Any]] = field(default_factory=list)
    #: Ranks not analyzed after a retry: ``{"rank", "error", "attempts"}`` each (empty: none).
    missing_ranks: list[dict[str, Any]] = field(default_factory=list)
    _tables: dict[str, pd.DataFrame] | None = field(default=None, repr=False)

    @property
    def bound(self) -> str:
        return self.verdict.bound

    @property
    def steps(self) -> dict[str, Any]:
        return _steps(self.per_rank)

    @property
    def warmup(self) -> list[dict[str, Any]]:
        """Warm-up first steps left out of the analysis: one entry per rank that had one."""
        return [{"rank": r, **rr["steps"].metrics["warmup"]} for r, rr in self.per_rank.items()
                if "steps" in rr and rr["steps"].metrics.get("warmup")]

    @property
    def breakdown(self) -> pd.DataFrame:
        """One row per rank: the five-part partition and the HTA-compatible figures (%)."""
        return pd.DataFrame(self.breakdown_rows, columns=["rank", *BREAKDOWN_KEYS])

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """``"analyzer.table"`` -> DataFrame; per-rank tables concatenated with a rank column."""
        if self._tables is None:
            parts: dict[str, list[pd.DataFrame]] = {}
            for r, rr in self.per_rank.items():
                for res in rr.values():
                    for name, df in res.tables.items():
                        parts.setdefault(f"{res.name}.{name}", []).append(
                            df.assign(rank=r) if "rank" not in df.columns else df)
            out = {k: pd.concat(v, ignore_index=True) if len(v) > 1 else v[0].reset_index(drop=True)
                   for k, v in parts.items()}
            for k, df in out.items():
                out[k] = df[["rank", *[c for c in df.columns if c != "rank"]]]
            for res in self.cluster.values():
                for name, df in res.tables.items():
                    out[f"{res.name}.{name}"] = df
            self._tables = out
        return self._tables

    @property
    def critical_path(self) -> dict[str, Any]:
        """Critical path of the slowest rank: ``components_pct``, ``top_ops`` (+ its metrics)."""
        have = {r: rr["critical_path"] for r, rr in self.per_rank.items() if "critical_path" in rr}
        if not have:
            return {"components_pct": {}, "top_ops": []}

        def slowness(r: int) -> float:
            w = self.per_rank[r]["steps"].tables["windows"]
            return float(w["dur_ns"].median()) if len(w) else 0.0

        r = max(have, key=slowness)
        res = have[r]
        out: dict[str, Any] = {"rank": r}
        out.update({k: v for k, v in res.metrics.items() if not isinstance(v, pd.DataFrame)})
        out.setdefault("components_pct", {})
        top = res.tables.get("top_ops")
        out["top_ops"] = top.head(TOP_OPS_N) if isinstance(top, pd.DataFrame) else []
        return jsonable(out)

    def results(self, name: str, rank: int | None = None) -> AnalyzerResult:
        """One analyzer's result: of ``rank`` (default: the first) or of a cluster analyzer."""
        if name in self.cluster:
            return self.cluster[name]
        r = self.ranks[0] if rank is None and self.ranks else rank
        try:
            return self.per_rank[r][name]  # type: ignore[index]
        except KeyError:
            have = sorted({n for rr in self.per_rank.values() for n in rr} | set(self.cluster))
            raise UsageError(f"no result {name!r} for rank {r}",
                             hint=f"analyzers: {', '.join(have)}") from None

    def with_findings(self, findings: list[Finding]) -> Analysis:
        """The same analysis with other findings (the advisor's, with recommendations)."""
        return replace(self, findings=findings)

    def finding(self, fid: str) -> Finding | None:
        """The top finding with id ``fid`` (e.g. ``"io.slow_data_processing"``), if any."""
        return next((f for f in self.findings if f.id == fid), None)

    @property
    def computation(self) -> dict[str, Any]:
        """Model FLOPs utilization and achieved TFLOP/s per rank, and the top kernels over all
        ranks (``nsys stats``' kernel summary: count, total, mean, max, share, family, bound)."""
        per_rank = [{"rank": r, **{k: rr["computation"].metrics.get(k) for k in MFU_KEYS}}
                    for r, rr in self.per_rank.items() if "computation" in rr]
        per_rank = [row for row in per_rank if row.get("achieved_tflops") is not None]
        k = self.tables.get("computation.kernels")
        top: list[dict[str, Any]] = []
        if k is not None and len(k):
            g = k.groupby("name", sort=False)
            agg = pd.DataFrame({"count": g["count"].sum(), "total_ns": g["total_ns"].sum(),
                                "max_ns": g["max_ns"].max(), "family": g["family"].first(),
                                "bound": g["bound"].first()})
            agg["mean_ns"] = agg["total_ns"] / agg["count"]
            agg["share_pct"] = 100.0 * agg["total_ns"] / max(float(agg["total_ns"].sum()), 1.0)
            agg = agg.sort_values("total_ns", ascending=False, kind="stable").head(TOP_KERNELS_N)
            top = agg.reset_index()[["name", *KERNEL_KEYS]].to_dict("records")
        return {"per_rank": per_rank, "top_kernels": top}

    @property
    def memory(self) -> list[dict[str, Any]]:
        """Peak device memory per rank (bytes), for ranks whose trace has memory samples."""
        return [{"rank": r, **{k: rr["memory"].metrics[k] for k in MEMORY_KEYS}}
                for r, rr in self.per_rank.items()
                if "memory" in rr and rr["memory"].metrics.get("samples")]

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        comp = self.computation
        if comp["per_rank"] or comp["top_kernels"]:
            extra["computation"] = comp
        if self.memory:
            extra["memory"] = {"per_rank": self.memory}
        if self.missing_ranks:  # only a partial analysis has the key: complete ones are unchanged
            extra["missing_ranks"] = self.missing_ranks
        return jsonable({
            "schema": SCHEMA,
            "source": getattr(self.meta, "source", None),
            "ranks": self.ranks,
            "steps": self.steps,
            "warmup": self.warmup,
            "bound": self.bound,
            "verdict": self.verdict.to_dict(),
            "breakdown": {"per_rank": self.breakdown_rows},
            "critical_path": self.critical_path,
            "findings": [f.to_dict() for f in self.findings],
            **extra,
        })

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent) + "\n"

    def __repr__(self) -> str:
        st = self.steps
        top = ", ".join(f"{f.id} {100 * f.time_share:.1f}%" for f in self.findings[:3]) or "none"
        return (f"<Analysis ranks={len(self.ranks)} steps={st['count']} "
                f"median={st['median_ms']:.3f}ms bound={self.bound} top: {top}>")
