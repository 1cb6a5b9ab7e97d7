"""Renderers of an :class:`~hermes.analyzers.api.Analysis`: each returns a string, never prints.

``RENDERERS`` maps a ``--format`` name to ``fn(analysis, top=N) -> str``:
``text`` (terminal), ``md`` (Markdown), ``json`` (DESIGN.md's contract, ``Analysis.to_json``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PARTS = (("computation_only_pct", "computation only"), ("overlapped_pct", "overlapped"),
         ("communication_only_pct", "communication only"), ("host_bound_pct", "host-bound"),
         ("free_pct", "free"))
HTA = (("idle_pct", "idle"), ("compute_pct", "compute"), ("non_compute_pct", "non-compute"),
       ("comm_comp_overlap_pct", "comm/comp overlap"))
DEFAULT_TOP = 10
BAR = 30
#: Operator names in text/Markdown reports are cut to this many characters (the JSON keeps them
#: whole): demangled CUDA kernel names run to thousands of characters of template arguments.
NAME_WIDTH = 100
#: How the critical path's components read in reports (keys as in the JSON).
CP_LABELS = {"other": "gaps"}


def short_name(name: Any, width: int = NAME_WIDTH) -> str:
    """A readable operator name: a long C++ signature loses its ``void`` return type, then its
    template arguments and parameter list (``kernel<...>(...)``), then is cut with an ellipsis."""
    s = str(name)
    if len(s) <= width:
        return s
    if s.startswith("void "):
        s = s[5:]
    out, depth = [], 0
    for ch in s:  # collapse everything nested inside <...> and (...)
        if ch in "<(":
            if depth == 0:
                out.append(ch + "...")
            depth += 1
        elif ch in ">)" and depth:
            depth -= 1
            if depth == 0:
                out.append(">" if ch == ">" else ")")
        elif depth == 0:
            out.append(ch)
    s = "".join(out)
    return s if len(s) <= width else s[:width - 3] + "..."


def _bar(pct: float) -> str:
    n = int(round(max(0.0, min(100.0, pct)) / 100 * BAR))
    return "#" * n + "." * (BAR - n)


def _top_ops(ev: dict[str, Any], n: int = 3) -> str:
    ops = ev.get("top_ops") or []
    out = []
    for op in ops[:n]:
        if isinstance(op, dict):
            t = op.get("time_ns")
            ms = f" ({t / 1e6:.3f} ms)" if isinstance(t, (int, float)) else ""
            out.append(short_name(op.get("name")) + ms)
    return "; ".join(out)


def _mean_breakdown(rows: list[dict[str, Any]], key: str) -> float:
    vals = [float(r[key]) for r in rows if r.get(key) is not None]
    return sum(vals) / len(vals) if vals else 0.0


def _warmup_text(w: dict[str, Any]) -> str:
    return (f"rank {w['rank']} step {w['step']} ({w['dur_ms']:.1f} ms, {w['factor']:.0f}x the "
            f"median {w['median_ms']:.3f} ms of the others: compilation, lazy loading, "
            "allocator and cache warm-up); --keep-warmup analyzes it too")


def render_text(analysis: Any, top: int = DEFAULT_TOP) -> str:
    d = analysis.to_dict()
    st = d["steps"]
    v = d["verdict"]
    rows = d["breakdown"]["per_rank"]
    lines = [f"Hermes analysis — {len(d['ranks'])} rank(s), {st['count']} step(s), "
             f"median {st['median_ms']:.3f} ms, p90 {st['p90_ms']:.3f} ms"]
    lines += [f"Warm-up left out: {_warmup_text(w)}" for w in d.get("warmup", [])]
    lines += ["", f"Verdict: {d['bound'].upper()}-bound — {v['reason']}", ""]
    if rows:
        lines.append("Step time breakdown (mean over ranks, % of step wall time):")
        for key, label in PARTS:
            pct = _mean_breakdown(rows, key)
            lines.append(f"  {label:<20} {pct:6.1f}%  {_bar(pct)}")
        hta = ", ".join(f"{label} {_mean_breakdown(rows, k):.1f}%" for k, label in HTA)
        lines += [f"  HTA-compatible: {hta}", ""]
    findings = d["findings"]
    lines.append(f"Findings ({len(findings)}; top {min(top, len(findings))} by share of step time):"
                 if findings else "Findings: none")
    for i, f in enumerate(findings[:top], 1):
        lines.append(f"  {i:>2}. [{f['severity']:<6}] {f['id']:<36} {100 * f['time_share']:6.1f}%"
                     f"  ranks {_ranks(f['ranks'])}")
        lines.append(f"      {f['summary']}")
        ops = _top_ops(f["evidence"])
        if ops:
            lines.append(f"      top: {ops}")
        recs = f["recommendations"]
        if recs:  # the best one; the others are in the JSON and Markdown reports
            rec = recs[0]
            opt = f"  [--opt {rec['emulator_opt']}]" if rec.get("emulator_opt") else ""
            more = f"  (+{len(recs) - 1} more)" if len(recs) > 1 else ""
            lines.append(f"      -> {rec['optimization']} (est. {rec['estimated_speedup']:.2f}x)"
                         f"{opt}{more}: {rec['how']}")
    cp = d["critical_path"]
    if cp.get("components_pct"):
        comp = ", ".join(f"{CP_LABELS.get(k, k)} {float(val):.1f}%"
                         for k, val in cp["components_pct"].items())
        lines += ["", f"Critical path (rank {cp.get('rank')}): {comp}"]
        for op in (cp.get("top_ops") or [])[:5]:
            lines.append(f"  {short_name(op.get('name'))}  "
                         f"{float(op.get('time_ns') or 0) / 1e6:.3f} ms")
    return "\n".join(lines) + "\n"


def _ranks(ranks: list[int]) -> str:
    if not ranks:
        return "-"
    if len(ranks) <= 6:
        return ",".join(map(str, ranks))
    return f"{ranks[0]}..{ranks[-1]} ({len(ranks)})"


def _md_escape(s: Any) -> str:
    return str(s).replace("|", "\\|")


def _md_rec(r: dict[str, Any]) -> str:
    opt = f" (`hermes emulate --opt {r['emulator_opt']}`)" if r.get("emulator_opt") else ""
    return (f"**{_md_escape(r['optimization'])}** — estimated {r['estimated_speedup']:.2f}×"
            f"{opt}: {_md_escape(r['how'])}")


def render_md(analysis: Any, top: int = DEFAULT_TOP) -> str:
    d = analysis.to_dict()
    st = d["steps"]
    out = ["# Hermes analysis", "",
           f"- ranks: {len(d['ranks'])}; steps: {st['count']} (median {st['median_ms']:.3f} ms, "
           f"p90 {st['p90_ms']:.3f} ms)",
           *[f"- warm-up left out: {_warmup_text(w)}" for w in d.get("warmup", [])],
           f"- **bound: {d['bound']}** — {d['verdict']['reason']}", ""]
    rows = d["breakdown"]["per_rank"]
    if rows:
        out += ["## Breakdown (% of step wall time)", "",
                "| rank | " + " | ".join(label for _, label in PARTS + HTA) + " |",
                "|---:|" + "---:|" * len(PARTS + HTA)]
        for r in rows:
            out.append(f"| {r['rank']} | " + " | ".join(
                f"{float(r.get(k) or 0):.1f}" for k, _ in PARTS + HTA) + " |")
        out.append("")
    out += ["## Findings", ""]
    if not d["findings"]:
        out.append("No findings.")
    else:
        out += ["| # | id | severity | share of step | summary | top operators |",
                "|---:|---|---|---:|---|---|"]
        for i, f in enumerate(d["findings"][:top], 1):
            out.append(f"| {i} | `{f['id']}` | {f['severity']} | {100 * f['time_share']:.1f}% | "
                       f"{_md_escape(f['summary'])} | {_md_escape(_top_ops(f['evidence']))} |")
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
    return "\n".join(out) + "\n"


def render_json(analysis: Any, top: int = DEFAULT_TOP) -> str:
    return str(analysis.to_json())


RENDERERS: dict[str, Callable[..., str]] = {"text": render_text, "md": render_md,
                                            "json": render_json}
