"""Renderers: ``render(analysis, advice) -> str``, one registry for every output format.

A renderer is a function ``fn(analysis: Analysis, advice: Advice, top: int) -> str`` that only
renders what analysis and advice returned: it computes nothing and prints nothing. ``RENDERERS``
maps a ``--format`` name to it; the CLI's choices and the demo's files come from that registry.
A renderer that draws the events themselves (HTML: the timeline) registers with
``wants_trace=True`` and is called with ``trace=`` the loaded :class:`hermes.trace.Trace`.
Entries name their module and function, imported on first use, so the CLI's ``--help`` lists the
formats without loading pandas. Adding a format: a module here with its function, and one
``RENDERERS.add`` line below.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hermes.registry import Registry
from hermes.trace.textsafe import clean_text

if TYPE_CHECKING:
    from hermes.advisor import Advice
    from hermes.analyzers.engine.result import Analysis
    from hermes.trace import Trace


@dataclass(frozen=True)
class Renderer:
    """One output format: where its function lives, the file it is written to, what it is for."""

    module: str
    function: str
    filename: str
    description: str

    #: Whether the function takes ``trace=`` (the events behind the analysis, for a timeline).
    wants_trace: bool = False

    def load(self) -> None:
        """Import the function's module now, for a caller with time to spare before it
        renders (``hermes analyze`` while its forked import runs)."""
        importlib.import_module(self.module)

    def __call__(self, analysis: Analysis, advice: Advice, top: int = 10,
                 trace: Trace | None = None) -> str:
        fn = getattr(importlib.import_module(self.module), self.function)
        if self.wants_trace:
            return clean_text(str(fn(analysis, advice, top, trace=trace)))
        return clean_text(str(fn(analysis, advice, top)))


RENDERERS: Registry[Renderer] = Registry("format")
RENDERERS.add("text", Renderer("hermes.report.text", "render_text", "report.txt",
                               "terminal report"))
RENDERERS.add("md", Renderer("hermes.report.markdown", "render_md", "report.md",
                             "Markdown (pull-request comment, CI summary)"))
RENDERERS.add("json", Renderer("hermes.report.json_doc", "render_json", "analysis.json",
                               "the hermes.analysis/1 document"))
RENDERERS.add("html", Renderer("hermes.report.html", "render_html", "report.html",
                               "self-contained HTML report with figures (opens offline)",
                               wants_trace=True))


def render(fmt: str, analysis: Analysis, advice: Advice, top: int = 10,
           trace: Trace | None = None) -> str:
    """``analysis`` and its ``advice`` in format ``fmt`` (a name of ``RENDERERS``); ``trace``
    (the analyzed events) feeds the HTML timeline and is ignored by the other formats."""
    return RENDERERS.get(fmt, flag="--format")(analysis, advice, top, trace=trace)


def formats_help() -> str:
    """``text, md or json``: the registered formats, for option help."""
    names = RENDERERS.names()
    return ", ".join(names[:-1]) + (" or " if len(names) > 1 else "") + names[-1]


__all__ = ["RENDERERS", "Renderer", "formats_help", "render"]
