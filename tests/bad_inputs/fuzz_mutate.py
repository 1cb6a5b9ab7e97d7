"""Mutations for the fuzzer (tests/bad_inputs/fuzz.py): odd JSON values, Kineto events and
documents, bytes, CSV text and nested JSON objects; the Kineto seed tables."""

from __future__ import annotations

import copy
import csv
import gzip
import io
import json
import random
from pathlib import Path
from typing import Any

from tests.bad_inputs.make_corpus import EVENTS

ROOT = Path(__file__).resolve().parents[2]
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
#: a string :func:`dumps` writes as bytes that are not UTF-8
BAD_UTF8 = "<<not-utf8>>"


def odd_value(rng: random.Random) -> Any:
    """Another JSON type or an extreme value."""
    return rng.choice([
        "", "x", "12", "1.5", "-1", "nan", "\u00b2", "\udc80", "\u202e\u0000", LONG, None, True,
        False, [], [1, 2], ["a"], {}, {"a": 1}, 0, -1, 1.5, -0.0, float("nan"), float("inf"),
        float("-inf"), 1e308, -1e308, 2**31, 2**63, 2**64, -(2**63) - 1, 10**30,
        # issue 38: just past int64 ns once in microseconds; bytes that are not UTF-8
        # (BAD_UTF8, put into the file's bytes by dumps); lane names of superscripts only
        9223372036854775, 9223372036854776, -9223372036854776, 9223372036854775.8075,
        BAD_UTF8, "\u00b9\u00b2"])


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
                       1e15, 0.5, -0.5, 1e-9, 9223372036854775, 9223372036854776])


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
    return text.encode("utf-8", "surrogatepass").replace(BAD_UTF8.encode(), b"a\xff\xfe\xc3(")


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


