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
* With ``WARMUP_MIN_STEPS`` steps or more, the first step is left out of the classification
  (pipeline warm-up: every queue starts empty) but not out of the share: its ``E`` is split as
  the steady steps' ``E`` is, and its duration stays in the denominator (so the io shares are
  parts of the breakdown's device-idle share).
* The run's kind (``common/runkind.py``, metric ``run_kind``) picks the words: only a run that
  records device activity is said to keep "the device" waiting; in a CPU-only run, or one whose
  device was not captured, it is the training loop that waits for data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common import intervals as iv
from hermes.analyzers.common import opinfo
from hermes.analyzers.common.names import WS_ASCII, is_, name_matches, rows_matching
from hermes.analyzers.common.runkind import ACCELERATOR, rank_kind
from hermes.analyzers.common.spans import (
    data_wait_mask,
    device_idle,
    per_step_ns,
    spans,
    top_names,
    windows_union,
)
from hermes.analyzers.common.steps import WARMUP_MIN_STEPS, fine_windows
from hermes.analyzers.engine.base import AnalyzerResult, RankContext, register
from hermes.findings import MIN_SHARE, Finding
from hermes.trace.args import args_of, has_args
from hermes.trace.schema import DEVICE_LANES

#: The queue counters of Hermes's queue rule (data -> host -> device).
QUEUES = ("data_queue", "host_queue", "device_queue")
CAUSE_OF = {"reading": "slow_data_reading", "processing": "slow_data_processing",
            "fetching": "slow_data_fetching"}
#: Host/loader functions that read storage rather than compute (reading evidence).
READ_NAME = r"(?i)(^|[^a-z])(read|readinto|open|fread|pread|recv|get_object|download|imread|" \
            r"decompress|unzip|untar|tarfile|zipfile)([^a-z]|$)"
FETCH_NAME = r"(?i)pin_memory|HtoD|H2D"
PAGEABLE = r"(?i)pageable|\"pinned\"\s*:\s*false"
#: PAGEABLE in RE2's syntax for ASCII text (``rows_matching``)
PAGEABLE_ASCII = (r'(?i)pageable|"pinned"' + WS_ASCII + r'*:' + WS_ASCII + r'*false')


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
    pageable[h2d] = rows_matching(text, PAGEABLE, PAGEABLE_ASCII)
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


def _wait_union(ev: pd.DataFrame, waits: np.ndarray,
                queues: dict[str, tuple[np.ndarray, np.ndarray]], windows: pd.DataFrame
                ) -> iv.Union:
    """``W`` inside ``windows``: the data waits, else the device queue's empty periods."""
    u = iv.intersect(spans(ev, waits), windows_union(windows))
    if u[0].size == 0 and "device_queue" in queues:
        u = iv.intersect(_empty_periods(queues["device_queue"], int(windows["end_ns"].max())),
                         windows_union(windows))
    return u


def _with_warmup_row(table: dict[str, np.ndarray], first: pd.DataFrame, wait_first: iv.Union,
                     e_first: iv.Union, frac: dict[str, float]) -> dict[str, np.ndarray]:
    """``table`` (the steady steps' per-step columns) with the warm-up step's row first: its
    explained wait split as the steady steps' (``frac``: each class's part of their ``E``)."""
    t = float(iv.total(e_first))
    row = {"step": first["step"].to_numpy(np.int64), "dur_ns": first["dur_ns"].to_numpy(),
           "data_wait_ns": per_step_ns(wait_first, first),
           "explained_ns": per_step_ns(e_first, first),
           **{f"{k}_ns": np.array([round(t * frac[k])], np.int64) for k in CAUSE_OF}}
    return {c: np.concatenate([np.asarray(row[c]), np.asarray(v)]) for c, v in table.items()}


def _loader(ev: pd.DataFrame, waits: np.ndarray) -> dict[str, Any]:
    """What the data waits say of the loader: ``loader`` (single-/multi-process) and
    ``num_workers`` where known (empty: nothing)."""
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
    return loader


@register("io", scope="rank", needs=("overlap",))
def io(ctx: RankContext) -> AnalyzerResult:
    """Queue-based I/O: device-idle time explained by data waits, as reading/processing/fetching."""
    ev = ctx.events
    res = AnalyzerResult("io")
    every = fine_windows(ev, ctx.meta)  # (coarse-to-fine traces: the detailed steps)
    # the first step fills empty queues (warm-up): it is classified by the steady steps' split,
    # but its time stays in the denominator, as in the breakdown and the other analyzers
    warm = len(every) >= WARMUP_MIN_STEPS
    windows = every.iloc[1:].reset_index(drop=True) if warm else every
    first = every.iloc[:1].reset_index(drop=True) if warm else every.iloc[:0]
    step_total = int(every["dur_ns"].sum()) if len(every) else 0
    cols = ["step", "dur_ns", "data_wait_ns", "explained_ns", "reading_ns", "processing_ns",
            "fetching_ns"]
    res.tables["per_step"] = pd.DataFrame({c: np.empty(0, np.int64) for c in cols})
    kind = rank_kind(ev)
    res.metrics.update({"method": "none", "step_total_ns": step_total, "data_wait_ns": 0,
                        "explained_ns": 0, "run_kind": kind,
                        **{f"{c}_share": 0.0 for c in CAUSE_OF}})
    if step_total == 0 or len(windows) == 0:
        return res
    idle = device_idle(ctx, every)
    waits = data_wait_mask(ev)
    queues = _queue_samples(ev)
    wait_all = _wait_union(ev, waits, queues, every)
    wait_u = iv.intersect(wait_all, windows_union(windows))  # the steady steps'
    wait_first = iv.intersect(wait_all, windows_union(first)) if len(first) else iv.EMPTY
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
    e_tot = float(iv.total(e))
    # the warm-up step's explained wait, split as the steady steps' (their "none" included):
    # its queues start empty, so they cannot say which stage is slow; a pipeline the steady
    # steps never wait on charges it to no cause
    e_first = iv.intersect(idle, wait_first)
    first_t = float(iv.total(e_first))
    frac = {k: times[k] / e_tot if e_tot > 0 else 0.0 for k in CAUSE_OF}
    for k in CAUSE_OF:
        times[k] += first_t * frac[k]
    h2d = _h2d(ev, every)
    exposed = h2d.pop("_exposed", iv.EMPTY)
    # pageable copies the device waits on are slow fetching, whatever the loader does
    exposed_extra = iv.subtract(exposed, iv.union(np.concatenate([e[0], e_first[0]]),
                                                  np.concatenate([e[1], e_first[1]])))
    times["fetching"] += float(iv.total(exposed_extra))
    res.metrics.update({"data_wait_ns": int(iv.total(wait_all)),
                        "explained_ns": int(e_tot + first_t), "h2d": h2d,
                        "warmup_explained_ns": int(first_t)})
    # per step: explained time split in the rank-wide proportions (queue classes per step);
    # the warm-up step (first row, when left out of the classification) in the steady split
    wait_ps = per_step_ns(wait_u, windows)
    e_ps = per_step_ns(e, windows)
    table = {"step": windows["step"].to_numpy(np.int64), "dur_ns": windows["dur_ns"].to_numpy(),
             "data_wait_ns": wait_ps, "explained_ns": e_ps}
    for k in CAUSE_OF:
        if by_class is not None:
            ps = per_step_ns(by_class[k], windows)
        else:
            ps = np.round(e_ps * frac[k]).astype(np.int64)
        table[f"{k}_ns"] = ps
    if len(first):
        table = _with_warmup_row(table, first, wait_first, e_first, frac)
    table["fetching_ns"] = table["fetching_ns"] + per_step_ns(exposed_extra, every)
    res.tables["per_step"] = pd.DataFrame(table)
    wait_top = top_names(ev, waits)
    loader = _loader(ev, waits)
    for k, cause in CAUSE_OF.items():
        share = min(1.0, times[k] / step_total)
        res.metrics[f"{k}_share"] = share
        if share < MIN_SHARE:
            continue
        steps = tuple(int(s) for s, v in zip(table["step"], table[f"{k}_ns"], strict=True)
                      if v > 0)
        evidence = {
            "method": res.metrics["method"], "data_wait_ms": round(iv.total(wait_all) / 1e6, 6),
            "data_wait_per_step_ms": round(float(np.median(wait_ps)) / 1e6, 6),
            "device_idle_explained_ms": round((e_tot + first_t) / 1e6, 6),
            f"{k}_ms": round(times[k] / 1e6, 6), "steps_total_ms": round(step_total / 1e6, 6),
            "h2d_copies": h2d["count"], "h2d_pageable": h2d["pageable"],
            "exposed_pageable_h2d_ms": round(h2d["exposed_pageable_ns"] / 1e6, 6),
            "top_ops": wait_top, **loader,
        }
        if by_class is not None:
            evidence["no_bottleneck_ms"] = round(res.metrics["no_bottleneck_ns"] / 1e6, 6)
        res.findings.append(Finding(
            "io", cause, share,
            f"{'the device' if kind == ACCELERATOR else 'the training loop'} waits for data "
            f"{100 * share:.1f}% of step time: {(_WHY if kind == ACCELERATOR else _WHY_HOST)[k]}",
            evidence=evidence, ranks=(int(ctx.rank),), steps=steps))
    res.findings.sort(key=lambda f: -f.time_share)
    return res


_WHY = {
    "reading": "the loader is still reading samples from storage",
    "processing": "samples are read but still being processed (decode, augment, collate)",
    "fetching": "batches are ready on the host but not yet moved to the device",
}
#: ``_WHY`` of a run that records no device activity (CPU-only, or device not captured)
_WHY_HOST = {**_WHY, "fetching": "batches are ready in the loader but not yet handed to the "
                                 "training loop (collate, queue transfer)"}
