"""Findings of all ranks and analyzers made into the run's findings.

Symptoms are first folded into the cause that explains them (``fold_symptoms``: a slow node
explains its own frequency drop and the other ranks' waits for it). Findings of the same id from
several ranks or analyzers are then merged into one (``merge_findings``; sub-causes, e.g. of
underutilization, live in its evidence): its ``time_share`` is the **maximum** over ranks — in
synchronous training the slowest rank sets the pace, so the worst rank's loss is the run's loss —
its evidence is that of the rank with the maximum, plus ``per_rank_share`` when more than one rank
has it; ``ranks`` and ``steps`` are the unions.
"""

from __future__ import annotations

from collections.abc import Iterable

from hermes.findings import MIN_SHARE, Finding


def merge_findings(groups: Iterable[Iterable[Finding]]) -> list[Finding]:
    """Merge findings of the same id across ranks/analyzers: max share (see module)."""
    by_key: dict[str, list[Finding]] = {}
    for fs in groups:
        for f in fs:
            by_key.setdefault(f.id, []).append(f)
    out: list[Finding] = []
    for fs in by_key.values():
        best = max(fs, key=lambda f: f.time_share)
        if len(fs) == 1:
            out.append(best)
            continue
        ranks = tuple(sorted({r for f in fs for r in f.ranks}))
        steps = tuple(sorted({s for f in fs for s in f.steps}))
        evidence = dict(best.evidence)
        if len(ranks) > 1:
            share: dict[str, float] = {}
            for f in fs:
                for r in f.ranks:
                    share[str(r)] = max(share.get(str(r), 0.0), round(f.time_share, 6))
            evidence["per_rank_share"] = share
        out.append(Finding(best.category, best.cause, best.time_share, best.summary, evidence,
                           ranks, steps, recommendations=best.recommendations))
    out.sort(key=lambda f: (-f.time_share, f.id))
    return out


def _without_frequency_drop(f: Finding, by: Finding) -> Finding | None:
    """A rank's underutilization finding less its frequency drop (explained by ``by``)."""
    causes = dict(f.evidence.get("causes") or {})
    drop = causes.pop("frequency_drop", None)
    if drop is None:
        return f
    share = max(0.0, f.time_share - float(drop.get("share", 0.0)))
    if share < MIN_SHARE and not causes:
        return None
    reason = max(causes, key=lambda x: causes[x]["share"]) if causes else ""
    ev = {**f.evidence, "causes": causes, "reason": reason,
          "explained_by": {by.id: {"frequency_drop": drop}}}
    return Finding(f.category, f.cause, share, f.summary, ev, f.ranks, f.steps,
                   recommendations=f.recommendations)


def fold_symptoms(groups: Iterable[Iterable[Finding]]) -> list[list[Finding]]:
    """Fold symptoms into the cause that explains them, before findings are merged.

    A slow node (``computation.slow_node``, ranks S) explains (1) the frequency drop of its own
    ranks (their ``underutilization`` loses that part) and (2) the other ranks' waits for it:
    a ``synchronization_wait`` whose late ranks are all in S keeps only what exceeds the slow
    node's share. The folded part is recorded in the symptom's evidence (``explained_by``); a
    symptom left below ``MIN_SHARE`` is dropped."""
    groups = [list(fs) for fs in groups]
    slow = [f for fs in groups for f in fs if f.id == "computation.slow_node"]
    if not slow:
        return groups
    by = max(slow, key=lambda f: f.time_share)
    s_ranks = {r for f in slow for r in f.ranks}
    out: list[list[Finding]] = []
    for fs in groups:
        kept: list[Finding] = []
        for f in fs:
            g: Finding | None = f
            if f.id == "computation.underutilization" and f.ranks and \
                    set(f.ranks) <= s_ranks:
                g = _without_frequency_drop(f, by)
            elif f.id == "communication.synchronization_wait" and f.ranks and \
                    set(f.ranks) <= s_ranks:
                share = f.time_share - by.time_share
                g = None if share < MIN_SHARE else Finding(
                    f.category, f.cause, share, f.summary,
                    {**f.evidence, "explained_by": {by.id: round(by.time_share, 6)}},
                    f.ranks, f.steps, recommendations=f.recommendations)
            if g is not None:
                kept.append(g)
        out.append(kept)
    return out


