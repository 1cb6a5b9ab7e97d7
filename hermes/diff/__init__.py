"""Compare two runs: ``hermes diff BASE NEW``.

``compare(base_path, new_path) -> TraceDiff`` loads both (importing profiler output on the fly),
analyzes them and diffs them; ``RENDERERS`` holds the output formats (text, md, json, html), each
``fn(diff, top) -> str``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes.registry import Registry

if TYPE_CHECKING:
    from hermes.diff.compute import TraceDiff, diff
    from hermes.diff.runs import Run, load_run, open_runs


@dataclass(frozen=True)
class Renderer:
    """A diff format's function, named by module, imported on first use: ``hermes --help``
    lists the formats without loading pandas (which ``hermes.diff.compute`` needs)."""

    module: str
    function: str

    def __call__(self, d: TraceDiff, top: int) -> str:
        return str(getattr(importlib.import_module(self.module), self.function)(d, top))


RENDERERS: Registry[Renderer] = Registry("diff format", normalize=str.lower)
RENDERERS.add("text", Renderer("hermes.diff.render", "render_text"))
RENDERERS.add("md", Renderer("hermes.diff.render", "render_md"))
RENDERERS.add("json", Renderer("hermes.diff.render", "render_json"))
RENDERERS.add("html", Renderer("hermes.diff.html", "render_html"))

_LAZY = {"TraceDiff": "hermes.diff.compute", "diff": "hermes.diff.compute",
         "Run": "hermes.diff.runs", "load_run": "hermes.diff.runs", "open_runs": "hermes.diff.runs"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hermes.diff' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def compare(base: str | Path, new: str | Path) -> TraceDiff:
    """Diff two runs given by path (Hermes traces or any profiler output ``hermes import``
    reads)."""
    from hermes.diff.compute import diff
    from hermes.diff.runs import open_runs

    with open_runs([Path(base), Path(new)]) as (b, n):
        return diff(b, n)


__all__ = ["RENDERERS", "Run", "TraceDiff", "compare", "diff", "load_run", "open_runs"]
