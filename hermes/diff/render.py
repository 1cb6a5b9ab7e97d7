"""Text, Markdown and JSON renderings of a :class:`~hermes.diff.compute.TraceDiff`.

Every renderer is ``fn(diff, top) -> str``; ``top`` bounds the changed names shown (the JSON
keeps every name). Figures are per step and per rank: a name's time is the mean, over the matched
ranks' analyzed steps, of its total in one step.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from hermes.analyzers.engine.result import missing_text
from hermes.diff.compute import TraceDiff


def fmt_us(us: float) -> str:
    if not math.isfinite(us):
        return "-"
    a = abs(us)
    if a >= 1e6:
        return f"{us / 1e6:.3f} s"
    if a >= 1e3:
        return f"{us / 1e3:.3f} ms"
    return f"{us:.1f} us"


def fmt_pct(x: float, signed: bool = True) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{100 * x:+.1f} %" if signed else f"{100 * x:.1f} %"


def fmt_p(p: float) -> str:
    return "-" if p is None or not math.isfinite(p) else (f"{p:.2g}" if p >= 1e-4 else "<1e-4")


def step_rows(d: TraceDiff) -> list[list[str]]:
    """Rows of the step-time table: what, base, new, change."""
    b, n = d.base_steps, d.new_steps
    return [["steps", str(b.count), str(n.count), ""],
            ["median", fmt_us(b.median_ms * 1e3), fmt_us(n.median_ms * 1e3),
             fmt_pct(d.median_change)],
            ["p90", fmt_us(b.p90_ms * 1e3), fmt_us(n.p90_ms * 1e3), fmt_pct(d.p90_change)]]


def significance_line(d: TraceDiff) -> str:
    ci = d.ci
    level = f"{100 * ci.level:.0f} %"
    text = (f"median ratio {ci.ratio:.3f} ({level} bootstrap interval {ci.lo:.3f}-{ci.hi:.3f}); "
            f"Mann-Whitney U over steps p = {fmt_p(d.p_value)}")
    if d.min_p > 0.05:
        text += (f" (with {d.base_steps.count} and {d.new_steps.count} steps the smallest "
                 f"possible p is {d.min_p:.2g}: too few steps to show significance)")
    return text


def name_rows(d: TraceDiff, top: int) -> list[list[str]]:
    rows = []
    for r in d.changed(top).itertuples(index=False):
        rows.append([r.status, r.category, str(r.name), fmt_us(r.base_us), fmt_us(r.new_us),
                     ("+" if r.change_us > 0 else "") + fmt_us(r.change_us),
                     "-" if pd.isna(r.change_pct) else f"{r.change_pct:+.1f} %",
                     f"{r.base_calls:g} -> {r.new_calls:g}", fmt_p(r.p_value)])
    return rows


NAME_HEAD = ["status", "what", "name", "base/step", "new/step", "change", "change %",
             "calls/step", "p"]
BREAKDOWN_HEAD = ["% of step time", "base", "new", "change (points)"]
FINDING_HEAD = ["finding", "status", "base share", "new share", "change", "severity"]
STEP_HEAD = ["step time", "base", "new", "change"]


def breakdown_rows(d: TraceDiff) -> list[list[str]]:
    def f(x: float, signed: bool = False) -> str:
        return "-" if not math.isfinite(x) else (f"{x:+.1f}" if signed else f"{x:.1f}")
    return [[r.key, f(r.base), f(r.new), f(r.change, True)]
            for r in d.breakdown.itertuples(index=False)]


def finding_rows(d: TraceDiff) -> list[list[str]]:
    return [[f["id"], f["status"], fmt_pct(f["base_share"], False),
             fmt_pct(f["new_share"], False), fmt_pct(f["change"]), f["severity"]]
            for f in d.findings]


def rank_line(d: TraceDiff) -> str:
    def ids(rs: list[int]) -> str:
        return ",".join(map(str, rs)) or "none"
    text = f"ranks matched by id: {ids(d.ranks)}"
    if d.only_base_ranks or d.only_new_ranks:
        text += f"; only in base: {ids(d.only_base_ranks)}; only in new: {ids(d.only_new_ranks)}"
    return text


def missing_lines(d: TraceDiff) -> list[str]:
    """One line per rank (or file) a run's analysis left out: a rank "only in" the other run
    may be one this run could not analyze, not one it lacks."""
    return [f"MISSING in {which}: {missing_text(m)}"
            for which, ms in (("base", d.base_missing), ("new", d.new_missing)) for m in ms]


def _table(head: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(head)]
    out = [indent + "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip()]
    out += [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]
    return out


def render_text(d: TraceDiff, top: int = 20) -> str:
    changed = d.changed()
    lines = [f"hermes diff: {d.base_label} -> {d.new_label}", rank_line(d),
             *missing_lines(d), ""]
    lines += _table(STEP_HEAD, step_rows(d))
    lines += ["  " + significance_line(d), ""]
    lines += _table(BREAKDOWN_HEAD, breakdown_rows(d)) + [""]
    lines.append(f"changed operators and kernels: {len(changed)} of {len(d.names)} "
                 f"(per step and rank; largest change first; top {min(top, len(changed))})")
    lines += _table(NAME_HEAD, name_rows(d, top)) if len(changed) else ["  none"]
    lines += ["", "findings:"]
    lines += _table(FINDING_HEAD, finding_rows(d)) if d.findings else ["  none in either run"]
    return "\n".join(lines) + "\n"


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    return out


def render_md(d: TraceDiff, top: int = 20) -> str:
    changed = d.changed()
    missing = [f"- **{_md_cell(m)}**" for m in missing_lines(d)]
    lines = [f"## hermes diff: `{d.base_label}` → `{d.new_label}`", "", rank_line(d), "",
             *missing, *([""] if missing else [])]
    lines += md_table(STEP_HEAD, step_rows(d)) + ["", significance_line(d), ""]
    lines += ["### Breakdown", ""] + md_table(BREAKDOWN_HEAD, breakdown_rows(d)) + [""]
    lines += [f"### Changed operators and kernels ({len(changed)} of {len(d.names)}; "
              f"per step and rank)", ""]
    lines += md_table(NAME_HEAD, name_rows(d, top)) if len(changed) else ["none"]
    lines += ["", "### Findings", ""]
    lines += md_table(FINDING_HEAD, finding_rows(d)) if d.findings else ["none in either run"]
    return "\n".join(lines) + "\n"


def render_json(d: TraceDiff, top: int = 20) -> str:
    doc: dict[str, Any] = d.to_dict()
    return json.dumps(doc, indent=2) + "\n"
