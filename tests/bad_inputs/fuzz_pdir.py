"""The fuzzer's ``pdir`` family (tests/bad_inputs/fuzz.py): per-rank Hermes Parquet
DIRECTORIES (what ``hermes emulate --ranks N`` and a multi-rank ``hermes import`` write),
analyzed in process (``--workers 1``) and in a pool (``--workers 2``), with ``--rank`` and
``--allow-missing`` now and then, and validated.

Seeds: ``hermes emulate deepfm --ranks 3 --steps 3`` and ``benchmarks/synth.py write(...)`` (3
ranks, a few thousand events), made once per campaign. A case copies a seed directory and
applies 1-3 mutations (:data:`MUTATIONS`). Besides what ``fuzz.run_cli`` calls a defect, a case
is a DEFECT when: exit 1 without a missing entry (or exit 0 with one and no --allow-missing); a
missing entry not named on stderr (exit 1) or without its MISSING line (text); exit 0 or 1
while a rank of the input (a rank its rows or its footer hold) is neither analyzed nor missing;
``--workers 1`` and ``--workers 2`` disagreeing (exit code or JSON document); a pool worker
left alive after the case.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import random
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from tests.bad_inputs.fuzz_families import Family

ROOT = Path(__file__).resolve().parents[2]


def _read(f: Path) -> Any:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(f)
    meta = dict(pf.schema_arrow.metadata or {})
    meta.update(pf.metadata.metadata or {})
    return pf.read().replace_schema_metadata(meta)


def _write(table: Any, f: Path) -> None:
    import pyarrow.parquet as pq

    tmp = f.with_name(f.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, f)


def _set_meta(table: Any, key: str, value: bytes | None) -> Any:
    meta = dict(table.schema.metadata or {})
    if value is None:
        meta.pop(key.encode(), None)
    else:
        meta[key.encode()] = value
    return table.replace_schema_metadata(meta)


def _set_rank(table: Any, rank: int) -> Any:
    import pyarrow as pa

    i = table.schema.get_field_index("rank")
    return table.set_column(i, table.schema.field(i), pa.array([rank] * len(table),
                                                               table.schema.field(i).type))


class Case:
    """One directory under construction: which ranks each file's rows and footer hold."""

    def __init__(self, rng: random.Random, src: Path, dst: Path, other: Path) -> None:
        self.rng, self.dir, self.other = rng, dst, other
        shutil.copytree(src, dst, symlinks=True)
        self.truth: dict[str, set[int]] = {}  # file name -> ranks its rows or footer hold
        for f in sorted(dst.glob("*.parquet")):
            self.truth[f.name] = {int(f.stem.split("-")[-1])}
        self.ops: list[str] = []

    def pick(self) -> Path:
        names = [n for n in self.truth if (self.dir / n).is_file()
                 and not (self.dir / n).is_symlink()]
        return self.dir / self.rng.choice(names or list(self.truth))

    def new_name(self) -> Path:
        return self.dir / f"rank-{self.rng.choice((7, 8, 9, 10, 11)):05d}.parquet"


def _bytes_op(case: Case, f: Path) -> None:
    rng = case.rng
    data = bytearray(f.read_bytes())
    n = len(data)
    how = rng.choice(("cut-small", "cut-tail", "zero-middle", "flip-footer", "flip-rows",
                      "empty", "text"))
    if how == "cut-small":
        data = data[:rng.randrange(0, min(n, 4000))]
    elif how == "cut-tail":
        data = data[:n - rng.randrange(1, 64)]
    elif how == "zero-middle":
        a, k = rng.randrange(4, max(5, n // 2)), rng.randrange(8, max(9, n // 3))
        data[a:a + k] = bytes(len(data[a:a + k]))
    elif how in ("flip-footer", "flip-rows"):
        lo, hi = (max(4, n - 2000), n - 8) if how == "flip-footer" else (4, max(5, n // 2))
        for _ in range(rng.choice((1, 2, 8))):
            i = rng.randrange(lo, max(lo + 1, hi))
            if i < n:
                data[i] ^= 1 << rng.randrange(8)
    elif how == "empty":
        data = bytearray()
    else:
        data = bytearray(b"rank,ts\n0,1\n")
    f.write_bytes(bytes(data))
    case.ops.append(f"{how} {f.name}")


def _meta_op(case: Case, f: Path) -> None:
    rng = case.rng
    key, values = rng.choice((
        ("hermes.schema_version", [b"0", b"2", b"99", b"x", None]),
        ("hermes.source", [b"kineto", b"ascend", b"", None]),
        ("hermes.created_by", [b"someone else", None]),
        ("hermes.device", [b'{"name": "mi300x"}', b'{"name": "910b"}', b"{}", b"x", None]),
        ("hermes.clock_offsets_ns", [b'{"0": 5000000}', b'{"1": -1}', b"[]", b"x", None]),
        ("hermes.ranks", [b"[]", b"[7]", b"[0, 1, 2]", b"[-1]", b"x", b"[0]", None]),
        ("hermes.extra", [b'{"world_size": 99}', b'{"run_id": "other"}', b"[]", None]),
    ))
    value = rng.choice(values)
    table = _set_meta(_read(f), key, value)
    _write(table, f)
    if key == "hermes.ranks" and value not in (None, b"x", b"[]"):
        case.truth[f.name] |= set(json.loads(value))
    case.ops.append(f"meta {key}={value!r} {f.name}")


def _table_op(case: Case, f: Path) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = case.rng
    table = _read(f)
    how = rng.choice(("zero-rows", "rows-other-rank", "rows-negative", "nulls", "to-string",
                      "drop-column", "few-rows"))
    if how == "zero-rows":
        table = table.slice(0, 0)
    elif how == "few-rows":
        table = table.slice(0, rng.randrange(1, 20))
    elif how in ("rows-other-rank", "rows-negative"):
        rank = -1 if how == "rows-negative" else rng.choice((0, 1, 2, 5))
        table = _set_rank(table, rank)
        case.truth[f.name].add(rank)
    else:
        name = rng.choice([c for c in table.column_names if c != "rank"] + ["rank"])
        i = table.schema.get_field_index(name)
        col = table.column(i).combine_chunks()
        if how == "drop-column":
            table = table.drop_columns([name])
        else:
            if how == "nulls":
                mask = pa.array([rng.random() < 0.3 for _ in range(len(col))])
                new = pc.if_else(mask, pa.nulls(len(col), col.type), col)
            else:
                try:
                    new = pc.cast(col, pa.string())
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    new = pa.array(["x"] * len(col))
            table = table.set_column(i, name, new)
        how += f"[{name}]"
    _write(table, f)
    case.ops.append(f"{how} {f.name}")


def _dir_op(case: Case, f: Path) -> None:
    rng = case.rng
    how = rng.choice(("duplicate", "symlink", "subdir", "fifo", "hidden", "other-run",
                      "other-run-new-rank", "delete"))
    new = case.new_name()
    if new.name in case.truth or new.exists() or new.is_symlink():
        how = "hidden"
    if how == "duplicate":
        shutil.copy(f, new)
        case.truth[new.name] = set(case.truth[f.name])
    elif how == "symlink":
        new.symlink_to(f.name)
        case.truth[new.name] = set(case.truth[f.name])
    elif how == "subdir":
        (case.dir / "sub.parquet").mkdir(exist_ok=True)
    elif how == "fifo":
        if not (case.dir / "pipe.parquet").exists():
            os.mkfifo(case.dir / "pipe.parquet")
    elif how == "hidden":
        shutil.copy(f, case.dir / f".x{rng.randrange(9)}.parquet")
    elif how == "delete":
        f.unlink()
        case.truth.pop(f.name)
    else:
        src = rng.choice(sorted(case.other.glob("rank-*.parquet")))
        rank = int(src.stem.split("-")[-1])
        if how == "other-run-new-rank":
            rank = int(new.stem.split("-")[-1])
            table = _set_meta(_set_rank(_read(src), rank), "hermes.ranks",
                              json.dumps([rank]).encode())
            _write(table, new)
        else:
            shutil.copy(src, new)
        case.truth[new.name] = {rank}
    case.ops.append(f"{how} {f.name} -> {new.name}")


MUTATIONS = (_bytes_op, _bytes_op, _meta_op, _meta_op, _table_op, _table_op, _dir_op,
             _dir_op)


class PDir(Family):
    """Per-rank Parquet directories; ``run`` checks the directory-specific invariants."""

    name = "pdir"

    def __init__(self, rng: random.Random, work: Path) -> None:
        super().__init__(rng, work)
        from hermes.cli import main

        sys.path.insert(0, str(ROOT / "benchmarks"))
        import synth  # noqa: PLC0415 - benchmarks/ is not a package

        self.seeds = [work / "seed-emulate", work / "seed-synth"]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(
                io.StringIO()):
            assert main(["emulate", "deepfm", "--ranks", "3", "--steps", "3", "--out",
                         str(self.seeds[0])]) == 0
        synth.write(self.seeds[1], ranks=3, steps=4, ops=60)
        self.case: Case | None = None
        self.mode = ""

    def build(self, d: Path) -> tuple[list[str], Path]:
        rng = self.rng
        i = rng.randrange(2)
        case = Case(rng, self.seeds[i], d / "in" / "run", self.seeds[1 - i])
        for _ in range(rng.choice((1, 1, 2, 3))):
            op, f = rng.choice(MUTATIONS), case.pick()
            try:
                op(case, f)
            except (OSError, ValueError, KeyError):  # (Arrow's errors are ValueErrors)
                case.ops.append(f"({op.__name__} of {f.name}: not readable, left as is)")
        self.case = case
        self.mode = rng.choice(("json", "json", "json", "text", "validate"))
        if self.mode == "validate":
            return ["validate", str(case.dir)], d / "in"
        argv = ["analyze", str(case.dir), "-f", self.mode]
        if rng.random() < 0.25:
            argv += ["--rank", str(rng.choice((0, 1, 2, 7, -1)))]
        if rng.random() < 0.3:
            argv.append("--allow-missing")
        return argv, d / "in"

    def run(self, argv: list[str], inputs: Path, limit: int, run_cli: Any
            ) -> tuple[str, int | None, str, str]:
        """Run the case (analyze: ``--workers 1`` then ``--workers 2``) and check it."""
        if argv[0] != "analyze":
            outcome, code, out, err, detail = run_cli(argv, inputs, limit)
            return outcome, code, err, detail
        results = []
        for w in ("1", "2"):
            outcome, code, out, err, detail = run_cli([*argv, "--workers", w], inputs, limit)
            alive = multiprocessing.active_children()
            if outcome != "DEFECT" and alive:
                outcome, detail = "DEFECT", f"--workers {w}: {len(alive)} worker(s) left alive"
            if outcome != "DEFECT":
                detail = self.check(argv, code, out, err)
                outcome = "DEFECT" if detail else outcome
            if outcome == "DEFECT":
                return outcome, code, err, f"--workers {w}: {detail}" if not detail.startswith(
                    "Traceback") else detail
            results.append((code, out, err))
        (c1, o1, e1), (c2, o2, e2) = results
        if c1 != c2:
            return "DEFECT", c2, e1 + e2, f"exit {c1} with --workers 1, {c2} with --workers 2"
        if self.mode == "json" and c1 in (0, 1) and json.loads(o1) != json.loads(o2):
            d1, d2 = json.loads(o1), json.loads(o2)
            keys = sorted(k for k in set(d1) | set(d2) if d1.get(k) != d2.get(k))
            return "DEFECT", c1, e1, f"--workers 1 and 2 differ in {keys}"
        return ("ok" if c1 in (0, 1) else "clean"), c1, e1, ""

    def check(self, argv: list[str], code: int | None, out: str, err: str) -> str:
        """The directory invariants of one analyze run ('' when they hold)."""
        if code not in (0, 1):
            return ""
        allow = "--allow-missing" in argv
        if self.mode == "text":
            shown = [ln for ln in out.splitlines() if ln.startswith("MISSING")]
            if code == 1 and (allow or not shown):
                return "exit 1 without a MISSING line"
            if code == 0 and shown and not allow:
                return "exit 0 with a MISSING line, without --allow-missing"
            return ""
        doc = json.loads(out)
        missing = doc.get("missing_ranks", [])
        if code == 1 and (allow or not missing):
            return "exit 1 without a missing entry"
        if code == 0 and missing and not allow:
            return "exit 0 with missing entries, without --allow-missing"
        for m in missing:  # a rank's error is the input's, never an exception's class name
            if re.match(r"(\w+\.)*\w*(Error|Exception|Invalid|Interrupt)\b", str(m["error"])):
                return f"internal error as a missing entry: {str(m['error'])[:80]}"
        for m in missing if code == 1 else ():
            name = str(m["rank"]) if m["rank"] is not None else f"file {m['file']}"
            if name not in err:
                return f"missing {name} not named on stderr"
        assert self.case is not None
        wanted = None if "--rank" not in argv else {int(argv[argv.index("--rank") + 1])}
        named = {m["rank"] for m in missing} | {m.get("file") for m in missing}
        for fname, ranks in self.case.truth.items():
            for r in ranks:
                if wanted is not None and r not in wanted:
                    continue
                told = any(fname in str(m.get("error")) for m in missing)
                if r not in doc["ranks"] and r not in named and fname not in named and not told:
                    return f"rank {r} ({fname}) neither analyzed nor missing"
        return ""
