"""Input families of the fuzzer (tests/bad_inputs/fuzz.py): seeds and how one case is built."""

from __future__ import annotations

import abc
import contextlib
import copy
import gzip
import io
import json
import random
import shutil
from pathlib import Path
from typing import Any

from tests.bad_inputs.fuzz_mutate import (
    ASCEND_DIR,
    COLLECTIVE,
    EVENTS,
    KINETO_DIR,
    KINETO_SEEDS,
    LONG,
    dumps,
    mutate_bytes,
    mutate_csv,
    mutate_doc,
    mutate_nested,
    odd_value,
)


def _load_json(path: Path) -> Any:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


class Family(abc.ABC):
    """Seeds of one input family and how a case is built from them."""

    name = ""

    def __init__(self, rng: random.Random, work: Path) -> None:
        self.rng, self.work = rng, work

    @abc.abstractmethod
    def build(self, d: Path) -> tuple[list[str], Path]:
        """Write a mutated input under ``d/in``; return the argv and the inputs folder."""


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
