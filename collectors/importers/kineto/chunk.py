"""Phase 1 of the Kineto import: one chunk of decoded events -> one intermediate Arrow batch.

Steps, lane names and dangling correlations depend on events anywhere in the file (a
``ProfilerStep#N`` may come after the events it contains; thread names come from metadata
events), so phase 1 stores raw-ish columns plus small side arrays (:class:`Side`), and phase 2
(``kineto.py``) finishes every batch once the whole file has been read.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import count
from operator import attrgetter
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa

from hermes.collectors.importers.kineto.arrow import dictionary, from_numpy, utf8_buffers
from hermes.collectors.importers.kineto.mapping import (
    CATEGORIES,
    CCP,
    EVENT_PHASES,
    FLOW_PHASES,
    KERNEL,
    LK,
    MEMCPY,
    NO_INT,
    RUNTIME,
    Args,
    K,
    U,
    coll_bytes,
    coll_group,
    decode_args,
    name_info,
    with_source_category,
)
from hermes.collectors.importers.kineto.reader import (
    BOTH_FLOAT,
    DUR_FLOAT,
    TEXT,
    Chunk,
    time_mode,
)
from hermes.collectors.importers.kineto.times import float_us_to_ns, us_text_to_ns
from hermes.errors import ImportFormatError

ROLE_FLOW, ROLE_META, ROLE_EVENT = 0, 1, 2
_NO_CAT = "(none)"

INTERMEDIATE = pa.schema([
    ("kind", pa.int8()), ("lane", pa.dictionary(pa.int32(), pa.string())),
    ("lane_kind", pa.int8()), ("name", pa.dictionary(pa.int32(), pa.string())),
    ("ts_ns", pa.int64()), ("dur_ns", pa.int64()), ("step_n", pa.int32()),
    ("corr", pa.int64()), ("external_id", pa.int64()), ("stream", pa.int32()),
    ("unit", pa.int8()), ("flops", pa.float64()), ("bytes", pa.int64()),
    ("value", pa.float64()), ("args", pa.string()),
])


@dataclass
class Side:
    """Small per-file arrays gathered in phase 1 for phase 2."""

    host_steps: list[np.ndarray] = field(default_factory=list)  # rows of (start, end, N)
    dev_steps: list[np.ndarray] = field(default_factory=list)
    host_corr: list[np.ndarray] = field(default_factory=list)  # rows of (corr, ts)
    dev_corr: list[np.ndarray] = field(default_factory=list)
    # record_param_comms ops, rows of (external id, bytes, group code, seq); -1 = unknown
    rpc: list[np.ndarray] = field(default_factory=list)
    # collective kernels, rows of (global row, ts, group code, seq, bytes, external id)
    colls: list[np.ndarray] = field(default_factory=list)
    groups: dict[str, int] = field(default_factory=dict)  # process group name -> code
    thread_names: dict[str, str] = field(default_factory=dict)
    #: pid of every device-side event: more than one means a multi-device process, whose
    #: device lanes are then named 'gpu <pid> stream <id>'
    device_pids: set = field(default_factory=set)
    by_category: Counter[str] = field(default_factory=Counter)
    unknown: Counter[str] = field(default_factory=Counter)
    flows: int = 0
    negative_dur: int = 0
    rows: int = 0
    ts_min: int | None = None


_PH, _CAT, _NAME = attrgetter("ph"), attrgetter("cat"), attrgetter("name")
_PID, _TID, _TS, _DUR, _ARGS = (attrgetter(a) for a in ("pid", "tid", "ts", "dur", "args"))
#: separates the device (pid) from the stream in phase 1 lane labels; phase 2 names the lane
DEVICE_SEP = "\x1f"


def _codes(values: list) -> tuple[np.ndarray, list]:
    """Dictionary codes of hashable values (few distinct ones): (int32 codes, distinct values)."""
    n = len(values)
    if n and values[-1] == values[0] == values[n >> 1] and values.count(values[0]) == n:
        return np.zeros(n, np.int32), [values[0]]  # one value (a chunk of metadata, say)
    # one pass in C: a missing key gets the next number, in order of first appearance
    keys: defaultdict = defaultdict(count().__next__)
    return np.fromiter(map(keys.__getitem__, values), np.int32, n), list(keys)


def _member(values: np.ndarray, *members: int) -> np.ndarray:
    """``values`` in ``members`` (np.isin imports numpy.ma, ~40 ms, on first use)."""
    out = values == members[0]
    for m in members[1:]:
        out |= values == m
    return out


def _take(items: list, idx: np.ndarray) -> list:
    return list(map(items.__getitem__, idx.tolist()))


def _role(ph: str, cat: str | None) -> tuple[int, int, int, bool, bool]:
    """(role, kind code, lane-kind code, kept as unknown, stream from args) of (phase, cat)."""
    if ph in FLOW_PHASES:
        return ROLE_FLOW, 0, 0, False, False
    if ph == "M":
        return ROLE_META, 0, 0, False, False
    if ph == "C":
        return ROLE_EVENT, K["counter"], LK["counter"], False, False
    rule = CATEGORIES.get(cat or "")
    if ph in EVENT_PHASES and rule is not None:
        return ROLE_EVENT, rule.kind, LK[rule.lane_kind], False, rule.stream_from_args
    return ROLE_EVENT, K["other"], LK["host"], True, False


def chunk_to_batch(chunk: Chunk, side: Side, path: Path) -> pa.RecordBatch | None:
    evs = chunk.events
    ph_code, ph_dict = _codes(list(map(_PH, evs)))
    cat_code, cat_dict = _codes(list(map(_CAT, evs)))
    n_cat = len(cat_dict)
    pair = ph_code * n_cat + cat_code
    n_pairs = len(ph_dict) * n_cat
    counts = np.bincount(pair, minlength=n_pairs)
    role = np.zeros(n_pairs, np.int8)
    pkind = np.zeros(n_pairs, np.int8)
    plane = np.zeros(n_pairs, np.int8)
    punknown = np.zeros(n_pairs, bool)
    pargs = np.zeros(n_pairs, bool)
    for u in np.flatnonzero(counts).tolist():
        ph, cat = ph_dict[u // n_cat], cat_dict[u % n_cat]
        c = int(counts[u])
        if not ph:
            first = int(np.flatnonzero(pair == u)[0])
            raise ImportFormatError("event has no 'ph' (phase)", path=path,
                                    where=f"event {chunk.first_index + first}",
                                    hint="expected Chrome-trace events such as "
                                         '{"ph": "X", "name": ..., "ts": ..., "dur": ...}')
        role[u], pkind[u], plane[u], punknown[u], pargs[u] = _role(str(ph), cat)
    row_role = role[pair]
    sel = np.flatnonzero(row_role == ROLE_EVENT)
    rows = evs if sel.size == len(evs) else _take(evs, sel)
    # times read as doubles are checked before anything is recorded in side: a chunk read
    # again starts clean
    times = _float_times(rows)
    if isinstance(times, int):
        return chunk_to_batch(chunk.exact(times), side, path)
    for u in np.flatnonzero(counts).tolist():
        ph, cat = ph_dict[u // n_cat], cat_dict[u % n_cat]
        c = int(counts[u])
        key = cat if cat else f"(ph {ph})"
        side.by_category[key] += c
        if punknown[u]:
            side.unknown[key] += c
        if role[u] == ROLE_FLOW:
            side.flows += c
    meta_rows = np.flatnonzero(row_role == ROLE_META)
    if meta_rows.size:
        _thread_names(_take(evs, meta_rows), side)
    if sel.size == 0:
        return None
    rpair = pair[sel]
    return _events_batch(rows, sel, rpair, pkind, plane, punknown, pargs, cat_dict, ph_dict,
                         chunk, side, path, times)


Times = tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]


def _float_times(rows: list) -> Times | int:
    """(ts ns, ts present, dur ns) of the times read as doubles (None: read as text), or the
    time mode to read the chunk again with when a double does not give the exact value."""
    mode = time_mode(rows)
    n = len(rows)
    ts = dur = None
    if mode == BOTH_FLOAT:
        ts = float_us_to_ns(np.fromiter(map(_TS, rows), np.float64, n))
        if ts is None:
            return DUR_FLOAT
    if mode >= DUR_FLOAT:
        dur = float_us_to_ns(np.fromiter(map(_DUR, rows), np.float64, n))
        if dur is None:
            return TEXT
    return (ts[0] if ts else None, ts[1] if ts else None, dur[0] if dur else None)


def _thread_names(rows: list, side: Side) -> None:
    """First non-empty ``thread_name`` per tid (metadata events repeat: decode each once).

    Only the first event of each tid not named yet is decoded; the rare tid whose first name
    is empty has all its events looked at."""
    name_idx, names = _codes(list(map(_NAME, rows)))
    if "thread_name" not in names:
        return
    rows = _take(rows, np.flatnonzero(name_idx == names.index("thread_name")))
    tid_idx, tids = _codes(list(map(_TID, rows)))
    text = [str(t) for t in tids]
    if len(set(text)) < len(text):  # 7 and "7" are one tid
        canon, text = _codes(text)
        tid_idx = canon[tid_idx]
    new = np.array([t not in side.thread_names for t in text], bool)
    if not new.any():
        return
    first = np.full(len(text), len(rows), np.int64)
    np.minimum.at(first, tid_idx, np.arange(len(rows)))
    firsts = np.sort(first[new])
    args = decode_args(list(map(_ARGS, _take(rows, firsts))))
    unnamed = []
    for i, a in zip(firsts.tolist(), args, strict=True):
        if a.name:
            side.thread_names[text[tid_idx[i]]] = a.name.strip()
        else:
            unnamed.append(tid_idx[i])
    if unnamed:  # the first name was empty: the first non-empty one of any later event
        wanted = np.zeros(len(text), bool)
        wanted[unnamed] = True
        for r in _take(rows, np.flatnonzero(wanted[tid_idx])):
            tid = str(r.tid)
            if tid not in side.thread_names:
                a = decode_args([r.args])[0]
                if a.name:
                    side.thread_names[tid] = a.name.strip()


def _ints(values: list) -> np.ndarray | None:
    """int64 array of Python ints; None when some value is not an int (string tids)."""
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        return None


def _lanes(tids: list, rows: list, dev: np.ndarray, dev_id: np.ndarray | None,
           side: Side) -> pa.DictionaryArray:
    """Lane labels: 'thread <tid>' for host rows, '<pid>SEP stream <id>' for device rows
    (phase 2 drops or spells out the pid), built once per distinct lane."""
    tid = _ints(tids)
    dev_rows = np.flatnonzero(dev)
    pids = list(map(_PID, _take(rows, dev_rows))) if dev_rows.size else []
    side.device_pids.update(pids)
    pid = _ints(pids)
    if tid is not None and pid is not None:
        ident = tid if dev_id is None else np.where(dev & (dev_id != NO_INT), dev_id, tid)
        dev_pid = np.zeros(len(tids), np.int64)
        dev_pid[dev_rows] = pid
        # one int per (device?, pid, id) from the codes of each part: a 1-D unique is cheap
        u_pid, c_pid = np.unique(dev_pid, return_inverse=True)
        u_id, c_id = np.unique(ident, return_inverse=True)
        key = (dev.astype(np.int64) * len(u_pid) + c_pid.reshape(-1)) * len(u_id) + \
            c_id.reshape(-1)
        uniq, inverse = np.unique(key, return_inverse=True)
        labels = []
        for k in uniq.tolist():
            rest, i = divmod(k, len(u_id))
            d, p = divmod(rest, len(u_pid))
            labels.append(f"{u_pid[p]}{DEVICE_SEP}stream {u_id[i]}" if d else
                          f"thread {u_id[i]}")
        return dictionary(inverse.reshape(-1), labels)
    labels = [f"thread {t}" for t in tids]
    for j, r in enumerate(dev_rows.tolist()):
        i = tids[r] if dev_id is None or dev_id[r] == NO_INT else int(dev_id[r])
        labels[r] = f"{pids[j]}{DEVICE_SEP}stream {i}"
    codes, uniq_labels = _codes(labels)
    return dictionary(codes, uniq_labels)


_COLL_KEY = attrgetter("pg_name", "pg_desc", "in_nelems", "out_nelems", "dtype", "seq")


def _coll_info(args: list, side: Side) -> tuple[np.ndarray, ...]:
    """(group code, seq, bytes, external id) arrays of collective args; -1 where unknown.

    The fields repeat (same group, sizes and dtype over many calls): each distinct
    combination is worked out once, only the sequence number varies per row."""
    idx, keys = _codes(list(map(_COLL_KEY, args)))
    group = np.empty(len(keys), np.int64)
    nbytes = np.empty(len(keys), np.int64)
    seq = np.empty(len(keys), np.int64)
    for j, (pg_name, pg_desc, in_n, out_n, dtype, s) in enumerate(keys):
        a = Args(pg_name=pg_name, pg_desc=pg_desc, in_nelems=in_n, out_nelems=out_n,
                 dtype=dtype)
        group[j] = _group_code(coll_group(a), side)
        nbytes[j] = -1 if (b := coll_bytes(a)) is None else b
        seq[j] = s if isinstance(s, int) else -1
    ext = _column(args, "external_id", np.int64)
    return group[idx], seq[idx], nbytes[idx], np.where(ext == NO_INT, -1, ext)


def _group_code(group: str | None, side: Side) -> int:
    if group is None:
        return -1
    return side.groups.setdefault(group, len(side.groups))


def _name_codes(names: list) -> tuple[np.ndarray, list[str]]:
    """Dictionary codes of event names as text (None -> '', numbers -> their text)."""
    codes, uniq = _codes(names)
    text = [u if isinstance(u, str) else "" if u is None else str(u) for u in uniq]
    if len(set(text)) < len(text):  # e.g. None and "" both read as ""
        canon, text = _codes(text)
        codes = canon[codes]
    return codes, text


def _column(args: list, field_name: str, dtype: type) -> np.ndarray:
    return np.fromiter(map(attrgetter(field_name), args), dtype, len(args))


def _events_batch(rows: list, sel: np.ndarray, rpair: np.ndarray, pkind: np.ndarray,
                  plane: np.ndarray, punknown: np.ndarray, pargs: np.ndarray, cat_dict: list,
                  ph_dict: list, chunk: Chunk, side: Side, path: Path,
                  times: Times = (None, None, None)) -> pa.RecordBatch:
    n = len(rows)
    where0 = chunk.first_index
    name_idx, name_dict = _name_codes(list(map(_NAME, rows)))
    infos = [name_info(s) for s in name_dict]
    step_by_name = np.array([i.step for i in infos], np.int32)
    dw_by_name = np.array([i.data_wait for i in infos], bool)
    nccl_by_name = np.array([i.nccl for i in infos], bool)
    rt_by_name = np.array([i.runtime_kind for i in infos], np.int8)
    mc_by_name = np.array([i.memcpy_kind for i in infos], np.int8)
    dma_by_name = np.array([i.dma for i in infos], bool)

    try:
        ts, has_ts, dur = times
        if ts is None or has_ts is None:
            ts, has_ts = us_text_to_ns(list(map(_TS, rows)))
        if dur is None:
            dur, _ = us_text_to_ns(list(map(_DUR, rows)))
    except ValueError as exc:
        i = int(exc.args[0])
        where = f"event {where0 + int(sel[i])}"
        for field, get in (("ts", _TS), ("dur", _DUR)):
            raw = get(rows[i])
            try:
                value = float(raw if isinstance(raw, (int, float, str)) else bytes(raw) or b"0")
            except (TypeError, ValueError):
                continue
            if abs(value) * 1e3 >= 2 ** 63:
                raise ImportFormatError(
                    f"'{field}' {value:g} us is out of range", path=path, where=where,
                    hint="expected microseconds that fit in 64-bit nanoseconds "
                         "(|value| < 9.2e15 us, about 292 years)") from None
        raise ImportFormatError("'ts'/'dur' is not a number", path=path, where=where,
                                hint="expected microseconds as a JSON number") from None
    if not has_ts.all():
        i = int(np.flatnonzero(~has_ts)[0])
        raise ImportFormatError("event has no 'ts' (start time)", path=path,
                                where=f"event {where0 + int(sel[i])}",
                                hint="expected a start time in microseconds")
    neg = dur < 0
    if neg.any():  # a few Kineto versions write -1 for events that never ended
        side.negative_dur += int(neg.sum())
        dur = np.where(neg, 0, dur)
    tmin = int(ts.min())
    side.ts_min = tmin if side.ts_min is None else min(side.ts_min, tmin)

    raw_args = list(map(_ARGS, rows))
    args = decode_args(raw_args)
    corr = _column(args, "correlation", np.int64)
    corr[corr == NO_INT] = -1
    ext = _column(args, "external_id", np.int64)
    flops = _column(args, "flops", np.float64)
    nbytes = _column(args, "bytes", np.float64)
    arg_stream = _column(args, "stream", np.int64)

    base = pkind[rpair]
    lane_kind = plane[rpair]
    kind = base.copy()
    m = base == RUNTIME
    kind[m] = rt_by_name[name_idx[m]]
    m = base == KERNEL
    kind[m] = np.where(nccl_by_name[name_idx[m]], K["collective"], K["kernel"])
    m = base == MEMCPY
    kind[m] = mc_by_name[name_idx[m]]
    m = base == CCP
    if m.any():
        kind[m] = K["kernel"]
        dma = np.flatnonzero(m & dma_by_name[name_idx])
        if dma.size:
            kind[dma] = [_DMA_KINDS.get(args[i].direction or "", K["memcpy_d2d"])
                         for i in dma.tolist()]
            size = _column(_take(args, dma), "size", np.float64)
            nbytes[dma] = np.where(np.isnan(nbytes[dma]), size, nbytes[dma])
    step_n = step_by_name[name_idx]
    is_step = (base == K["marker"]) & (step_n >= 0)
    kind[is_step] = K["step"]
    host_like = _member(base, K["host_op"], K["marker"], K["python"]) & \
        (lane_kind == LK["host"]) & ~is_step
    kind[host_like & dw_by_name[name_idx]] = K["data_wait"]
    step_n = np.where(is_step, step_n, -1).astype(np.int32)

    unit = np.full(n, -1, np.int8)
    unit[(kind == K["kernel"]) & (base != CCP)] = U["sm"]  # MTIA has no SMs: left empty
    unit[kind == K["collective"]] = U["link"]
    unit[_member(kind, K["memcpy_h2d"], K["memcpy_d2h"], K["memcpy_d2d"], K["memset"])] = \
        U["copy"]

    tids = list(map(_TID, rows))
    dev_arr = lane_kind == LK["device"]
    from_args = pargs[rpair] & dev_arr
    # device stream: the tid (CUDA writes the stream there), or args.stream where the category
    # says so (MTIA) or the tid is not a number
    tid_int = _ints(tids)
    if tid_int is not None:
        stream_v = np.where(from_args, arg_stream, tid_int)
    else:
        stream_v = np.array([a if f or not isinstance(t, int) else t for t, a, f in
                             zip(tids, arg_stream.tolist(), from_args.tolist(), strict=True)],
                            np.int64)
    stream_null = ~dev_arr | (stream_v == NO_INT) | (stream_v < -2 ** 31) | \
        (stream_v >= 2 ** 31)
    stream = from_numpy(np.where(stream_null, 0, stream_v).astype(np.int32), stream_null)
    lane_id = np.where(from_args & (arg_stream != NO_INT), arg_stream, NO_INT) \
        if from_args.any() else None

    counter_rows = np.flatnonzero(kind == K["counter"])
    lane_arr = _lanes(tids, rows, dev_arr, lane_id, side)
    sync_rows = (base == K["sync"]) & dev_arr
    if sync_rows.any():
        # CUPTI sync records (cuda_sync) carry the *host* call's times on the stream's track:
        # a lane of their own ('stream 7 sync'), so they never nest with the stream's kernels
        labels = lane_arr.dictionary.to_pylist()
        codes = lane_arr.indices.to_numpy(zero_copy_only=False).copy()
        codes[sync_rows] += len(labels)
        lane_arr = dictionary(codes, labels + [f"{lb} sync" for lb in labels])
    if counter_rows.size:
        lanes = lane_arr.to_pylist()
        for i in counter_rows.tolist():
            lanes[i] = f"counter {name_dict[name_idx[i]]}"
        codes, uniq = _codes(lanes)
        lane_arr = dictionary(codes, uniq)

    value = np.full(n, np.nan)
    if counter_rows.size:
        decoded = msgspec.json.decode(b"[" + b",".join(raw_args[i] for i in counter_rows) + b"]")
        for i, d in zip(counter_rows.tolist(), decoded, strict=True):
            nums = [v for v in (d.values() if isinstance(d, dict) else ())
                    if isinstance(v, (int, float)) and not isinstance(v, bool)]
            value[i] = float(nums[0]) if nums else np.nan

    unknown_rows = np.flatnonzero(punknown[rpair])
    if unknown_rows.size:
        for i in unknown_rows.tolist():
            p = int(rpair[i])
            cat = cat_dict[p % len(cat_dict)] or f"(ph {ph_dict[p // len(cat_dict)]})"
            raw_args[i] = msgspec.Raw(with_source_category(bytes(raw_args[i]), cat))

    coll_rows = np.flatnonzero(kind == K["collective"])
    if coll_rows.size:
        info = _coll_info(_take(args, coll_rows), side)
        side.colls.append(np.stack([coll_rows + side.rows, ts[coll_rows], *info], 1))
    rpc_code = next((i for i, s in enumerate(name_dict) if s == "record_param_comms"), -1)
    rpc_rows = np.flatnonzero(name_idx == rpc_code) if rpc_code >= 0 else coll_rows[:0]
    if rpc_rows.size:
        r_group, r_seq, r_bytes, r_ext = _coll_info(_take(args, rpc_rows), side)
        keep = (r_ext >= 0) & ((r_group >= 0) | (r_seq >= 0) | (r_bytes >= 0))
        if keep.any():
            side.rpc.append(np.stack([r_ext, r_bytes, r_group, r_seq], 1)[keep])

    steps = np.flatnonzero(is_step)
    if steps.size:
        win = np.stack([ts[steps], ts[steps] + dur[steps], step_n[steps].astype(np.int64)], 1)
        on_dev = dev_arr[steps]
        side.host_steps.append(win[~on_dev])
        side.dev_steps.append(win[on_dev])
    has_corr = corr >= 0
    side.host_corr.append(np.stack([corr[has_corr & ~dev_arr], ts[has_corr & ~dev_arr]], 1))
    side.dev_corr.append(corr[has_corr & dev_arr])
    side.rows += n

    no_bytes = np.isnan(nbytes) | (np.abs(nbytes) >= 2 ** 63)
    return pa.RecordBatch.from_arrays([
        from_numpy(kind), lane_arr, from_numpy(lane_kind), dictionary(name_idx, name_dict),
        from_numpy(ts), from_numpy(dur), from_numpy(step_n), from_numpy(corr),
        from_numpy(ext, ext == NO_INT), stream, from_numpy(unit),
        from_numpy(flops, np.isnan(flops)),
        from_numpy(np.where(no_bytes, 0, nbytes).astype(np.int64), no_bytes),
        from_numpy(value, np.isnan(value)), utf8_buffers(raw_args),
    ], schema=INTERMEDIATE)


_DMA_KINDS = {"HOST_TO_DEVICE": K["memcpy_h2d"], "DEVICE_TO_HOST": K["memcpy_d2h"],
              "DEVICE_TO_DEVICE": K["memcpy_d2d"]}
