"""Rank analyzer ``io``: queue-based I/O analysis — is the device starved of data, and why?

``io(ctx: RankContext) -> AnalyzerResult`` (needs ``overlap`` for its ``device_idle`` gaps;
computes them itself when overlap did not run). Definitions (formulas in ``docs/analysis/io.md``):

* ``I`` = device-idle time (step windows minus device busy), ``W`` = the training loop's data
  waits: host-lane ``data_wait`` events and host events named like a DataLoader ``__next__``; when
  the trace has no data waits but has a ``device_queue`` counter, ``W`` = the time that queue is
  empty. ``E = I ∩ W`` is the device-idle time the data wait explains.
* Each instant of ``E`` is classified by **Hermes's queue rule** when ``data_queue`` /
  ``host_queue`` / ``device_queue`` counter samples exist (each sample holds until the next one of
  its queue): device queue non-empty -> no I/O bottleneck; else host queue non-empty ->
  ``slow_data_fetching``; else data queue non-empty -> ``slow_data_processing``; else
  ``slow_data_reading``.
* Without queue counters, by what runs during ``E``: reading (``data_read`` events, host/loader
  events named like file reads), processing (``data_process`` events), fetching (``data_fetch``
  events, ``pin_memory``, host-side H2D copies); ``|E|`` is split in proportion to the three
  overlaps. When nothing but the wait itself is recorded — a single-process PyTorch DataLoader,
  whose ``__next__`` runs dataset ``__getitem__`` and collate on the training thread — ``E`` is
  data processing.
* Fetching also gets the *exposed pageable H2D copy* time: device H2D copies from pageable memory
  (``Pageable`` in the name or ``"pinned": false`` in args) not overlapped by any kernel.
* ``time_share`` = classified time / sum of step durations; a finding needs ``MIN_SHARE``.
* With ``WARMUP_MIN_STEPS`` steps or more, the first step is left out of all of this (pipeline
  warm-up: every queue starts empty).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers import intervals as iv
from hermes.analyzers import opinfo
from hermes.analyzers.base import AnalyzerResult, RankContext, register
from hermes.analyzers.hta_compat import codes_in, precompile
from hermes.analyzers.kernelstats import desc_order
from hermes.analyzers.steps import WARMUP_MIN_STEPS, fine_windows
from hermes.findings import Finding
from hermes.trace.args import args_of, has_args
from hermes.trace.schema import DEVICE_LANES, NOT_WORK_KINDS

MIN_SHARE = 0.01
#: With at least this many steps the first one is left out: the loader starts with empty
#: queues, so the first step's wait measures start-up, not the pipeline's steady-state rate.
TOP_N = 10
QUEUES = ("data_queue", "host_queue", "device_queue")
CAUSE_OF = {"reading": "slow_data_reading", "processing": "slow_data_processing",
            "fetching": "slow_data_fetching"}
#: PyTorch's DataLoader iterator (Kineto user annotation ``enumerate(DataLoader)#...__next__``).
DATA_WAIT_NAME = r"DataLoader.*__next__|_next_data\b"
#: Host/loader functions that read storage rather than compute (reading evidence).
READ_NAME = r"(?i)(^|[^a-z])(read|readinto|open|fread|pread|recv|get_object|download|imread|" \
            r"decompress|unzip|untar|tarfile|zipfile)([^a-z]|$)"
FETCH_NAME = r"(?i)pin_memory|HtoD|H2D"
PAGEABLE = r"(?i)pageable|\"pinned\"\s*:\s*false"
precompile(DATA_WAIT_NAME, READ_NAME, FETCH_NAME, PAGEABLE)


# ------------------------------------------------------------------ helpers shared with cpu.py
def name_matches(names: pd.Series, pattern: str) -> np.ndarray:
    """``re.search`` of ``pattern`` on each name, evaluated once per distinct name."""
    if len(names) == 0:
        return np.zeros(0, bool)
    rx = re.compile(pattern)
    if isinstance(names.dtype, pd.CategoricalDtype):  # (a few matching names: compared codes)
        return codes_in(names, [bool(rx.search(str(c))) for c in names.dtype.categories.tolist()])
    # (as its categories would: each distinct value once, missing ones never match)
    codes, uniq = pd.factorize(names, use_na_sentinel=True)
    hit = np.array([bool(rx.search(str(c))) for c in uniq], dtype=bool)
    return np.append(hit, False)[codes]  # code -1 (missing) reads the trailing False


def col(events: pd.DataFrame, name: str) -> np.ndarray:
    """A string column as a numpy object array. Categoricals are expanded from their categories
    (``astype(str)`` of a million-row categorical costs seconds under pandas 3's Arrow strings)."""
    if len(events) == 0:
        return np.empty(0, object)
    s = events[name]
    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = np.array([str(c) for c in s.dtype.categories.tolist()] + ["nan"], dtype=object)
        return cats[s.array.codes]  # code -1 (missing) picks the trailing "nan"
    return s.astype(str).to_numpy(dtype=object)


def is_(events: pd.DataFrame, name: str, *values: str) -> np.ndarray:
    """Mask of the rows whose string column ``name`` is one of ``values`` (as
    ``np.isin(col(events, name), values)``), decided once per category: no per-row strings."""
    s = events[name] if len(events) else None
    if s is None or not isinstance(s.dtype, pd.CategoricalDtype):
        return np.isin(col(events, name), values) if len(events) else np.zeros(0, bool)
    return codes_in(s, [str(c) in values for c in s.dtype.categories.tolist()], "nan" in values)



def spans(events: pd.DataFrame, mask: np.ndarray | None = None) -> iv.Union:
    """Union of the events' [ts, ts + dur) (those selected by ``mask``)."""
    if mask is not None and not mask.any():
        return iv.EMPTY
    s = events["ts_ns"].to_numpy(np.int64)
    d = events["dur_ns"].to_numpy(np.int64)
    if mask is not None:  # (the rows selected first: no end computed for the others)
        s, d = s[mask], d[mask]
    return iv.union(s, s + d)


def windows_union(windows: pd.DataFrame) -> iv.Union:
    return iv.union(windows["start_ns"].to_numpy(np.int64), windows["end_ns"].to_numpy(np.int64))


def device_idle(ctx: RankContext, windows: pd.DataFrame) -> iv.Union:
    """Device-idle time inside the step windows (overlap's ``device_idle`` table when present)."""
    ov = ctx.results.get("overlap")
    if ov is not None and "device_idle" in ov.tables:
        t = ov.tables["device_idle"]
        return iv.union(t["start_ns"].to_numpy(np.int64), t["end_ns"].to_numpy(np.int64))
    ev = ctx.events
    dev = is_(ev, "lane_kind", *DEVICE_LANES) & ~is_(ev, "kind", *NOT_WORK_KINDS)
    return iv.subtract(windows_union(windows), spans(ev, dev))


def per_step_ns(u: iv.Union, windows: pd.DataFrame) -> np.ndarray:
    return iv.overlap_per_interval(windows["start_ns"].to_numpy(np.int64),
                                   windows["end_ns"].to_numpy(np.int64), u)


def top_names(events: pd.DataFrame, mask: np.ndarray, n: int = TOP_N,
              weights: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Top event names by total duration (or by ``weights``, one per event, e.g. self time):
    ``[{name, time_ns, count}]``."""
    if not mask.any():
        return []
    w = (events["dur_ns"].to_numpy(np.int64) if weights is None else weights)[mask]
    names = events["name"]
    if isinstance(names.dtype, pd.CategoricalDtype) and w.dtype.kind in "iu":
        # summed per category code, then by text (as the per-row strings would group): no
        # string per event
        code = names.array.codes[mask].astype(np.int64)
        keep = code >= 0  # a missing name is no group (as the strings' groupby drops it)
        order = np.argsort(code[keep], kind="stable")
        code, w = code[keep][order], w[keep][order].astype(np.int64)
        if code.size == 0:
            return []
        first = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
        text = np.array([str(c) for c in names.dtype.categories.tolist()], dtype=object)
        keys, sums = text[code[first]], np.add.reduceat(w, first)
        counts = np.diff(np.r_[first, len(code)])
        if len(set(keys.tolist())) == keys.size:  # (distinct texts: the groups as they are)
            # = the groupby by name (sorted names), then sort_values("sum", ascending=False)
            # (pandas' quicksort: desc_order) and head(n), without the frames
            by_name = np.argsort(keys, kind="stable")
            top = by_name[desc_order(sums[by_name], kind="quicksort")[:n]]
            return [{"name": str(keys[i]), "time_ns": int(sums[i]), "count": int(counts[i])}
                    for i in top]
        sub = pd.DataFrame({"name": keys, "sum": sums, "count": counts})
        g = sub.groupby("name")[["sum", "count"]].sum()
    else:
        sub = pd.DataFrame({"name": names[mask].astype(str).to_numpy(), "dur_ns": w})
        g = sub.groupby("name", observed=True)["dur_ns"].agg(["sum", "count"])
    g = g.sort_values("sum", ascending=False).head(n)
    return [{"name": str(k), "time_ns": int(r["sum"]), "count": int(r["count"])}
            for k, r in g.iterrows()]


def data_wait_mask(events: pd.DataFrame) -> np.ndarray:
    """Host-lane data waits: ``data_wait`` events and DataLoader ``__next__`` ranges."""
    if len(events) == 0:
        return np.zeros(0, bool)
    host = is_(events, "lane_kind", "host")
    return host & (is_(events, "kind", "data_wait") | name_matches(events["name"],
                                                                       DATA_WAIT_NAME))


# ------------------------------------------------------------------ queue rule
def _queue_samples(events: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    counter = is_(events, "kind", "counter")
    out = {}
    for q in QUEUES:
        m = counter & is_(events, "name", q)
        if m.any():  # (the rows' times and values only, in time order)
            rows = np.flatnonzero(m)
            ts = events["ts_ns"].to_numpy(np.int64)[rows]
            o = np.argsort(ts, kind="stable")
            out[q] = (ts[o], pd.to_numeric(events["value"].take(rows[o]), errors="coerce")
                      .fillna(0.0).to_numpy(np.float64))
    return out


def _state_at(samples: tuple[np.ndarray, np.ndarray] | None, t: np.ndarray) -> np.ndarray:
    """Queue depth at times ``t`` (the last sample at or before; 0 before the first)."""
    if samples is None:
        return np.zeros(t.size)
    ts, vals = samples
    k = np.searchsorted(ts, t, side="right") - 1
    return np.where(k >= 0, vals[np.maximum(k, 0)], 0.0)


def _empty_periods(samples: tuple[np.ndarray, np.ndarray], end: int) -> iv.Union:
    ts, vals = samples
    nxt = np.append(ts[1:], max(end, int(ts[-1])))
    return iv.union(ts[vals <= 0], nxt[vals <= 0])


def classify_by_queues(e: iv.Union, queues: dict[str, tuple[np.ndarray, np.ndarray]]
                       ) -> dict[str, iv.Union]:
    """Split ``e`` by the queue rule into reading/processing/fetching/none unions."""
    pts = [e[0], e[1]] + [q[0] for q in queues.values()]
    p = np.unique(np.concatenate(pts))
    if p.size < 2:
        return {k: iv.EMPTY for k in ("reading", "processing", "fetching", "none")}
    s, t = p[:-1], p[1:]
    inside = iv.overlap_per_interval(s, t, e) > 0  # elementary segments: fully in or out
    s, t = s[inside], t[inside]
    dev = _state_at(queues.get("device_queue"), s) > 0
    host = _state_at(queues.get("host_queue"), s) > 0
    data = _state_at(queues.get("data_queue"), s) > 0
    none = dev
    fetching = ~dev & host
    processing = ~dev & ~host & data
    reading = ~dev & ~host & ~data
    return {k: iv.union(s[m], t[m]) for k, m in (("reading", reading), ("processing", processing),
                                                  ("fetching", fetching), ("none", none))}


def _classify_by_events(events: pd.DataFrame, e: iv.Union) -> dict[str, float]:
    """Time of ``e`` per class from the loader activity during it (see module docstring)."""
    workers = is_(events, "lane_kind", "host", "loader")
    read = is_(events, "kind", "data_read") | (
        workers & name_matches(events["name"], READ_NAME)
        & ~is_(events, "kind", "data_wait", "data_process"))
    proc = is_(events, "kind", "data_process")
    fetch = is_(events, "kind", "data_fetch") | (
        workers & (is_(events, "kind", "memcpy_h2d") | name_matches(events["name"], FETCH_NAME)))
    total = float(iv.total(e))
    t = {k: float(iv.total(iv.intersect(e, spans(events, m)))) for k, m in
         (("reading", read), ("processing", proc), ("fetching", fetch))}
    seen = sum(t.values())
    if seen <= 0:
        return {"reading": 0.0, "processing": total, "fetching": 0.0}
    return {k: total * v / seen for k, v in t.items()}


def _h2d(events: pd.DataFrame, windows: pd.DataFrame) -> dict[str, Any]:
    dev = is_(events, "lane_kind", *DEVICE_LANES)
    h2d = dev & is_(events, "kind", "memcpy_h2d")
    if not h2d.any():
        return {"count": 0, "pageable": 0, "bytes": 0, "exposed_pageable_ns": 0}
    names = events["name"][h2d]  # the name + args text of the copies only
    text = names.astype(str) + " " + args_of(events, h2d).astype(str).fillna("") \
        if has_args(events) else names.astype(str)
    pageable = h2d.copy()
    pageable[h2d] = name_matches(text, PAGEABLE)
    # (no pageable copy: nothing exposed, without the kernels' union)
    exposed = iv.intersect(iv.subtract(spans(events, pageable),
                                       spans(events, dev & is_(events, "kind", "kernel"))),
                           windows_union(windows)) if pageable.any() else iv.EMPTY
    b = pd.to_numeric(events["bytes"][h2d], errors="coerce") if "bytes" in events.columns \
        else pd.Series(dtype=float)
    return {"count": int(h2d.sum()), "pageable": int(pageable.sum()),
            "bytes": int(b.fillna(0).sum()),
            "time_ns": int(events["dur_ns"].to_numpy(np.int64)[h2d].sum()),
            "exposed_pageable_ns": int(iv.total(exposed)), "_exposed": exposed}


@register("io", scope="rank", needs=("overlap",))
def io(ctx: RankContext) -> AnalyzerResult:
    """Queue-based I/O: device-idle time explained by data waits, as reading/processing/fetching."""
    ev = ctx.events
    res = AnalyzerResult("io")
    windows = fine_windows(ev, ctx.meta)  # (coarse-to-fine traces: the detailed steps)
    if len(windows) >= WARMUP_MIN_STEPS:  # the first step fills empty queues: warm-up
        windows = windows.iloc[1:].reset_index(drop=True)
    step_total = int(windows["dur_ns"].sum()) if len(windows) else 0
    cols = ["step", "dur_ns", "data_wait_ns", "explained_ns", "reading_ns", "processing_ns",
            "fetching_ns"]
    res.tables["per_step"] = pd.DataFrame({c: np.empty(0, np.int64) for c in cols})
    res.metrics.update({"method": "none", "step_total_ns": step_total, "data_wait_ns": 0,
                        "explained_ns": 0, **{f"{c}_share": 0.0 for c in CAUSE_OF}})
    if step_total == 0:
        return res
    idle = device_idle(ctx, windows)
    waits = data_wait_mask(ev)
    queues = _queue_samples(ev)
    wait_u = iv.intersect(spans(ev, waits), windows_union(windows))
    if wait_u[0].size == 0 and "device_queue" in queues:
        wait_u = iv.intersect(_empty_periods(queues["device_queue"], int(windows["end_ns"].max())),
                              windows_union(windows))
    e = iv.intersect(idle, wait_u)
    by_class: dict[str, iv.Union] | None = None
    if queues:
        by_class = classify_by_queues(e, queues)
        times = {k: float(iv.total(by_class[k])) for k in CAUSE_OF}
        res.metrics["method"] = "queues"
        res.metrics["no_bottleneck_ns"] = int(iv.total(by_class["none"]))
    else:
        times = _classify_by_events(ev, e)
        res.metrics["method"] = "events"
    h2d = _h2d(ev, windows)
    exposed = h2d.pop("_exposed", iv.EMPTY)
    # pageable copies the device waits on are slow fetching, whatever the loader does
    exposed_extra = iv.subtract(exposed, e)
    times["fetching"] += float(iv.total(exposed_extra))
    res.metrics.update({"data_wait_ns": int(iv.total(wait_u)), "explained_ns": int(iv.total(e)),
                        "h2d": h2d})
    # per step: explained time split in the rank-wide proportions (queue classes per step)
    wait_ps = per_step_ns(wait_u, windows)
    e_ps = per_step_ns(e, windows)
    e_tot = max(float(iv.total(e)), 1.0)
    table = {"step": windows["step"].to_numpy(np.int64), "dur_ns": windows["dur_ns"].to_numpy(),
             "data_wait_ns": wait_ps, "explained_ns": e_ps}
    for k in CAUSE_OF:
        if by_class is not None:
            ps = per_step_ns(by_class[k], windows)
        else:
            ps = np.round(e_ps * (times[k] - (float(iv.total(exposed_extra)) if k == "fetching"
                                              else 0.0)) / e_tot).astype(np.int64)
        if k == "fetching":
            ps = ps + per_step_ns(exposed_extra, windows)
        table[f"{k}_ns"] = ps
    res.tables["per_step"] = pd.DataFrame(table)
    wait_top = top_names(ev, waits)
    # PyTorch names the loader's iterator: a single-process one loads in the training process
    # (num_workers=0); a multi-process one has workers (how many, the trace does not say)
    wait_names = pd.Series(ev.loc[waits, "name"].astype(str).unique(), dtype=str)
    loader: dict[str, Any] = {}
    if wait_names.str.contains("_MultiProcessingDataLoaderIter", regex=False).any():
        loader = {"loader": "multi-process"}
    elif wait_names.str.contains("_SingleProcessDataLoaderIter", regex=False).any():
        loader = {"loader": "single-process", "num_workers": 0}
    # a collector that saw the DataLoader records its workers in the waits' args
    workers = (opinfo.arg_numbers(args_of(ev, waits), "num_workers").dropna()
               if has_args(ev) and waits.any() else pd.Series(dtype=float))
    if len(workers):
        n = int(workers.max())
        loader = {"loader": "multi-process" if n > 0 else "single-process", "num_workers": n}
    for k, cause in CAUSE_OF.items():
        share = min(1.0, times[k] / step_total)
        res.metrics[f"{k}_share"] = share
        if share < MIN_SHARE:
            continue
        steps = tuple(int(s) for s, v in zip(table["step"], table[f"{k}_ns"], strict=True)
                      if v > 0)
        evidence = {
            "method": res.metrics["method"], "data_wait_ms": round(iv.total(wait_u) / 1e6, 6),
            "data_wait_per_step_ms": round(float(np.median(wait_ps)) / 1e6, 6),
            "device_idle_explained_ms": round(iv.total(e) / 1e6, 6),
            f"{k}_ms": round(times[k] / 1e6, 6), "steps_total_ms": round(step_total / 1e6, 6),
            "h2d_copies": h2d["count"], "h2d_pageable": h2d["pageable"],
            "exposed_pageable_h2d_ms": round(h2d["exposed_pageable_ns"] / 1e6, 6),
            "top_ops": wait_top, **loader,
        }
        if by_class is not None:
            evidence["no_bottleneck_ms"] = round(res.metrics["no_bottleneck_ns"] / 1e6, 6)
        res.findings.append(Finding(
            "io", cause, share,
            f"the device waits for data {100 * share:.1f}% of step time: {_WHY[k]}",
            evidence=evidence, ranks=(int(ctx.rank),), steps=steps))
    res.findings.sort(key=lambda f: -f.time_share)
    return res


_WHY = {
    "reading": "the loader is still reading samples from storage",
    "processing": "samples are read but still being processed (decode, augment, collate)",
    "fetching": "batches are ready on the host but not yet moved to the device",
}
