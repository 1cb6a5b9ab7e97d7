"""The JSON document (``--format json``): DESIGN.md's output contract, ``hermes.analysis/1``."""

from __future__ import annotations

from hermes.advisor import Advice
from hermes.analyzers.engine.result import Analysis
from hermes.trace.textsafe import dumps


def render_json(analysis: Analysis, advice: Advice, top: int = 0) -> str:
    """Every finding (``top`` does not cut the document) with its recommendations; strict
    JSON (a non-finite number is null, never ``NaN``/``Infinity``) in valid UTF-8."""
    return dumps(advice.attach(analysis).to_dict(), indent=2, ensure_ascii=True) + "\n"
