"""``check(new, baselines, ...) -> Verdict``: the gates of ``hermes check``.

The regression gate (see docs/ci.md for why this test): a run fails when its median step time
is above the baseline's by more than the allowed regression *and* the slowdown is significant:

* significance: one-sided Mann-Whitney U over the step times (new slower than baseline), p < alpha;
* size: the one-sided upper (1 - alpha) bootstrap bound of median(new) / median(baseline) is
  past ``1 + threshold`` — at the same alpha, the data cannot show the regression is within
  the allowed size (a slowdown of exactly the allowed size fails, not one time in two);
* threshold: ``max_regression``, widened to the history's own spread when several baselines are
  given (their steps are pooled; a run fails only when it lies outside what the history did);
* too few steps for the test to ever reach alpha (the smallest p an exact test can give with
  n1 and n2 steps is above alpha, asv's guard): the point estimate alone decides, flagged.

Budget gates compare the new run's figures with the limits of a :class:`Budget`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hermes.analyzers.engine.result import missing_text
from hermes.check.budget import LIMITS, Budget
from hermes.diff.compute import TraceDiff, diff
from hermes.diff.runs import Run
from hermes.diff.stats import mann_whitney, median_ratio_ci, min_p

PASS, FAIL, SKIP = "pass", "fail", "skip"
#: Operators/kernels named as responsible for a failed regression gate.
RESPONSIBLE_N = 5


@dataclass
class Gate:
    name: str
    status: str
    summary: str
    kind: str = "budget"
    #: decided without a significance test (too few steps), or another caveat
    flagged: bool = False
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Verdict:
    new_label: str
    baseline_labels: list[str]
    gates: list[Gate]
    #: the operators/kernels that got slower or appeared, against the last baseline
    responsible: list[dict[str, Any]] = field(default_factory=list)
    diff: TraceDiff | None = None

    @property
    def failed(self) -> list[Gate]:
        return [g for g in self.gates if g.status == FAIL]

    @property
    def exit_code(self) -> int:
        """0 every gate passed (or was skipped), 1 a regression or a broken budget."""
        return 1 if self.failed else 0

    @property
    def status(self) -> str:
        return FAIL if self.failed else PASS


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %" if math.isfinite(x) else "-"


def regression_gate(new: Run, baselines: list[Run], max_regression: float,
                    alpha: float) -> Gate:
    runs = [b.step_times() for b in baselines]
    pooled = np.concatenate(runs) if runs else np.zeros(0)
    ns = new.step_times()
    if pooled.size == 0 or ns.size == 0:
        return Gate("step_time_regression", SKIP, "no analyzed steps to compare",
                    kind="regression", flagged=True)
    med = float(np.median(pooled))
    spread = max((float(np.median(r)) / med - 1 for r in runs if r.size), default=0.0)
    threshold = max(max_regression, spread) if len(runs) > 1 else max_regression
    ci = median_ratio_ci(pooled, ns, level=1 - 2 * alpha)  # its hi: the one-sided bound
    p = float(mann_whitney(pooled, ns, alternative="less")[0])
    floor = min_p(pooled.size, ns.size, alternative="less")
    testable = floor <= alpha
    if testable:
        failed = p < alpha and ci.hi > 1 + threshold
    else:
        failed = ci.ratio > 1 + threshold
    details = {"base_median_ms": med / 1e6, "new_median_ms": float(np.median(ns)) / 1e6,
               "ratio": ci.ratio, "ci_lo": ci.lo, "ci_hi": ci.hi, "ci_level": ci.level,
               "p_value": p, "alpha": alpha, "min_p": floor, "threshold": threshold,
               "max_regression": max_regression, "history_spread": spread,
               "base_steps": int(pooled.size), "new_steps": int(ns.size),
               "baselines": len(runs), "tested": testable}
    text = (f"median {med / 1e6:.3f} -> {np.median(ns) / 1e6:.3f} ms "
            f"({_pct(ci.ratio - 1)}, {100 * ci.level:g} % CI {_pct(ci.lo - 1)} .. "
            f"{_pct(ci.hi - 1)}); "
            f"limit {_pct(threshold)}")
    if len(runs) > 1:
        text += f" (history of {len(runs)} runs, spread {_pct(spread)})"
    if testable:
        text += f"; Mann-Whitney p = {p:.2g} (alpha {alpha:g})"
    else:
        text += (f"; too few steps for the test ({pooled.size} vs {ns.size}: smallest possible "
                 f"p {floor:.2g} > alpha {alpha:g}) - decided on the threshold alone")
    return Gate("step_time_regression", FAIL if failed else PASS, text, kind="regression",
                flagged=not testable, details=details)


def figures(run: Run) -> dict[str, float | None]:
    """The budgeted figures of a run (None: not measured). Per-rank figures take the worst
    rank: a budget holds for every rank or it does not hold."""
    a = run.analysis
    bd = a.breakdown

    def worst(col: str) -> float | None:
        if col not in bd.columns or not bd[col].notna().any():
            return None
        return float(bd[col].max())

    mfus = [rr["computation"].metrics.get("mfu") for rr in a.per_rank.values()
            if "computation" in rr]
    mfus = [float(m) for m in mfus if isinstance(m, (int, float)) and math.isfinite(m)]
    st = run.step_times()
    return {"step_ms": float(np.median(st)) / 1e6 if st.size else None,
            "host_bound_pct": worst("host_bound_pct"),
            "exposed_comm_pct": worst("communication_only_pct"),
            "mfu": min(mfus) if mfus else None}


def budget_gates(new: Run, baselines: list[Run], budget: Budget) -> list[Gate]:
    gates: list[Gate] = []
    have = figures(new)
    for key, limit in budget.limits.items():
        fig, sense, _, _ = LIMITS[key]
        value = have[fig]
        name = f"budget.{key}"
        if value is None:
            required = fig in budget.require
            gates.append(Gate(name, FAIL if required else SKIP,
                              f"{fig} not measured in this trace" +
                              (" (required by the budget)" if required else ""), flagged=True))
            continue
        ok = value <= limit if sense == "max" else value >= limit
        gates.append(Gate(name, PASS if ok else FAIL,
                          f"{fig} {value:.4g} ({sense} {limit:g})",
                          details={"value": value, "limit": limit}))
    for fig in budget.require:  # required but no limit on it: measured is all it asks
        if not any(LIMITS[k][0] == fig for k in budget.limits) and have[fig] is None:
            gates.append(Gate(f"budget.require.{fig}", FAIL, f"{fig} not measured", flagged=True))
    shares = {f.id: f for f in new.analysis.findings}
    if budget.no_new_high_findings:
        known = {f.id for b in baselines for f in b.analysis.findings}
        high = [f for f in new.analysis.findings if f.severity == "high" and f.id not in known]
        text = ", ".join(f"{f.id} {100 * f.time_share:.1f} %" for f in high) or "none"
        gates.append(Gate("budget.no_new_high_findings", FAIL if high else PASS,
                          f"new high-severity findings: {text}",
                          details={"findings": [f.id for f in high]}))
    for fid, cap in budget.finding_caps.items():
        share = shares[fid].time_share if fid in shares else 0.0
        gates.append(Gate(f"budget.finding.{fid}", PASS if share <= cap else FAIL,
                          f"{fid} costs {100 * share:.1f} % of step time (max "
                          f"{100 * cap:.1f} %)", details={"share": share, "limit": cap}))
    return gates


def responsible(d: TraceDiff, n: int = RESPONSIBLE_N) -> list[dict[str, Any]]:
    """The kernels, then the operators and user ranges, that added the most time per step
    (slower or new): up to ``n`` of each, most first."""
    rows = d.names[d.names["status"].isin(("slower", "new")) & (d.names["change_us"] > 0)]
    rows = rows.sort_values("change_us", ascending=False)
    out = []
    for cat in ("kernel", "operator", "range"):
        for r in rows[rows["category"] == cat].head(n).itertuples(index=False):
            out.append({"category": r.category, "name": r.name, "raw": r.new_raw or r.base_raw,
                        "base_us": float(r.base_us), "new_us": float(r.new_us),
                        "change_us": float(r.change_us), "p_value": float(r.p_value)})
    return out


def coverage_gate(new: Run, baselines: list[Run], allow_missing: bool = False) -> Gate | None:
    """``ranks_analyzed``: fails when a run's analysis left ranks (or unreadable files) out
    -- its figures are not the whole run's, so the other gates would compare unlike things --
    unless ``allow_missing`` (then it passes, flagged, naming them); None when none did."""
    named = [f"{label}: {missing_text(m)}" for label, run in
             (("new run", new), *((f"baseline {b.label}", b) for b in baselines))
             for m in run.analysis.missing_ranks]
    if not named:
        return None
    summary = "; ".join(named)
    if allow_missing:
        return Gate("ranks_analyzed", PASS, f"{summary} (accepted: --allow-missing)",
                    kind="coverage", flagged=True)
    return Gate("ranks_analyzed", FAIL, f"{summary} (--allow-missing to gate on the others)",
                kind="coverage")


def check(new: Run, baselines: list[Run], max_regression: float = 0.05, alpha: float = 0.01,
          budget: Budget | None = None, allow_missing: bool = False) -> Verdict:
    """Every gate: the regression gate when baselines are given, the budget's gates when a
    budget is, and :func:`coverage_gate` when a run is only partly analyzed.
    ``Verdict.exit_code`` is the CI exit code (0 pass, 1 fail)."""
    gates: list[Gate] = []
    coverage = coverage_gate(new, baselines, allow_missing)
    if coverage is not None:
        gates.append(coverage)
    d = None
    if baselines:
        gates.append(regression_gate(new, baselines, max_regression, alpha))
        d = diff(baselines[-1], new)
    if budget is not None:
        gates += budget_gates(new, baselines, budget)
    failed = any(g.status == FAIL and g.kind == "regression" for g in gates)
    return Verdict(new_label=new.label, baseline_labels=[b.label for b in baselines],
                   gates=gates, responsible=responsible(d) if d is not None and failed else [],
                   diff=d)
