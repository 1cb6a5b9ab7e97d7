"""The JSON document (``--format json``): DESIGN.md's output contract, ``hermes.analysis/1``."""

from __future__ import annotations

from hermes.advisor import Advice
from hermes.analyzers.engine.result import Analysis


def render_json(analysis: Analysis, advice: Advice, top: int = 0) -> str:
    """Every finding (``top`` does not cut the document) with its recommendations."""
    return advice.attach(analysis).to_json()
