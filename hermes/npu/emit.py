"""Turn one stage's step record into a columnar event batch for one rank (trace-schema names).

Events are assembled kind by kind with boolean masks over the operators and concatenated;
string columns are built as Arrow dictionary arrays from small vocabularies (no per-event
Python strings). The runtime calls this only for (rank, step) pairs a collector wants in
detail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from hermes.npu.graph import BWD, DTYPE_BYTES, UNIT_NAMES, Graph
from hermes.npu.stage import Stage, StepRecord
from hermes.trace.schema import arrow_schema

LANES = ["thread 0", "thread 1", "thread 2", "stream 0", "stream 1", "copy 0", "link tp",
         "link dp", "link pp", "link ep", "counters", "thread pin"] + \
    [f"loader {i}" for i in range(64)]
MAX_LOADER_LANES = 64
LANE_KIND = {"thread": "host", "stream": "device", "copy": "copy", "link": "link",
             "counters": "counter", "loader": "loader"}
KINDS = ["compile", "gc", "infer_shape", "tiling", "alloc", "launch", "host_op", "kernel",
         "collective", "sync", "step", "data_read", "data_process", "data_fetch", "data_wait",
         "memcpy_h2d", "counter", "python", "runtime", "marker"]
UNITS = list(UNIT_NAMES[:3]) + ["link", "host", "copy"]
EXTRA_NAMES = ["TransData", "StreamSynchronize", "wait grad_allreduce", "gc.collect(gen0)",
               "gc.collect(full)", "next(batch)", "read batch", "decompress batch",
               "process batch", "pin batch", "H2D batch", "data_queue", "host_queue",
               "device_queue", "host_cpu_pct",
               "other_processes_cpu_pct", "ModelExecute", "ModelLoad", "model_execute_header",
               "grad_allreduce", "straggler_stall", "item_sync", "ProfilerStep",
               "aicore_freq_mhz"]
ARGS = [None, '{"cache_hit":true}', '{"cache_hit":false}', '{"unit":"items"}',
        '{"unit":"percent"}', '{"unit":"MHz"}', '{"pinned":true}', '{"pinned":false}']
# Dictionaries must not repeat a value (the Parquet writer's output would then depend on
# how it unifies them): lane kinds get their own dictionary and a lane -> kind index map.
_LANE_DICT = pa.array(LANES)
_LANE_KIND_NAMES = sorted(set(LANE_KIND.values()))
_LANE_KIND_DICT = pa.array(_LANE_KIND_NAMES)
_LANE_KIND_IDX = np.array([_LANE_KIND_NAMES.index(LANE_KIND[x.split(" ")[0]]) for x in LANES],
                          np.int32)
LINK_LANE = {"tp": "link tp", "dp": "link dp", "ep": "link ep", "pp_prev": "link pp",
             "pp_next": "link pp"}


@dataclass(frozen=True)
class Vocab:
    """Per-stage name dictionary: display names of ops (backward ops suffixed) + extras."""

    names: pa.Array
    op_name: np.ndarray       # (expanded ops,) index into names
    extra: dict[str, int]
    #: per shape scale: the args of every graph operator (its shapes; None where not recorded)
    shape_args: dict[float, np.ndarray] = field(default_factory=dict, compare=False)

    def shapes(self, g: Graph, scale: float) -> np.ndarray:
        """Args of each operator of ``g`` as a profiler records a task (Ascend
        kernel_details ``Type``, ``Input Shapes`` / ``Output Shapes`` and data types): a
        Vector operator reads
        ``tensors - 1`` tensors and writes one, each of ``bytes / tensors`` at the base shape;
        None for other operators. Once per stage and shape scale (dynamic shapes)."""
        out = self.shape_args.get(scale)
        if out is None:
            out = np.full(len(g), None, dtype=object)
            for i in np.flatnonzero(g.tensors > 0):
                n = int(g.tensors[i])
                e = str(int(round(g.bytes[i] / (n * DTYPE_BYTES) * scale)))
                ins, types = ";".join([e] * max(n - 1, 1)), ";".join(["DT_BF16"] * max(n - 1, 1))
                out[i] = (f'{{"Type":"{g.optype[i]}","Input Shapes":"{ins}",'
                          f'"Input Data Types":"{types}","Output Shapes":"{e}",'
                          f'"Output Data Types":"DT_BF16"}}')
            self.shape_args[scale] = out
        return out

    @classmethod
    def of(cls, st: Stage) -> Vocab:
        g, o = st.g, st.order
        disp = np.array([g.name[i] + (".grad" if g.phase[i] == BWD else "") for i in
                         range(len(g))] + EXTRA_NAMES, dtype=object)
        uniq, inv = np.unique(disp, return_inverse=True)
        return cls(pa.array(uniq.tolist(), pa.string()), inv[o].astype(np.int32),
                   {n: int(inv[len(g) + k]) for k, n in enumerate(EXTRA_NAMES)})


class Parts:
    """Accumulates event groups for all ranks of a stage at once.

    Everything but time is the same on every rank of a stage (same graph, same host costs),
    so static columns are built once per step and only ``ts``/``dur`` are (ranks, events)
    matrices; ``batch(li, ...)`` slices one rank's row into schema-typed Arrow arrays.
    """

    def __init__(self, ranks: int) -> None:
        self.R = ranks
        self.texts: list[Any] = []  # args beyond ARGS, one per event that has its own
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in (
            "lane", "kind", "name", "ts_ns", "dur_ns", "corr_id", "stream", "unit", "flops",
            "bytes", "value", "coll_group", "coll_seq", "coll_bytes", "args", "keep")}

    def add(self, n: int, *, lane: str | np.ndarray, kind: str, name: int | np.ndarray,
            ts: Any, dur: Any, keep: Any = True, **kw: Any) -> None:
        """Add ``n`` events; ``ts``/``dur``/``value`` may be per rank (ranks, n); ``keep``
        (ranks, n) marks events only some ranks have."""
        if n == 0:
            return
        full = np.full
        c = self.cols
        c["lane"].append(full(n, LANES.index(lane), np.int32) if isinstance(lane, str)
                         else np.broadcast_to(np.asarray(lane, np.int32), (n,)))
        c["kind"].append(full(n, KINDS.index(kind), np.int32))
        c["name"].append(np.broadcast_to(np.asarray(name, np.int32), (n,)))
        c["ts_ns"].append(_mat(ts, self.R, n))
        c["dur_ns"].append(_mat(dur, self.R, n))
        c["value"].append(_mat(kw.get("value", np.nan), self.R, n))
        c["keep"].append(_mat(keep, self.R, n) > 0)
        for k in ("corr_id", "stream", "flops", "bytes", "coll_seq", "coll_bytes"):
            c[k].append(np.broadcast_to(np.asarray(kw.get(k, np.nan), np.float64), (n,)))
        for k in ("unit", "coll_group", "args"):
            c[k].append(np.broadcast_to(np.asarray(kw.get(k, -1), np.int32), (n,)))
        text = kw.get("args_text")
        if text is not None:  # each event its own args (codes past ARGS)
            c["args"][-1] = np.arange(len(ARGS) + len(self.texts),
                                      len(ARGS) + len(self.texts) + n, dtype=np.int32)
            self.texts.extend(text)

    def freeze(self, vocab: Vocab) -> Frozen:
        cat = {k: np.concatenate(v, axis=-1) if v else np.empty(0) for k, v in self.cols.items()}
        n = cat["kind"].shape[0] if len(self.cols["kind"]) else 0
        static: dict[str, pa.Array] = {}
        if n:
            lane = cat["lane"]
            static["lane"] = pa.DictionaryArray.from_arrays(pa.array(lane), _LANE_DICT)
            static["lane_kind"] = pa.DictionaryArray.from_arrays(
                pa.array(_LANE_KIND_IDX[lane]), _LANE_KIND_DICT)
            static["kind"] = pa.DictionaryArray.from_arrays(pa.array(cat["kind"]), _KIND_DICT)
            static["name"] = pa.DictionaryArray.from_arrays(pa.array(cat["name"]), vocab.names)
            for k, typ in (("corr_id", pa.int64()), ("stream", pa.int32()),
                           ("bytes", pa.int64()), ("coll_seq", pa.int64()),
                           ("coll_bytes", pa.int64())):
                v = cat[k]
                mask = np.isnan(v)
                static[k] = pa.array(np.where(mask, 0, np.round(v)).astype(np.int64),
                                     mask=mask).cast(typ)
            static["flops"] = pa.array(cat["flops"], pa.float64(), from_pandas=True)
            u = cat["unit"]
            static["unit"] = pa.DictionaryArray.from_arrays(
                pa.array(np.where(u < 0, 0, u), pa.int32(), mask=u < 0), _UNIT_DICT)
            a = cat["args"]
            # decoded from a dictionary in Arrow (no Python object per event)
            table = pa.array(ARGS + self.texts, pa.string())
            idx = pa.array(np.where(a < 0, 0, a).astype(np.int32), mask=a <= 0)
            static["args"] = pa.DictionaryArray.from_arrays(idx, table).cast(pa.string())
        keep = cat["keep"] if n else np.empty((self.R, 0), bool)
        # start and end rounded to the ns, the duration their difference: tasks back to back
        # on one stream stay back to back (no 1 ns overlaps from rounding each apart)
        ts = np.round(cat["ts_ns"]) if n else np.empty((self.R, 0))
        dur = np.maximum(np.round(cat["ts_ns"] + cat["dur_ns"]) - ts, 0) if n else ts
        return Frozen(n, static, cat["coll_group"] if n else np.empty(0, np.int32),
                      cat["value"] if n else np.empty((self.R, 0)),
                      None if keep.all() else keep, ts.astype(np.int64), dur.astype(np.int64))


def _mat(x: Any, r: int, n: int) -> np.ndarray:
    a = np.asarray(x, np.float64)
    if a.ndim == 2:
        return a
    return np.broadcast_to(a, (n,))[None, :].repeat(r, axis=0) if a.ndim else \
        np.full((r, n), float(a))


_KIND_DICT = pa.array(KINDS)
_UNIT_DICT = pa.array(UNITS)
_SCHEMA = arrow_schema()


@dataclass(frozen=True)
class Frozen:
    """One stage-step's events: static columns plus per-rank time matrices."""

    n: int
    static: dict[str, pa.Array]
    group_idx: np.ndarray
    value: np.ndarray            # (ranks, events); NaN = null
    keep: np.ndarray | None      # (ranks, events) bool; None = every rank has every event
    ts: np.ndarray
    dur: np.ndarray

    def batch(self, li: int, rank: int, step: int, groups: list[str]) -> dict[str, pa.Array]:
        """Local rank ``li``'s events: a columnar batch of schema-typed Arrow arrays."""
        n = self.n
        g = self.group_idx
        cols = dict(self.static)
        cols["rank"] = pa.array(np.full(n, rank, np.int32))
        cols["ts_ns"] = pa.array(self.ts[li])
        cols["dur_ns"] = pa.array(self.dur[li])
        cols["step"] = pa.array(np.full(n, step, np.int32))
        cols["value"] = pa.array(self.value[li], pa.float64(), from_pandas=True)
        cols["coll_group"] = pa.DictionaryArray.from_arrays(
            pa.array(np.where(g < 0, 0, g), pa.int32(), mask=g < 0), pa.array(groups))
        if self.keep is not None and not self.keep[li].all():
            mask = pa.array(self.keep[li])
            cols = {k: v.filter(mask) for k, v in cols.items()}
            n = int(self.keep[li].sum())
        return {f.name: cols[f.name] if f.name in cols else pa.nulls(n, f.type)
                for f in _SCHEMA}


def stage_events(st: Stage, rec: StepRecord, vocab: Vocab, data: dict[str, float],
                 loader_lane: str, sink_load_ns: float) -> Frozen:
    """The events every rank of the stage has this step (times per rank). The parts are added
    in a fixed order (host stages, device tasks, the rest): the trace's row order follows it."""
    p = Parts(st.R)
    pipe = st.s.pipeline and not st.s.sink
    threads = ("thread 0", "thread 1", "thread 2") if pipe else ("thread 0",) * 3
    corr = rec.step * 1_000_000 + np.arange(st.n, dtype=np.float64)
    _host_stages(p, st, rec, vocab, threads, corr, sink_load_ns)
    _device_tasks(p, st, rec, vocab, corr)
    _step_and_data(p, st, rec, vocab, threads[2], data, loader_lane)
    return p.freeze(vocab)


def _host_stages(p: Parts, st: Stage, rec: StepRecord, vocab: Vocab,
                 threads: tuple[str, ...], corr: np.ndarray, sink_load_ns: float) -> None:
    """GC pauses, compiles, InferShape, tiling, allocation and launch of every operator (or,
    sunk, one model execute per step and the model load at step 0)."""
    c, x, names = rec.costs, vocab.extra, vocab.op_name
    t1, t2, t3 = threads
    s1, s2, s3 = rec.s1, rec.s2, rec.s3
    on_host = c.on_host
    if st.s.sink:
        p.add(1, lane=t3, kind="launch", name=x["ModelExecute"], ts=s3[:, :1],
              dur=c.launch[0], corr_id=corr[0])
        if rec.step == 0:
            p.add(1, lane=t1, kind="runtime", name=x["ModelLoad"],
                  ts=s1[:, :1] - sink_load_ns, dur=sink_load_ns)
    else:
        m = c.gc > 0
        if m.any():
            p.add(int(m.sum()), lane=t1, kind="gc", ts=s1[:, m], dur=c.gc[m],
                  name=np.where(c.gc_full[m], x["gc.collect(full)"], x["gc.collect(gen0)"]))
        t = s1 + c.gc
        m = c.compile > 0
        p.add(int(m.sum()), lane=t1, kind="compile", name=names[m], ts=t[:, m],
              dur=c.compile[m])
        t = t + c.compile
        d = ~on_host
        nd = int(d.sum())
        p.add(nd, lane=t1, kind="infer_shape", name=names[d], ts=t[:, d], dur=c.infer[d])
        t = t + c.infer
        p.add(nd, lane=t1, kind="tiling", name=names[d], ts=t[:, d], dur=c.tiling[d],
              args=np.where(c.tiling_hit[d], 1, 2))
        p.add(nd, lane=t2, kind="alloc", name=names[d], ts=s2[:, d], dur=c.alloc[d])
        p.add(nd, lane=t3, kind="launch", name=names[d], ts=s3[:, d], dur=c.launch[d],
              corr_id=corr[d])
        p.add(int(on_host.sum()), lane=t3, kind="host_op", name=names[on_host],
              ts=s3[:, on_host], dur=c.launch[on_host], unit=UNITS.index("host"))


def _device_tasks(p: Parts, st: Stage, rec: StepRecord, vocab: Vocab, corr: np.ndarray) -> None:
    """Kernels (with their TransData), stream-ordered collectives and gradient buckets."""
    g, o, x, names = st.g, st.order, vocab.extra, vocab.op_name
    step, link, on_host = rec.step, st.is_link, rec.costs.on_host
    dts, ddur = rec.dev_ts, rec.dev_dur
    kcorr = np.full(st.n, corr[0]) if st.s.sink else corr
    if st.s.sink:
        p.add(1, lane="stream 0", kind="kernel", name=x["model_execute_header"],
              ts=dts[:, :1] - st.sink_header, dur=st.sink_header, corr_id=kcorr[0], stream=0)
    k = ~link & ~on_host
    td = rec.transdata
    m = k & (td > 0)
    p.add(int(m.sum()), lane="stream 0", kind="kernel", name=x["TransData"], ts=dts[:, m],
          dur=td[m], corr_id=kcorr[m], stream=0, unit=UNITS.index("vector"),
          bytes=g.bytes[o[m]] * rec.scale / 3)
    p.add(int(k.sum()), lane="stream 0", kind="kernel", name=names[k],
          ts=dts[:, k] + td[k], dur=ddur[:, k] - td[k], corr_id=kcorr[k], stream=0,
          unit=st.unit[o[k]], flops=st.flops[o[k]] * rec.scale,
          bytes=st.nbytes[o[k]] * rec.scale, args_text=vocab.shapes(g, rec.scale)[o[k]].tolist())
    if link.any():
        grp = np.array([st.group_code[g.comm_group[i]] for i in o[link]])
        lane = np.array([LANES.index(LINK_LANE[g.comm_group[i]]) for i in o[link]])
        p.add(int(link.sum()), lane=lane, kind="collective", name=names[link],
              ts=dts[:, link], dur=ddur[:, link], corr_id=kcorr[link], stream=1,
              unit=UNITS.index("link"), bytes=rec.comm_bytes[link],
              coll_bytes=rec.comm_bytes[link], coll_group=grp,
              coll_seq=step * st.link_count[link] + st.link_occ[link])
    nb = rec.grad_ts.shape[1] if rec.grad_ts.ndim == 2 else 0
    if nb:
        p.add(nb, lane="link dp", kind="collective", name=x["grad_allreduce"],
              ts=rec.grad_ts, dur=rec.grad_dur, stream=1, unit=UNITS.index("link"),
              bytes=rec.grad_bytes, coll_bytes=rec.grad_bytes, coll_group=st.group_code["dp"],
              coll_seq=step * nb + np.arange(nb))


def _step_and_data(p: Parts, st: Stage, rec: StepRecord, vocab: Vocab, t3: str,
                   data: dict[str, float], loader_lane: str) -> None:
    """Syncs, the step range, the data pipeline, counters and the waits only some ranks have."""
    x = vocab.extra
    m = st.sync
    p.add(int(m.sum()), lane=t3, kind="sync", name=x["item_sync"], ts=rec.sync_ts[:, m],
          dur=rec.sync_dur[:, m])
    end = rec.end[:, None]
    p.add(1, lane=t3, kind="sync", name=x["StreamSynchronize"], ts=rec.end_sync_ts[:, None],
          dur=end - rec.end_sync_ts[:, None])
    start = rec.start[:, None]
    p.add(1, lane="thread 0", kind="step", name=x["ProfilerStep"], ts=start, dur=end - start)
    if data:
        lane_l = LANES.index(loader_lane)
        # a read is its transfer (the bytes it moved) then, from compressed archives, the
        # extraction of their members (a read of its own kind, named as such)
        read_start = data["read_end"] - data["read_dur"]
        p.add(1, lane=np.array([lane_l]), kind="data_read", name=x["read batch"],
              ts=read_start, dur=data["transfer_dur"], bytes=data["read_bytes"])
        if data["decode_dur"] > 0:
            p.add(1, lane=np.array([lane_l]), kind="data_read", name=x["decompress batch"],
                  ts=read_start + data["transfer_dur"], dur=data["decode_dur"])
        p.add(1, lane=np.array([lane_l]), kind="data_process", name=x["process batch"],
              ts=data["proc_end"] - data["proc_dur"], dur=data["proc_dur"])
        # the pin thread pins a batch once it is processed; where the copy starts before
        # that would end, the pinning is drawn ending at the copy's start
        copy_start = data["fetch_end"] - data["fetch_dur"]
        pin = data["proc_end"] if data["proc_end"] + data["pin_dur"] <= copy_start else \
            copy_start - data["pin_dur"]
        p.add(1, lane="thread pin", kind="data_fetch", name=x["pin batch"], ts=pin,
              dur=data["pin_dur"])
        p.add(1, lane="copy 0", kind="memcpy_h2d", name=x["H2D batch"],
              ts=data["fetch_end"] - data["copy_dur"], dur=data["copy_dur"], stream=2,
              unit=UNITS.index("copy"), bytes=data["batch_bytes"],
              args=6 if st.s.pin_memory else 7)
        for q in ("data_queue", "host_queue", "device_queue"):
            p.add(1, lane="counters", kind="counter", name=x[q], ts=start, dur=0,
                  value=data[q], args=3)
    if st.s.other_cpu_pct > 0:
        p.add(1, lane="counters", kind="counter", name=x["other_processes_cpu_pct"], ts=end,
              dur=0, value=st.s.other_cpu_pct, args=4)
    # events only some ranks have: waits for data, straggler stalls, optimizer waits
    wait = rec.data_wait[:, None]
    if (wait > 0).any():
        p.add(1, lane="thread 0", kind="data_wait", name=x["next(batch)"], ts=start, dur=wait,
              keep=wait > 0)
    stall = rec.stall[:, None]
    if (stall > 0).any():
        # a range annotating the late start (its cause lies outside the emulated stack), not
        # host work of the framework
        p.add(1, lane="thread 0", kind="marker", name=x["straggler_stall"], ts=start + wait,
              dur=stall, keep=stall > 0)
    if len(rec.opt_wait_dur) and (rec.opt_wait_dur > 0).any():
        ow = rec.opt_wait_dur[:, None]
        p.add(1, lane="stream 0", kind="sync", name=x["wait grad_allreduce"],
              ts=rec.opt_wait_ts[:, None], dur=ow, stream=0, keep=ow > 0)
    # AI Core clock: a slow node runs its tasks at a fraction of the nominal frequency
    p.add(1, lane="counters", kind="counter", name=x["aicore_freq_mhz"], ts=start, dur=0,
          value=st.clock_mhz[:, None], args=5)
    busy = float(rec.costs.total.sum())
    p.add(1, lane="counters", kind="counter", name=x["host_cpu_pct"], ts=end, dur=0,
          value=np.minimum(100.0, 100.0 * busy / np.maximum(end - start, 1.0)), args=4)

