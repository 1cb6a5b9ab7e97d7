"""Phase 1 of the Kineto import: one chunk of decoded events -> one intermediate Arrow batch.

Steps, lane names and dangling correlations depend on events anywhere in the file (a
``ProfilerStep#N`` may come after the events it contains; thread names come from metadata
events), so phase 1 stores raw-ish columns plus small side arrays (:class:`Side`), and phase 2
(``finish``) completes every batch once the whole file has been read. Everything here is per
distinct (phase, category) pair or per distinct name, spread over rows with numpy indexing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa

from hermes.collectors.importers.kineto.events import BOTH_FLOAT, DUR_FLOAT, TEXT, time_mode
from hermes.collectors.importers.kineto.extras import (
    coll_info,
    column,
    external_ids,
    memory_samples,
    with_unit,
)
from hermes.collectors.importers.kineto.lanes import ints, lanes, thread_names
from hermes.collectors.importers.kineto.mapping import (
    CCP,
    EVENT_PHASES,
    FLOW_PHASES,
    KERNEL,
    LK,
    MEMCPY,
    MEMORY_EVENT,
    NO_INT,
    RUNTIME,
    ArgsList,
    K,
    U,
    category_rule,
    decode_args,
    decode_hot_args,
    name_info,
    with_source_category,
)
from hermes.collectors.importers.kineto.reader import Chunk
from hermes.collectors.importers.kineto.side import (
    DUR,
    INTERMEDIATE,
    ROLE_EVENT,
    ROLE_FLOW,
    ROLE_META,
    TS,
    Side,
    codes,
    member,
    take,
)
from hermes.collectors.importers.kineto.times import float_us_to_ns, us_text_to_ns
from hermes.errors import ImportFormatError
from hermes.trace.arrowbuf import (
    dictionary,
    from_numpy,
    to_numpy,
    utf8_buffers,
)
from hermes.trace.columns import floats, objects

_DMA_KINDS = {"HOST_TO_DEVICE": K["memcpy_h2d"], "DEVICE_TO_HOST": K["memcpy_d2h"],
              "DEVICE_TO_DEVICE": K["memcpy_d2d"]}
_NAME_ALLOCATED, _NAME_RESERVED = "memory allocated", "memory reserved"


def _role(ph: str, cat: str | None) -> tuple[int, int, int, bool, bool]:
    """(role, kind code, lane-kind code, kept as unknown, stream from args) of (phase, cat)."""
    if ph in FLOW_PHASES:
        return ROLE_FLOW, 0, 0, False, False
    if ph == "M":
        return ROLE_META, 0, 0, False, False
    if ph == "C":
        return ROLE_EVENT, K["counter"], LK["counter"], False, False
    rule = category_rule(cat)
    if ph in EVENT_PHASES and rule is not None:
        return ROLE_EVENT, rule.kind, LK[rule.lane_kind], False, rule.stream_from_args
    return ROLE_EVENT, K["other"], LK["host"], True, False


def chunk_to_batch(chunk: Chunk, side: Side, path: Path) -> pa.RecordBatch | None:
    evs = chunk.events
    ph_code, ph_dict = codes(evs, "ph")
    cat_code, cat_dict = codes(evs, "cat")
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
    rows = evs if sel.size == len(evs) else take(evs, sel)
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
        thread_names(take(evs, meta_rows), side)
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
    ts = dur = None
    if mode == BOTH_FLOAT:
        ts = float_us_to_ns(floats(rows, "ts"))
        if ts is None:
            return DUR_FLOAT
    if mode >= DUR_FLOAT:
        dur = float_us_to_ns(floats(rows, "dur"))
        if dur is None:
            return TEXT
    return (ts[0] if ts else None, ts[1] if ts else None, dur[0] if dur else None)


def _name_codes(rows: list) -> tuple[np.ndarray, list[str]]:
    """Dictionary codes of the events' names as text (None -> '', numbers -> their text)."""
    name_codes, uniq = codes(rows, "name")
    text = [u if isinstance(u, str) else "" if u is None else str(u) for u in uniq]
    if len(set(text)) < len(text):  # e.g. None and "" both read as ""
        canon, text = codes(text)
        name_codes = canon[name_codes]
    return name_codes, text




@dataclass
class _Memory:
    """Rows of ``[memory]`` events: each event is read twice (allocated, then reserved)."""

    first: np.ndarray  # rows of the allocated samples
    second: np.ndarray  # rows of the reserved samples (the repeated events, at the end)

    @property
    def rows(self) -> np.ndarray:
        return np.concatenate([self.first, self.second])


def _repeat_memory(rows: list, sel: np.ndarray, rpair: np.ndarray, name_idx: np.ndarray,
                   name_dict: list[str], times: Times
                   ) -> tuple[list, np.ndarray, np.ndarray, np.ndarray, Times, _Memory | None]:
    """Repeat each ``[memory]`` event at the end of the chunk, so that allocated and reserved
    bytes become one counter sample each (a counter lane per device and quantity)."""
    code = name_dict.index(MEMORY_EVENT) if MEMORY_EVENT in name_dict else -1
    mem = np.flatnonzero(name_idx == code) if code >= 0 else None
    if mem is None or mem.size == 0:
        return rows, sel, rpair, name_idx, times, None
    n = len(rows)
    rows = rows + take(rows, mem)
    ts, has_ts, dur = times
    times = (None if ts is None else np.concatenate([ts, ts[mem]]),
             None if has_ts is None else np.concatenate([has_ts, has_ts[mem]]),
             None if dur is None else np.concatenate([dur, dur[mem]]))
    return (rows, np.concatenate([sel, sel[mem]]), np.concatenate([rpair, rpair[mem]]),
            np.concatenate([name_idx, name_idx[mem]]), times,
            _Memory(mem, np.arange(n, n + mem.size)))


def _times(rows: list, sel: np.ndarray, chunk: Chunk, side: Side, path: Path,
           times: Times) -> tuple[np.ndarray, np.ndarray]:
    """(ts, dur) in integer ns; a bad or missing time is an ImportFormatError naming the event."""
    where0 = chunk.first_index
    try:
        ts, has_ts, dur = times
        if ts is None or has_ts is None:
            ts, has_ts = us_text_to_ns(objects(rows, "ts"))
        if dur is None:
            dur, _ = us_text_to_ns(objects(rows, "dur"))
    except ValueError as exc:
        i = int(exc.args[0])
        where = f"event {where0 + int(sel[i])}"
        for fld, get in (("ts", TS), ("dur", DUR)):
            raw = get(rows[i])
            try:
                value = float(raw if isinstance(raw, (int, float, str)) else bytes(raw) or b"0")
            except (TypeError, ValueError):
                continue
            if abs(value) * 1e3 >= 2 ** 63:
                raise ImportFormatError(
                    f"'{fld}' {value:g} us is out of range", path=path, where=where,
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
    return ts, dur


def _kinds(base: np.ndarray, lane_kind: np.ndarray, name_idx: np.ndarray,
           name_dict: list[str], args: ArgsList, nbytes: np.ndarray, side: Side
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kind, ProfilerStep N or -1, is-step) of every row; MTIA DMA bytes filled in place."""
    infos = [name_info(s) for s in name_dict]
    step_by_name = np.array([i.step for i in infos], np.int32)
    dw_by_name = np.array([i.data_wait for i in infos], bool)
    pg_by_name = np.array([i.host_collective for i in infos], bool)
    comm_by_name = np.array(side.comm.match(name_dict), bool)
    rt_by_name = np.array([i.runtime_kind for i in infos], np.int8)
    mc_by_name = np.array([i.memcpy_kind for i in infos], np.int8)
    dma_by_name = np.array([i.dma for i in infos], bool)

    kind = base.copy()
    m = base == RUNTIME
    kind[m] = rt_by_name[name_idx[m]]
    m = base == KERNEL
    kind[m] = np.where(comm_by_name[name_idx[m]], K["collective"], K["kernel"])
    m = base == MEMCPY
    kind[m] = mc_by_name[name_idx[m]]
    m = base == CCP
    if m.any():
        kind[m] = K["kernel"]
        dma = np.flatnonzero(m & dma_by_name[name_idx])
        if dma.size:
            some = args.some(dma)  # direction and size: read for these events only
            kind[dma] = [_DMA_KINDS.get(a.direction or "", K["memcpy_d2d"]) for a in some]
            size = column(some, "size", np.float64)
            nbytes[dma] = np.where(np.isnan(nbytes[dma]), size, nbytes[dma])
    step_n = step_by_name[name_idx]
    # ProfilerStep#N is a user_annotation today, an Operator (cpu_op) in PyTorch 1.8-1.13
    on_host = lane_kind == LK["host"]
    is_step = (step_n >= 0) & ((base == K["marker"]) | ((base == K["host_op"]) & on_host))
    kind[is_step] = K["step"]
    host_like = member(base, K["host_op"], K["marker"], K["python"]) & on_host & ~is_step
    kind[host_like & dw_by_name[name_idx]] = K["data_wait"]
    # a Gloo/MPI ProcessGroup range runs the collective on this host thread
    kind[member(base, K["host_op"], K["marker"]) & on_host & pg_by_name[name_idx]] = \
        K["collective"]
    return kind, np.where(is_step, step_n, -1).astype(np.int32), is_step


def _units(kind: np.ndarray, base: np.ndarray) -> np.ndarray:
    unit = np.full(len(kind), -1, np.int8)
    unit[(kind == K["kernel"]) & (base != CCP)] = U["sm"]  # MTIA has no SMs: left empty
    unit[kind == K["collective"]] = U["link"]
    unit[member(kind, K["memcpy_h2d"], K["memcpy_d2h"], K["memcpy_d2d"], K["memset"])] = \
        U["copy"]
    return unit


def _streams(rows: list, dev_arr: np.ndarray, from_args: np.ndarray, arg_stream: np.ndarray,
             base: np.ndarray, side: Side) -> tuple[pa.Array, pa.DictionaryArray]:
    """(stream column, lane labels). The device stream is the tid (CUDA writes the stream
    there), or args.stream where the category says so (MTIA) or the tid is not a number."""
    tids = objects(rows, "tid")
    tid_int = ints(tids)
    if tid_int is not None:
        stream_v = np.where(from_args, arg_stream, tid_int)
    else:
        # a tid that is no int64 (text, or an integer past 2**63) is no stream number either
        stream_v = np.array([a if f or not isinstance(t, int) or not -2**63 <= t < 2**63 else t
                             for t, a, f in zip(tids, arg_stream.tolist(), from_args.tolist(),
                                                strict=True)], np.int64)
    stream_null = ~dev_arr | (stream_v == NO_INT) | (stream_v < -2 ** 31) | \
        (stream_v >= 2 ** 31)
    stream = from_numpy(np.where(stream_null, 0, stream_v).astype(np.int32), stream_null)
    lane_id = np.where(from_args & (arg_stream != NO_INT), arg_stream, NO_INT) \
        if from_args.any() else None
    lane_arr = lanes(tids, rows, dev_arr, lane_id, side, tid_int)
    sync_rows = (base == K["sync"]) & dev_arr
    if sync_rows.any():
        # CUPTI sync records (cuda_sync) carry the *host* call's times on the stream's track:
        # a lane of their own ('stream 7 sync'), so they never nest with the stream's kernels
        labels = lane_arr.dictionary.to_pylist()
        lane_codes = to_numpy(lane_arr.indices).copy()  # no nulls in lanes
        lane_codes[sync_rows] += len(labels)
        lane_arr = dictionary(lane_codes, labels + [f"{lb} sync" for lb in labels])
    return stream, lane_arr


def _counters(kind: np.ndarray, lane_kind: np.ndarray, lane_arr: pa.DictionaryArray,
              name_idx: np.ndarray, name_dict: list[str], raw_args: list,
              memory: _Memory | None) -> tuple[pa.DictionaryArray, np.ndarray]:
    """Counter samples: lanes 'counter <name>' and the first number of args for Chrome 'C'
    events; lanes 'memory <device> allocated|reserved' for ``[memory]`` events (their names,
    kind, lane kind and args' unit set in place). Returns (lanes, value)."""
    value = np.full(len(kind), np.nan)
    counter_rows = np.flatnonzero(kind == K["counter"])
    if memory is None and counter_rows.size == 0:
        return lane_arr, value
    # per-row work only on the counter and memory rows: their lane labels are appended to the
    # chunk's labels, and the codes renumbered in order of first appearance at the end
    labels = lane_arr.dictionary.to_pylist()
    lane_code = to_numpy(lane_arr.indices).astype(np.int64)
    label_code: dict[str, int] = {}

    def relabel(rows: np.ndarray, texts: list[str]) -> None:
        lane_code[rows] = [label_code.setdefault(t, len(labels) + len(label_code))
                           for t in texts]

    if counter_rows.size:
        decoded = msgspec.json.decode(b"[" + b",".join(raw_args[i] for i in counter_rows) +
                                      b"]")
        for i, d in zip(counter_rows.tolist(), decoded, strict=True):
            nums = [v for v in (d.values() if isinstance(d, dict) else ())
                    if isinstance(v, (int, float)) and not isinstance(v, bool)]
            value[i] = float(nums[0]) if nums else np.nan
        relabel(counter_rows, [f"counter {name_dict[c]}" for c in name_idx[counter_rows]])
    if memory is not None:
        alloc, resv, devices = memory_samples(take(raw_args, memory.first))
        value[memory.first], value[memory.second] = alloc, resv
        rows = memory.rows
        kind[rows] = K["counter"]
        lane_kind[rows] = LK["counter"]
        name_dict.extend([_NAME_ALLOCATED, _NAME_RESERVED])
        name_idx[memory.first] = len(name_dict) - 2
        name_idx[memory.second] = len(name_dict) - 1
        relabel(memory.first, [f"memory {dev} allocated" for dev in devices])
        relabel(memory.second, [f"memory {dev} reserved" for dev in devices])
        for r in rows.tolist():
            raw_args[r] = msgspec.Raw(with_unit(bytes(raw_args[r]), "B"))
    texts = labels + list(label_code)
    # labels that are the same text (a thread named 'counter x') share one code, as before
    canon_codes, canon = codes(texts)
    used, first = np.unique(canon_codes[lane_code], return_index=True)
    order = used[np.argsort(first, kind="stable")]
    renum = np.zeros(len(canon), np.int32)
    renum[order] = np.arange(len(order), dtype=np.int32)
    return dictionary(renum[canon_codes[lane_code]], [canon[c] for c in order.tolist()]), value


def _record_side(side: Side, kind: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                 corr: np.ndarray, dev_arr: np.ndarray, is_step: np.ndarray,
                 step_n: np.ndarray, args: ArgsList, name_idx: np.ndarray, name_dict: list[str],
                 lane_arr: pa.DictionaryArray) -> None:
    """What phase 2 needs from this chunk: steps, correlations, collectives and the
    record_param_comms ops that describe them."""
    n = len(kind)
    lane_idx = to_numpy(lane_arr.indices)  # Array.to_numpy would import pandas
    lane_code = np.array([side.lane_codes.setdefault(lb, len(side.lane_codes))
                          for lb in lane_arr.dictionary.to_pylist()], np.int64)
    lane_code = lane_code[lane_idx] if len(lane_code) else np.zeros(n, np.int64)
    coll_rows = np.flatnonzero(kind == K["collective"])
    if coll_rows.size:
        info = coll_info(args.some(coll_rows), side)
        host_lane = np.where(dev_arr[coll_rows], -1, lane_code[coll_rows])
        side.colls.append(np.stack([coll_rows + side.rows, ts[coll_rows], *info, host_lane],
                                   1))
    rpc_code = next((i for i, s in enumerate(name_dict) if s == "record_param_comms"), -1)
    rpc_rows = np.flatnonzero(name_idx == rpc_code) if rpc_code >= 0 else coll_rows[:0]
    if rpc_rows.size:
        r_group, r_seq, r_bytes, r_ext = coll_info(args.some(rpc_rows), side)
        keep = (r_group >= 0) | (r_seq >= 0) | (r_bytes >= 0)
        if keep.any():
            side.rpc.append(np.stack([r_ext, r_bytes, r_group, r_seq, ts[rpc_rows],
                                      lane_code[rpc_rows]], 1)[keep])
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


def _few_read_more(name_idx: np.ndarray, name_dict: list[str], side: Side) -> bool:
    """Whether few events (at most 1 in 8) may read args fields beyond ``HotArgs``: those
    named as a collective (a communication kernel, a Gloo/MPI range), a record_param_comms op
    or an MTIA DMA copy. Decoding their args again costs about what the hot fields save."""
    more = np.array([name_info(s).host_collective or name_info(s).dma or
                     s == "record_param_comms" for s in name_dict], bool)
    more |= np.array(side.comm.match(name_dict), bool)
    return not more.any() or int(np.count_nonzero(more[name_idx])) * 8 <= len(name_idx)


def _arg_columns(args: ArgsList) -> tuple[np.ndarray, ...]:
    """(correlation or -1, external id, flops, bytes, stream) of decoded args; a negative or
    infinite FLOP count is not known (NaN): nothing counts below zero or without end, and a
    Hermes trace holds neither (``hermes validate``; bytes: where the batch is made)."""
    corr = column(args, "correlation", np.int64)
    corr[corr == NO_INT] = -1
    flops = column(args, "flops", np.float64)
    flops[(flops < 0) | np.isinf(flops)] = np.nan
    return (corr, external_ids(args), flops, column(args, "bytes", np.float64),
            column(args, "stream", np.int64))


def _events_batch(rows: list, sel: np.ndarray, rpair: np.ndarray, pkind: np.ndarray,
                  plane: np.ndarray, punknown: np.ndarray, pargs: np.ndarray, cat_dict: list,
                  ph_dict: list, chunk: Chunk, side: Side, path: Path,
                  times: Times = (None, None, None)) -> pa.RecordBatch:
    name_idx, name_dict = _name_codes(rows)
    rows, sel, rpair, name_idx, times, memory = _repeat_memory(rows, sel, rpair, name_idx,
                                                               name_dict, times)
    ts, dur = _times(rows, sel, chunk, side, path, times)
    raw_args = objects(rows, "args")
    joined: bytes | None = b"".join(raw_args)  # the args column's data, decoded as it is
    # the fields read for every event; the others only for the few events that read them
    # (from the args as read: raw_args gains keys below), unless they are many
    if _few_read_more(name_idx, name_dict, side):
        args = decode_hot_args(tuple(raw_args), joined)
    else:
        args = decode_args(raw_args, joined)
    try:
        corr, ext, flops, nbytes, arg_stream = _arg_columns(args)
    except OverflowError:  # an integer beyond int64: as decode_args reads it
        args = args.full()
        corr, ext, flops, nbytes, arg_stream = _arg_columns(args)
    base = pkind[rpair]
    lane_kind = plane[rpair].copy()
    kind, step_n, is_step = _kinds(base, lane_kind, name_idx, name_dict, args, nbytes, side)
    unit = _units(kind, base)
    dev_arr = lane_kind == LK["device"]
    stream, lane_arr = _streams(rows, dev_arr, pargs[rpair] & dev_arr,
                                arg_stream, base, side)
    lane_arr, value = _counters(kind, lane_kind, lane_arr, name_idx, name_dict, raw_args,
                                memory)
    if memory is not None:
        corr[memory.rows] = -1  # samples, not launches
        dur[memory.rows] = 0
        joined = None  # their args gained a unit
    unknown_rows = np.flatnonzero(punknown[rpair])
    if unknown_rows.size:
        joined = None  # their args gain the source category
        for i in unknown_rows.tolist():
            p = int(rpair[i])
            cat = cat_dict[p % len(cat_dict)] or f"(ph {ph_dict[p // len(cat_dict)]})"
            raw_args[i] = msgspec.Raw(with_source_category(bytes(raw_args[i]), cat))
    _record_side(side, kind, ts, dur, corr, dev_arr, is_step, step_n, args, name_idx,
                 name_dict, lane_arr)
    no_bytes = ~(nbytes >= 0) | (nbytes >= 2 ** 63)  # NaN, negative, past int64: not known
    return pa.RecordBatch.from_arrays([
        from_numpy(kind), lane_arr, from_numpy(lane_kind), dictionary(name_idx, name_dict),
        from_numpy(ts), from_numpy(dur), from_numpy(step_n), from_numpy(corr),
        from_numpy(ext, ext == NO_INT), stream, from_numpy(unit),
        from_numpy(flops, np.isnan(flops)),
        from_numpy(np.where(no_bytes, 0, nbytes).astype(np.int64), no_bytes),
        from_numpy(value, np.isnan(value)), utf8_buffers(raw_args, joined),
    ], schema=INTERMEDIATE)
