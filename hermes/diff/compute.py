"""``diff(base, new) -> TraceDiff``: what changed between two runs, and how sure we are.

Step time: median and p90 of each run (a step's time is its slowest rank's), the median ratio
with its bootstrap interval and a two-sided Mann-Whitney p over the steps. Names: every operator,
user range and kernel, its time per step on each side (mean over the matched ranks' steps; a step
where it did not run counts 0), the change, and a Mann-Whitney p over those per-step samples (all
names in one vectorized call). Findings: appeared, disappeared, grew or shrank by share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.engine.result import BREAKDOWN_KEYS, jsonable
from hermes.diff.runs import Run
from hermes.diff.stats import RatioCI, mann_whitney, median_ratio_ci, min_p

SCHEMA = "hermes.diff/1"
#: A finding "grew" (or shrank) when its share of step time moved by at least this much
#: (2 points of step time: below that, shares move with the noise of a few steps).
SHARE_CHANGE = 0.02
#: What happened to a name; "unchanged" rows stay in the JSON, not in the tables.
NAME_STATUSES = ("slower", "faster", "new", "gone", "unchanged")


@dataclass
class StepStats:
    count: int
    median_ms: float
    p90_ms: float

    @classmethod
    def of(cls, ns: np.ndarray) -> StepStats:
        if ns.size == 0:
            return cls(0, float("nan"), float("nan"))
        return cls(int(ns.size), float(np.median(ns) / 1e6), float(np.percentile(ns, 90) / 1e6))


@dataclass
class TraceDiff:
    """Everything ``hermes diff`` reports; ``to_dict()`` is its JSON document."""

    base_label: str
    new_label: str
    ranks: list[int]
    only_base_ranks: list[int]
    only_new_ranks: list[int]
    base_steps: StepStats
    new_steps: StepStats
    ci: RatioCI
    p_value: float
    min_p: float
    #: per breakdown key: ``key, base, new, change`` (percent of step time, mean over ranks)
    breakdown: pd.DataFrame
    #: per name: ``category, name, status, base_us, new_us, change_us, change_pct, base_calls,
    #: new_calls, p_value, base_raw, new_raw``, sorted by |change_us| (per step, per rank)
    names: pd.DataFrame
    #: per finding id: ``id, status, base_share, new_share, change, severity``
    findings: list[dict[str, Any]] = field(default_factory=list)
    #: each run's ranks (or files) its analysis left out (``Analysis.missing_ranks``)
    base_missing: list[dict[str, Any]] = field(default_factory=list)
    new_missing: list[dict[str, Any]] = field(default_factory=list)

    @property
    def median_change(self) -> float:
        return self.ci.ratio - 1.0

    @property
    def p90_change(self) -> float:
        b, n = self.base_steps.p90_ms, self.new_steps.p90_ms
        return n / b - 1.0 if b else float("nan")

    def changed(self, limit: int | None = None) -> pd.DataFrame:
        """Names that changed (any status but unchanged), largest change first."""
        out = self.names[self.names["status"] != "unchanged"]
        return out if limit is None else out.head(limit)

    def to_dict(self) -> dict[str, Any]:
        return jsonable({
            "schema": SCHEMA,
            "base": self.base_label, "new": self.new_label,
            "ranks": {"matched": self.ranks, "only_base": self.only_base_ranks,
                      "only_new": self.only_new_ranks,
                      # (present only for a partial run: complete documents are unchanged)
                      **({"missing_base": self.base_missing} if self.base_missing else {}),
                      **({"missing_new": self.new_missing} if self.new_missing else {})},
            "steps": {"base": vars(self.base_steps), "new": vars(self.new_steps),
                      "median_change": self.median_change, "p90_change": self.p90_change,
                      "median_ratio_ci": self.ci.to_dict(), "p_value": self.p_value,
                      "min_p": self.min_p},
            "breakdown": self.breakdown,
            "names": self.names,
            "findings": self.findings,
        })


def _breakdown(base: Run, new: Run, ranks: list[int]) -> pd.DataFrame:
    def mean(run: Run) -> pd.Series:
        df = run.analysis.breakdown
        df = df[df["rank"].isin(ranks)] if len(df) else df
        return df[list(BREAKDOWN_KEYS)].astype(float).mean() if len(df) else \
            pd.Series(np.nan, index=list(BREAKDOWN_KEYS))

    b, n = mean(base), mean(new)
    return pd.DataFrame({"key": list(BREAKDOWN_KEYS), "base": b.to_numpy(),
                         "new": n.to_numpy(), "change": (n - b).to_numpy()})


def _samples(run: Run, ranks: list[int], index: pd.MultiIndex) -> tuple[np.ndarray, np.ndarray]:
    """(per-step time matrix: one row per name in ``index``, one column per (rank, step);
    mean calls per step per name)."""
    w = run.windows[run.windows["rank"].isin(ranks)]
    slots = pd.MultiIndex.from_arrays([w["rank"].to_numpy(), w["ordinal"].to_numpy()])
    t = run.totals[run.totals["rank"].isin(ranks)]
    if not len(slots):
        return np.zeros((len(index), 0)), np.zeros(len(index))
    wide = t.pivot_table(index=["category", "name"], columns=["rank", "ordinal"],
                         values="dur_ns", aggfunc="sum", fill_value=0, observed=True)
    wide = wide.reindex(index=index, columns=slots, fill_value=0)
    calls = t.groupby(["category", "name"], observed=True)["calls"].sum()
    calls = calls.reindex(index, fill_value=0).to_numpy(np.float64) / len(slots)
    return wide.to_numpy(np.float64), calls


def _status(b: np.ndarray, n: np.ndarray) -> np.ndarray:
    # a move under 0.5 % of the name's own time (or 1 ns) is rounding, not a change; whether a
    # change is more than noise is the p-value's to say, not the status's
    eps = np.maximum(5e-3 * np.maximum(b, n), 1e-3)
    return np.select([(b == 0) & (n > 0), (n == 0) & (b > 0), n - b > eps, b - n > eps],
                     ["new", "gone", "slower", "faster"], "unchanged")


def _names(base: Run, new: Run, ranks: list[int]) -> pd.DataFrame:
    keys = pd.concat([base.totals[["category", "name"]], new.totals[["category", "name"]]])
    keys = keys.drop_duplicates().sort_values(["category", "name"])
    index = pd.MultiIndex.from_frame(keys)
    bm, bc = _samples(base, ranks, index)
    nm, nc = _samples(new, ranks, index)
    b_us = bm.mean(axis=1) / 1e3 if bm.shape[1] else np.zeros(len(index))
    n_us = nm.mean(axis=1) / 1e3 if nm.shape[1] else np.zeros(len(index))
    change = n_us - b_us
    df = pd.DataFrame({
        "category": keys["category"].to_numpy(), "name": keys["name"].to_numpy(),
        "status": _status(b_us, n_us), "base_us": b_us, "new_us": n_us,
        "change_us": change,
        "change_pct": np.where(b_us > 0, 100 * change / np.where(b_us > 0, b_us, 1), np.nan),
        "base_calls": bc, "new_calls": nc,
        "p_value": mann_whitney(bm, nm) if len(index) else np.zeros(0),
    })
    df["base_raw"] = [base.raw_names.get(k, "") for k in zip(df["category"], df["name"],
                                                           strict=True)]
    df["new_raw"] = [new.raw_names.get(k, "") for k in zip(df["category"], df["name"],
                                                         strict=True)]
    order = np.argsort(-np.abs(change), kind="stable")
    return df.iloc[order].reset_index(drop=True)


def _findings(base: Run, new: Run) -> list[dict[str, Any]]:
    b = {f.id: f for f in base.analysis.findings}
    n = {f.id: f for f in new.analysis.findings}
    rows = []
    for fid in sorted(set(b) | set(n)):
        sb = b[fid].time_share if fid in b else 0.0
        sn = n[fid].time_share if fid in n else 0.0
        if fid not in b:
            status = "appeared"
        elif fid not in n:
            status = "disappeared"
        elif sn - sb >= SHARE_CHANGE:
            status = "grew"
        elif sb - sn >= SHARE_CHANGE:
            status = "shrank"
        else:
            status = "same"
        sev = (n.get(fid) or b[fid]).severity
        rows.append({"id": fid, "status": status, "base_share": sb, "new_share": sn,
                     "change": sn - sb, "severity": sev})
    rows.sort(key=lambda r: -abs(r["change"]))
    return rows


def diff(base: Run, new: Run) -> TraceDiff:
    """Compare two loaded runs (:func:`hermes.diff.runs.open_runs`)."""
    ranks = sorted(set(base.ranks) & set(new.ranks))
    bs, ns = base.step_times(ranks), new.step_times(ranks)
    ci = median_ratio_ci(bs, ns)
    p = float(mann_whitney(bs, ns)[0]) if bs.size and ns.size else float("nan")
    base_steps = StepStats.of(bs)
    return TraceDiff(
        base_label=base.label, new_label=new.label, ranks=ranks,
        only_base_ranks=sorted(set(base.ranks) - set(ranks)),
        only_new_ranks=sorted(set(new.ranks) - set(ranks)),
        base_steps=base_steps, new_steps=StepStats.of(ns), ci=ci, p_value=p,
        min_p=min_p(bs.size, ns.size), breakdown=_breakdown(base, new, ranks),
        names=_names(base, new, ranks),
        findings=_findings(base, new),
        base_missing=list(base.analysis.missing_ranks),
        new_missing=list(new.analysis.missing_ranks))
