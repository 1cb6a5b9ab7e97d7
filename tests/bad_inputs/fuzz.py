"""A seeded mutation fuzzer for the ``hermes`` CLI (a script, not a test: pytest never collects
it). Each case mutates a seed input, runs ``hermes.cli.main([...])`` in process with stdout and
stderr captured and a time limit, and sorts the outcome:

* ``ok``: exit 0 (or 1 from ``check``: a regression or budget verdict);
* ``clean``: exit 2 with exactly one ``hermes: error:`` line, no traceback;
* ``DEFECT``: ``hermes.cli.unexpected`` reached (recorded with its traceback), another exit
  code, a traceback or several error lines, a timeout, or an input file changed.

Families: ``kineto`` (JSON-level mutations; import and analyze), ``kbytes`` (byte-level:
truncate, flip, insert, gzip corruption), ``ascend-csv``, ``ascend-json``, ``parquet`` (columns
and metadata; analyze, report, diff, check). Each defect's input, argv and traceback go to
``--out DIR/<family>-<n>/``; ``--minimize`` shrinks a JSON defect's event list first.

    nice -n 10 .venv/bin/python tests/bad_inputs/fuzz.py --seed 1 --iterations 2000 \\
        --family kineto --out /tmp/fuzz
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import gzip
import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bad_inputs.make_corpus import EVENTS  # noqa: E402

KINETO_DIR = ROOT / "tests" / "data" / "kineto"
ASCEND_DIR = ROOT / "tests" / "data" / "ascend"
KINETO_SEEDS = ("cuda_event_sync.json.gz", "two_stream_prefetch.pt.trace.json.gz",
                "big_matmul.pt.trace.json.gz", "sampled_rank-0.json.gz")
#: The corpus's tiny trace plus a collective: its launch, kernel and communication args.
COLLECTIVE = [
    *EVENTS,
    {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 120,
     "dur": 5, "args": {"External id": 9, "Collective name": "allreduce", "dtype": "Float",
                        "In msg nelems": 1024, "Out msg nelems": 1024, "Group size": 2,
                        "Process Group Name": "0", "Process Group Ranks": "[0, 1]", "rank": 0}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
     "ts": 121, "dur": 2, "args": {"correlation": 6, "External id": 9}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0,
     "tid": 8, "ts": 124, "dur": 20, "args": {
         "correlation": 6, "stream": 8, "device": 0, "External id": 9,
         "Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024,
         "Group size": 2, "dtype": "Float", "Process Group Ranks": "[0, 1]", "rank": 0}},
    {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 6, "pid": 1, "tid": 1, "ts": 121, "bp": "e"},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 6, "pid": 0, "tid": 8, "ts": 124, "bp": "e"},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
     "tid": 7, "ts": 140, "dur": 4, "args": {"correlation": 7, "stream": 7, "device": 0,
                                            "bytes": 4096}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 130, "dur": 3,
     "args": {"External id": 10, "Input Dims": [[4, 8], [8, 4]],
              "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}},
]
CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cpu_op",
        "user_annotation", "gpu_user_annotation", "python_function", "ac2g", "fwdbwd", "Trace",
        "cpu_instant_event", "cuda_sync", "overhead", "Memcpy", "Memset", "Runtime", "Kernel",
        "", "CUPTI")
NAMES = ("ProfilerStep#5", "ProfilerStep#0", "ProfilerStep#-1", "ProfilerStep#", "aten::mm",
         "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "Memcpy HtoD (Pageable -> Device)",
         "Memset (Device)", "cudaStreamSynchronize", "cudaDeviceSynchronize",
         "cudaEventSynchronize", "cudaMemcpyAsync", "cudaLaunchKernel", "nccl:all_reduce",
         "record_param_comms", "Optimizer.step#SGD.step",
         "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "aten::copy_",
         "PyTorch Profiler (0)", "process_name", "thread_name", "", "c10d::allreduce_")
FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp", "s", "args")
ARG_KEYS = ("correlation", "External id", "stream", "device", "Input Dims", "Input type",
            "Concrete Inputs", "flops", "bytes", "Collective name", "In msg nelems",
            "Group size", "Process Group Ranks", "rank", "Sequence number", "Stream Id",
            "Task Type", "name", "labels")
TOP_KEYS = ("traceEvents", "deviceProperties", "distributedInfo", "baseTimeNanoseconds",
            "schemaVersion", "displayTimeUnit")
LONG = "x" * 70_000


def odd_value(rng: random.Random) -> Any:
    """Another JSON type or an extreme value."""
    return rng.choice([
        "", "x", "12", "1.5", "-1", "nan", "\u00b2", "\udc80", "\u202e\u0000", LONG, None, True,
        False, [], [1, 2], ["a"], {}, {"a": 1}, 0, -1, 1.5, -0.0, float("nan"), float("inf"),
        float("-inf"), 1e308, -1e308, 2**31, 2**63, 2**64, -(2**63) - 1, 10**30])


def same_type(rng: random.Random, key: str, old: Any) -> Any:
    """A value of the type the field usually has, but extreme or odd."""
    if key == "cat":
        return rng.choice(CATS)
    if key == "name":
        return rng.choice(NAMES)
    if key in ("Input Dims", "Input Strides"):
        return rng.choice([[[]], [[-1]], [[2**40, 2**40]], [[4, 8], [8]], [], [[0, 0]],
                           [[4, 8], [8, 4], [1]], [[2**63 - 1]], [4, 8], [[[4]]]])
    if key in ("Input type", "Concrete Inputs"):
        return rng.choice([[], ["float"], ["c10::BFloat16", "c10::Half", "int"], [""], ["1e400"],
                           ["", "", "", ""], ["-1"], ["[1, 2]"]])
    if key in ("Process Group Ranks",):
        return rng.choice(["[]", "[0, 0]", "[-1]", "0,1", "[0, 1", "[2147483648]", "x"])
    if isinstance(old, str):
        return rng.choice(["", old * 2, old[:1], "-1", "0", "\u00e9", old + "#-1"])
    return rng.choice([0, -1, 1, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 10**12,
                       1e15, 0.5, -0.5, 1e-9])


def mutate_event(rng: random.Random, ev: dict[str, Any]) -> None:
    op = rng.randrange(9)
    if op >= 7:  # a field or arg of its own type, odd value
        args = ev.get("args")
        if op == 8 and isinstance(args, dict):
            key = rng.choice(ARG_KEYS + tuple(args))
            args[key] = same_type(rng, key, args.get(key))
        else:
            key = rng.choice(FIELDS[:7])
            ev[key] = same_type(rng, key, ev.get(key))
    elif op <= 1:  # a field of another type
        ev[rng.choice(FIELDS)] = odd_value(rng)
    elif op == 2:  # an args key of another type
        args = ev.get("args")
        if not isinstance(args, dict):
            args = ev["args"] = {}
        args[rng.choice(ARG_KEYS)] = odd_value(rng)
    elif op == 3 and ev:  # a field removed
        ev.pop(rng.choice(list(ev)))
    elif op == 4:  # ts backwards, dur negative or huge
        key = rng.choice(("ts", "dur"))
        base = ev.get(key) if isinstance(ev.get(key), (int, float)) else 0
        ev[key] = rng.choice([-base, base - 10**6, -1, 10**15, 1e18, -(10**12), 0])
    elif op == 5:  # a phase changed: B/E, flows, metadata, counters, instants
        ev["ph"] = rng.choice(["B", "E", "s", "f", "t", "M", "C", "i", "I", "b", "e", "n"])
        if ev["ph"] == "M" and rng.random() < 0.7:
            ev["name"] = rng.choice(["process_name", "thread_name", "process_labels",
                                     "process_sort_index", "thread_sort_index"])
            ev["args"] = rng.choice([{"name": odd_value(rng)}, {"labels": odd_value(rng)},
                                     {"sort_index": odd_value(rng)}, odd_value(rng)])
    else:  # args itself odd
        ev["args"] = odd_value(rng) if rng.random() < 0.5 else {
            k: odd_value(rng) for k in rng.sample(ARG_KEYS, 3)}


def mutate_doc(rng: random.Random, doc: Any) -> Any:
    """One JSON-level mutation of a Kineto document (a dict with traceEvents) in place."""
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    op = rng.randrange(10)
    if isinstance(events, list) and events and (op < 6 or op >= 7 and rng.random() < 0.5):
        i = rng.randrange(len(events))
        if isinstance(events[i], dict):
            mutate_event(rng, events[i])
        else:
            events[i] = {}
    elif isinstance(events, list) and events and op == 6:
        sub = rng.randrange(4)
        if sub == 0:
            rng.shuffle(events)
        elif sub == 1:
            events.append(copy.deepcopy(rng.choice(events)))
        elif sub == 2:
            del events[rng.randrange(len(events))]
        else:
            events.insert(rng.randrange(len(events)), odd_value(rng))
    elif isinstance(doc, dict) and op == 7 and rng.random() < 0.5:
        key = rng.choice(TOP_KEYS[1:])
        doc[key] = odd_value(rng) if rng.random() < 0.6 else rng.choice([
            {"rank": odd_value(rng), "world_size": odd_value(rng), "backend": "nccl"},
            [{"id": odd_value(rng), "totalGlobalMem": odd_value(rng), "name": odd_value(rng),
              "computeMajor": odd_value(rng)}], {"pg_config": odd_value(rng)}])
    elif isinstance(doc, dict) and op == 8 and len(doc) > 1 and rng.random() < 0.5:
        doc.pop(rng.choice([k for k in doc if k != "traceEvents"] or ["traceEvents"]))
    elif isinstance(events, list) and events:  # a flow or B/E pair broken
        src = copy.deepcopy(rng.choice(events))
        if isinstance(src, dict):
            src["ph"] = rng.choice(["s", "f", "B", "E"])
            src["id"] = rng.choice([1, odd_value(rng)])
            src["bp"] = rng.choice(["e", odd_value(rng)])
            events.insert(rng.randrange(len(events) + 1), src)
    return doc


def dumps(doc: Any, rng: random.Random) -> bytes:
    text = json.dumps(doc)
    if rng.random() < 0.05:  # a duplicated key in the first event
        i = text.find('"ph"')
        if i > 0:
            text = text[:i] + '"ph": "X", ' + text[i:]
    return text.encode("utf-8", "surrogatepass")


def mutate_bytes(rng: random.Random, data: bytes, gz: bool) -> bytes:
    op = rng.randrange(5)
    if gz and op == 0:  # the compressed stream corrupted
        comp = bytearray(gzip.compress(data))
        for _ in range(rng.randint(1, 4)):
            comp[rng.randrange(len(comp))] = rng.randrange(256)
        return bytes(comp[: rng.randint(1, len(comp))]) if rng.random() < 0.3 else bytes(comp)
    buf = bytearray(data)
    if op == 1:
        buf = buf[: rng.randrange(len(buf) + 1)]
    elif op == 2:
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    elif op == 3:
        pos = rng.randrange(len(buf) + 1)
        buf[pos:pos] = rng.choice([b"\x00", b"\xff\xfe", b"{", b"]", b",", b'"', b"-", b"e9",
                                   b"\xef\xbb\xbf", b"NaN", b"[" * 50, b"\\u"])
    else:
        pos = rng.randrange(len(buf) + 1)
        del buf[pos: pos + rng.randint(1, 20)]
    out = bytes(buf)
    return gzip.compress(out) if gz and rng.random() < 0.8 else out


def mutate_csv(rng: random.Random, text: str) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    if len(rows) < 2 or not rows[0]:
        return text
    op = rng.randrange(9)
    header, body = rows[0], rows[1:]
    r = rng.randrange(len(body))
    if op <= 2 and body[r]:
        c = rng.randrange(len(body[r]))
        body[r][c] = rng.choice(["", "nan", "inf", "-inf", "1e400", "-5", "1e17", "\u00b2",
                                 "x", LONG, '"', "1,2", "N/A", "0x10", " 7 ", "9" * 30,
                                 "\x00", "1.5", "True", "\ufeff1"])
    elif op == 3:
        c = rng.randrange(len(header))
        for row in rows:
            if c < len(row):
                del row[c]
    elif op == 4:
        c = rng.randrange(len(header))
        for row in rows:
            if c < len(row):
                row.insert(c, row[c])
    elif op == 5:
        header[rng.randrange(len(header))] = rng.choice(["", "x", header[0], "\ufeffStep Id"])
    elif op == 6:
        body[r] = body[r][: rng.randrange(len(body[r]) + 1)] + (
            ["extra"] * rng.randint(0, 2))
    elif op == 7:
        rows.insert(rng.randrange(1, len(rows) + 1), list(header))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    text = out.getvalue()
    if op == 8:
        text = rng.choice(["\ufeff" + text, text.replace(",", ";"), text.replace(",", "\t"),
                           text.replace("\n", "\r\n"), text[: rng.randrange(len(text))]])
    return text


#: The importers' last resort (``_guarded_run``): an exception no check foresaw, reported as
#: "malformed value (TypeError: ...)" without the field or line: a defect like unexpected().
#: Likewise an analysis crash that ``hermes analyze`` reports per rank.
MASKED = re.compile(r"malformed value \((\w+Error|\w*Exception): .{0,60}|no rank could be "
                    r"analyzed: (rank -?\d+: (?!hermes\.errors\.)\w+(Error|Exception)\b.{0,60}"
                    r"|$)", re.MULTILINE)


class _Timeout(BaseException):  # noqa: N818 - a signal, not an error class
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _digest(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in d.rglob("*") if p.is_file()}


def run_cli(argv: list[str], inputs: Path, limit: int) -> tuple[str, int | None, str, str]:
    """(outcome, code, stderr, detail) of one in-process run; ``inputs`` must not change."""
    import hermes.cli as cli

    caught: list[str] = []
    original = cli.unexpected

    def spy(exc: BaseException) -> int:
        caught.append("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        return original(exc)

    before = _digest(inputs)
    out, err = io.StringIO(), io.StringIO()
    cli.unexpected = spy
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    code: int | None = None
    detail = ""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
    except _Timeout:
        detail = f"timeout after {limit} s"
    except BaseException as exc:  # noqa: BLE001 - anything escaping main is the finding
        detail = "escaped main: " + "".join(traceback.format_exception(exc))
    finally:
        signal.alarm(0)
        cli.unexpected = original
    text = err.getvalue()
    lines = [ln for ln in text.splitlines() if ln.startswith("hermes: error:")]
    changed = [k for k, v in before.items() if _digest(inputs).get(k) != v]
    if caught:
        detail = caught[0]
    elif changed:
        detail = f"input changed: {changed}"
    elif "Traceback" in text + out.getvalue():
        detail = "traceback printed"
    elif MASKED.search(text):
        detail = f"internal error masked as bad input: {MASKED.search(text).group(0)}"
    elif "Warning:" in text:
        detail = "a warning printed: " + text[text.index("Warning:") - 40:][:160]
    elif code == 2 and len(lines) != 1:
        detail = f"{len(lines)} error lines"
    elif code not in (0, 2) and not (code == 1 and argv[0] == "check") and not detail:
        detail = f"exit {code}"
    if detail:
        return "DEFECT", code, text, detail
    return ("ok" if code in (0, 1) else "clean"), code, text, ""


def signature(detail: str) -> str:
    """A defect's identity: the exception line and the innermost hermes frame."""
    if not detail.startswith("Traceback"):
        return detail[:110]
    lines = [ln.strip() for ln in detail.strip().splitlines()]
    where = [ln for ln in lines if ln.startswith("File ") and "/hermes" in ln.replace(
        "/collectors", "/hermes").replace("/analyzers", "/hermes")]
    exc = lines[-1].split(":")[0] if lines else ""
    return f"{exc} @ {where[-1] if where else '?'}"[:300]


def ensure_stdlib_streams() -> None:
    os.environ["HERMES_NO_PROGRESS"] = "1"
    os.environ.pop("HERMES_DEBUG", None)


def _load_json(path: Path) -> Any:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


class Family:
    """Seeds of one input family and how a case is built from them."""

    name = ""

    def __init__(self, rng: random.Random, work: Path) -> None:
        self.rng, self.work = rng, work

    def build(self, d: Path) -> tuple[list[str], Path]:
        """Write a mutated input under ``d/in``; return the argv and the inputs folder."""
        raise NotImplementedError


class Kineto(Family):
    name = "kineto"

    def __init__(self, rng: random.Random, work: Path) -> None:
        super().__init__(rng, work)
        self.seeds = [{"schemaVersion": 1, "deviceProperties": [], "traceEvents": EVENTS},
                      {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 2},
                       "traceEvents": COLLECTIVE}]
        self.seeds += [_load_json(KINETO_DIR / n) for n in KINETO_SEEDS]

    def payload(self, d: Path) -> tuple[Path, bytes]:
        rng = self.rng
        doc = copy.deepcopy(rng.choice(self.seeds[:4] * 3 + self.seeds[4:]))
        for _ in range(rng.choice((1, 1, 2, 3, 5))):
            mutate_doc(rng, doc)
        name = rng.choice(("r.pt.trace.json", "r.pt.trace.json.gz", "r.json"))
        data = dumps(doc, rng)
        return d / "in" / name, gzip.compress(data) if name.endswith(".gz") else data

    def build(self, d: Path) -> tuple[list[str], Path]:
        path, data = self.payload(d)
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        if self.rng.random() < 0.5:
            return ["import", str(path), "--out", str(d / "o.parquet")], path.parent
        return ["analyze", str(path), "-f", self.rng.choice(("text", "json"))], path.parent


class KinetoBytes(Kineto):
    name = "kbytes"

    def payload(self, d: Path) -> tuple[Path, bytes]:
        seed = self.rng.choice(self.seeds[:3])
        gz = self.rng.random() < 0.4
        data = mutate_bytes(self.rng, json.dumps(seed).encode(), gz)
        return d / "in" / ("r.pt.trace.json.gz" if gz else "r.pt.trace.json"), data


class Ascend(Family):
    """Kernel details, step trace time and trace view files in an ASCEND_PROFILER_OUTPUT."""

    name = "ascend-csv"
    FILES = ("kernel_details_newer_cann.csv", "kernel_details_older_cann.csv",
             "cluster_step_trace_time.csv")

    def __init__(self, rng: random.Random, work: Path) -> None:
        super().__init__(rng, work)
        self.texts = {n: (ASCEND_DIR / n).read_text() for n in self.FILES}

    def mutated(self) -> tuple[str, bytes]:
        name = self.rng.choice(self.FILES)
        text = self.texts[name]
        for _ in range(self.rng.choice((1, 1, 2, 3))):
            text = mutate_csv(self.rng, text)
        dest = name.replace("_newer_cann", "").replace("_older_cann", "")
        return dest, text.encode("utf-8", "surrogatepass")

    def build(self, d: Path) -> tuple[list[str], Path]:
        prof = d / "in" / "prof_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        prof.mkdir(parents=True)
        dest, data = self.mutated()
        (prof / dest).write_bytes(data)
        if self.rng.random() < 0.5:
            return ["import", str(prof / dest), "--out", str(d / "o.parquet")], d / "in"
        return ["analyze", str(prof / dest), "-f", "json"], d / "in"


class AscendJson(Ascend):
    name = "ascend-json"
    FILES = ("cluster_communication.json", "trace_view.json")

    def __init__(self, rng: random.Random, work: Path) -> None:
        Family.__init__(self, rng, work)
        view = _load_json(ASCEND_DIR / "trace_view.json")
        small = [e for e in view if e.get("ph") == "M"] + [
            e for e in view if e.get("ph") != "M"][:300]
        self.docs = {"trace_view.json": small,
                     "cluster_communication.json": _load_json(
                         ASCEND_DIR / "cluster_communication.json")}

    def mutated(self) -> tuple[str, bytes]:
        rng = self.rng
        name = rng.choice(self.FILES)
        doc = copy.deepcopy(self.docs[name])
        if name == "trace_view.json":
            wrap = {"traceEvents": doc}
            for _ in range(rng.choice((1, 1, 2, 3))):
                mutate_doc(rng, wrap)
            doc = wrap.get("traceEvents", wrap)
        else:
            for _ in range(rng.choice((1, 2, 3))):
                mutate_nested(rng, doc)
        return name, dumps(doc, rng)


def mutate_nested(rng: random.Random, doc: Any) -> None:
    """Replace, drop or retype one value somewhere in a nested JSON object."""
    node, depth = doc, rng.randint(1, 6)
    for _ in range(depth):
        if isinstance(node, dict) and node:
            key = rng.choice(list(node))
            if not isinstance(node[key], (dict, list)) or rng.random() < 0.25:
                op = rng.randrange(3)
                if op == 0:
                    node[key] = odd_value(rng)
                elif op == 1:
                    node.pop(key)
                else:
                    node[rng.choice(["x", "", "1", "(0, 1)", "Transit Size(MB)"])] = node.pop(key)
                return
            node = node[key]
        elif isinstance(node, list) and node:
            i = rng.randrange(len(node))
            if not isinstance(node[i], (dict, list)):
                node[i] = odd_value(rng)
                return
            node = node[i]
        else:
            return


class Parquet(Family):
    """Hermes traces with columns dropped, retyped, nulled or extreme, and metadata mutated."""

    name = "parquet"

    def __init__(self, rng: random.Random, work: Path) -> None:
        super().__init__(rng, work)
        import pyarrow.parquet as pq

        from hermes.cli import main

        sources = [work / "events.pt.trace.json"]
        sources[0].write_text(json.dumps({"traceEvents": EVENTS}))
        sources += [KINETO_DIR / "two_stream_prefetch.pt.trace.json.gz",
                    KINETO_DIR / "cuda_event_sync.json.gz"]
        prof = work / "p_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        prof.mkdir(parents=True)
        shutil.copy(ASCEND_DIR / "kernel_details_newer_cann.csv", prof / "kernel_details.csv")
        sources.append(prof / "kernel_details.csv")
        self.tables = []
        for i, src in enumerate(sources):
            out = work / f"seed{i}.parquet"
            with contextlib.redirect_stdout(io.StringIO()):
                assert main(["import", str(src), "--out", str(out)]) == 0, src
            self.tables.append(pq.read_table(out))
        self.good = work / "seed0.parquet"

    def mutated(self) -> Any:
        import pyarrow as pa

        rng = self.rng
        table = rng.choice(self.tables)
        for _ in range(rng.choice((1, 1, 2, 3))):
            op = rng.randrange(6)
            names = table.column_names
            if op == 0 and names:
                table = table.drop_columns([rng.choice(names)])
            elif op in (1, 2, 3) and names:
                i = rng.randrange(len(names))
                col = table.column(i).combine_chunks()
                table = table.set_column(i, names[i], self.column(col, op, len(table)))
            elif op == 4:
                meta = dict(table.schema.metadata or {})
                key = rng.choice(list(meta) + [b"hermes.schema_version", b"hermes.ranks",
                                               b"hermes.device", b"hermes.clock_offsets_ns"])
                if rng.random() < 0.2:
                    meta.pop(key, None)
                else:
                    meta[key] = self.meta_value(meta.get(key))
                table = table.replace_schema_metadata(meta)
            elif len(table):
                idx = pa.array([rng.randrange(len(table)) for _ in range(len(table))])
                table = table.take(idx) if rng.random() < 0.5 else table.slice(
                    0, rng.randrange(len(table)))
        return table

    def column(self, col: Any, op: int, n: int) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        rng = self.rng
        if op == 1:  # nulls
            mask = pa.array([rng.random() < 0.3 for _ in range(n)])
            return pc.if_else(mask, pa.nulls(n, col.type), col)
        if op == 2:  # another type
            kind = rng.choice(["str", "float", "int8", "bool", "uint64", "dict_int"])
            try:
                if kind == "str":
                    return pc.cast(col, pa.string())
                if kind == "float":
                    return pa.array([rng.choice([1.5, float("nan"), -1.0, 1e300]) for _ in
                                     range(n)])
                if kind == "int8":
                    few = [rng.randrange(-128, 128) for _ in range(3)]  # not 256 ranks
                    return pa.array([rng.choice(few) for _ in range(n)], pa.int8())
                if kind == "bool":
                    return pa.array([rng.random() < 0.5 for _ in range(n)])
                if kind == "uint64":
                    return pa.array([2**64 - 1] * n, pa.uint64())
                return pa.array([str(rng.randrange(3)) for _ in range(n)]).dictionary_encode()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return pa.array(["x"] * n)
        # extreme values of the column's own type
        t = col.type
        if pa.types.is_integer(t):
            info_max = {8: 127, 16: 2**15 - 1, 32: 2**31 - 1, 64: 2**63 - 1}[t.bit_width]
            vals = [rng.choice([0, -1, info_max, -info_max - 1, 10**6]) for _ in range(n)]
            return pa.array(vals, t)
        if pa.types.is_floating(t):
            return pa.array([rng.choice([float("nan"), float("inf"), -1.0, 1e308, 0.0])
                             for _ in range(n)], t)
        if pa.types.is_dictionary(t) or pa.types.is_string(t):
            words = ["", "kernel", "step", "host", "device", "bogus", "\u00e9\udc80"[:1],
                     "stream -1", LONG[:5000], '{"a": [1,', "null", "collective", "link"]
            arr = pa.array([rng.choice(words) for _ in range(n)])
            return arr.dictionary_encode() if pa.types.is_dictionary(t) else arr
        return col

    def meta_value(self, old: bytes | None) -> bytes:
        rng = self.rng
        if old and rng.random() < 0.6:
            try:
                doc = json.loads(old)
                if isinstance(doc, (dict, list)) and doc:
                    mutate_nested(rng, doc)
                else:
                    doc = odd_value(rng)
                return json.dumps(doc).encode("utf-8", "surrogatepass")
            except ValueError:
                pass
        return rng.choice([b"", b"x", b"0", b"2", b"-1", b"1.0", b"null", b"[]", b"{}",
                           b"[0, 0]", b"[-1]", b"[2147483648]", b'{"0": 1e300}', b"\xff",
                           b'{"name": null}', b'{"name": "h100", "peak_flops": []}', b"NaN",
                           b"[" * 50, b'{"mode": 5}', b'{"0": "x"}'])

    def build(self, d: Path) -> tuple[list[str], Path]:
        import pyarrow.parquet as pq

        inp = d / "in"
        inp.mkdir(parents=True)
        bad = inp / "bad.parquet"
        try:
            pq.write_table(self.mutated(), bad)
        except Exception:  # noqa: BLE001 - a table Arrow cannot write: no case
            pq.write_table(self.tables[0], bad)
        shutil.copy(self.good, inp / "good.parquet")
        cmd = self.rng.choice(("analyze", "analyze", "report", "diff", "diff", "check"))
        if cmd == "analyze":
            return ["analyze", str(bad), "-f", self.rng.choice(("text", "json"))], inp
        if cmd == "report":
            return ["report", str(bad), "--out", str(d / "r.html")], inp
        if cmd == "diff":
            pair = [str(inp / "good.parquet"), str(bad)]
            return ["diff", *(pair if self.rng.random() < 0.5 else pair[::-1])], inp
        return ["check", str(bad), "--baseline", str(inp / "good.parquet")], inp


FAMILIES = {f.name: f for f in (Kineto, KinetoBytes, Ascend, AscendJson, Parquet)}


def minimize_events(argv: list[str], path: Path, inputs: Path, sig: str, limit: int) -> None:
    """Greedily drop events (then top-level keys) while the same defect reproduces."""
    raw = path.read_bytes()
    gz = path.suffix == ".gz"
    try:
        doc = json.loads(gzip.decompress(raw) if gz else raw)
    except ValueError:
        return
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        return

    def still(cand: Any) -> bool:
        data = json.dumps(cand).encode("utf-8", "surrogatepass")
        path.write_bytes(gzip.compress(data) if gz else data)
        outcome, _, _, detail = run_cli(argv, inputs, limit)
        return outcome == "DEFECT" and signature(detail) == sig

    chunk = max(1, len(events) // 2)
    while chunk >= 1:
        i = 0
        while i < len(events):
            trial = events[:i] + events[i + chunk:]
            if isinstance(doc, dict):
                cand = {**doc, "traceEvents": trial}
            else:
                cand = trial
            if trial and still(cand):
                events = trial
                doc = cand
            else:
                i += chunk
        chunk //= 2
    if isinstance(doc, dict):
        for key in [k for k in doc if k != "traceEvents"]:
            cand = {k: v for k, v in doc.items() if k != key}
            if still(cand):
                doc = cand
    data = json.dumps(doc).encode("utf-8", "surrogatepass")
    path.write_bytes(gzip.compress(data) if gz else data)


def campaign(family: str, seed: int, iterations: int, out: Path, limit: int,
             minimize: bool) -> Counter[str]:
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    seen: dict[str, int] = {}
    msgs: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="hermes-fuzz-") as tmp:
        work = Path(tmp)
        fam = FAMILIES[family](rng, work)
        for n in range(iterations):
            d = work / f"c{n}"
            d.mkdir()
            argv, inputs = fam.build(d)
            outcome, code, err, detail = run_cli(argv, inputs, limit)
            counts[outcome] += 1
            if outcome == "clean":
                msgs[re.sub(r"/tmp/\S+/", "", err.strip())[:70]] += 1
            if outcome == "DEFECT":
                sig = signature(detail)
                seen[sig] = seen.get(sig, 0) + 1
                if seen[sig] <= 2:
                    dest = out / f"{family}-s{seed}-{n}"
                    if minimize and argv[0] in ("import", "analyze") and family != "kbytes":
                        src = Path(argv[1])
                        if src.suffix in (".json", ".gz"):
                            minimize_events(argv, src, inputs, sig, limit)
                    shutil.copytree(inputs, dest / "in")
                    (dest / "argv.txt").write_text(" ".join(argv) + "\n")
                    (dest / "detail.txt").write_text(f"exit {code}\n{err}\n{detail}\n")
                    print(f"[{family} {n}] DEFECT {sig} -> {dest}", flush=True)
            shutil.rmtree(d, ignore_errors=True)
    for sig, k in sorted(seen.items(), key=lambda kv: -kv[1]):
        print(f"  {k:5d}  {sig}")
    for msg, k in msgs.most_common(12):
        print(f"  clean {k:5d}  {msg}")
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--family", choices=sorted(FAMILIES), action="append")
    p.add_argument("--out", type=Path, default=Path("fuzz-out"))
    p.add_argument("--limit", type=int, default=30, help="seconds per case")
    p.add_argument("--minimize", action="store_true")
    a = p.parse_args(argv)
    ensure_stdlib_streams()
    a.out.mkdir(parents=True, exist_ok=True)
    total = 0
    for family in a.family or sorted(FAMILIES):
        counts = campaign(family, a.seed, a.iterations, a.out, a.limit, a.minimize)
        print(f"{family}: {a.iterations} cases: " + ", ".join(
            f"{k} {counts[k]}" for k in ("ok", "clean", "DEFECT")), flush=True)
        total += counts["DEFECT"]
    return 1 if total else 0


if __name__ == "__main__":
    raise SystemExit(main())
