"""PyTorch profiler (Kineto) JSON importer: ``.json`` / ``.json.gz``, one file per rank.

Each file is read in chunks (``reader``), every chunk becomes an intermediate Arrow batch
spooled to a temporary Arrow IPC stream (``chunk``, phase 1), and once the whole file
is known every batch is finished and written as row groups of the Hermes trace (phase 2):
steps from the ``ProfilerStep#N`` windows, device events' steps from their launch, correlation
ids whose host end is not in the file nulled (the original stays in ``args``), collective
sequence numbers, thread names on lanes. Memory stays bounded by the chunk size.

Timestamps stay on Kineto's own clock, converted exactly to integer nanoseconds; the file's
``baseTimeNanoseconds`` is kept in the metadata (``extra.kineto``).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hermes.collectors.importers.base import ImportResult
from hermes.collectors.importers.kineto import halves
from hermes.collectors.importers.kineto.chunk import chunk_to_batch
from hermes.collectors.importers.kineto.mapping import KINDS, LANE_KIND_NAMES, LK, UNIT_NAMES, K
from hermes.collectors.importers.kineto.reader import MAX_EVENT_BYTES, KinetoFile
from hermes.collectors.importers.kineto.side import DEVICE_SEP, INTERMEDIATE, Side
from hermes.errors import ImportFormatError, UsageError
from hermes.trace import comm_patterns
from hermes.trace.arrowbuf import dictionary, from_numpy, strings, to_numpy
from hermes.trace.comm_patterns import CommPatterns
from hermes.trace.memory import MemoryWriter
from hermes.trace.meta import INT32_MAX, TraceMeta, strict_int
from hermes.trace.writer import RankedTraceWriter, TraceWriter, open_writer

NAME = "kineto"
#: Rows per Parquet row group: small enough to bound memory, large enough to compress well.
ROW_GROUP_ROWS = 64 * 1024


def _windows(parts: list[np.ndarray]) -> np.ndarray:
    parts = [p for p in parts if len(p)]
    if not parts:
        return np.zeros((0, 3), np.int64)
    w = np.concatenate(parts)
    return w[np.argsort(w[:, 0], kind="stable")]


def _in_window(ts: np.ndarray, win: np.ndarray) -> np.ndarray:
    """Step N of the window (start <= ts < end) holding each ts; -1 where none does."""
    if len(win) == 0:
        return np.full(len(ts), -1, np.int64)
    i = np.searchsorted(win[:, 0], ts, side="right") - 1
    ic = np.clip(i, 0, None)
    ok = (i >= 0) & (ts < win[ic, 1])
    return np.where(ok, win[ic, 2], -1)


class _Finish:
    """Phase 2 lookups built once per file from the side arrays."""

    def __init__(self, side: Side, rank: int) -> None:
        self.rank = rank
        self.host_win = _windows(side.host_steps)
        self.dev_win = _windows(side.dev_steps)
        hc = np.concatenate(side.host_corr) if side.host_corr else np.zeros((0, 2), np.int64)
        order = np.argsort(hc[:, 0], kind="stable")
        self.host_corr = hc[order, 0]
        self.host_corr_step = _in_window(hc[order, 1], self.host_win)
        dc = np.sort(np.concatenate(side.dev_corr)) if side.dev_corr else np.zeros(0, np.int64)
        # distinct values by hand: a bare np.unique imports numpy.ma on first use
        self.dev_corr = dc[np.r_[True, dc[1:] != dc[:-1]]] if len(dc) else dc
        self.thread_names = side.thread_names
        self.multi_device = len(side.device_pids) > 1
        self.lane_kinds = from_numpy(np.arange(len(LANE_KIND_NAMES), dtype=np.int32))
        self.coll_rows, self.coll_vals, self.group_names = self._collectives(side)
        self.dangling = 0

    @staticmethod
    def _collectives(side: Side) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Rows and (group code, seq, bytes) of each collective, sorted by row.

        What a kernel's args lack comes from the record_param_comms op of the same external
        id; a collective without any Seq is numbered by time order within its group.
        """
        names = [g for g, _ in sorted(side.groups.items(), key=lambda kv: kv[1])]
        if not side.colls:
            return np.zeros(0, np.int64), np.zeros((0, 3), np.int64), names
        c = np.concatenate(side.colls)  # row, ts, group, seq, bytes, ext, host lane
        row, ts, group, seq, nbytes, ext, lane = (c[:, i].copy() for i in range(7))
        if side.rpc:
            _fill_from_rpc(np.concatenate(side.rpc), ts, ext, lane, group, seq, nbytes)
        order = np.lexsort((row, ts))
        g = group[order]
        by_group = np.argsort(g, kind="stable")  # time order kept within each group
        gs = g[by_group]
        starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]])
        index_in_group = np.arange(len(gs)) - np.repeat(starts, np.diff(np.r_[starts, len(gs)]))
        index = np.empty(len(g), np.int64)
        index[order[by_group]] = index_in_group
        seq = np.where(seq >= 0, seq, index)
        out = np.argsort(row)
        return row[out], np.stack([group[out], seq[out], nbytes[out]], 1), names

    def _lookup_corr(self, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.searchsorted(self.host_corr, corr)
        pc_ = np.clip(pos, 0, max(len(self.host_corr) - 1, 0))
        found = (pos < len(self.host_corr)) & (self.host_corr[pc_] == corr) if \
            len(self.host_corr) else np.zeros(len(corr), bool)
        step = np.where(found, self.host_corr_step[pc_] if len(self.host_corr) else -1, -1)
        return found, step

    def batch(self, b: pa.RecordBatch, first_row: int) -> dict[str, Any]:
        n = b.num_rows
        kind = to_numpy(b.column("kind")).copy()
        lane_kind = to_numpy(b.column("lane_kind"))
        ts = to_numpy(b.column("ts_ns"))
        corr = to_numpy(b.column("corr"))
        dev = lane_kind == LK["device"]
        has_corr = corr >= 0
        # a runtime call whose correlation reaches a device event enqueued work: a launch
        runtime = (kind == K["runtime"]) & has_corr
        if runtime.any() and len(self.dev_corr):
            pos = np.minimum(np.searchsorted(self.dev_corr, corr), len(self.dev_corr) - 1)
            kind[runtime & (self.dev_corr[pos] == corr)] = K["launch"]
        found, launch_step = self._lookup_corr(np.where(has_corr, corr, -1))
        dangling = dev & has_corr & ~found
        self.dangling += int(dangling.sum())
        step = to_numpy(b.column("step_n")).astype(np.int64)
        free = step < 0
        host_step = _in_window(ts, self.host_win)
        dev_step = np.where(has_corr & found & (launch_step >= 0), launch_step,
                            _in_window(ts, self.dev_win))
        step = np.where(free, np.where(dev, dev_step, host_step), step)
        corr_out = from_numpy(corr, ~has_corr | dangling)

        lanes = b.column("lane")
        names = [self._lane_name(s) for s in lanes.dictionary.to_pylist()]
        lanes = pa.DictionaryArray.from_arrays(lanes.indices, strings(names))
        unit = to_numpy(b.column("unit"))
        cols: dict[str, Any] = {
            "rank": from_numpy(np.full(n, self.rank, np.int32)),
            "lane": lanes,
            "lane_kind": dictionary(lane_kind.astype(np.int32), LANE_KIND_NAMES),
            "kind": dictionary(kind.astype(np.int32), KINDS),
            "name": b.column("name"),
            "ts_ns": b.column("ts_ns"),
            "dur_ns": b.column("dur_ns"),
            "step": from_numpy(step.astype(np.int32), step < 0),
            "corr_id": corr_out,
            "external_id": b.column("external_id"),
            "stream": b.column("stream"),
            "unit": dictionary(np.maximum(unit, 0).astype(np.int32), UNIT_NAMES, unit < 0),
            "flops": b.column("flops"),
            "bytes": b.column("bytes"),
            "value": b.column("value"),
            "args": b.column("args"),
        }
        group = np.full(n, -1, np.int64)
        seq = np.full(n, -1, np.int64)
        nbytes = np.full(n, -1, np.int64)
        lo, hi = np.searchsorted(self.coll_rows, [first_row, first_row + n])
        if hi > lo:
            i = self.coll_rows[lo:hi] - first_row
            group[i], seq[i], nbytes[i] = self.coll_vals[lo:hi].T
        self.kind_counts = _kind_counts(kind)
        coll = kind == K["collective"]
        cols["coll_group"] = dictionary(np.maximum(group, 0).astype(np.int32), self.group_names,
                                        group < 0)
        cols["coll_seq"] = from_numpy(seq, ~coll | (seq < 0))
        cols["coll_bytes"] = from_numpy(nbytes, ~coll | (nbytes < 0))
        return cols

    def _lane_name(self, lane: str) -> str:
        if DEVICE_SEP in lane:  # '<pid>SEP stream <id>': the device only where there are several
            pid, _, rest = lane.partition(DEVICE_SEP)
            return f"gpu {pid} {rest}" if self.multi_device else rest
        if not lane.startswith("thread "):
            return lane
        tid = lane[7:]
        name = self.thread_names.get(tid)
        if not name or name == lane:
            return lane
        return name if name.startswith(lane) else f"{lane} ({name})"


def _kind_counts(kind: np.ndarray) -> list[tuple[int, int]]:
    """(kind, events) of a batch, kinds in order of first appearance (as the summary lists
    them): counted with bincount, each kind's first row found by one scan per kind (a batch
    holds a few kinds; no stable argsort of every row)."""
    if len(kind) == 0:
        return []
    if int(kind.min()) < 0:  # never (phase 1 resolves every pseudo-kind): as before, sorted
        uniq, first_at, counts = np.unique(kind, return_index=True, return_counts=True)
        order = np.argsort(first_at)
        return list(zip(uniq[order].tolist(), counts[order].tolist(), strict=True))
    counts = np.bincount(kind.astype(np.intp), minlength=len(KINDS))
    uniq = np.flatnonzero(counts)
    first_at = np.array([int(np.argmax(kind == k)) for k in uniq.tolist()], np.int64)
    order = np.argsort(first_at)
    return list(zip(uniq[order].tolist(), counts[uniq[order]].tolist(), strict=True))


def _fill_from_rpc(r: np.ndarray, ts: np.ndarray, ext: np.ndarray, lane: np.ndarray,
                   group: np.ndarray, seq: np.ndarray, nbytes: np.ndarray) -> None:
    """Fill what collectives' args lack from their record_param_comms op (rows of ext, bytes,
    group, seq, ts, lane): the op of the same external id, else, for a collective on a host
    thread (a Gloo range), the latest op on that thread that started at or before it."""
    by_ext = r[np.argsort(r[:, 0], kind="stable")]
    pos = np.clip(np.searchsorted(by_ext[:, 0], ext), 0, len(by_ext) - 1)
    hit = (ext >= 0) & (by_ext[pos, 0] == ext)
    src = by_ext[pos]
    # (lane, ts) order: the latest op of the same lane at or before each collective
    by_time = r[np.lexsort((r[:, 4], r[:, 5]))]
    key_r = by_time[:, 5].astype(np.float64) * 2.0 ** 62 + by_time[:, 4]
    key_c = lane.astype(np.float64) * 2.0 ** 62 + ts
    j = np.searchsorted(key_r, key_c, side="right") - 1
    jc = np.clip(j, 0, None)
    near = ~hit & (lane >= 0) & (j >= 0) & (by_time[jc, 5] == lane)
    src = np.where(near[:, None], by_time[jc], src)
    use = hit | near
    for col, k in ((nbytes, 1), (group, 2), (seq, 3)):
        fill = use & (col < 0)
        col[fill] = src[fill, k]


def _rank_of(header: dict[str, Any], path: Path | None = None) -> int | None:
    """distributedInfo.rank, range-checked (a rank must fit the trace's int32 column)."""
    info = header.get("distributedInfo")
    if not isinstance(info, dict) or "rank" not in info:
        return None
    try:
        return strict_int(info["rank"], "rank", lo=0, hi=INT32_MAX)
    except ValueError as exc:
        raise ImportFormatError(f"invalid distributedInfo.rank: {exc}", path=path,
                                hint="fix the file or drop distributedInfo and pass --rank"
                                ) from None


def _device_meta(header: dict[str, Any], fallback: str | None = None) -> dict[str, Any]:
    """The device profile matching the file's ``deviceProperties``; where they are missing or
    name no known device, the profile ``fallback`` (``--device``), if given."""
    from hermes import devices

    props = header.get("deviceProperties")
    if not isinstance(props, list) or not props or not isinstance(props[0], dict):
        return devices.get(fallback).to_meta() if fallback else {}
    name = str(props[0].get("name", ""))
    meta: dict[str, Any] = {}
    profile = devices.match(name) or (devices.get(fallback) if fallback else None)
    if profile is not None:
        meta.update(profile.to_meta())
    meta.update({"name": name, "count": len(props), "kineto": props[0]})
    return meta


def _phase1(path: Path, spool: Path | list[pa.RecordBatch],
            progress: Callable[[int], None] | None, comm: CommPatterns, max_bytes: int,
            helper: halves.Helper | None = None) -> tuple[Side, dict[str, Any]]:
    """Read the file chunk by chunk into intermediate batches spooled to ``spool`` (a file, or
    a list when the trace is built in memory anyway); up to the split of ``helper``, a forked
    process reading the rest meanwhile (``halves``), where there is one."""
    side = Side(comm=comm)
    kf = KinetoFile(path, max_event_bytes=max_bytes).open()
    taken: halves.Part | None = None

    def at_split() -> bool:  # the events up to the helper's boundary are read: its part
        nonlocal taken
        taken = helper.take(kf.offset, mapped=isinstance(spool, list),
                            ident=kf.identity()) if helper else None
        if taken is not None and progress is not None:  # the rest of the file is read too
            progress(path.stat().st_size)
        return taken is not None

    try:
        with _sink(spool) as put:
            for chunk in kf.chunks(progress, split=helper.split if helper else None,
                                   at_split=at_split):
                batch = chunk_to_batch(chunk, side, path)
                if batch is not None:
                    put(batch)
                del chunk, batch  # hold one chunk at a time, not two
            for batch in taken.batches if taken is not None else ():
                put(batch)
    finally:
        kf.close()
    if taken is not None:
        halves.merge(side, taken.side)
        return side, taken.header
    return side, kf.header


@contextlib.contextmanager
def _sink(spool: Path | list[pa.RecordBatch]) -> Iterator[Callable[[pa.RecordBatch], None]]:
    """Where phase 1's batches go: appended to a list, or written to a spool file."""
    if isinstance(spool, list):
        yield spool.append
        return
    with pa.OSFile(str(spool), "wb") as sink, pa.ipc.new_stream(sink, INTERMEDIATE) as out:
        yield out.write_batch


def _spooled(spool: Path | list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The intermediate batches in order; each is let go once the next is asked for (a
    finished batch keeps only the columns it shares with it)."""
    if isinstance(spool, list):
        while spool:
            yield spool.pop(0)
        return
    with pa.OSFile(str(spool), "rb") as src:
        yield from pa.ipc.open_stream(src)
    spool.unlink(missing_ok=True)


def _import_file(path: Path, rank_fallback: int,
                 writer: TraceWriter | RankedTraceWriter | MemoryWriter,
                 tmpdir: Path | None, progress: Callable[[int], None] | None,
                 comm: CommPatterns,
                 max_bytes: int, helper: halves.Helper | None = None
                 ) -> tuple[int, Side, dict[str, Any], Counter[str], int]:
    """Import one file; returns (rank, side info, header, events per kind, dangling corr).
    Into memory, the intermediate batches stay in memory too (no spool file): a batch read
    back from the spool is one buffer that the finished batch's shared columns keep whole."""
    spool: Path | list[pa.RecordBatch] = [] if isinstance(writer, MemoryWriter) or \
        tmpdir is None else tmpdir / "spool.arrows"
    side, header = _phase1(path, spool, progress, comm, max_bytes, helper)
    rank = _rank_of(header, path)
    rank = rank_fallback if rank is None else rank
    finish = _Finish(side, rank)
    by_kind: Counter[str] = Counter()
    first = 0
    pool = pa.default_memory_pool()
    for b in _spooled(spool):
        cols = finish.batch(b, first)
        first += b.num_rows
        for k, n in finish.kind_counts:
            by_kind[KINDS[k]] += n
        writer.write(cols)
        del b, cols
        pool.release_unused()
    return rank, side, header, by_kind, finish.dangling


def run(sources: list[Path], out: Path, options: dict[str, Any]) -> ImportResult:
    """Import Kineto files (one per rank) into one Hermes trace at ``out``.

    A single big file is read by two processes where that pays (``halves``): option
    ``helpers`` (0: none; default :func:`halves.usable`)."""
    #: rank of a single file without distributedInfo (else files take their order's rank)
    rank_option: int | None = options.get("rank")
    if rank_option is not None and len(sources) > 1:
        raise UsageError(f"rank {rank_option} given for {len(sources)} files",
                         hint="a rank option applies to a single file")
    #: which kernel names are communication: the shipped table, or one a user extended
    comm: CommPatterns = options.get("comm_patterns") or comm_patterns.default()
    max_bytes = int(options.get("max_bytes") or MAX_EVENT_BYTES)
    helpers = options.get("helpers")
    helpers = halves.usable() if helpers is None else int(helpers)
    # forked before the writer opens (a fork copies only this thread, not the writer's)
    helper = halves.start(sources[0], comm, max_bytes) if helpers > 0 and len(sources) == 1 \
        else None
    try:
        return _run(sources, out, options, comm, max_bytes, helper)
    finally:
        if helper is not None:
            helper.cancel()


def _run(sources: list[Path], out: Path, options: dict[str, Any], comm: CommPatterns,
         max_bytes: int, helper: halves.Helper | None) -> ImportResult:
    rank_option: int | None = options.get("rank")
    progress: Callable[[int], None] | None = options.get("progress")
    writer: TraceWriter | RankedTraceWriter | MemoryWriter
    if options.get("in_memory"):  # the Trace load() would give of ``out``, no file written
        # ("arrow": its Arrow table, for hermes.trace.memory.from_table)
        writer = MemoryWriter(TraceMeta(source=NAME), row_group_rows=ROW_GROUP_ROWS,
                              arrow=options["in_memory"] == "arrow")
    else:
        writer = open_writer(out, TraceMeta(source=NAME), row_group_rows=ROW_GROUP_ROWS,
                             threaded=True)
    ranks: dict[int, Path] = {}
    by_kind: Counter[str] = Counter()
    by_cat: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    files: list[dict[str, Any]] = []
    warnings: list[str] = []
    device: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    done = 0
    try:
        # the spool's folder; an import into memory spools in memory and makes none (a forked
        # child killed half-way would leave it behind)
        scratch: Any = contextlib.nullcontext("") if isinstance(writer, MemoryWriter) else \
            tempfile.TemporaryDirectory(prefix="hermes-kineto-")
        with scratch as tmp:
            for i, src in enumerate(sources):
                size = src.stat().st_size

                def step_progress(pos: int, base: int = done) -> None:
                    if progress is not None:
                        progress(base + pos)

                fallback = i if rank_option is None else int(rank_option)
                rank, side, header, kinds, dangling = _import_file(
                    src, fallback, writer, Path(tmp) if tmp else None, step_progress, comm,
                    max_bytes, helper)
                if rank_option is not None and rank != rank_option:
                    warnings.append(f"{src.name}: the file names rank {rank} "
                                    f"(distributedInfo); rank option {rank_option} not used")
                done += size
                if rank in ranks:
                    raise ImportFormatError(f"rank {rank} appears twice (also in {ranks[rank]})",
                                            path=src, where="distributedInfo.rank",
                                            hint="give one trace file per rank")
                ranks[rank] = src
                by_kind.update(kinds)
                by_cat.update(side.by_category)
                unknown.update(side.unknown)
                device = device or _device_meta(header, options.get("device"))
                extra[str(rank)] = {k: header[k] for k in
                                    ("baseTimeNanoseconds", "traceName", "distributedInfo",
                                     "schemaVersion", "displayTimeUnit") if k in header}
                files.append({"path": str(src), "rank": rank,
                              "events": int(sum(kinds.values())),
                              "flow_events": side.flows,
                              "dangling_corr_nulled": dangling})
                if dangling:
                    warnings.append(f"{src.name}: {dangling} device event(s) whose launch is "
                                    "not in the file: corr_id left empty (kept in args)")
                if side.negative_dur:
                    warnings.append(f"{src.name}: {side.negative_dur} event(s) with a negative "
                                    "duration stored with dur_ns 0")
            summary = {"importer": NAME, "files": files, "by_kind": dict(by_kind),
                       "by_source_category": dict(by_cat), "unknown_kept": dict(unknown)}
            meta = TraceMeta(source=NAME, device=device, collector={"mode": "import"},
                             ranks=tuple(sorted(ranks)), import_summary=summary,
                             extra={"kineto": extra,
                                    "clock": "Kineto's own clock, ns (ts * 1000)"})
            written = writer.close(meta)
    except BaseException:
        writer.abort()
        raise
    trace = None
    if isinstance(writer, MemoryWriter):
        trace, written = written, out
    return ImportResult(out=written, trace=trace, events=int(sum(by_kind.values())),
                        ranks=tuple(sorted(ranks)), by_kind=dict(by_kind),
                        by_source_category=dict(by_cat), unknown_kept=dict(unknown),
                        warnings=tuple(warnings))
