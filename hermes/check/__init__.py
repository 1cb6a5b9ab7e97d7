"""The CI gate: ``hermes check NEW --baseline BASE [--budget FILE.toml]``.

``check_paths(new, baselines, ...)`` loads the runs (importing profiler output on the fly) and
returns a :class:`Verdict` whose ``exit_code`` is 0 (pass) or 1 (regression or budget broken);
bad input raises a :class:`~hermes.errors.HermesError` (exit 2). Renderers: terminal, JUnit XML,
Markdown (:mod:`hermes.check.output`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hermes.check.budget import Budget, BudgetError, load_budget, parse_budget
from hermes.check.gates import Gate, Verdict, check
from hermes.check.output import render_junit, render_markdown, render_terminal
from hermes.diff.runs import open_runs


def check_paths(new: str | Path, baselines: Sequence[str | Path], max_regression: float = 0.05,
                alpha: float = 0.01, budget: Budget | str | Path | None = None,
                allow_missing: bool = False) -> Verdict:
    """:func:`check` on runs given by path; ``budget`` may be a file path."""
    if budget is not None and not isinstance(budget, Budget):
        budget = load_budget(budget)
    paths = [Path(new), *(Path(b) for b in baselines)]
    with open_runs(paths) as runs:
        return check(runs[0], runs[1:], max_regression, alpha, budget, allow_missing)


__all__ = ["Budget", "BudgetError", "Gate", "Verdict", "check", "check_paths", "load_budget",
           "parse_budget", "render_junit", "render_markdown", "render_terminal"]
