"""What an agent reads to interpret the tools' results: the cause vocabulary, the rule table,
the what-if transforms and the documentation pages (``hermes://docs/NAME``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

#: Documentation pages served as resources (those found next to the package: a source checkout
#: or an editable install has them; a wheel carries no ``docs/``), with what each explains.
DOC_PAGES = {
    "agents": "the tools of `hermes mcp`, their caps and a worked session",
    "analysis": "what every figure of an analysis means and how it is computed (formulas)",
    "rules": "the rule table: which cause leads to which optimization, and its estimate",
    "whatif": "how what-if replays a trace's step graph to predict a step time",
    "ci": "the CI gate: the regression test, budgets and the verdict",
    "trace-format": "the Hermes trace: events, kinds, lanes and metadata",
    "report": "the sections of the HTML report",
    "query": "the SQL tables and columns of query(trace, sql), with example queries",
}


def docs_dir() -> Path:
    import hermes

    return Path(hermes.__file__).resolve().parent.parent / "docs"


def causes() -> str:
    """The cause vocabulary: category -> causes, and the finding ids they make."""
    from hermes.findings import BOUNDS, CAUSE_IDS, CAUSES, SEVERITIES

    return json.dumps({"categories": {k: list(v) for k, v in CAUSES.items()},
                       "finding_ids": list(CAUSE_IDS), "bounds": list(BOUNDS),
                       "severities": list(SEVERITIES),
                       "note": "a finding's id is category.cause; time_share is the fraction "
                               "of step time the cause costs (0-1); time no cause explains is "
                               "reported as unattributed, never as a guessed cause"}, indent=1)


def rule_table() -> str:
    """The rule table as shipped (``rules/rules.toml``)."""
    from hermes.rules import TABLE

    return Path(TABLE.path).read_text(encoding="utf-8")


def transforms() -> str:
    """The what-if transforms (``whatif(apply=[...])`` names)."""
    from hermes.whatif.transforms import TRANSFORMS

    return json.dumps({name: t.what for name, t in
                       sorted(TRANSFORMS.items())}, indent=1)


def doc_pages() -> dict[str, tuple[str, Callable[[], str]]]:
    """``name -> (description, read)`` of the documentation pages present."""
    base = docs_dir()
    out: dict[str, tuple[str, Callable[[], str]]] = {}
    for name, what in DOC_PAGES.items():
        f = base / f"{name}.md"
        if f.is_file():
            out[name] = (what, _reader(f))
    return out


def _reader(f: Path) -> Callable[[], str]:
    def read() -> str:
        return f.read_text(encoding="utf-8")
    return read
