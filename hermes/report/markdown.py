"""The Markdown report (``--format md``): for a pull-request comment or a CI summary."""

from __future__ import annotations

from typing import Any

from hermes.advisor import Advice
from hermes.analyzers.engine.result import Analysis, missing_what, missing_why
from hermes.report.common import (
    CP_LABELS,
    DEFAULT_TOP,
    HTA,
    KERNEL_HEADER,
    OPERATOR_HEADER,
    PARTS,
    across_ranks_text,
    cpu_part_rows,
    device_text,
    dtype_mix_text,
    estimate_text,
    explained_pct_text,
    explained_text,
    kernel_rows,
    mfu_text,
    operator_rows,
    operators_title,
    run_kind_text,
    summary_ranks_text,
    top_ops,
    warmup_text,
)


def _md_escape(s: Any) -> str:
    """Table-safe text: ``|`` would split the cell; ``<`` and ``>`` would be taken for HTML
    (GitHub drops ``<script>``, and a C++ template argument list vanishes)."""
    return str(s).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _md_rec(r: dict[str, Any]) -> str:
    opt = f" (`hermes emulate --opt {r['emulator_opt']}`)" if r.get("emulator_opt") else ""
    return (f"**{_md_escape(r['optimization'])}** — estimated {r['estimated_speedup']:.2f}×"
            f"{estimate_text(r)}"
            f"{opt}: {_md_escape(r['how'])}")


def render_md(analysis: Analysis, advice: Advice, top: int = DEFAULT_TOP) -> str:
    d = advice.attach(analysis).to_dict()
    st = d["steps"]
    out = ["# Hermes analysis", "",
           f"- ranks: {len(d['ranks'])}; steps: {st['count']} (per step: median "
           f"{st['median_ms']:.3f} ms, p90 {st['p90_ms']:.3f} ms)",
           *[f"- warm-up left out: {warmup_text(w)}" for w in d.get("warmup", [])],
           *[f"- **missing {_md_escape(missing_what(m))}**: {_md_escape(missing_why(m))}"
             for m in d.get("missing_ranks", ())],
           f"- **bound: {d['bound']}** ({explained_pct_text(d['verdict'])}) — "
           f"{_md_escape(d['verdict']['reason'])}",
           f"- verdict accounting: {_md_escape(explained_text(d['verdict']))}",
           *([f"- **run:** {_md_escape(run_kind_text(d))}"] if run_kind_text(d) else []), ""]
    rows = d["breakdown"]["per_rank"]
    if cpu_part_rows(d):
        out += ["## Where the CPU's time goes (% of step wall time, mean over ranks)", "",
                "| part | % of step |", "|---|---:|"]
        out += [f"| {_md_escape(label)} | {pct:.1f} |" for label, pct in cpu_part_rows(d)]
        if operator_rows(d, 10):
            out += ["", f"{operators_title(d)}:", "",
                    "| " + " | ".join(OPERATOR_HEADER) + " |", "|---|---:|---:|---:|"]
            out += ["| " + " | ".join(_md_escape(c) for c in r) + " |"
                    for r in operator_rows(d, 10)]
        out.append("")
    elif rows:
        out += ["## Breakdown (% of step wall time, mean over steps)", "",
                "| rank | " + " | ".join(label for _, label in PARTS + HTA) + " |",
                "|---:|" + "---:|" * len(PARTS + HTA)]
        for r in rows:
            out.append(f"| {r['rank']} | " + " | ".join(
                f"{float(r.get(k) or 0):.1f}" for k, _ in PARTS + HTA) + " |")
        if summary_ranks_text(rows):
            out += ["", summary_ranks_text(rows).capitalize() + "."]
        out.append("")
    comp = d.get("computation") or {}
    if device_text(d):
        out.append(f"- device: {device_text(d)}")
    if dtype_mix_text(comp):
        out.append(f"- matmul dtypes: {dtype_mix_text(comp)}")
    if (device_text(d) or dtype_mix_text(comp)) and not mfu_text(comp):
        out.append("")
    if mfu_text(comp):
        out += [f"- computation: {mfu_text(comp)}", ""]
    if comp.get("top_kernels"):
        out += ["## Top kernels (all ranks, total over the capture)", "",
                "| " + " | ".join(KERNEL_HEADER) + " |", "|---|" + "---:|" * 4 + "---|---|"]
        out += ["| " + " | ".join(_md_escape(c) for c in r) + " |"
                for r in kernel_rows(comp, 10)]
        out.append("")
    out += ["## Findings", ""]
    if not d["findings"]:
        out.append("No findings.")
    else:
        out += ["| # | id | severity | share of step | summary | top operators |",
                "|---:|---|---|---:|---|---|"]
        for i, f in enumerate(d["findings"][:top], 1):
            out.append(f"| {i} | `{f['id']}` | {f['severity']} | {100 * f['time_share']:.1f}% | "
                       f"{_md_escape(f['summary'])} | {_md_escape(top_ops(f['evidence']))} |")
        with_recs = [f for f in d["findings"][:top] if f["recommendations"]]
        if with_recs:
            out += ["", "## Recommendations", ""]
        for f in with_recs:  # the best recommendation of each finding, then the others
            r, *others = f["recommendations"]
            out.append(f"- `{f['id']}` → {_md_rec(r)}")
            out += [f"  - also: {_md_rec(o)}" for o in others]
    cp = d["critical_path"]
    if cp.get("components_pct"):
        out += ["", f"## Critical path (rank {cp.get('rank')})", "",
                ", ".join(f"{CP_LABELS.get(k, k)} {float(v):.1f}%"
                          for k, v in cp["components_pct"].items())]
    if across_ranks_text(cp):
        out += ["", across_ranks_text(cp)]
    return "\n".join(out) + "\n"
