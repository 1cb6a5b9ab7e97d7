"""Every writer's output reads back, with its own reader and a standard one, whatever text and
numbers it is given (issue 38 item 1): full Unicode, control characters, lone surrogates,
invalid UTF-8 bytes, 1 MB strings, int64 limits, NaN and infinities.

One hypothesis property per writer: the Parquet trace (hermes.trace.load and pyarrow), the
per-rank directory, the JSON document (``json`` with NaN refused), Markdown and HTML (strict
UTF-8; the HTML's embedded JSON strict), JUnit (``xml.etree``) and the Chrome export (``json``,
times exact). Few examples each: the strategies put the hostile values in every example.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from hermes.check.gates import FAIL, PASS, SKIP, Gate, Verdict
from hermes.check.output import render_junit
from hermes.pipeline import analyze_and_advise
from hermes.report import render
from hermes.trace import load
from hermes.trace.chrome import export_chrome
from hermes.trace.meta import TraceMeta
from hermes.trace.writer import RankedTraceWriter, TraceWriter

FAST = settings(max_examples=6, deadline=None, derandomize=True, phases=(Phase.generate,),
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])
I64 = 2**63 - 1

#: any code point, surrogates and controls included
CHARS = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None)
HOSTILE = ["\x00", "\x1b[31m", "\ud800", "x\udfffy", "\u2028\u2029", "\u00b2\u00b3",
           "\ufeff", "\U0001f600", "\\", '"', "</script><!--", "]]>", "\ufffe"]
TEXT = st.one_of(st.text(CHARS, min_size=1, max_size=12), st.sampled_from(HOSTILE))
BIG = st.sampled_from(["é" * 500_000, "x" * 1_000_000])  # 1 MB of UTF-8 either way
FLOATS = st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 5e-324]),
                   st.floats(allow_nan=True, allow_infinity=True))
#: args texts: objects with hostile members, non-objects, invalid UTF-8 bytes
ARGS = st.one_of(
    st.builds(lambda k, v: json.dumps({k: v}), TEXT.map(lambda s: s.replace("\ud800", "")),
              st.one_of(TEXT, st.integers(-I64 - 1, I64))),
    st.sampled_from(['"just text"', "[1, 2]", "null", "42", "not json", "", "{bad}",
                     b"{\"k\": \"\xff\xfe\"}", b"\xc3("]))


def _utf8(value: str) -> str:
    """What a column stores for ``value`` handed as bytes (surrogates as the 3 bytes Python's
    surrogatepass writes): each invalid byte as U+FFFD."""
    return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _text(value: str) -> str:
    """What metadata stores for a Python string: each lone surrogate as one U+FFFD."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)


def _strict(text: str) -> Any:
    """``json.loads`` refusing NaN/Infinity, and the text strict UTF-8."""
    text.encode("utf-8")

    def no(c: str) -> None:
        raise AssertionError(f"non-finite JSON constant {c}")
    return json.loads(text, parse_constant=no, parse_float=Decimal)


def _column(values: list[Any]) -> pa.Array:
    """A string column that may hold raw (invalid UTF-8) bytes, as an importer hands it."""
    raw = [v if isinstance(v, bytes) or v is None else
           v.encode("utf-8", "surrogatepass") for v in values]
    return pa.array(raw, pa.binary()).view(pa.string())


def _events(names: list[str], args: list[Any], ts: list[int], values: list[float],
            rank: int = 0) -> dict[str, Any]:
    n = len(names)
    return {"rank": [rank] * n, "lane": _column(names), "lane_kind": ["host"] * n,
            "kind": ["host_op"] * n, "name": _column(names), "ts_ns": ts,
            "dur_ns": [min(abs(t) % 1000, I64 - t) for t in ts], "value": values, "args": _column(args)}


def _check_rows(table: pa.Table, names: list[str], ts: list[int]) -> None:
    assert table.column("name").to_pylist() == [_utf8(n) for n in names]
    assert table.column("ts_ns").to_pylist() == ts
    for a in table.column("args").to_pylist():
        assert a is None or isinstance(json.loads(a), dict), a


ROWS = st.integers(1, 4).flatmap(lambda n: st.tuples(
    st.lists(st.one_of(TEXT, BIG) if n == 1 else TEXT, min_size=n, max_size=n),
    st.lists(ARGS, min_size=n, max_size=n),
    st.lists(st.one_of(st.integers(-I64 - 1, I64), st.sampled_from([-I64 - 1, I64, 0])),
             min_size=n, max_size=n),
    st.lists(FLOATS, min_size=n, max_size=n)))


@FAST
@given(ROWS, TEXT)
def test_parquet_trace_reads_back(tmp_path: Path, rows: tuple[Any, ...], label: str) -> None:
    names, args, ts, values = rows
    out = tmp_path / "t.parquet"
    meta = TraceMeta(source=label, extra={"label": label, "x": math.nan})
    with TraceWriter(out, meta) as w:
        w.write(_events(names, args, ts, values))
    table = pq.read_table(out)  # pyarrow's own reader, every value decoded
    table.to_pylist()
    _check_rows(table, names, ts)
    trace = load(out)
    assert trace.meta.extra["label"] == _text(label) and trace.meta.extra["x"] is None
    assert list(trace.events["name"]) == [_utf8(n) for n in names]


@FAST
@given(ROWS)
def test_rank_directory_reads_back(tmp_path: Path, rows: tuple[Any, ...]) -> None:
    names, args, ts, values = rows
    out = tmp_path / "dir"
    with RankedTraceWriter(out, TraceMeta(source="test")) as w:
        for rank in (0, 3):
            w.write(_events(names, args, ts, values, rank=rank))
    assert sorted(p.name for p in out.iterdir()) == ["rank-00000.parquet", "rank-00003.parquet"]
    for f in sorted(out.iterdir()):
        _check_rows(pq.read_table(f), names, ts)
    assert load(out).ranks == [0, 3]


@FAST
@given(ROWS)
def test_chrome_export_is_json_with_exact_times(tmp_path: Path, rows: tuple[Any, ...]) -> None:
    names, args, ts, values = rows
    trace = tmp_path / "t.parquet"
    with TraceWriter(trace, TraceMeta(source="test")) as w:
        w.write(_events(names, args, ts, values))
    export_chrome(trace, tmp_path / "c.json")
    doc = _strict((tmp_path / "c.json").read_bytes().decode("utf-8"))
    got = [e for e in doc["traceEvents"] if e["ph"] in ("X", "i")]
    assert [e["name"] for e in got] == [_utf8(n) for n in names]
    assert [e["ts"] * 1000 for e in got] == ts
    lanes = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert lanes == {_utf8(n) for n in names}


def _analysis_trace(tmp_path: Path, names: list[str], args: list[Any]) -> Path:
    """Three steps of a host op and a kernel per hostile name (times of a real-looking run)."""
    rows: dict[str, list[Any]] = {k: [] for k in ("rank", "lane", "lane_kind", "kind", "name",
                                                  "ts_ns", "dur_ns", "step", "args", "value")}

    def add(kind: str, lane: str, lk: str, name: Any, ts: int, dur: int, step: int,
            arg: Any = None, value: float | None = None) -> None:
        for k, v in zip(rows, (0, lane, lk, kind, name, ts, dur, step, arg, value)):
            rows[k].append(v)
    for s in range(3):
        t0 = s * 1_000_000
        add("step", "steps", "host", "step", t0, 900_000, s)
        for i, (n, a) in enumerate(zip(names, args)):
            add("host_op", n, "host", n, t0 + 10 + i * 100, 50, s, a)
            add("kernel", "stream 7", "device", n, t0 + 1000 + i * 1000, 500, s)
        add("counter", "monitor", "counter", "tflops", t0 + 900_000, 0, s, value=math.nan)
    cols = {k: (_column(v) if k in ("lane", "name", "args") else v) for k, v in rows.items()}
    out = tmp_path / "a.parquet"
    with TraceWriter(out, TraceMeta(source="test")) as w:
        w.write(cols)
    return out


@FAST
@given(st.lists(TEXT, min_size=1, max_size=3), st.lists(ARGS, min_size=3, max_size=3))
def test_json_markdown_and_html_reports_read_back(tmp_path: Path, names: list[str],
                                                  args: list[Any]) -> None:
    path = _analysis_trace(tmp_path, names, args[: len(names)])
    trace = load(path)
    analysis, advice = analyze_and_advise(trace)
    doc = _strict(render("json", analysis, advice))
    assert doc["steps"]["count"] == 3
    md = render("md", analysis, advice)
    md.encode("utf-8")
    html = render("html", analysis, advice, trace=trace)
    html.encode("utf-8")
    for script in html.split('<script type="application/json"')[1:]:
        _strict(script.split(">", 1)[1].split("</script>", 1)[0])


@FAST
@given(st.lists(st.tuples(TEXT, TEXT, st.sampled_from([PASS, FAIL, SKIP])), min_size=1,
                max_size=4), TEXT)
def test_junit_parses_as_xml(gates: list[tuple[str, str, str]], label: str) -> None:
    verdict = Verdict(label, [label + "-base"],
                      [Gate(n, status, s, kind="budget") for n, s, status in gates])
    root = ET.fromstring(render_junit(verdict).encode("utf-8"))
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(gates)
    assert len(root.findall("./testsuite/testcase/failure")) == \
        sum(st == FAIL for _, _, st in gates)


def test_an_end_past_int64_is_refused_naming_the_event(tmp_path: Path) -> None:
    import pytest

    from hermes.errors import TraceFormatError

    with pytest.raises(TraceFormatError, match=r"event 'late' at ts_ns=9223372036854775000 "
                                               r"with dur_ns=1000 ends past the int64"):
        with TraceWriter(tmp_path / "t.parquet") as w:
            w.write(_events(["late"], [None], [I64 - 807], [1.0]) | {"dur_ns": [1000]})
    assert list(tmp_path.iterdir()) == []
