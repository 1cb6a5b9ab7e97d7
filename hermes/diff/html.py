"""The HTML rendering of a diff: one self-contained page (inline CSS, no script), every value
escaped, the same tables as the text rendering."""

from __future__ import annotations

from html import escape

from hermes.diff.compute import TraceDiff
from hermes.diff.render import (
    BREAKDOWN_HEAD,
    FINDING_HEAD,
    NAME_HEAD,
    STEP_HEAD,
    breakdown_rows,
    finding_rows,
    missing_lines,
    name_rows,
    rank_line,
    significance_line,
    step_rows,
)

_CSS = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
        "table{border-collapse:collapse;margin:.5em 0 1.5em}"
        "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;font-size:.9em}"
        "th{background:#f3f3f3}td.name{font-family:monospace;max-width:60em;"
        "overflow-wrap:anywhere}tr.slower td,tr.new td{background:#fdecea}"
        "tr.faster td,tr.gone td{background:#e8f5e9}")


def _table(head: list[str], rows: list[list[str]], classes: list[str] | None = None,
           name_col: int | None = None) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = []
    for i, r in enumerate(rows):
        cls = f' class="{escape(classes[i])}"' if classes else ""
        tds = "".join(f'<td class="name">{escape(c)}</td>' if j == name_col
                      else f"<td>{escape(c)}</td>" for j, c in enumerate(r))
        body.append(f"<tr{cls}>{tds}</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_html(d: TraceDiff, top: int = 20) -> str:
    changed = d.changed()
    rows = name_rows(d, top)
    title = f"hermes diff: {d.base_label} -> {d.new_label}"
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>", f"<p>{escape(rank_line(d))}</p>",
        *[f'<p class="missing"><b>{escape(m)}</b></p>' for m in missing_lines(d)],
        _table(STEP_HEAD, step_rows(d)), f"<p>{escape(significance_line(d))}</p>",
        "<h2>Breakdown</h2>", _table(BREAKDOWN_HEAD, breakdown_rows(d)),
        f"<h2>Changed operators and kernels ({len(changed)} of {len(d.names)}; per step and "
        "rank)</h2>",
        _table(NAME_HEAD, rows, [r[0] for r in rows], name_col=2) if rows else "<p>none</p>",
        "<h2>Findings</h2>",
        _table(FINDING_HEAD, finding_rows(d)) if d.findings else "<p>none in either run</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
