"""Corpus cases of issue 38: inputs whose output used to be unreadable (items 1 and 2).

Each case that succeeds carries a ``check`` proving its output reads back with a standard
reader (pyarrow decoding every value, ``json`` refusing NaN, ``xml.etree``). Which of them
failed before the fixes is listed in /work/notes/issue-38.md and in each case's comment.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from tests.bad_inputs.make_corpus import EVENTS, Case, good_trace, kineto_text, kineto_with, write

Build = Callable[[Path], list[str]]
I64 = 2**63 - 1


def _main(argv: list[str]) -> int:
    from hermes.cli import main

    return main(argv)


def _strict_json(path: Path) -> Any:
    def no(c: str) -> None:
        raise AssertionError(f"{path}: non-finite JSON constant {c}")
    return json.loads(path.read_bytes().decode("utf-8"), parse_constant=no,
                      parse_float=Decimal)


def _parquet_rows(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()  # decodes every string: invalid UTF-8 raises


def _bad_utf8_kineto(n: int = 300) -> bytes:
    """A Kineto trace whose args hold invalid UTF-8 bytes (msgspec keeps args raw)."""
    evs: list[dict[str, Any]] = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1",
                                  "pid": 1, "tid": 1, "ts": 99, "dur": 5000}]
    evs += [{"ph": "X", "cat": "cpu_op", "name": f"op{i % 3}", "pid": 1, "tid": 1,
             "ts": 100 + i, "dur": 1, "args": {"External id": i, "x": "HOLE"}}
            for i in range(n)]
    return kineto_text(evs).encode().replace(b"HOLE", b"a\xff\xfeb", 4)


def _check_utf8_import(d: Path) -> None:
    rows = _parquet_rows(d / "o.parquet")
    bad = [r["args"] for r in rows if r["args"] and "\ufffd" in r["args"]]
    assert len(bad) == 4 and all(isinstance(json.loads(a), dict) for a in bad), bad
    from hermes.trace.reader import read_meta

    assert read_meta(d / "o.parquet").extra["repaired"] == {"invalid_utf8.args": 4}


def _imported(d: Path, data: str | bytes, name: str = "t.parquet") -> Path:
    src = write(d, "_src.pt.trace.json", data)
    assert _main(["import", str(src), "--out", str(d / name)]) == 0
    src.unlink()
    return d / name


def _export(d: Path, data: str | bytes) -> list[str]:
    return ["export", str(_imported(d, data)), "--out", str(d / "c.json")]


def _check_export(names: set[str] | None = None) -> Callable[[Path], None]:
    def check(d: Path) -> None:
        doc = _strict_json(d / "c.json")
        if names is not None:
            lanes = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
            assert names <= lanes, lanes
    return check


def _extreme_trace(d: Path) -> Path:
    """A valid Hermes trace with times at both int64 limits."""
    from hermes.trace.writer import write_trace

    out = d / "x.parquet"
    write_trace(out, {"rank": [0, 0], "lane": ["thread 1"] * 2, "lane_kind": ["host"] * 2,
                      "kind": ["host_op"] * 2, "name": ["first", "last"],
                      "ts_ns": [-(2**63), I64 - 5], "dur_ns": [1, 5]})
    return out


def _lanes_trace(d: Path, lanes: list[str]) -> Path:
    """A valid Hermes trace with one host event on each of ``lanes``."""
    from hermes.trace.writer import write_trace

    n = len(lanes)
    out = d / "l.parquet"
    write_trace(out, {"rank": [0] * n, "lane": lanes, "lane_kind": ["host"] * n,
                      "kind": ["host_op"] * n, "name": lanes, "ts_ns": list(range(n)),
                      "dur_ns": [1] * n})
    return out


def _check_extreme(d: Path) -> None:
    ts = [e["ts"] for e in _strict_json(d / "c.json")["traceEvents"] if e["ph"] == "X"]
    assert [t * 1000 for t in ts] == [-(2**63), I64 - 5], ts


def _thread(name: str) -> str:
    meta = {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": name}}
    return kineto_text([*EVENTS, meta])


def _nan_trace(d: Path) -> list[str]:
    from hermes.trace.writer import write_trace

    n = 9
    out = d / "nan.parquet"
    write_trace(out, {"rank": [0] * n, "lane": ["steps", "thread 1", "monitor"] * 3,
                      "lane_kind": ["host", "host", "counter"] * 3,
                      "kind": ["step", "host_op", "counter"] * 3,
                      "name": ["step", "op", "tflops"] * 3,
                      "ts_ns": [s * 1000 + o for s in range(3) for o in (0, 10, 900)],
                      "dur_ns": [900, 100, 0] * 3, "step": [s for s in range(3) for _ in "abc"],
                      "flops": [float("nan"), float("inf"), None] * 3,
                      "value": [None, None, float("nan")] * 3})
    return ["analyze", str(out), "--format", "json", "--out", str(d / "a.json")]


def _junit_control(d: Path) -> list[str]:
    """A run label (its file name) with an ESC and a BEL: XML 1.0 cannot hold them."""
    new = good_trace(d, "new\x1b[31m\x07.parquet")
    base = good_trace(d, "base.parquet")
    return ["check", str(new), "--baseline", str(base), "--junit", str(d / "j.xml")]


def _check_junit(d: Path) -> None:
    root = ET.parse(d / "j.xml").getroot()
    assert root.findall("./testsuite/testcase"), ET.tostring(root)


def _args_kinds(d: Path) -> list[str]:
    raw = ('{"ph": "X", "cat": "cpu_op", "name": "na%d", "pid": 1, "tid": 1, "ts": %d, '
           '"dur": 1, "args": %s}')
    text = kineto_text()
    extra = ", ".join(raw % (i, 110 + i, a) for i, a in
                      enumerate(('"just text"', "[1, 2]", "null", "3.5", '""')))
    src = write(d, "r.pt.trace.json", text[: text.rindex("]")] + ", " + extra + "]}")
    return ["import", str(src), "--out", str(d / "o.parquet")]


def _check_args_kinds(d: Path) -> None:
    got = {r["name"]: r["args"] for r in _parquet_rows(d / "o.parquet")
           if r["name"].startswith("na")}
    assert {k: (json.loads(v) if v else v) for k, v in got.items()} == {
        "na0": {"value": "just text"}, "na1": {"value": [1, 2]}, "na2": None,
        "na3": {"value": 3.5}, "na4": {"value": ""}}, got


def _kineto_ts(ts: str, dur: str = "1") -> Build:
    ev = '{"ph": "X", "cat": "cpu_op", "name": "late", "pid": 1, "tid": 1, "ts": %s, "dur": %s}'

    def build(d: Path) -> list[str]:
        src = write(d, "r.pt.trace.json", kineto_with(ev % (ts, dur)))
        return ["import", str(src), "--out", str(d / "o.parquet")]
    return build


def readback_cases() -> list[Case]:
    """Item 1 (text and numbers a writer must keep readable) and item 2 (limits)."""
    sup = "worker\u00b2"
    return [*fuzz_readback_cases(),
        # failed before: args bytes reached the Parquet file as they were (pyarrow's
        # to_pylist raised UnicodeDecodeError on the written file)
        Case("readback-kineto-args-invalid-utf8-import", "text", "import",
             lambda d: ["import", str(write(d, "r.pt.trace.json", _bad_utf8_kineto())),
                        "--out", str(d / "o.parquet")], codes=(0,), check=_check_utf8_import),
        Case("readback-kineto-args-invalid-utf8-export", "text", "export",
             lambda d: _export(d, _bad_utf8_kineto()), codes=(0,), check=_check_export()),
        # failed before: a lane named only by a superscript ('²'): int('²') in the sort key
        Case("readback-lane-superscript-only-export", "text", "export",
             lambda d: ["export", str(_lanes_trace(d, ["\u00b2", "\u00b9\u00b2", "thread 2"])),
                        "--out", str(d / "c.json")], codes=(0,),
             check=_check_export({"\u00b2", "\u00b9\u00b2", "thread 2"})),
        Case("readback-lane-superscript-export", "text", "export",
             lambda d: _export(d, _thread(sup)), codes=(0,),
             check=_check_export({f"thread 1 ({sup})"})),
        # failed before: ts_ns = -2**63 was written as "--9223372036854775.808"
        Case("readback-export-int64-limits", "numbers", "export",
             lambda d: ["export", str(_extreme_trace(d)), "--out", str(d / "c.json")],
             codes=(0,), check=_check_extreme),
        Case("readback-analyze-json-nan-inf", "numbers", "analyze", _nan_trace, codes=(0,),
             check=lambda d: _strict_json(d / "a.json") and None),
        # failed before: the ESC and BEL of the label were written raw into the XML
        Case("readback-junit-control-characters", "text", "check", _junit_control,
             codes=(0, 1), check=_check_junit),
        # item 2. failed before: stored as {"args": "\"just text\""} etc., not objects
        Case("numbers-args-not-objects-wrapped", "structure", "import", _args_kinds,
             codes=(0,), check=_check_args_kinds),
        # failed before: 9223372036854776 us wrapped around to a negative ts_ns, exit 0
        Case("numbers-kineto-ts-just-past-int64", "numbers", "import",
             _kineto_ts("9223372036854776"), needle="'ts'"),
        Case("numbers-kineto-ts-just-below-int64-min", "numbers", "import",
             _kineto_ts("-9223372036854776"), needle="'ts'"),
        Case("numbers-kineto-ts-past-int64-decimals", "numbers", "import",
             _kineto_ts("9223372036854775.8075"), needle="'ts'"),
        # failed before: imported with exit 0; only analyze refused it later
        Case("numbers-kineto-end-past-int64", "numbers", "import",
             _kineto_ts("9223372036854775", "1"), needle="ends past the int64"),
        Case("numbers-kineto-dur-past-int64", "numbers", "import",
             _kineto_ts("1", "9223372036854776"), needle="'dur'"),
    ]


def _comm_nelems(d: Path) -> list[str]:
    ev = ('{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, '
          '"ts": 120, "dur": 5, "args": {"External id": 9, "Collective name": "allreduce", '
          '"dtype": "Float", "In msg nelems": %d, "Group size": 2, "Process Group Name": "0", '
          '"rank": 0}}' % 2**62)
    src = write(d, "r.pt.trace.json", kineto_with(ev))
    return ["import", str(src), "--out", str(d / "o.parquet")]


def _utf8_beside_text_args(d: Path) -> list[str]:
    text = kineto_with('{"ph": "X", "cat": "cpu_op", "name": "t", "pid": 1, "tid": 1, '
                       '"ts": 111, "dur": 1, "args": "just text"}')
    text = text[: text.rindex("]")] + (', {"ph": "X", "cat": "cpu_op", "name": "u", "pid": 1, '
                                       '"tid": 1, "ts": 112, "dur": 1, "args": {"x": "HOLE"}}]}')
    src = write(d, "r.pt.trace.json", text.encode().replace(b"HOLE", b"a\xff\xfe"))
    return ["analyze", str(src), "-f", "json", "--out", str(d / "a.json")]


def fuzz_readback_cases() -> list[Case]:
    """Defects the fuzzer's issue-38 mutations found (seed 3, family kineto), minimized."""
    return [
        # failed before: "malformed value (OverflowError: Python int too large ...)"
        Case("fuzz-kineto-coll-nelems-past-int64", "numbers", "import", _comm_nelems,
             codes=(0,), check=lambda d: _parquet_rows(d / "o.parquet") and None),
        # failed before: "malformed value (DecodeError: Invalid UTF-8 encoded string)"
        Case("fuzz-kineto-args-invalid-utf8-beside-text-args", "text", "analyze",
             _utf8_beside_text_args, codes=(0,),
             check=lambda d: _strict_json(d / "a.json") and None),
    ]
