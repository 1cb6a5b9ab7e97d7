"""torch_npu ``trace_view.json`` (Chrome trace format) -> an Ascend event frame.

Processes are recognized by their ``process_name`` metadata (tables below, data not code):

* ``Python``: ``cpu_op`` -> ``host_op`` (``ProfilerStep#N`` -> ``step`` N), ``python_function`` ->
  ``python``, ``user_annotation`` -> ``marker``, the torch_npu task queue (``enqueue``/``dequeue``)
  -> ``runtime``; lane ``thread <tid>``.
* ``CANN``: AscendCL/runtime calls on lane ``thread <tid>`` (the same OS thread as the Python
  ops): a call that is the source of a ``HostToDevice`` flow, or whose name reads like one
  (``*Launch*``, ``*Execute*``, ``aclnnX``), -> ``launch``; synchronize/wait and blocking
  ``aclrtMemcpy`` -> ``sync``; tiling, InferShape, compile, malloc/free by name; others ->
  ``runtime``.
* ``Ascend Hardware``: device tasks on lane ``stream <Stream Id>`` (lane_kind device); ``Task
  Type`` picks kind and unit (AI_CORE -> cube, AI_VECTOR_CORE -> vector, AI_CPU -> ai_cpu,
  MIX_AIC/MIX_AIV -> mix; ``Other`` is a task the profiler did not classify: a kernel with no unit).
* ``HCCL`` / ``Communication``: collectives on link lanes named after their thread; tasks on
  ``Plane`` threads are the links' sub-tasks (``Notify_Wait`` -> ``sync``, transfers ->
  ``memcpy_d2d`` with ``bytes``).
* ``Overlap Analysis``: ``marker`` events on lane ``overlap analysis`` (lane_kind device; kind
  marker keeps them out of busy/idle sums); ``args.category`` keeps Computing / Communication /
  Communication(Not Overlapped) / Free.

Flows: ``HostToDevice`` links a CANN launch to device tasks -> the same ``corr_id`` (the launch's
event index in the file) on both; ``async_npu`` links a Python operator to device tasks -> the
same ``external_id`` (the operator's event index) on both and on the launch. A flow binds to
the innermost slice enclosing its timestamp on its thread. Anything unrecognized becomes kind
``other`` with ``args.source_category``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hermes.collectors.importers.ascend.common import frame, load_json, lookup, us_to_ns
from hermes.errors import ImportFormatError

#: Role of a process by its process_name.
PROCESS_ROLES: dict[str, str] = {
    "Python": "host", "CPU": "host", "CANN": "cann", "Ascend Hardware": "hardware",
    "HCCL": "hccl", "Communication": "hccl", "Overlap Analysis": "overlap",
}

#: Python-process event category -> kind.
HOST_CATS: dict[str, str] = {
    "cpu_op": "host_op", "python_function": "python", "user_annotation": "marker",
    "enqueue": "runtime", "dequeue": "runtime", "memory": "alloc", "gc": "gc",
}

#: CANN API name (prefix such as ``AscendCL@`` removed) -> kind; first match wins.
CANN_NAME_KINDS: tuple[tuple[str, str], ...] = (
    (r"(?i).*(synchroniz|streamwait|syncstream|eventsync|waitevent).*", "sync"),
    (r"aclrtMemcpy|aclrtMemcpy2d", "sync"),  # blocking copies: the host waits
    (r".*Tiling.*", "tiling"),
    (r".*InferShape.*", "infer_shape"),
    (r"opCompile|aclopCompile|aclopCompileV\d+|.*JitCompile.*", "compile"),
    (r"(?i).*(malloc|aclrtfree|freemem).*", "alloc"),
    (r".*(Launch|Execute|MemcpyAsync|MemsetAsync).*", "launch"),
    (r"aclnn(?!.*GetWorkspaceSize)[A-Za-z0-9_]+", "launch"),
)

#: Device task type -> (kind, unit).
TASK_TYPES: dict[str, tuple[str, str | None]] = {
    "AI_CORE": ("kernel", "cube"), "AI_VECTOR_CORE": ("kernel", "vector"),
    "AI_CPU": ("kernel", "ai_cpu"), "MIX_AIC": ("kernel", "mix"), "MIX_AIV": ("kernel", "mix"),
    "Other": ("kernel", None), "DSA_SQE": ("kernel", None), "FFTS_PLUS": ("kernel", None),
    "EVENT_WAIT": ("sync", None), "STREAM_WAIT_EVENT": ("sync", None),
    "HCCL": ("collective", "link"), "COMMUNICATION": ("collective", "link"),
    "MEMSET": ("memset", None),
}

_STEP_RE = r"ProfilerStep#(\d+)"
_FIELDS = ("ph", "name", "pid", "tid", "ts", "dur", "cat", "args", "id", "bp")


def parse(path: Path, rank: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Events of one ``trace_view.json`` for ``rank``; returns (event frame, flow counts)."""
    raw = load_json(path)
    events = raw.get("traceEvents") if isinstance(raw, dict) else raw
    if not isinstance(events, list):
        raise ImportFormatError("not a Chrome trace", path=path, where="byte offset 0",
                                hint="expected a JSON list of events or {\"traceEvents\": [...]}")
    bad = [i for i, e in enumerate(events) if not isinstance(e, dict)]
    if bad:
        raise ImportFormatError(f"event is a {type(events[bad[0]]).__name__}, not an object",
                                path=path, where=f"event #{bad[0]}",
                                hint="expected Chrome trace events {\"ph\": ..., \"ts\": ...}")
    # Only the fields used, as object columns: no per-column type inference over the events.
    df = pd.DataFrame({c: [e.get(c) for e in events] for c in _FIELDS}, dtype=object)
    df["pid"] = df["pid"].map(str)
    df["tid"] = df["tid"].map(str)
    ph = df["ph"].astype(str).to_numpy()

    meta = df[ph == "M"]
    procs = _meta_names(meta, "process_name", by_thread=False)
    threads = _meta_names(meta, "thread_name", by_thread=True)

    timed = df[(ph != "M")]
    ts, bad_ts = us_to_ns(timed["ts"].to_numpy())
    if bad_ts.any():
        i = int(timed.index[np.flatnonzero(bad_ts)[0]])
        raise ImportFormatError(f"'ts' is {events[i].get('ts')!r}, expected a time in µs",
                                path=path, where=f"event #{i}", hint="re-export the profile")
    df["ts_ns"] = pd.Series(ts, index=timed.index, dtype="Int64")
    flows = df[np.isin(ph, ("s", "f", "t"))]
    slices = df[(ph != "M") & ~np.isin(ph, ("s", "f", "t"))]
    out, slice_index = _slices(slices, procs, threads, path, events, rank)
    counts = _link_flows(out, slices, slice_index, flows)
    return out, counts


def _meta_names(meta: pd.DataFrame, which: str, by_thread: bool) -> dict[Any, str]:
    rows = meta[meta["name"] == which]
    names = [a.get("name") if isinstance(a, dict) else None for a in rows["args"]]
    keys = list(zip(rows["pid"], rows["tid"], strict=True)) if by_thread else list(rows["pid"])
    return {k: str(n) for k, n in zip(keys, names, strict=True) if n is not None}


def _hardware(hw: np.ndarray, args: list[Any], tid: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, list[str], list[str], np.ndarray]:
    """Device tasks: (task types, which map to a kind, their kinds, their units, stream ids)."""
    ttype = np.array([str(args[i].get("Task Type", "")) for i in hw], dtype=object)
    mapped = lookup(ttype, TASK_TYPES)
    known = np.array([m is not None for m in mapped], dtype=bool)
    sid = pd.to_numeric(pd.Series([args[i].get("Stream Id", tid[i]) for i in hw], dtype=object),
                        errors="coerce").to_numpy(float)
    return ttype, known, [m[0] for m in mapped[known]], [m[1] for m in mapped[known]], sid


def _hccl(hccl: np.ndarray, tname: np.ndarray, name: np.ndarray, tid: np.ndarray,
          args: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """HCCL events: (kinds, lanes, which are on a transport plane, message sizes in bytes).
    Plane events are the transfers (or notify waits) of a collective; the rest the collective."""
    tn = pd.Series(tname[hccl], dtype=object)
    plane = tn.str.contains("Plane", case=False).to_numpy(dtype=bool)
    waits = pd.Series(name[hccl], dtype=object).str.contains(
        "Notify_Wait|Notify Wait|Wait", case=False).to_numpy(dtype=bool)
    kinds = np.where(plane, np.where(waits, "sync", "memcpy_d2d"), "collective")
    lanes = np.where(tn.to_numpy() != "", tn.to_numpy(), "hccl " + tid[hccl].astype(str))
    size = pd.to_numeric(pd.Series([args[i].get("size(Byte)") for i in hccl], dtype=object),
                         errors="coerce").to_numpy(float)
    return kinds, lanes, plane, size


def _slices(df: pd.DataFrame, procs: dict[Any, str], threads: dict[Any, str], path: Path,
            events: list[Any], rank: int) -> tuple[pd.DataFrame, np.ndarray]:
    n = len(df)
    dur_raw = df["dur"].where(df["dur"].notna(), 0).to_numpy()
    dur, bad = us_to_ns(dur_raw)
    if bad.any():
        i = int(df.index[np.flatnonzero(bad)[0]])
        raise ImportFormatError(f"'dur' is {events[i].get('dur')!r}, expected a duration in µs",
                                path=path, where=f"event #{i}", hint="re-export the profile")
    dur = np.maximum(dur, 0)
    pid = df["pid"].to_numpy(dtype=object)
    tid = df["tid"].to_numpy(dtype=object)
    pname = lookup(pid, procs, "")
    role = lookup(pname, PROCESS_ROLES, "unknown")
    pair = (df["pid"] + ":" + df["tid"]).to_numpy(dtype=object)
    tname = lookup(pair, {f"{p}:{t}": v for (p, t), v in threads.items()}, "")
    name = df["name"].fillna("").astype(str).to_numpy(dtype=object)
    cat = df["cat"].fillna("").astype(str).to_numpy(dtype=object)
    ph = df["ph"].astype(str).to_numpy(dtype=object)
    args = [a if isinstance(a, dict) else {} for a in df["args"]]

    kind = np.full(n, "other", dtype=object)
    lane = np.char.add("thread ", tid.astype(str)).astype(object)
    lane_kind = np.full(n, "host", dtype=object)
    unit = np.full(n, None, dtype=object)
    src = np.char.add("trace_view/", np.where(pname == "", "unknown process", pname).astype(str))
    src = src.astype(object)
    stream = np.full(n, np.nan)
    step = np.full(n, np.nan)
    nbytes = np.full(n, np.nan)

    host = np.flatnonzero(role == "host")
    kind[host] = lookup(cat[host], HOST_CATS, "other")
    src[host] = src[host] + "/" + cat[host]
    steps = pd.Series(name[host], dtype=object).str.extract("^" + _STEP_RE + "$")[0]
    is_step = steps.notna().to_numpy()
    kind[host[is_step]] = "step"
    step[host[is_step]] = steps[is_step].astype(np.int64).to_numpy()

    cann = np.flatnonzero(role == "cann")
    bare = pd.Series(name[cann], dtype=object).str.replace(r"^[A-Za-z]+@", "", regex=True)
    ck = np.full(len(cann), "runtime", dtype=object)
    decided = np.zeros(len(cann), dtype=bool)
    for pattern, k in CANN_NAME_KINDS:
        hit = bare.str.fullmatch(pattern).to_numpy(dtype=bool) & ~decided
        ck[hit] = k
        decided |= hit
    kind[cann] = ck

    hw = np.flatnonzero(role == "hardware")
    ttype, known, kinds, units, sid = _hardware(hw, args, tid)
    kind[hw[known]] = kinds
    unit[hw[known]] = units
    src[hw] = src[hw] + "/" + ttype
    stream[hw] = sid
    lane[hw] = [f"stream {int(v)}" if v == v else "stream ?" for v in sid]
    lane_kind[hw] = "device"

    hccl = np.flatnonzero(role == "hccl")
    kind[hccl], lane[hccl], plane, size = _hccl(hccl, tname, name, tid, args)
    unit[hccl] = "link"
    lane_kind[hccl] = "link"
    nbytes[hccl[plane]] = np.round(size[plane])

    ov = np.flatnonzero(role == "overlap")
    kind[ov] = "marker"
    lane[ov] = "overlap analysis"
    lane_kind[ov] = "device"
    for j in ov:  # the category goes into args, which are dicts per event
        args[j] = {**args[j], "category": name[j]}

    unknown = np.flatnonzero(role == "unknown")
    lane[unknown] = pname[unknown] + " " + tid[unknown].astype(str)
    src[unknown] = src[unknown] + "/" + cat[unknown]
    instant = np.isin(ph, ("i", "I", "n"))
    kind[instant & (kind != "other")] = "marker"
    counter = np.flatnonzero(ph == "C")
    kind[counter] = "counter"
    lane_kind[counter] = "counter"
    lane[counter] = "counter " + name[counter]
    value = np.full(n, np.nan)
    value[counter] = [_first_number(args[i]) for i in counter]
    dur[counter] = 0

    for j in np.flatnonzero(kind == "other"):
        args[j] = {**args[j], "source_category": src[j]}
    out = frame(n, rank=rank, lane=lane, lane_kind=lane_kind, kind=kind, name=name,
                ts_ns=df["ts_ns"].to_numpy(np.int64), dur_ns=dur, step=_ints(step),
                stream=_ints(stream), unit=unit, bytes=_ints(nbytes), args=args, src=src,
                value=value)
    return out, df.index.to_numpy()


def _ints(values: np.ndarray) -> pd.arrays.IntegerArray:
    """Float array with NaN for missing -> nullable Int64. A value no int64 holds (inf, beyond
    2**63) is missing too, never a wrapped-around number."""
    missing = ~(np.abs(values) < 2.0**63)  # NaN and inf compare False
    return pd.arrays.IntegerArray(np.where(missing, 0, values).astype(np.int64), missing)


def _first_number(a: dict[str, Any]) -> float:
    for v in a.values():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return float("nan")


def _enclosing(keys: np.ndarray, starts: np.ndarray, ends: np.ndarray, qkeys: np.ndarray,
               qts: np.ndarray) -> np.ndarray:
    """Position of the innermost slice with the same key enclosing each query time, or -1.

    Slices sorted by (key, start, -end); the innermost enclosing slice is the last one that
    started at or before ``t`` and ends at or after it. A sparse table of running maxima of
    the ends finds it in log2(n) vectorized jumps instead of walking back slice by slice.
    """
    order = np.lexsort((-ends, starts, keys))
    k, s, e = keys[order], starts[order], ends[order]
    n = len(order)
    res = np.full(len(qts), -1, dtype=np.int64)
    if n == 0 or len(qts) == 0:
        return res
    lo = np.searchsorted(k, qkeys, "left")
    hi = np.searchsorted(k, qkeys, "right")
    # Last slice of the same key starting at or before t.
    pos = np.empty(len(qts), dtype=np.int64)
    for key in np.unique(qkeys):  # one searchsorted per lane, not per event
        m = qkeys == key
        a, b = lo[m][0], hi[m][0]
        pos[m] = a + np.searchsorted(s[a:b], qts[m], "right") - 1
    floor = lo - 1  # a query may not jump below its lane
    levels = [e]
    width = 1
    while width * 2 <= n:
        prev = levels[-1]
        nxt = prev.copy()
        nxt[width:] = np.maximum(prev[width:], prev[:-width])
        levels.append(nxt)
        width *= 2
    ok = pos > floor
    cur = np.where(ok, pos, 0)
    found = ok & (e[cur] >= qts)
    pending = ok & ~found
    for lvl in range(len(levels) - 1, -1, -1):
        step = 1 << lvl
        # Block ending at cur of width step lies wholly below the target: jump over it.
        can = pending & (cur - step >= floor) & (levels[lvl][cur] < qts)
        cur = np.where(can, cur - step, cur)
    pending_ok = pending & (cur > floor) & (e[np.maximum(cur, 0)] >= qts)
    hit = found | pending_ok
    res[hit] = order[cur[hit]]
    return res


def _link_flows(out: pd.DataFrame, slices: pd.DataFrame, slice_index: np.ndarray,
                flows: pd.DataFrame) -> dict[str, Any]:
    """Set corr_id / external_id from HostToDevice and async_npu flows; returns counts."""
    counts: dict[str, Any] = {}
    if len(flows) == 0 or len(out) == 0:
        return counts
    lane_of = pd.Series(slices["pid"].astype(str) + ":" + slices["tid"].astype(str))
    codes, uniques = pd.factorize(lane_of)
    starts = out["ts_ns"].to_numpy(np.int64)
    ends = starts + out["dur_ns"].to_numpy(np.int64)
    timed = ~np.isin(out["kind"].to_numpy(), ("counter",))
    fl = pd.Series(flows["pid"].astype(str) + ":" + flows["tid"].astype(str))
    qcodes = pd.Index(uniques).get_indexer(fl)
    bound = _enclosing(np.where(timed, codes, -2), starts, ends, qcodes,
                       flows["ts_ns"].to_numpy(np.int64))
    bound[qcodes < 0] = -1
    fdf = pd.DataFrame({"cat": flows["cat"].fillna("").astype(str).to_numpy(),
                        "id": flows["id"].astype(str).to_numpy(),
                        "ph": flows["ph"].astype(str).to_numpy(), "slice": bound})
    counts["flows_by_category"] = {str(k): int(v) for k, v in
                                   fdf[fdf["ph"] == "s"]["cat"].value_counts().items()}
    counts["flow_ends_unbound"] = int((bound < 0).sum())
    fdf = fdf[fdf["slice"] >= 0]
    starts_ = fdf[fdf["ph"] == "s"].drop_duplicates(["cat", "id"])
    ends_ = fdf[fdf["ph"] == "f"]
    pairs = starts_.merge(ends_, on=["cat", "id"], suffixes=("_s", "_f"))
    corr = np.array(out["corr_id"], dtype=object)  # writable copy
    ext = np.array(out["external_id"], dtype=object)  # writable copy
    kind = np.array(out["kind"], dtype=object)  # writable copy
    h2d = pairs[pairs["cat"] == "HostToDevice"]
    src, dst = h2d["slice_s"].to_numpy(np.int64), h2d["slice_f"].to_numpy(np.int64)
    # corr_id: the launch's event index in the file, unique per launch.
    corr[src] = slice_index[src]
    corr[dst] = slice_index[src]
    launch_src = src[out["lane_kind"].to_numpy()[src] == "host"]
    kind[launch_src] = np.where(kind[launch_src] == "sync", "sync", "launch")
    op = pairs[pairs["cat"] == "async_npu"]
    osrc, odst = op["slice_s"].to_numpy(np.int64), op["slice_f"].to_numpy(np.int64)
    ext[osrc] = slice_index[osrc]
    ext[odst] = slice_index[osrc]
    out["corr_id"] = pd.array(corr, dtype="Int64")
    out["external_id"] = pd.array(ext, dtype="Int64")
    out["kind"] = kind
    # The launch joins its operator: take the external_id of the tasks it launched.
    tasks = pd.DataFrame({"launch": src, "ext": out["external_id"].to_numpy(dtype=object)[dst]})
    tasks = tasks.dropna().drop_duplicates("launch")
    if len(tasks):
        e2 = np.array(out["external_id"], dtype=object)  # writable copy
        li = tasks["launch"].to_numpy(np.int64)
        e2[li] = tasks["ext"].to_numpy()
        out["external_id"] = pd.array(e2, dtype="Int64")
    counts["device_tasks_with_launch"] = int(len(np.unique(dst)))
    counts["device_tasks_with_operator"] = int(len(np.unique(odst)))
    return counts
