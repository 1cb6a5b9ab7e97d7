"""What ``hermes check`` writes: a one-screen verdict, JUnit XML (one test case per gate) and
Markdown for ``$GITHUB_STEP_SUMMARY`` or a pull-request comment."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hermes.check.gates import FAIL, SKIP, Gate, Verdict
from hermes.diff.render import fmt_p, fmt_us
from hermes.trace.textsafe import xml_text


def _responsible_lines(v: Verdict) -> list[str]:
    return [f"{r['category']:<8} {r['name']}  {fmt_us(r['base_us'])} -> {fmt_us(r['new_us'])} "
            f"per step (+{fmt_us(r['change_us'])}, p {fmt_p(r['p_value'])})"
            for r in v.responsible]


def _head(v: Verdict) -> str:
    n = len(v.gates)
    against = (f"against {len(v.baseline_labels)} baseline run(s)" if v.baseline_labels
               else "budget only")
    word = f"FAIL ({len(v.failed)} of {n} gates failed)" if v.failed else f"PASS ({n} gates)"
    return f"hermes check: {word} - {v.new_label} {against}"


def render_terminal(v: Verdict) -> str:
    lines = [_head(v)]
    for g in v.gates:
        mark = {FAIL: "FAIL", SKIP: "skip"}.get(g.status, "pass")
        flag = " [flagged]" if g.flagged and g.status != SKIP else ""
        lines.append(f"  {mark}  {g.name}{flag}: {g.summary}")
    if not v.gates:
        lines.append("  no gates: give --baseline and/or --budget")
    if v.responsible:
        lines.append(f"  slower or new against {v.baseline_labels[-1]} (time per step):")
        lines += ["    " + s for s in _responsible_lines(v)]
    return "\n".join(lines) + "\n"


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def render_markdown(v: Verdict) -> str:
    icon = "❌" if v.failed else "✅"
    lines = [f"### {icon} {_md(_head(v))}", "", "| gate | result | detail |", "|---|---|---|"]
    for g in v.gates:
        res = g.status.upper() + (" (flagged)" if g.flagged and g.status != SKIP else "")
        lines.append(f"| `{_md(g.name)}` | {res} | {_md(g.summary)} |")
    if v.responsible:
        lines += ["", f"**Slower or new** against `{_md(v.baseline_labels[-1])}` "
                      "(time per step and rank):", "",
                  "| what | name | base | new | change | p |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['category']} | `{_md(r['name'])}` | {fmt_us(r['base_us'])} | "
                  f"{fmt_us(r['new_us'])} | +{fmt_us(r['change_us'])} | {fmt_p(r['p_value'])} |"
                  for r in v.responsible]
    return "\n".join(lines) + "\n"


def _case(suite: ET.Element, g: Gate, v: Verdict) -> None:
    case = ET.SubElement(suite, "testcase", classname=f"hermes.check.{g.kind}", name=g.name,
                         time="0")
    if g.status == FAIL:
        fail = ET.SubElement(case, "failure", message=g.summary, type=g.kind)
        body = [g.summary]
        if g.kind == "regression" and v.responsible:
            body += ["slower or new (time per step):", *_responsible_lines(v)]
        fail.text = "\n".join(body)
    elif g.status == SKIP:
        ET.SubElement(case, "skipped", message=g.summary)
    else:
        out = ET.SubElement(case, "system-out")
        out.text = g.summary


def render_junit(v: Verdict) -> str:
    """JUnit XML: ``testsuites/testsuite/testcase`` with ``failure``/``skipped`` children, the
    subset every CI reader (GitHub, GitLab, Jenkins) accepts."""
    root = ET.Element("testsuites", name="hermes check", tests=str(len(v.gates)),
                      failures=str(len(v.failed)), errors="0")
    suite = ET.SubElement(root, "testsuite", name="hermes check", tests=str(len(v.gates)),
                          failures=str(len(v.failed)), errors="0",
                          skipped=str(sum(g.status == SKIP for g in v.gates)), time="0")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="new", value=v.new_label)
    for i, b in enumerate(v.baseline_labels):
        ET.SubElement(props, "property", name=f"baseline.{i}", value=b)
    for g in v.gates:
        _case(suite, g, v)
    ET.indent(root)
    # XML 1.0 cannot hold control characters even escaped, nor lone surrogates: a gate or
    # run label carrying one (a file name, a kernel name) would make the file unreadable
    return xml_text('<?xml version="1.0" encoding="UTF-8"?>\n'
                    + ET.tostring(root, encoding="unicode") + "\n")
