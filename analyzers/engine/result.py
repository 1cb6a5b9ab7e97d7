"""The result of analysis: :class:`Analysis`, and the JSON document it becomes.

``Analysis`` holds every analyzer's per-rank and cluster results, the merged findings, the verdict
and the breakdown rows; ``to_dict()`` / ``to_json()`` build the ``hermes analyze --format json``
document of DESIGN.md (``schema: "hermes.analysis/1"``). Findings carry recommendations only once
the advisor has attached them (``hermes.advisor.Advice.attach``).
"""

from __future__ import annotations

import json
import math
import pickle
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.engine.base import AnalyzerResult
from hermes.analyzers.engine.verdict import Verdict
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
#: The cpu analyzer's causes a CPU-only run's step splits into (``Analysis.cpu``).
CPU_PARTS = ("operator_dispatch", "python", "garbage_collection", "operator_compilation",
             "initialization", "memory_allocation", "environment_configuration",
             "resource_contention", "host_device_sync")
#: Per-rank memory figures of the JSON document (``memory.per_rank``).
MEMORY_KEYS = ("device", "peak_allocated_bytes", "peak_reserved_bytes", "samples")


#: Per-rank tables that stay with the worker when ranks run from a trace path: one row per device
#: task (as many rows as the rank has kernels), read by no cluster analyzer, report or document.
#: An in-memory analysis (``analyze(trace)``, ``run_rank``) keeps them.
WORKER_ONLY = {"computation": ("tasks",)}
#: Ranks whose kernel tables are aggregated together for ``computation.top_kernels`` (bounds the
#: rows concatenated at once).
KERNEL_CHUNK = 64


class PackedTables(Mapping[str, pd.DataFrame]):
    """A rank's tables as compressed pickles, each unpacked (a fresh DataFrame) on access.

    What a worker sends and the driver keeps per rank: ~4x smaller than the DataFrames (strings
    as Python objects), so the driver's memory grows by tens of KiB a rank, not hundreds."""

    __slots__ = ("_packed",)

    def __init__(self, tables: Mapping[str, pd.DataFrame]) -> None:
        self._packed = {k: zlib.compress(pickle.dumps(v, protocol=5), 1)
                        for k, v in tables.items()}

    def __getitem__(self, key: str) -> pd.DataFrame:
        return pickle.loads(zlib.decompress(self._packed[key]))  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)

    @property
    def nbytes(self) -> int:
        return sum(len(b) for b in self._packed.values())


def pack(results: dict[str, AnalyzerResult]) -> dict[str, AnalyzerResult]:
    """One rank's results as the driver keeps them: ``WORKER_ONLY`` tables left out, the others
    packed (:class:`PackedTables`); findings and metrics unchanged. A result already packed is
    left as it is."""
    for name, res in results.items():
        if isinstance(res.tables, PackedTables):
            continue
        drop = WORKER_ONLY.get(name, ())
        res.tables = PackedTables({k: v for k, v in res.tables.items()  # type: ignore[assignment]
                                   if k not in drop})
    return results


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


def unread_file(m: dict[str, Any]) -> str | None:
    """The file a ``missing_ranks`` entry names when its ranks are not known (a directory's
    file whose footer could not be read), else None (the entry is a rank's)."""
    return m.get("file") if m.get("rank") is None else None


def missing_what(m: dict[str, Any]) -> str:
    """What a ``missing_ranks`` entry left out: ``rank N``, or the file of unknown ranks whose
    footer could not be read (``file NAME``)."""
    f = unread_file(m)
    return f"file {f}" if f else f"rank {m['rank']}"


def missing_why(m: dict[str, Any]) -> str:
    """Why a ``missing_ranks`` entry was left out: ``not analyzed (ERROR)`` (``not read``
    for a file)."""
    return f"{'not read' if unread_file(m) else 'not analyzed'} ({m['error']})"


def missing_text(m: dict[str, Any]) -> str:
    """A ``missing_ranks`` entry as a line's text: what was left out, and why."""
    return f"{missing_what(m)}: {missing_why(m)}"


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
    #: Ranks not analyzed after a retry: ``{"rank", "error", "attempts"}`` each (empty: none);
    #: a directory's file whose footer could not be read: ``"rank": None`` and its ``"file"``
    #: name (its ranks are not known)
    missing_ranks: list[dict[str, Any]] = field(default_factory=list)
    _tables: Mapping[str, pd.DataFrame] | None = field(default=None, repr=False)
    #: ``--device NAME``: the device the user says ran the trace (over what the trace shows)
    device_option: str | None = None
    #: what the trace records of an accelerator: ``accelerator``, ``cpu_only`` or
    #: ``device_not_captured`` (``analyzers/common/runkind.py``)
    run_kind: str = "accelerator"
    #: what the analyzers handed to the stages after the analysis (``engine.base.Keep``: the
    #: critical path's step graphs for the advisor's replay); None: nothing
    keep: Any = field(default=None, repr=False, compare=False)

    @property
    def machine(self) -> dict[str, Any]:
        """The device (and how Hermes knows it), the matmul dtype mix and the parallelism the
        trace shows (``analyzers/common/precision.py``): what the advice is fitted to."""
        from hermes.analyzers.common.precision import combine

        return combine(self.per_rank, self.device_option)

    @property
    def bound(self) -> str:
        return self.verdict.bound

    @property
    def unread_files(self) -> list[str]:
        """The trace directory's files that could not be read (``missing_ranks`` entries of
        unknown rank): left out when the trace's events are read again."""
        return [f for m in self.missing_ranks if (f := unread_file(m))]

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
    def tables(self) -> Mapping[str, pd.DataFrame]:
        """``"analyzer.table"`` -> DataFrame; per-rank tables concatenated with a rank column.
        Each is built on first use (a render reads a few of them, never all)."""
        if self._tables is None:
            self._tables = _LazyTables(self)  # type: ignore[assignment]
        return self._tables  # type: ignore[return-value]

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
        across = self.cluster.get("critical_path_cluster")
        if across is not None and across.metrics.get("ranks_on_path"):
            # the job's path through every rank, joined at matched collectives
            out["across_ranks"] = dict(across.metrics)
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
        top: list[dict[str, Any]] = []
        agg = kernel_totals([rr["computation"].tables.get("kernels") for rr in
                              self.per_rank.values() if "computation" in rr])
        if agg is not None and len(agg):
            agg["mean_ns"] = agg["total_ns"] / agg["count"]
            agg["share_pct"] = 100.0 * agg["total_ns"] / max(float(agg["total_ns"].sum()), 1.0)
            agg = agg.sort_values("total_ns", ascending=False, kind="stable").head(TOP_KERNELS_N)
            top = agg.reset_index()[["name", *KERNEL_KEYS]].to_dict("records")
        return {"per_rank": per_rank, "top_kernels": top,
                "matmul_dtypes": self.machine["matmul_mix"]}

    @property
    def memory(self) -> list[dict[str, Any]]:
        """Peak device memory per rank (bytes), for ranks whose trace has memory samples."""
        return [{"rank": r, **{k: rr["memory"].metrics[k] for k in MEMORY_KEYS}}
                for r, rr in self.per_rank.items()
                if "memory" in rr and rr["memory"].metrics.get("samples")]

    @property
    def cpu(self) -> dict[str, Any]:
        """Where a CPU-only run's time goes (empty for another kind of run): ``parts_pct``, the
        step in CPU terms (mean over ranks, % of step time: each host cause's share, data
        waits, communication, time with nothing recorded, other host work), and
        ``operators``, the operators by self time over all ranks (``calls``, ``self_ms``,
        ``share_pct`` of the summed step time), and ``threads``, the most host threads that run
        operators on a rank."""
        if self.run_kind != "cpu_only":
            return {}
        cpus = {r: rr["cpu"] for r, rr in self.per_rank.items() if "cpu" in rr}
        parts: dict[str, float] = {}
        for r, c in cpus.items():
            row = next((b for b in self.breakdown_rows if b.get("rank") == r), {})
            step = float(c.metrics.get("step_total_ns") or 0)
            got = {k: 100.0 * float(c.metrics.get(f"{k}_share") or 0.0) for k in CPU_PARTS}
            got["data_waits"] = 100.0 * float(c.metrics.get("io_wait_ns") or 0) / step \
                if step else 0.0
            got["communication"] = float(row.get("communication_only_pct") or 0.0)
            got["nothing_recorded"] = float(row.get("free_pct") or 0.0)
            got["other_host_work"] = max(0.0, float(row.get("host_bound_pct") or 0.0) - sum(
                v for k, v in got.items() if k not in ("communication", "nothing_recorded")))
            for k, v in got.items():
                parts[k] = parts.get(k, 0.0) + v / len(cpus)
        frames = [c.tables["operators"] for c in cpus.values() if "operators" in c.tables]
        frames = [f for f in frames if len(f)]
        ops: list[dict[str, Any]] = []
        total = sum(float(c.metrics.get("step_total_ns") or 0) for c in cpus.values())
        if frames:
            g = pd.concat(frames, ignore_index=True).groupby("name", sort=False)[
                ["calls", "self_ns"]].sum().sort_values("self_ns", ascending=False,
                                                        kind="stable").head(TOP_OPS_N)
            ops = [{"name": str(n), "calls": int(row["calls"]),
                    "self_ms": round(float(row["self_ns"]) / 1e6, 3),
                    "share_pct": round(100.0 * float(row["self_ns"]) / total, 3) if total
                    else 0.0} for n, row in g.iterrows()]
        threads = max((int((c.metrics.get("cpu_profile") or {}).get("cpu_op_threads") or 0)
                       for c in cpus.values()), default=0)
        return {"parts_pct": {k: round(v, 3) for k, v in parts.items() if v > 0.0005},
                "operators": ops, "threads": threads}

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        cpu = self.cpu
        if cpu:
            extra["cpu"] = cpu
        comp = self.computation
        if comp["per_rank"] or comp["top_kernels"]:
            extra["computation"] = comp
        if self.memory:
            extra["memory"] = {"per_rank": self.memory}
        cc = self.cluster.get("communication_cluster")
        if cc is not None and cc.metrics.get("matched"):
            # collectives matched across ranks, per (group, op): wait, skew, transfer, busbw
            extra["collectives"] = {k: cc.metrics.get(k) for k in (
                "matched", "holding_back", "T_wait_ns", "wait_ns_per_rank", "by_op")}
        if self.missing_ranks:  # only a partial analysis has the key: complete ones are unchanged
            extra["missing_ranks"] = self.missing_ranks
        return jsonable({
            "schema": SCHEMA,
            "source": getattr(self.meta, "source", None),
            "ranks": self.ranks,
            "steps": self.steps,
            "warmup": self.warmup,
            "bound": self.bound,
            "run_kind": self.run_kind,
            "verdict": self.verdict.to_dict(),
            "breakdown": {"per_rank": self.breakdown_rows},
            "critical_path": self.critical_path,
            "findings": [f.to_dict() for f in self.findings],
            "device": {**self.machine["device"], "shown": self.machine["shown"]},
            **extra,
        })

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent) + "\n"

    def __repr__(self) -> str:
        st = self.steps
        top = ", ".join(f"{f.id} {100 * f.time_share:.1f}%" for f in self.findings[:3]) or "none"
        kind = "" if self.run_kind == "accelerator" else f" run_kind={self.run_kind}"
        return (f"<Analysis ranks={len(self.ranks)} steps={st['count']} "
                f"median={st['median_ms']:.3f}ms bound={self.bound} "
                f"explained={self.verdict.explained_pct:.0f}%{kind} top: {top}>")


def _kernel_sums(k: pd.DataFrame) -> pd.DataFrame:
    """Per kernel name (first-seen order): count and total summed, max, first family and bound."""
    g = k.groupby("name", sort=False)
    return pd.DataFrame({"count": g["count"].sum(), "total_ns": g["total_ns"].sum(),
                         "max_ns": g["max_ns"].max(), "family": g["family"].first(),
                         "bound": g["bound"].first()})


def kernel_totals(frames: list[pd.DataFrame | None]) -> pd.DataFrame | None:
    """``_kernel_sums`` of every rank's kernel table, in rank order, ``KERNEL_CHUNK`` ranks at a
    time (sums of integer sums, max of maxima and first of firsts are the one-pass figures)."""
    cols = ["name", "count", "total_ns", "max_ns", "family", "bound"]
    parts = []
    for i in range(0, len(frames), KERNEL_CHUNK):
        chunk = [f[cols] for f in frames[i:i + KERNEL_CHUNK] if f is not None and len(f)]
        if chunk:
            parts.append(_kernel_sums(pd.concat(chunk, ignore_index=True)).reset_index())
    if not parts:
        return None
    return parts[0].set_index("name") if len(parts) == 1 else \
        _kernel_sums(pd.concat(parts, ignore_index=True))


class _LazyTables(Mapping[str, pd.DataFrame]):
    """``Analysis.tables``: each key concatenated over the ranks when first read, then kept."""

    def __init__(self, a: Analysis) -> None:
        self._a = a
        self._done: dict[str, pd.DataFrame] = {}
        names: dict[str, tuple[str, str]] = {}
        for rr in a.per_rank.values():
            for res in rr.values():
                for name in res.tables:
                    names.setdefault(f"{res.name}.{name}", (res.name, name))
        for res in a.cluster.values():
            for name in res.tables:
                names[f"{res.name}.{name}"] = ("", name)
        self._names = names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __getitem__(self, key: str) -> pd.DataFrame:
        if key not in self._done:
            self._done[key] = self._build(key)
        return self._done[key]

    def _build(self, key: str) -> pd.DataFrame:
        analyzer, name = self._names[key]
        if not analyzer:
            return next(res.tables[name] for res in self._a.cluster.values()
                        if f"{res.name}.{name}" == key)
        parts = []
        for r, rr in self._a.per_rank.items():
            for res in rr.values():
                if res.name == analyzer and name in res.tables:
                    df = res.tables[name]
                    parts.append(df.assign(rank=r) if "rank" not in df.columns else df)
        df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else \
            parts[0].reset_index(drop=True)
        return df[["rank", *[c for c in df.columns if c != "rank"]]]
