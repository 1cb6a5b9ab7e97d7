"""The hostile-input corpus: malformed and extreme inputs for every command, by class.

Each :class:`Case` builds its files in a fresh directory and returns the ``hermes`` argv that
must fail cleanly (or succeed with a note). Nothing is stored: small files are written by
``build``; big ones (a gzip bomb, a CSV cell past the csv field limit) are generated at test
time into the test's directory. ``python tests/bad_inputs/make_corpus.py DIR`` writes every
case's files under ``DIR/<case id>/`` for inspection by hand.

Classes: numbers, text, structure, size, resources, dataloss (the issue 17 integrity holes).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

#: A tiny valid Kineto trace: one step, an op, a launch and its kernel.
EVENTS: list[dict[str, Any]] = [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
     "ts": 100, "dur": 50},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 101, "dur": 10,
     "args": {"External id": 3}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
     "ts": 102, "dur": 2, "args": {"correlation": 5}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 105, "dur": 3,
     "args": {"correlation": 5, "stream": 7, "device": 0}},
]

KD_HEADER = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),"
             "Duration(us),Wait Time(us),Block Dim,Input Shapes\n")
KD_ROW = '7,1,11,2,MatMul_1,MatMul,AI_CORE,110.85,5.5,0,8,"""4,8;8,4"""\n'


@dataclass(frozen=True)
class Case:
    id: str
    cls: str  # numbers | text | structure | size | resources | dataloss
    command: str
    #: build(dir) -> argv; writes the inputs (and a good file at --out where one is checked)
    build: Callable[[Path], list[str]]
    codes: tuple[int, ...] = (2,)
    #: a substring the error line must contain (the file's name, the field); None: any
    needle: str | None = None
    #: a path (relative to dir) whose bytes must be unchanged by the command
    keep: str | None = None
    subprocess: bool = False
    #: for a case that succeeds: check(dir) proves what it wrote reads back (raises if not)
    check: Callable[[Path], None] | None = None


def kineto_text(events: list[Any] | None = None, **top: Any) -> str:
    body = {"schemaVersion": 1, "deviceProperties": [], **top,
            "traceEvents": EVENTS if events is None else events}
    return json.dumps(body)


def kineto_with(raw_event: str) -> str:
    """The valid trace with one more event given as raw JSON text (literals json can't write)."""
    text = kineto_text()
    return text[: text.rindex("]")] + ", " + raw_event + "]}"


def write(d: Path, name: str, data: str | bytes) -> Path:
    p = d / name
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


def good_trace(d: Path, name: str = "good.parquet") -> Path:
    """A valid Hermes trace, imported from the tiny Kineto trace."""
    from hermes.cli import main

    src = write(d, "_good.json", kineto_text())
    out = d / name
    assert main(["import", str(src), "--out", str(out)]) == 0
    src.unlink()
    return out


def retag(d: Path, name: str, **kv: str) -> Path:
    """The good trace with metadata keys replaced by ``kv`` (hermes_ranks: hermes.ranks)."""
    good = good_trace(d, "_base.parquet")
    table = pq.read_table(good)
    meta = dict(table.schema.metadata or {})
    meta.update({k.replace("hermes_", "hermes.").encode(): v.encode() for k, v in kv.items()})
    out = d / name
    pq.write_table(table.replace_schema_metadata(meta), out)
    good.unlink()
    return out


def _imp(text: str | bytes, name: str = "bad.pt.trace.json") -> Callable[[Path], list[str]]:
    def build(d: Path) -> list[str]:
        src = write(d, name, text)
        good_trace(d, "out.parquet")
        return ["import", str(src), "--out", str(d / "out.parquet")]
    return build


def _imp_gz(text: str) -> Callable[[Path], list[str]]:
    return _imp(gzip.compress(text.encode()), "bad.pt.trace.json.gz")


def asc(name: str, text: str | bytes) -> Callable[[Path], list[str]]:
    """Import of one Ascend profiler file ``name`` holding ``text``."""
    def build(d: Path) -> list[str]:
        prof = d / "prof" / "ASCEND_PROFILER_OUTPUT"
        prof.mkdir(parents=True)
        write(prof, name, text)
        good_trace(d, "out.parquet")
        return ["import", str(prof / name), "--out", str(d / "out.parquet")]
    return build


def _asc_csv(csv_text: str | bytes) -> Callable[[Path], list[str]]:
    return asc("kernel_details.csv", csv_text)


def _asc_json(events: str) -> Callable[[Path], list[str]]:
    return asc("trace_view.json", events)


def _on_trace(command: str, make: Callable[[Path], Path], *extra: str
              ) -> Callable[[Path], list[str]]:
    """``command`` run on the trace ``make`` builds (analyze/report/export/diff/check/validate)."""
    def build(d: Path) -> list[str]:
        bad = make(d)
        if command == "validate":
            return ["validate", str(bad)]
        if command == "analyze":
            (d / "report.txt").write_text("old report\n")
            return ["analyze", str(bad), "--out", str(d / "report.txt"), *extra]
        if command == "report":
            (d / "report.html").write_text("<p>old report</p>\n")
            return ["report", str(bad), "--out", str(d / "report.html"), *extra]
        if command == "export":
            (d / "out.json").write_text("{}\n")
            return ["export", str(bad), "--out", str(d / "out.json"), *extra]
        good = good_trace(d, "base.parquet")
        if command == "diff":
            return ["diff", str(good), str(bad), *extra]
        return ["check", str(bad), "--baseline", str(good), *extra]
    return build


def _keep_for(command: str) -> str | None:
    return {"analyze": "report.txt", "report": "report.html", "export": "out.json"}.get(command)


TRACE_COMMANDS = ("validate", "analyze", "report", "export", "diff", "check")


def per_command(cid: str, cls: str, make: Callable[[Path], Path], needle: str | None,
                 commands: tuple[str, ...] = TRACE_COMMANDS) -> list[Case]:
    return [Case(f"{cid}-{c}", cls, c, _on_trace(c, make), needle=needle, keep=_keep_for(c))
            for c in commands]


def cases() -> list[Case]:
    from tests.bad_inputs import corpus_more

    return [*kineto_cases(), *ascend_cases(), *parquet_cases(), *corpus_more.cases()]


def kineto_cases() -> list[Case]:
    """Numbers, text, structure and size in Kineto JSON (import)."""
    ev = '{"ph": "X", "cat": "cpu_op", "name": "n", "pid": 1, "tid": 1, "ts": %s, "dur": %s%s}'
    nums = {
        "ts-overflow-exponent": (ev % ("1e400", "1", ""), "ts"),
        "ts-infinity": (ev % ("Infinity", "1", ""), None),
        "ts-nan": (ev % ("NaN", "1", ""), None),
        "ts-minus-infinity": (ev % ("-Infinity", "1", ""), None),
        "ts-beyond-int64-ns": (ev % ("1e17", "1", ""), "ts"),
        "ts-huge-integer": (ev % ("9" * 40, "1", ""), "ts"),
        "dur-overflow": (ev % ("200", "1e308", ""), "dur"),
        "dur-negative-huge": (ev % ("200", "-1e300", ""), "dur"),
        "ts-unicode-digit-string": (ev % ('"\\u00b2"', "1", ""), "ts"),
        "ts-text": (ev % ('"soon"', "1", ""), "ts"),
        "pid-fractional": (ev.replace('"pid": 1', '"pid": 1.5') % ("200", "1", ""), None),
        "pid-huge": (ev.replace('"pid": 1', '"pid": 1e30') % ("200", "1", ""), None),
        "tid-beyond-int64": (ev.replace('"tid": 1', f'"tid": {2**70}') % ("200", "1", ""), None),
        "correlation-fractional": (ev % ("200", "1", ', "args": {"correlation": 5.5}'), None),
        "correlation-huge": (ev % ("200", "1", f', "args": {{"correlation": {2**80}}}'), None),
        "external-id-nan": (ev % ("200", "1", ', "args": {"External id": NaN}'), None),
        "step-beyond-int32": (ev.replace('"name": "n"', '"name": "ProfilerStep#99999999999"')
                              .replace('"cpu_op"', '"user_annotation"') % ("200", "1", ""),
                              None),
        "step-unicode-digit": (ev.replace('"name": "n"', '"name": "ProfilerStep#\\u00b2"')
                               .replace('"cpu_op"', '"user_annotation"') % ("200", "1", ""),
                               None),
        "stream-huge": (ev.replace('"cpu_op"', '"kernel"') % (
            "200", "1", f', "args": {{"stream": {2**65}, "correlation": 5}}'), None),
    }
    out = [Case(f"kineto-{k}", "numbers", "import", _imp(kineto_with(raw)), codes=(0, 2),
                needle=n) for k, (raw, n) in nums.items()]
    deep = '{"a": ' * 200_000 + "1" + "}" * 200_000
    structure = {
        "args-list": kineto_with(ev % ("200", "1", ', "args": [1, 2]')),
        "args-string": kineto_with(ev % ("200", "1", ', "args": "x"')),
        "args-deep": kineto_with(ev % ("200", "1", ', "args": ' + deep)),
        "top-deep": "[" * 200_000 + "]" * 200_000,
        "events-object": kineto_text(events={"a": 1}),  # type: ignore[arg-type]
        "events-string": kineto_text(events="x"),  # type: ignore[arg-type]
        "event-number": kineto_with("42"),
        "event-null": kineto_with("null"),
        "top-array": json.dumps([EVENTS]),
        "empty-file": "",
        "only-brace": "{",
        "truncated": kineto_text()[:-40],
        "device-props-string": kineto_text(deviceProperties="h100"),
        "device-props-list-of-numbers": kineto_text(deviceProperties=[1, 2]),
        "distributed-info-list": kineto_text(distributedInfo=[0, 1]),
        "distributed-rank-text": kineto_text(distributedInfo={"rank": "zero"}),
        "distributed-rank-huge": kineto_text(distributedInfo={"rank": 2**40}),
        "distributed-rank-unicode": kineto_text(distributedInfo={"rank": "\u00b2"}),
        "name-object": kineto_with('{"ph": "X", "cat": "cpu_op", "name": {"a": 1}, "pid": 1, '
                                   '"tid": 1, "ts": 200, "dur": 1}'),
        "ph-unknown": kineto_with('{"ph": "??", "name": "n", "pid": 1, "tid": 1, "ts": 2}'),
    }
    out += [Case(f"kineto-{k}", "structure", "import", _imp(t), codes=(0, 2))
            for k, t in structure.items()]
    out += [Case("kineto-gz-truncated", "structure", "import",
                 _imp(gzip.compress(kineto_text().encode())[:-30], "bad.pt.trace.json.gz"),
                 needle="bad.pt.trace.json.gz"),
            Case("kineto-gz-garbage", "structure", "import",
                 _imp(b"\x1f\x8b\x08\x00garbage-not-deflate", "bad.pt.trace.json.gz"),
                 needle="bad.pt.trace.json.gz")]
    text = {
        "name-invalid-utf8": kineto_with(ev % ("200", "1", "")).encode().replace(
            b'"name": "n"', b'"name": "\xff\xfe\x80"'),
        "args-invalid-utf8": kineto_with(ev % ("200", "1", ', "args": {"k": "v"}')).encode()
        .replace(b'"v"', b'"\xc3\x28"'),
        "name-control-chars": kineto_with(ev.replace('"n"', '"a\\u0000b\\u001b[31mred"')
                                          % ("200", "1", "")),
        "name-lone-surrogate": kineto_with(ev.replace('"n"', '"\\udc80x"') % ("200", "1", "")),
        "utf16-file": kineto_text().encode("utf-16"),
        "bom-utf8": b"\xef\xbb\xbf" + kineto_text().encode(),
        "latin1-file": kineto_text().replace("aten::mm", "aten::\u00e9").encode("latin-1"),
    }
    out += [Case(f"kineto-{k}", "text", "import", _imp(t), codes=(0, 2)) for k, t in text.items()]
    out.append(Case("kineto-gz-name-invalid-utf8", "text", "import", _imp(
        gzip.compress(text["name-invalid-utf8"]), "bad.pt.trace.json.gz"), codes=(0, 2)))
    return out


def ascend_cases() -> list[Case]:
    """Numbers, text and structure in Ascend kernel_details.csv and trace_view.json."""
    def row(**cells: str) -> str:
        base = {"Step Id": "7", "Model ID": "1", "Task ID": "11", "Stream ID": "2",
                "Name": "MatMul_1", "Type": "MatMul", "Accelerator Core": "AI_CORE",
                "Start Time(us)": "110.85", "Duration(us)": "5.5", "Wait Time(us)": "0",
                "Block Dim": "8", "Input Shapes": '"""4,8"""'}
        base.update(cells)
        return KD_HEADER + ",".join(base.values()) + "\n"

    nums = {
        "start-inf": row(**{"Start Time(us)": "inf"}),
        "start-nan": row(**{"Start Time(us)": "nan"}),
        "start-overflow": row(**{"Start Time(us)": "1e400"}),
        "start-beyond-int64": row(**{"Start Time(us)": "1e17"}),
        "start-unicode-digit": row(**{"Start Time(us)": "\u00b2"}),
        "duration-huge": row(**{"Duration(us)": "1e300"}),
        "duration-negative": row(**{"Duration(us)": "-5"}),
        "step-beyond-int32": row(**{"Step Id": "99999999999"}),
        "step-unicode-digit": row(**{"Step Id": "\u00b2"}),
        "stream-fractional": row(**{"Stream ID": "1.5"}),
        "task-huge": row(**{"Task ID": "1e30"}),
        "block-dim-text": row(**{"Block Dim": "lots"}),
    }
    out = [Case(f"ascend-csv-{k}", "numbers", "import", _asc_csv(t), codes=(0, 2))
           for k, t in nums.items()]
    big = "x" * 300_000  # beyond the csv module's default field limit (131072)
    structure: dict[str, str | bytes] = {
        "cell-beyond-field-limit": row(Name=big),
        "header-only": KD_HEADER,
        "empty": "",
        "missing-columns": "Name,Type\nMatMul_1,MatMul\n",
        "ragged-row": KD_HEADER + "7,1,11\n",
        "nul-byte": row(Name="Mat\x00Mul"),
        "unclosed-quote": KD_HEADER + '7,1,11,2,"MatMul_1,MatMul\n',
    }
    out += [Case(f"ascend-csv-{k}", "structure", "import", _asc_csv(t), codes=(0, 2))
            for k, t in structure.items()]
    out += [Case("ascend-csv-invalid-utf8", "text", "import",
                 _asc_csv(row().encode().replace(b"MatMul_1", b"Mat\xffMul")), codes=(0, 2)),
            Case("ascend-csv-control-chars", "text", "import",
                 _asc_csv(row(Name="a\x1b[2Jb")), codes=(0, 2))]
    tv = ('[{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, '
          '"args": {"name": "Ascend Hardware"}}, '
          '{"ph": "X", "name": "MatMul_1", "pid": 1, "tid": 2, "ts": %s, "dur": %s, '
          '"args": %s}]')
    views = {
        "ts-infinity": ("Infinity", "1", "{}"),
        "ts-string-overflow": ('"1e400"', "1", "{}"),
        "dur-nan-string": ('"100"', '"NaN"', "{}"),
        "ts-unicode-digit": ('"\\u00b2"', "1", "{}"),
        "args-list": ('"100"', "1", "[1]"),
        "args-deep": ('"100"', "1", '{"a": ' * 100_000 + "1" + "}" * 100_000),
        "stream-id-huge": ('"100"', "1", '{"Stream Id": 1e300, "Task Type": "AI_CORE"}'),
    }
    out += [Case(f"ascend-json-{k}", "numbers" if "args" not in k else "structure", "import",
                 _asc_json(tv % v), codes=(0, 2)) for k, v in views.items()]
    out.append(Case("ascend-json-not-a-list", "structure", "import", _asc_json('{"a": 1}'),
                    codes=(0, 2)))
    return out


def parquet_cases() -> list[Case]:
    """Hermes traces whose metadata has wrong types or values, for every trace command."""
    metas = {
        "version-unicode-digit": ({"hermes_schema_version": "\u00b2"}, "schema_version"),
        "version-huge": ({"hermes_schema_version": "9" * 30}, "schema_version"),
        "ranks-fractional": ({"hermes_ranks": "[1.5]"}, "hermes.ranks"),
        "device-list": ({"hermes_device": "[1, 2]"}, "hermes.device"),
        "peak-text": ({"hermes_device": '{"name": "h100", "peak_flops": {"bf16": "fast"}}'},
                      "peak_flops"),
        "offsets-not-object": ({"hermes_clock_offsets_ns": '"x"'}, "clock_offsets"),
        "collector-deep": ({"hermes_collector": "[" * 100_000 + "]" * 100_000}, None),
    }
    out: list[Case] = []
    for k, (kv, needle) in metas.items():
        out += per_command(f"parquet-{k}", "numbers" if "version" in k or "fractional" in k
                            else "structure",
                            lambda d, kv=kv: retag(d, "bad.parquet", **kv), needle,
                            commands=TRACE_COMMANDS if k in ("device-list", "peak-text")
                            else ("validate", "analyze", "report", "export"))

    def truncated(d: Path) -> Path:
        good = good_trace(d, "_t.parquet")
        bad = d / "bad.parquet"
        bad.write_bytes(good.read_bytes()[:-100])
        good.unlink()
        return bad

    def not_parquet(d: Path) -> Path:
        return write(d, "bad.parquet", b"PAR1 this is not parquet PAR1")

    out += per_command("parquet-truncated", "structure", truncated, "bad.parquet")
    out += per_command("parquet-garbage", "structure", not_parquet, "bad.parquet")
    return out


def main(argv: list[str]) -> int:
    """Write every case's files under ``argv[0]/<id>/`` and list the argv to run."""
    root = Path(argv[0] if argv else "bad_inputs_corpus")
    root.mkdir(parents=True, exist_ok=True)
    for case in cases():
        d = root / case.id
        d.mkdir(exist_ok=True)
        try:
            args = case.build(d)
        except OSError as exc:  # FIFOs and permissions need a POSIX file system
            print(f"{case.id}: skipped ({exc})", file=sys.stderr)
            continue
        print(f"{case.id}\t{case.cls}\t{' '.join(os.fsdecode(a) for a in args)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
