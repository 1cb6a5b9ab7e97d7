"""Phase 1 of the Kineto import: one chunk of decoded events -> one intermediate Arrow batch.

Steps, lane names and dangling correlations depend on events anywhere in the file (a
``ProfilerStep#N`` may come after the events it contains; thread names come from metadata
events), so phase 1 stores raw-ish columns plus small side arrays (:class:`Side`), and phase 2
(``kineto.py``) finishes every batch once the whole file has been read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hermes.collectors.importers.kineto_map import (
    CATEGORIES,
    EVENT_PHASES,
    FLOW_PHASES,
    KERNEL,
    LK,
    MEMCPY,
    RUNTIME,
    K,
    U,
    coll_bytes,
    coll_group,
    decode_args,
    name_info,
    raw_strings,
    with_source_category,
)
from hermes.collectors.importers.kineto_reader import Chunk, us_text_to_ns

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
    by_category: Counter[str] = field(default_factory=Counter)
    unknown: Counter[str] = field(default_factory=Counter)
    flows: int = 0
    negative_dur: int = 0
    rows: int = 0
    ts_min: int | None = None


def _encode(values: list[object]) -> tuple[np.ndarray, list[object]]:
    """Dictionary-encode a list of str/None: (indices with nulls -> len(dictionary), dictionary)."""
    enc = pa.array(values, type=pa.string()).dictionary_encode()
    dictionary = enc.dictionary.to_pylist()
    idx = pc.fill_null(enc.indices, len(dictionary)).to_numpy()
    return idx, dictionary + [None]


def _role(ph: str, cat: str | None) -> tuple[int, int, int, bool]:
    """(role, kind code, lane-kind code, kept as unknown) of a (phase, category) pair."""
    if ph in FLOW_PHASES:
        return ROLE_FLOW, 0, 0, False
    if ph == "M":
        return ROLE_META, 0, 0, False
    if ph == "C":
        return ROLE_EVENT, K["counter"], LK["counter"], False
    rule = CATEGORIES.get(cat or "")
    if ph in EVENT_PHASES and rule is not None:
        return ROLE_EVENT, rule.kind, LK[rule.lane_kind], False
    return ROLE_EVENT, K["other"], LK["host"], True


def chunk_to_batch(chunk: Chunk, side: Side, path: Path) -> pa.RecordBatch | None:
    evs = chunk.events
    ph_idx, ph_dict = _encode([e.ph for e in evs])
    cat_idx, cat_dict = _encode([e.cat for e in evs])
    pair = ph_idx * len(cat_dict) + cat_idx
    uniq, counts = np.unique(pair, return_counts=True)
    n_pairs = len(ph_dict) * len(cat_dict)
    role = np.zeros(n_pairs, np.int8)
    pkind = np.zeros(n_pairs, np.int8)
    plane = np.zeros(n_pairs, np.int8)
    punknown = np.zeros(n_pairs, bool)
    for u, c in zip(uniq.tolist(), counts.tolist(), strict=True):
        ph, cat = ph_dict[u // len(cat_dict)], cat_dict[u % len(cat_dict)]
        if not ph:
            first = int(np.flatnonzero(pair == u)[0])
            raise ImportFormatError("event has no 'ph' (phase)", path=path,
                                    where=f"event {chunk.first_index + first}",
                                    hint="expected Chrome-trace events such as "
                                         '{"ph": "X", "name": ..., "ts": ..., "dur": ...}')
        role[u], pkind[u], plane[u], punknown[u] = _role(str(ph), cat)
        key = cat if cat else f"(ph {ph})"
        side.by_category[key] += c
        if punknown[u]:
            side.unknown[key] += c
        if role[u] == ROLE_FLOW:
            side.flows += c
    row_role = role[pair]
    meta_rows = np.flatnonzero(row_role == ROLE_META)
    if meta_rows.size:
        _thread_names([evs[i] for i in meta_rows.tolist()], side)
    sel = np.flatnonzero(row_role == ROLE_EVENT)
    if sel.size == 0:
        return None
    rows = [evs[i] for i in sel.tolist()]
    rpair = pair[sel]
    return _events_batch(rows, sel, rpair, pkind, plane, punknown, cat_dict, ph_dict, chunk,
                         side, path)


def _thread_names(rows: list, side: Side) -> None:
    names = [r for r in rows if r.name == "thread_name"]
    if not names:
        return
    for r, a in zip(names, decode_args([r.args for r in names]), strict=True):
        if a.name and str(r.tid) not in side.thread_names:
            side.thread_names[str(r.tid)] = a.name.strip()


def _lanes(tids: list, dev: np.ndarray) -> pa.DictionaryArray:
    """'thread <tid>' / 'stream <tid>' per row, built once per distinct (tid, lane kind)."""
    try:
        tid = np.fromiter(tids, dtype=np.int64, count=len(tids))
    except (TypeError, ValueError, OverflowError):  # string tids (Kineto's own spans)
        labels = [("stream " if d else "thread ") + str(t)
                  for d, t in zip(dev.tolist(), tids, strict=True)]
        return pa.array(labels, pa.string()).dictionary_encode()
    key = tid * 2 + dev
    uniq, inverse = np.unique(key, return_inverse=True)
    labels = [("stream " if k & 1 else "thread ") + str(k >> 1) for k in uniq.tolist()]
    return pa.DictionaryArray.from_arrays(pa.array(inverse.astype(np.int32)),
                                          pa.array(labels, pa.string()))


def _coll_info(args: list, side: Side) -> tuple[np.ndarray, ...]:
    """(group code, seq, bytes, external id) arrays of collective args; -1 where unknown."""
    group = np.array([_group_code(coll_group(a), side) for a in args], np.int64)
    seq = np.array([a.seq if isinstance(a.seq, int) else -1 for a in args], np.int64)
    nbytes = np.array([-1 if (b := coll_bytes(a)) is None else b for a in args], np.int64)
    ext = np.array([-1 if a.external_id is None else a.external_id for a in args], np.int64)
    return group, seq, nbytes, ext


def _group_code(group: str | None, side: Side) -> int:
    if group is None:
        return -1
    return side.groups.setdefault(group, len(side.groups))


def _events_batch(rows: list, sel: np.ndarray, rpair: np.ndarray, pkind: np.ndarray,
                  plane: np.ndarray, punknown: np.ndarray, cat_dict: list, ph_dict: list,
                  chunk: Chunk, side: Side, path: Path) -> pa.RecordBatch:
    n = len(rows)
    where0 = chunk.first_index
    names = [r.name for r in rows]
    try:
        name_idx, name_dict = _encode(names)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        name_idx, name_dict = _encode([r if isinstance(r, str) else
                                       ("" if r is None else str(r)) for r in names])
    name_dict[-1] = ""
    infos = [name_info(s or "") for s in name_dict]
    step_by_name = np.array([i.step for i in infos], np.int32)
    dw_by_name = np.array([i.data_wait for i in infos], bool)
    nccl_by_name = np.array([i.nccl for i in infos], bool)
    rt_by_name = np.array([i.runtime_kind for i in infos], np.int8)
    mc_by_name = np.array([i.memcpy_kind for i in infos], np.int8)

    try:
        ts, has_ts = us_text_to_ns([r.ts for r in rows])
        dur, _ = us_text_to_ns([r.dur for r in rows])
    except ValueError as exc:
        i = int(exc.args[0])
        raise ImportFormatError("'ts'/'dur' is not a number", path=path,
                                where=f"event {where0 + int(sel[i])}",
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

    base = pkind[rpair]
    lane_kind = plane[rpair]
    kind = base.copy()
    m = base == RUNTIME
    kind[m] = rt_by_name[name_idx[m]]
    m = base == KERNEL
    kind[m] = np.where(nccl_by_name[name_idx[m]], K["collective"], K["kernel"])
    m = base == MEMCPY
    kind[m] = mc_by_name[name_idx[m]]
    step_n = step_by_name[name_idx]
    is_step = (base == K["marker"]) & (step_n >= 0)
    kind[is_step] = K["step"]
    host_like = np.isin(base, [K["host_op"], K["marker"], K["python"]]) & \
        (lane_kind == LK["host"]) & ~is_step
    kind[host_like & dw_by_name[name_idx]] = K["data_wait"]
    step_n = np.where(is_step, step_n, -1).astype(np.int32)

    unit = np.full(n, -1, np.int8)
    unit[kind == K["kernel"]] = U["sm"]
    unit[kind == K["collective"]] = U["link"]
    unit[np.isin(kind, [K["memcpy_h2d"], K["memcpy_d2h"], K["memcpy_d2d"], K["memset"]])] = \
        U["copy"]

    tids = [r.tid for r in rows]
    dev_arr = lane_kind == LK["device"]
    counter_rows = np.flatnonzero(kind == K["counter"])
    lane_arr = _lanes(tids, dev_arr)
    if counter_rows.size:
        lanes = lane_arr.to_pylist()
        for i in counter_rows.tolist():
            lanes[i] = f"counter {name_dict[name_idx[i]]}"
        lane_arr = pa.array(lanes, pa.string()).dictionary_encode()

    raw_args = [r.args for r in rows]
    args = decode_args(raw_args)
    corr = np.array([-1 if a.correlation is None else a.correlation for a in args], np.int64)
    ext = pa.array([a.external_id for a in args], pa.int64())
    flops = pa.array([a.flops for a in args], pa.float64())
    nbytes = pa.array([a.bytes for a in args]).cast(pa.int64(), safe=False) \
        if any(a.bytes is not None for a in args) else pa.nulls(n, pa.int64())
    stream = pa.array([(t if isinstance(t, int) else a.stream) if d else None
                       for d, t, a in zip(dev_arr.tolist(), tids, args, strict=True)], pa.int32())

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
        info = _coll_info([args[i] for i in coll_rows.tolist()], side)
        side.colls.append(np.stack([coll_rows + side.rows, ts[coll_rows], *info], 1))
    rpc_code = next((i for i, s in enumerate(name_dict) if s == "record_param_comms"), -1)
    rpc_rows = np.flatnonzero(name_idx == rpc_code) if rpc_code >= 0 else coll_rows[:0]
    if rpc_rows.size:
        r_group, r_seq, r_bytes, r_ext = _coll_info([args[i] for i in rpc_rows.tolist()], side)
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

    name_arr = pa.DictionaryArray.from_arrays(pa.array(name_idx.astype(np.int32)),
                                              pa.array(name_dict, pa.string()))
    return pa.RecordBatch.from_arrays([
        pa.array(kind), lane_arr, pa.array(lane_kind), name_arr, pa.array(ts), pa.array(dur),
        pa.array(step_n), pa.array(corr), ext, stream, pa.array(unit), flops, nbytes,
        pa.array(value, from_pandas=True), raw_strings(raw_args),
    ], schema=INTERMEDIATE)
