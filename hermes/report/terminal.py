"""The text report on a terminal: rich tables with aligned columns and units.

Piped output stays the plain layout of :mod:`hermes.report.text` (scripts read it); this module
draws the same content for a person at a terminal, fitted to its width (rich wraps cells).
"""

from __future__ import annotations

import io
from typing import Any

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
    summary_ranks_text,
    top_ops,
    unique_short_names,
    warmup_text,
)


def _row(table: Any, *cells: str) -> None:
    """A row of plain text cells: trace strings (``[high]``, ``<T>``) are never rich markup."""
    from rich.text import Text

    table.add_row(*(Text(str(c)) for c in cells))


def _tables(d: dict[str, Any], top: int) -> list[Any]:
    from rich.table import Table
    from rich.text import Text

    st = d["steps"]
    out: list[Any] = [
        Text(f"Hermes analysis — {len(d['ranks'])} rank(s), {st['count']} step(s); per step: "
             f"median {st['median_ms']:.3f} ms, p90 {st['p90_ms']:.3f} ms"),
        *[Text(f"Warm-up left out: {warmup_text(w)}", style="dim") for w in d.get("warmup", [])],
        *[Text(f"MISSING {missing_text(m)}", style="bold red")
          for m in d.get("missing_ranks", ())],
        Text.assemble(("Verdict: ", "bold"), (f"{d['bound'].upper()}-bound", "bold red"),
                      f" ({explained_pct_text(d['verdict'])}) — {d['verdict']['reason']}"),
        Text(f"  {explained_text(d['verdict'])}", style="dim")]
    if run_kind_text(d):
        out.append(Text(f"Run: {run_kind_text(d)}", style="bold yellow"))
    rows = d["breakdown"]["per_rank"]
    if cpu_part_rows(d):
        t = Table(title="Where the CPU's time goes (mean over ranks, % of step wall time)",
                  title_justify="left")
        t.add_column("part")
        t.add_column("% of step", justify="right")
        for label, pct in cpu_part_rows(d):
            _row(t, label, f"{pct:.1f}")
        out.append(t)
        if operator_rows(d, 10):
            t = Table(title=operators_title(d), title_justify="left")
            for i, h in enumerate(OPERATOR_HEADER):
                t.add_column(h, justify="left" if i == 0 else "right")
            for r in operator_rows(d, 10):
                _row(t, *r)
            out.append(t)
    elif rows:
        t = Table(title="Step time breakdown (per-step mean over ranks, % of step wall time)",
                  title_justify="left")
        t.add_column("component")
        t.add_column("% of step", justify="right")
        for key, label in PARTS:
            _row(t, label, f"{mean_breakdown(rows, key):.1f}")
        t.add_section()
        for key, label in HTA:
            _row(t, f"HTA {label}", f"{mean_breakdown(rows, key):.1f}")
        out.append(t)
        if summary_ranks_text(rows):
            out.append(Text(summary_ranks_text(rows).capitalize()))
    comp = d.get("computation") or {}
    if device_text(d):
        out.append(Text(f"Device: {device_text(d)}"))
    if dtype_mix_text(comp):
        out.append(Text(f"Matmul dtypes: {dtype_mix_text(comp)}"))
    if mfu_text(comp):
        out.append(Text(f"Computation: {mfu_text(comp)}"))
    if comp.get("top_kernels"):
        t = Table(title="Top kernels (all ranks, total over the capture)", title_justify="left")
        for i, h in enumerate(KERNEL_HEADER):
            t.add_column(h, justify="left" if i in (0, 5, 6) else "right",
                         overflow="fold" if i == 0 else "ellipsis")
        for r in kernel_rows(comp, 10):
            _row(t, *r)
        out.append(t)
    out.append(_findings(d["findings"], top))
    cp = d["critical_path"]
    if cp.get("components_pct"):
        t = Table(title=f"Critical path (rank {cp.get('rank')}, the slowest; total over the "
                        "capture)", title_justify="left")
        t.add_column("on the path")
        t.add_column("% of path", justify="right")
        for k, v in cp["components_pct"].items():
            _row(t, CP_LABELS.get(k, k), f"{float(v):.1f}")
        ops = (cp.get("top_ops") or [])[:5]
        if ops:
            t.add_section()
            for name, op in zip(unique_short_names([o.get("name") for o in ops], 60), ops,
                                strict=True):
                _row(t, name, f"{float(op.get('time_ns') or 0) / 1e6:.3f} ms")
        out.append(t)
    if across_ranks_text(cp):
        from rich.text import Text

        out.append(Text(across_ranks_text(cp)))
    return out


def _findings(fs: list[dict[str, Any]], top: int) -> Any:
    from rich.table import Table

    if not fs:
        from rich.text import Text

        return Text("Findings: none")
    t = Table(title=f"Findings ({len(fs)}; top {min(top, len(fs))} by share of step time)",
              title_justify="left", show_lines=True)
    t.add_column("#", justify="right")
    t.add_column("finding", ratio=3, overflow="fold")
    t.add_column("% of step", justify="right")
    t.add_column("best recommendation", ratio=4, overflow="fold")
    for i, f in enumerate(fs[:top], 1):
        what = f"[{f['severity']}] {f['id']}\n{f['summary']}\nranks {ranks_text(f['ranks'])}"
        ops = top_ops(f["evidence"])
        if ops:
            what += f"\ntop: {ops}"
        recs = f["recommendations"]
        rec = ""
        if recs:
            r = recs[0]
            more = f" (+{len(recs) - 1} more: --format md)" if len(recs) > 1 else ""
            how = " replayed" if r.get("estimate") == "replay" else ""
            rec = (f"{r['optimization']} (est. {float(r['estimated_speedup']):.2f}x{how})"
                   f"{more}\n{r['how']}")
        _row(t, str(i), what, f"{100 * float(f['time_share']):.1f}", rec)
    return t


def print_report(analysis: Analysis, advice: Advice, top: int = DEFAULT_TOP,
                 console: Any = None) -> None:
    """Print the report with rich on ``console`` (default: stdout's)."""
    from rich.console import Console

    con = console if console is not None else Console()
    d = advice.attach(analysis).to_dict()
    for item in _tables(d, top):
        con.print(item)
        con.print()


def render_rich(analysis: Analysis, advice: Advice, top: int = DEFAULT_TOP,
                width: int = 100) -> str:
    """The terminal report as text, ``width`` columns wide (what a terminal that wide shows)."""
    from rich.console import Console

    buf = io.StringIO()
    print_report(analysis, advice, top, Console(file=buf, width=width, color_system=None,
                                                force_terminal=False))
    return buf.getvalue()
