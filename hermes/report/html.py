"""The HTML report (``--format html``, ``hermes report``): one self-contained page.

plotly.js is embedded once, so the file opens offline and can be attached to a ticket. The
analysis provides every figure except the timeline, which bins the trace's own events
(:mod:`hermes.report.timeline`); without ``trace`` the timeline is left out with a note.
"""

from __future__ import annotations

from typing import Any

from hermes.advisor import Advice
from hermes.analyzers.engine.result import Analysis
from hermes.report import html_more, html_sections
from hermes.report.common import DEFAULT_TOP
from hermes.report.html_parts import CSS, SORT_JS, Figures, esc
from hermes.report.timeline import aggregate
from hermes.trace import Trace

#: Section ids and their link text in the page's navigation bar, in page order.
NAV = (("summary", "summary"), ("findings", "findings"), ("breakdown", "breakdown"),
       ("timeline", "timeline"), ("roofline", "roofline"), ("tables", "kernels"),
       ("io", "I/O"), ("cpu", "CPU"), ("communication", "communication"),
       ("cluster", "cluster"), ("fluctuation", "fluctuation"), ("memory", "memory"))


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    # a literal "</script" inside the library would end its element early
    return get_plotlyjs().replace("</script", "<\\/script")


def _events(trace: Trace | None, ranks: list[int]) -> Any:
    if trace is None:
        return None
    ev = trace.events
    return ev[ev["rank"].isin(ranks).to_numpy()] if ranks else ev


def render_html(analysis: Analysis, advice: Advice, top: int = DEFAULT_TOP,
                trace: Trace | None = None) -> str:
    d = advice.attach(analysis).to_dict()
    a = analysis
    figs = Figures()
    events = _events(trace, d["ranks"])
    tl = aggregate(events) if events is not None else None
    why = ("rendered without the trace's events (hermes report draws it)" if trace is None
           else "the trace has no timed events")
    sections = [
        html_sections.summary(d, a),
        html_sections.findings(d, max(top, DEFAULT_TOP)),
        html_sections.breakdown(d, a, figs),
        html_sections.timeline(tl, d, a, figs, why),
        html_sections.roofline(a, figs),
        html_sections.top_tables(a),
        html_more.io(a, figs, events),
        html_more.cpu(a, figs),
        html_more.communication(a, figs),
        html_more.cluster(a, figs),
        html_more.fluctuation(a, figs),
        html_more.memory(a, figs),
    ]
    # links only to the sections drawn: a left-out one is a line, not a target
    cpu_only = d.get("run_kind") == "cpu_only"  # (its tables are the operators)
    nav = " ".join(f'<a href="#{sid}">{"operators" if cpu_only and sid == "tables" else title}'
                   f'</a>' for sid, title in NAV
                   if any(f'<section id="{sid}">' in sec for sec in sections))
    source = esc(d.get("source") or "trace")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>Hermes report — {source}</title><style>{CSS}</style>"
            f"<script>{_plotly_js()}</script></head><body>"
            f"<header><h1>Hermes report — {esc(d['bound']).upper()}-bound, "
            f"{len(d['ranks'])} rank(s), {d['steps']['count']} step(s)</h1></header>"
            f"<nav>{nav}</nav><main>{''.join(sections)}</main>"
            f"{figs.script()}{SORT_JS}</body></html>\n")
