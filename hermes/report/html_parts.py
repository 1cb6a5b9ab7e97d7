"""Building blocks of the HTML report: escaping, figures, sortable tables, sections.

Every string that may come from a trace passes through :func:`esc` (HTML text) or
:func:`script_json` (data inside ``<script>``), so an operator named ``<script>...`` is text.
Figures are plain plotly.js ``data``/``layout`` dictionaries: plotly's Python figure objects
validate every property and would cost seconds on a large report for nothing the page needs.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Colors of the five-part breakdown, shared by every figure that shows it.
PART_COLORS = {"computation only": "#4C78A8", "overlapped": "#72B7B2",
               "communication only": "#F58518", "host-bound": "#E45756", "free": "#BAB0AC"}


def esc(s: Any) -> str:
    """HTML text of any value (quotes too: it may land in an attribute)."""
    return html.escape(str(s), quote=True)


def label(s: Any) -> str:
    """A trace string for a plotly label: plotly reads a few HTML tags in labels, so the text
    is escaped and its entities show as the characters they stand for."""
    return html.escape(str(s), quote=False)


def _clean(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, np.ndarray):
        return _clean(x.tolist())
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return None if math.isnan(f) or math.isinf(f) else f
    return x


def script_json(obj: Any) -> str:
    """JSON safe inside ``<script>``: ``<``, ``>`` and ``&`` as ``\\u003c`` etc., so no string
    can close the script element or open a comment (valid JSON: they only occur in strings)."""
    s = json.dumps(_clean(obj), separators=(",", ":"), allow_nan=False)
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _titles(spec: dict[str, Any]) -> dict[str, Any]:
    """``title: "text"`` of axes and colour bars as ``{"text": ...}``: plotly.js 3 dropped
    the string shorthand and draws no title at all for it."""
    out = dict(spec)
    for k, v in spec.items():
        if isinstance(v, dict):
            v = _titles(v)
            if isinstance(v.get("title"), str):
                v["title"] = {"text": v["title"]}
            out[k] = v
    return out


class Figures:
    """The figures of one page: each a ``<div>`` now and one ``Plotly.newPlot`` call at the end."""

    def __init__(self) -> None:
        self.specs: list[dict[str, Any]] = []

    def div(self, data: list[dict[str, Any]], layout: dict[str, Any], height: int = 360) -> str:
        fid = f"fig{len(self.specs)}"
        base = {"margin": {"l": 60, "r": 20, "t": 30, "b": 50}, "height": height,
                "legend": {"orientation": "h", "y": -0.2}, "font": {"size": 12}}
        self.specs.append({"id": fid, "data": [_titles(t) for t in data],
                           "layout": _titles({**base, **layout})})
        return f'<div class="plot" id="{fid}"></div>'

    def script(self) -> str:
        return ("<script>const FIGS=" + script_json(self.specs) + ";\n"
                "for (const f of FIGS) { Plotly.newPlot(f.id, f.data, f.layout, "
                "{responsive: true, displaylogo: false}); }</script>")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = (),
          sortable: bool = True) -> str:
    """An HTML table; a click on a sortable table's header sorts by that column. A cell is a
    value or a ``(text, title)`` pair."""
    cls = ' class="sortable"' if sortable else ""
    head = "".join(f'<th{" class=num" if i in numeric else ""}>{esc(h)}</th>'
                   for i, h in enumerate(header))
    body = []
    for r in rows:
        cells = "".join(_cell(c, i in numeric) for i, c in enumerate(r))
        body.append(f"<tr>{cells}</tr>")
    return (f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody>"
            "</table>")


def _cell(c: Any, num: bool) -> str:
    """A cell; a ``(text, title)`` pair shows ``text`` with ``title`` (a long kernel's full
    name) on hover."""
    cls = " class=num" if num else ""
    if isinstance(c, tuple):
        return f'<td{cls} title="{esc(c[1])}">{esc(c[0])}</td>'
    return f"<td{cls}>{esc(c)}</td>"


def section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{esc(title)}</h2>\n{body}\n</section>'


def omitted(title: str, why: str) -> str:
    """A section left out: its title and one line saying why."""
    return f'<p class="omitted"><b>{esc(title)}</b>: {esc(why)}</p>'


def ms(ns: Any) -> float:
    return round(float(ns) / 1e6, 4)


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;
background:#fafafa}
header{background:#1f2d3d;color:#fff;padding:14px 28px}header h1{margin:0;font-size:22px}
nav{padding:6px 28px;background:#eef1f4;font-size:13px}nav a{margin-right:12px;color:#1f4e79}
main{padding:8px 28px;max-width:1400px}
section{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:10px 18px;
margin:14px 0}
h2{font-size:18px;margin:6px 0 10px}
table{border-collapse:collapse;font-size:13px;margin:6px 0;width:100%}
th,td{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
table.sortable th{cursor:pointer;background:#f3f5f7;user-select:none}
table.sortable th:after{content:" \\2195";color:#aaa}
td{word-break:break-word;max-width:640px}
.verdict{font-size:18px;font-weight:600}.bound{color:#b03a2e}
.omitted{color:#777;font-size:13px;margin:4px 0}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;font-size:14px}
.kv dt{color:#666}.kv dd{margin:0}
.finding{border-left:4px solid #ccc;padding:4px 12px;margin:10px 0}
.sev-high{border-color:#c0392b}.sev-medium{border-color:#e67e22}.sev-low{border-color:#7f8c8d}
.rec{margin:2px 0 2px 14px;font-size:14px}.note{color:#555;font-size:13px}
.plot{width:100%}
"""

SORT_JS = """
<script>
document.querySelectorAll('table.sortable th').forEach(th => {
  th.addEventListener('click', () => {
    const col = th.cellIndex;
    const tb = th.closest('table').tBodies[0];
    const asc = th.dataset.dir !== 'asc';
    th.dataset.dir = asc ? 'asc' : 'desc';
    const key = r => r.cells[col].textContent.trim();
    const num = s => parseFloat(s.replace(/[,%]/g, ''));
    Array.from(tb.rows).sort((a, b) => {
      const x = key(a), y = key(b), nx = num(x), ny = num(y);
      const c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? c : -c;
    }).forEach(r => tb.appendChild(r));
  });
});
</script>
"""
