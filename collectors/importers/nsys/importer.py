"""Importer of Nsight Systems SQLite exports (``nsys export --type sqlite``), one file per
capture: every process that ran device work is a rank, several GPUs in one file included.

Per file, the passes are: the context (processes -> ranks, thread names), the step windows
(NVTX step ranges), the runtime calls' correlation ids (so device rows get their launch's
step), then the tables themselves, chunk by chunk, each through its mapping (``gpu``,
``host``, ``nvtx``) into the writer every importer uses. Several files are ranks one after
another (a multi-node capture: one file per node). What the export has that Hermes does not
read is named in the import summary, never an error.

Timestamps stay on Nsight's clock (integer ns; the capture's UTC start is kept in the
metadata, ``extra.nsys``).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hermes.collectors.importers.base import ImportResult
from hermes.collectors.importers.nsys import context, gpu, host, info, nvtx, report
from hermes.collectors.importers.nsys.detect import is_sqlite
from hermes.collectors.importers.nsys.events import KINDS
from hermes.collectors.importers.nsys.sql import Export
from hermes.errors import ImportFormatError
from hermes.trace import comm_patterns
from hermes.trace.arrowbuf import strings as arrow_strings
from hermes.trace.arrowbuf import to_numpy
from hermes.trace.memory import MemoryWriter
from hermes.trace.meta import TraceMeta
from hermes.trace.writer import open_writer

NAME = "nsys"
ROW_GROUP_ROWS = 256 * 1024


class _Counts:
    def __init__(self) -> None:
        self.by_kind: Counter[str] = Counter()
        self.by_table: Counter[str] = Counter()


def _write(writer: Any, cols: dict[str, Any] | None, table: str, counts: _Counts) -> int:
    if cols is None:
        return 0
    kinds = np.bincount(to_numpy(cols["kind"].indices), minlength=len(KINDS))
    for i in np.flatnonzero(kinds).tolist():
        counts.by_kind[KINDS[i]] += int(kinds[i])
    n = len(cols["ts_ns"])
    counts.by_table[table] += n
    writer.write(cols)
    return n


@dataclass
class _State:
    """What the tables' readers share while one export is read."""

    export: Export
    ctx: context.Context
    dev: gpu.DeviceState
    hst: host.HostState
    domains: dict[int, str]


@dataclass(frozen=True)
class Reader:
    """How one table is read: ``open(export, collectives)`` starts reading its chunks (SQL
    only: no state needed, so a table can be read while earlier ones are mapped);
    ``mapper(state)``, called when its first chunk is to be mapped (after the tables before
    it), gives the function making a chunk's batch."""

    open: Callable[[Export, bool], Iterator[Any]]
    mapper: Callable[[_State], Callable[[Any], Any]]


def _nvtx_mapper(st: _State) -> Callable[[Any], Any]:
    _, layout = nvtx.exprs_of(st.export)
    strings = (arrow_strings(st.export.strings()[1]), st.export.string_codes)
    return lambda c: nvtx.to_batch(c, st.ctx, st.domains, layout, strings)


NVTX_READER = Reader(
    open=lambda export, _: export.chunks(nvtx.TABLE, nvtx.exprs_of(export)[0],
                                         where=nvtx.where()),
    mapper=_nvtx_mapper)


def _host_reader(spec: host.HostTable) -> Reader:
    def mapper(st: _State) -> Callable[[Any], Any]:
        st.ctx.ops.seal()  # the operator ranges are all read: NVTX came first
        return lambda c: host.to_batch(c, spec, st.hst)
    return Reader(lambda export, _: export.chunks(spec.table, host.exprs_of(export, spec)),
                  mapper)


def _device_reader(spec: gpu.DeviceTable) -> Reader:
    def mapper(st: _State) -> Callable[[Any], Any]:
        st.ctx.ops.seal()
        st.ctx.seal_host()  # the runtime calls are all read
        return lambda c: gpu.to_batch(c, spec, st.dev)
    return Reader(lambda export, coll: export.chunks(spec.table,
                                                     gpu.exprs_of(export, spec, coll)),
                  mapper)


def tables(export: Export, warnings: list[str]) -> Iterator[tuple[str, Reader]]:
    """(table, its reader) of every table this export has and Hermes reads, in the order
    the links need; a table without a column its mapping needs is named."""
    def lacks(table: str, cols: list[str]) -> bool:
        miss = export.missing(table, cols)
        if miss and table in export.tables:
            warnings.append(f"{export.path.name}: {table} has no {', '.join(miss)} column: "
                            "not imported")
        return bool(miss) or table not in export.tables

    # NVTX first (the runtime calls take their operator's id), then the runtime calls (the
    # device rows take their launch's step, correlation and operator)
    if not lacks(nvtx.TABLE, nvtx.required()):
        yield nvtx.TABLE, NVTX_READER
    yield from ((s.table, _host_reader(s)) for s in host.TABLES
                if not lacks(s.table, host.required(s)))
    yield from ((s.table, _device_reader(s)) for s in gpu.TABLES
                if not lacks(s.table, gpu.required(s)))


def read_rows(path: Path) -> int:
    """Every row the import reads, read by the same queries and readers (every table's
    reader started at once, as the import starts them) and dropped: no mapping, no writing.
    The floor ``benchmarks/nsys_import.py`` measures the import against; the number of rows
    read."""
    export = Export(path)
    try:
        opened = [reader.open(export, True) for _, reader in tables(export, [])]
        return sum(chunk.num_rows for chunks in opened for chunk in chunks)
    finally:
        export.close()


def import_file(path: Path, writer: Any, rank_base: int, options: dict[str, Any],
                counts: _Counts, warnings: list[str],
                progress: Callable[[float], None]) -> tuple[list[int], dict[str, Any]]:
    """Import one export; (its ranks, what the metadata says of it)."""
    export = Export(path)
    pool = ThreadPoolExecutor(2, thread_name_prefix="hermes-nsys")
    try:
        plan = list(tables(export, warnings))
        total = sum(export.size(t) for t, _ in plan) or 1
        patterns = options.get("comm_patterns") or comm_patterns.default()
        # NVTX is read from now on, while the processes, the step windows and the
        # collectives' order are found (each query on a thread and connection of its own:
        # SQLite runs them at once)
        first = plan[0][1].open(export, False) if plan and plan[0][0] == nvtx.TABLE else None
        steps = pool.submit(nvtx.step_rows, export)
        order = pool.submit(gpu.collective_order, export, patterns,
                            "CUPTI_ACTIVITY_KIND_KERNEL")
        ctx = context.build(export, rank_base)
        if options.get("rank") is not None:
            if len(ctx.ranks) == 1:
                ctx.ranks = np.array([int(options["rank"])], np.int32)
                ctx.devices = {int(options["rank"]): next(iter(ctx.devices.values()), [])}
            else:
                warnings.append(f"{path.name}: {len(ctx.ranks)} processes ran device work "
                                "(one rank each): --rank not used")
        if not len(ctx.pids):
            raise ImportFormatError("the export holds no CUDA, NVTX or runtime events",
                                    path=path, hint="capture with nsys profile -t cuda,nvtx")
        nvtx.set_steps(ctx, steps.result())
        st = _State(export, ctx, gpu.DeviceState(export, ctx, patterns),
                    host.HostState(export, ctx), nvtx.domains(export))
        st.dev.coll_rowid, st.dev.coll_order = order.result()
        collectives = len(st.dev.coll_rowid) > 0
        # every other table starts reading too (each at most READ_AHEAD chunks ahead)
        opened = [(t, r, first if i == 0 and first is not None else r.open(export, collectives))
                  for i, (t, r) in enumerate(plan)]
        done = 0
        for table, reader, chunks in opened:
            make = reader.mapper(st)
            for chunk in chunks:
                done += chunk.num_rows
                _write(writer, make(chunk), table, counts)
                progress(min(1.0, done / total))
        device, note = info.device_meta(export, options.get("device"))
        if note:
            warnings.append(note)
        for table, n in sorted(ctx.skipped.items()):
            warnings.append(f"{path.name}: {n:,} {table} row(s) of processes that ran no "
                            "device work left out")
        unread = info.unread_tables(export, {t for t, _ in plan})
        if unread:
            warnings.append(f"{path.name}: tables not imported: " + ", ".join(
                f"{t} ({n:,} row(s))" for t, n in sorted(unread.items())))
        ranks = ctx.all_ranks()
        about = {"path": str(path), "ranks": ranks, "device": device,
                 "export": info.export_info(export), "unread_tables": unread,
                 "skipped_rows": dict(ctx.skipped),
                 "processes": {str(r): {"pid": p, "name": n}
                               for r, (p, n) in sorted(ctx.processes.items())},
                 "steps": int(len(ctx.step_no))}
        return ranks, about
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        export.close()


def _sources(sources: list[Path], folder: Path | None,
             warnings: list[str]) -> list[tuple[Path, Path]]:
    """(what was given, the SQLite file to read) per source; reports are exported first,
    unless their export is among the sources too (a folder holding both: one capture)."""
    out = []
    exported = {s.resolve().with_suffix("") for s in sources if is_sqlite(s)}
    for src in sources:
        if is_sqlite(src):
            out.append((src, src))
            continue
        if src.resolve().with_suffix("") in exported:
            warnings.append(f"{src.name}: its SQLite export is imported instead")
            continue
        if folder is None:
            raise ImportFormatError("an Nsight Systems report cannot be exported here",
                                    path=src)
        out.append((src, report.to_sqlite(src, folder)))
    return out


def run(sources: list[Path], out: Path, options: dict[str, Any]) -> ImportResult:
    bar = options.get("progress")
    if options.get("in_memory"):
        writer: Any = MemoryWriter(TraceMeta(source=NAME), row_group_rows=ROW_GROUP_ROWS,
                                   arrow=options["in_memory"] == "arrow")
    else:
        writer = open_writer(out, TraceMeta(source=NAME), row_group_rows=ROW_GROUP_ROWS,
                             threaded=True)
    counts = _Counts()
    warnings: list[str] = []
    files: list[dict[str, Any]] = []
    ranks: list[int] = []
    device: dict[str, Any] = {}
    try:
        need_folder = any(not is_sqlite(s) for s in sources)
        scratch: Any = tempfile.TemporaryDirectory(prefix="hermes-nsys-") if need_folder \
            else contextlib.nullcontext(None)
        with scratch as tmp:
            pairs = _sources(sources, Path(tmp) if tmp else None, warnings)
            sizes = [given.stat().st_size for given, _ in pairs]
            for i, (given, path) in enumerate(pairs):
                base = sum(sizes[:i])

                def step(frac: float, base: int = base, size: int = sizes[i]) -> None:
                    if bar is not None:
                        bar(base + int(size * frac))

                got, about = import_file(path, writer, max(ranks, default=-1) + 1, options,
                                         counts, warnings, step)
                dup = sorted(set(got) & set(ranks))
                if dup:
                    raise ImportFormatError(f"rank {dup[0]} appears twice", path=given,
                                            hint="import the files separately")
                ranks += got
                about["path"] = str(given)
                found = about.pop("device")
                device = device or found
                files.append(about)
        summary = {"importer": NAME, "files": files, "by_kind": dict(counts.by_kind),
                   "by_source_category": dict(counts.by_table), "unknown_kept": {}}
        meta = TraceMeta(source=NAME, device=device, collector={"mode": "import"},
                         ranks=tuple(sorted(ranks)), import_summary=summary,
                         extra={"nsys": {f["path"]: f["export"] for f in files},
                                "clock": "Nsight Systems' session clock, ns"})
        written = writer.close(meta)
    except BaseException:
        writer.abort()
        raise
    trace = None
    if isinstance(writer, MemoryWriter):
        trace, written = written, out
    return ImportResult(out=written, trace=trace, events=int(sum(counts.by_kind.values())),
                        ranks=tuple(sorted(ranks)), by_kind=dict(counts.by_kind),
                        by_source_category=dict(counts.by_table), unknown_kept={},
                        warnings=tuple(warnings))
