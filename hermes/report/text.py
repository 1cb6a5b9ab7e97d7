"""The terminal report (``--format text``): verdict, breakdown bars, findings, critical path."""

from __future__ import annotations

from hermes.advisor import Advice
from hermes.analyzers.engine.result import Analysis, missing_text
from hermes.report.common import (
    CP_LABELS,
    DEFAULT_TOP,
    HTA,
    KERNEL_HEADER,
    OPERATOR_HEADER,
    PARTS,
    across_ranks_text,
    bar,
    cpu_part_rows,
    device_text,
    dtype_mix_text,
    explained_pct_text,
    explained_text,
    kernel_rows,
    mean_breakdown,
    mfu_text,
    operator_rows,
    operators_title,
    ranks_text,
    run_kind_text,
    short_name,
    summary_ranks_text,
    top_ops,
    warmup_text,
)


def render_text(analysis: Analysis, advice: Advice, top: int = DEFAULT_TOP) -> str:
    d = advice.attach(analysis).to_dict()
    st = d["steps"]
    v = d["verdict"]
    rows = d["breakdown"]["per_rank"]
    lines = [f"Hermes analysis — {len(d['ranks'])} rank(s), {st['count']} step(s), "
             f"median {st['median_ms']:.3f} ms, p90 {st['p90_ms']:.3f} ms"]
    lines += [f"Warm-up left out: {warmup_text(w)}" for w in d.get("warmup", [])]
    lines += [f"MISSING {missing_text(m)}" for m in d.get("missing_ranks", ())]
    lines += ["", f"Verdict: {d['bound'].upper()}-bound ({explained_pct_text(v)}) — "
                  f"{v['reason']}", f"  {explained_text(v)}"]
    if run_kind_text(d):
        lines.append(f"Run: {run_kind_text(d)}")
    lines.append("")
    if cpu_part_rows(d):
        lines.append("Where the CPU's time goes (mean over ranks, % of step wall time):")
        lines += [f"  {label:<28} {pct:6.1f}%  {bar(pct)}" for label, pct in cpu_part_rows(d)]
        ops = [OPERATOR_HEADER, *operator_rows(d, 10)]
        if len(ops) > 1:
            widths = [max(len(r[i]) for r in ops) for i in range(len(OPERATOR_HEADER))]
            lines.append(f"  {operators_title(d)}:")
            lines += ["    " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w)
                                         in enumerate(zip(r, widths, strict=True))).rstrip()
                      for r in ops]
        lines.append("")
    elif rows:
        lines.append("Step time breakdown (mean over ranks, % of step wall time):")
        for key, label in PARTS:
            pct = mean_breakdown(rows, key)
            lines.append(f"  {label:<20} {pct:6.1f}%  {bar(pct)}")
        hta = ", ".join(f"{label} {mean_breakdown(rows, k):.1f}%" for k, label in HTA)
        lines.append(f"  HTA-compatible: {hta}")
        if summary_ranks_text(rows):  # parts from the vendor's step summary: no timeline
            lines.append(f"  {summary_ranks_text(rows)}")
        lines.append("")
    comp = d.get("computation") or {}
    if device_text(d):
        lines.append(f"Device: {device_text(d)}")
    if dtype_mix_text(comp):
        lines.append(f"Matmul dtypes: {dtype_mix_text(comp)}")
    if device_text(d) or dtype_mix_text(comp):
        lines.append("")
    if mfu_text(comp):
        lines += [f"Computation: {mfu_text(comp)}", ""]
    if comp.get("top_kernels"):
        rows = [KERNEL_HEADER, *kernel_rows(comp, 5)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(KERNEL_HEADER))]
        lines.append("Top kernels (all ranks, total over the capture):")
        for r in rows:
            cells = [c.ljust(w) if i in (0, 5, 6) else c.rjust(w)
                     for i, (c, w) in enumerate(zip(r, widths, strict=True))]
            lines.append(("  " + "  ".join(cells)).rstrip())
        lines.append("")
    findings = d["findings"]
    lines.append(f"Findings ({len(findings)}; top {min(top, len(findings))} by share of step time):"
                 if findings else "Findings: none")
    for i, f in enumerate(findings[:top], 1):
        lines.append(f"  {i:>2}. [{f['severity']:<6}] {f['id']:<36} {100 * f['time_share']:6.1f}%"
                     f"  ranks {ranks_text(f['ranks'])}")
        lines.append(f"      {f['summary']}")
        ops = top_ops(f["evidence"])
        if ops:
            lines.append(f"      top: {ops}")
        recs = f["recommendations"]
        if recs:  # the best one; the others are in the JSON and Markdown reports
            rec = recs[0]
            opt = f"  [--opt {rec['emulator_opt']}]" if rec.get("emulator_opt") else ""
            more = f"  (+{len(recs) - 1} more)" if len(recs) > 1 else ""
            how = " replayed" if rec.get("estimate") == "replay" else ""
            lines.append(f"      -> {rec['optimization']} (est. {rec['estimated_speedup']:.2f}x"
                         f"{how}){opt}{more}: {rec['how']}")
    cp = d["critical_path"]
    if cp.get("components_pct"):
        comp = ", ".join(f"{CP_LABELS.get(k, k)} {float(val):.1f}%"
                         for k, val in cp["components_pct"].items())
        lines += ["", f"Critical path (rank {cp.get('rank')}): {comp}"]
        for op in (cp.get("top_ops") or [])[:5]:
            lines.append(f"  {short_name(op.get('name'))}  "
                         f"{float(op.get('time_ns') or 0) / 1e6:.3f} ms")
    if across_ranks_text(cp):
        lines += ["", across_ranks_text(cp)]
    return "\n".join(lines) + "\n"


