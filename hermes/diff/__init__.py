"""Compare two runs: ``hermes diff BASE NEW``.

``compare(base_path, new_path) -> TraceDiff`` loads both (importing profiler output on the fly),
analyzes them and diffs them; ``RENDERERS`` holds the output formats (text, md, json, html), each
``fn(diff, top) -> str``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hermes.diff.compute import TraceDiff, diff
from hermes.diff.html import render_html
from hermes.diff.render import render_json, render_md, render_text
from hermes.diff.runs import Run, load_run, open_runs
from hermes.registry import Registry

Renderer = Callable[[TraceDiff, int], str]

RENDERERS: Registry[Renderer] = Registry("diff format", normalize=str.lower)
RENDERERS.add("text", render_text)
RENDERERS.add("md", render_md)
RENDERERS.add("json", render_json)
RENDERERS.add("html", render_html)


def compare(base: str | Path, new: str | Path) -> TraceDiff:
    """Diff two runs given by path (Hermes traces or any profiler output ``hermes import``
    reads)."""
    with open_runs([Path(base), Path(new)]) as (b, n):
        return diff(b, n)


__all__ = ["RENDERERS", "Run", "TraceDiff", "compare", "diff", "load_run", "open_runs"]
