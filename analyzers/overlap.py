"""Multi-component overlap: each step's wall time split into five disjoint parts (rank analyzer).

Per step window ``W`` (``steps.step_windows``), with unions of half-open intervals in ns:

* ``C`` = device computation: device-side kernels, copies and memsets (not collectives);
* ``M`` = device communication: ``collective`` events, events on ``link`` lanes and kernels named
  like NCCL kernels (``^nccl.*Kernel``, for importers that leave them as plain kernels);
* ``H`` = host busy: events on ``host`` lanes except ``step``/``marker``/``counter``/``other``
  (dispatch, launches, runtime calls, syncs, data waits, compilation, GC, Python frames), not on
  helper threads (``hostcalls.helper_lanes``: threads that drive nothing, e.g. a Python thread
  blocked in ``threading`` waits, when another thread launches the device work);

and the parts (each clipped to ``W``):

* ``overlapped``         = C ∩ M
* ``computation_only``   = C - M
* ``communication_only`` = M - C
* ``host_bound``         = H - (C ∪ M)   (device idle while the host works)
* ``free``               = W - (C ∪ M ∪ H) (device and host idle)

They partition ``W``, so the five ``*_pct`` figures sum to 100. Per-rank metrics are time-weighted
over steps (sum of a part over all steps / sum of step durations), which equals the mean of the
per-step percentages when steps are equally long. The HTA-compatible figures (``idle_pct``,
``compute_pct``, ``non_compute_pct``, ``comm_comp_overlap_pct``) use HTA's own definitions over the
whole trace (``hta_compat``); in the ``per_step`` table they are computed on the GPU events
clipped to the step. Table ``device_idle`` lists the device-idle gaps (W - (C ∪ M)) per step, for
the CPU and I/O analyzers to intersect with host events. This analyzer emits no findings: the
parts feed the verdict and the cause analyzers.

**From a vendor's step summary** (Ascend ``step_trace_time.csv``: step events whose args carry
``computing_ns``, ``communication_not_overlapped_ns``, ``overlapped_ns``, ``free_ns``, made by
the Ascend importer): a rank whose events do not record a part the summary reports -- no device
computation ``C`` inside its steps while ``computing_ns > 0``, or no communication ``M`` while
``communication_ns`` (else not-overlapped + overlapped) > 0 -- takes its parts from the summary,
step by step: ``overlapped = min(Overlapped, Computing)``, ``computation_only = Computing -
overlapped``, ``communication_only = Communication(Not Overlapped)``, ``free = Free``,
``host_bound = 0`` (the summary has no host; metric ``host_bound_known`` false), step time the
sum (what the importer made ``dur_ns``). Metric ``from_summary`` is true for such a rank (the
reports mark it), ``bubble_pct`` is the summary's Bubble (receive time, part of
communication_only); the HTA figures are the summary's own (idle = Free, compute = Computing,
non-compute = Communication(Not Overlapped), comm/comp overlap = Overlapped / Communication) and
``device_idle`` is empty (the summary does not say when the device was idle). A rank whose
events record every part the summary reports is analysed from its events as above, with the
summary's parts beside them (metric ``summary_pct``) for comparison.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common import hostcalls, hta_compat
from hermes.analyzers.common import intervals as iv
from hermes.analyzers.common.steps import (
    fine_windows,
    split_by_windows,
    step_windows,
    summary_rows,
    window_note,
)
from hermes.analyzers.engine.base import AnalyzerResult, RankContext, register
from hermes.trace.args import args_of, has_args
from hermes.trace.schema import COMM_KINDS, COMPUTE_KINDS, HOST_LANES, NOT_WORK_KINDS

PARTS = ("computation_only", "communication_only", "overlapped", "host_bound", "free")
#: The step summary's figures (args of its step events, ns) a rank's parts can come from.
SUMMARY_KEYS = ("computing_ns", "communication_not_overlapped_ns", "overlapped_ns",
                "communication_ns", "free_ns", "bubble_ns")
# not host work: annotations, counters, and unknown events ("other": e.g. Kineto's profiler-span
# "Trace" events, which cover the whole capture)


def _intervals(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    s = df["ts_ns"].to_numpy(np.int64)
    return s, s + df["dur_ns"].to_numpy(np.int64)


def components(events: pd.DataFrame) -> dict[str, iv.Union]:
    """Unions of device computation ``C``, device communication ``M`` and host busy ``H``."""
    if len(events) == 0:
        return {"C": iv.EMPTY, "M": iv.EMPTY, "H": iv.EMPTY}
    kind, lane_kind = events["kind"], events["lane_kind"]
    isin = hta_compat.isin
    device = ~isin(lane_kind, HOST_LANES)
    nccl = hta_compat.match_names(events["name"], hta_compat.NCCL_KERNEL_RE) & isin(kind, ("kernel",))
    # collectives run by the host (Gloo, MPI: a host-lane collective) are communication too: the
    # step waits on them as it waits on a device collective, and they are not dispatch work
    host_comm = isin(lane_kind, ("host",)) & isin(kind, COMM_KINDS)
    comm = (device & (isin(kind, COMM_KINDS) | isin(lane_kind, ("link",)) | nccl)) | host_comm
    comp = device & ~comm & isin(kind, COMPUTE_KINDS)
    # helper threads (blocked Python threads, the profiler's) are not the loop's host work
    host = isin(lane_kind, ("host",)) & ~isin(kind, NOT_WORK_KINDS) & ~host_comm & \
        ~hostcalls.helper_lanes(events)
    s, e = _intervals(events)  # (masked arrays, not masked copies of the whole frame)
    return {k: iv.union(s[m], e[m]) for k, m in (("C", comp), ("M", comm), ("H", host))}


def parts(u: dict[str, iv.Union]) -> dict[str, iv.Union]:
    """The device/host parts as unions (not yet clipped to steps; ``free`` is derived)."""
    c, m, h = u["C"], u["M"], u["H"]
    busy = iv.union(np.concatenate([c[0], m[0]]), np.concatenate([c[1], m[1]]))
    return {"computation_only": iv.subtract(c, m), "communication_only": iv.subtract(m, c),
            "overlapped": iv.intersect(c, m), "host_bound": iv.subtract(h, busy),
            "device_busy": busy}


def device_idle_gaps(windows: pd.DataFrame, busy: iv.Union) -> pd.DataFrame:
    """Device-idle gaps per step: window minus device busy, split at step borders."""
    cols = {"start_ns": np.empty(0, np.int64), "end_ns": np.empty(0, np.int64),
            "dur_ns": np.empty(0, np.int64), "step": np.empty(0, np.int64)}
    if len(windows) == 0:
        return pd.DataFrame(cols)
    ws = windows["start_ns"].to_numpy(np.int64)
    we = windows["end_ns"].to_numpy(np.int64)
    idle = iv.subtract(iv.union(ws, we), busy)
    s, e, w, _ = split_by_windows(idle[0], idle[1], windows)
    order = np.lexsort((s, w))
    s, e, w = s[order], e[order], w[order]
    return pd.DataFrame({"start_ns": s, "end_ns": e, "dur_ns": e - s,
                         "step": windows["step"].to_numpy(np.int64)[w]})


def _hta_per_window(s: np.ndarray, e: np.ndarray, types: np.ndarray, windows: pd.DataFrame
                    ) -> list[hta_compat.HtaFigures]:
    """HTA's figures per window on the GPU events [s, e) clipped to it (one pass over the
    events)."""
    cs, ce, w, src = split_by_windows(s, e, windows)
    order = np.argsort(w, kind="stable")
    cs, ce, w, t = cs[order], ce[order], w[order], types[src[order]]
    bounds = np.searchsorted(w, np.arange(len(windows) + 1))
    return [hta_compat.figures_of(cs[a:b], ce[a:b], t[a:b])
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def overlap_tables(events: pd.DataFrame, meta: Any = None,
                   gpu: tuple[np.ndarray, np.ndarray] | None = None
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per_step, device_idle) tables for one rank. ``per_step`` columns: step, start_ns,
    end_ns, dur_ns, ``<part>_ns`` and ``<part>_pct`` for the five parts, and the HTA figures.
    Only the steps captured in detail (``steps.fine_windows``): a step the monitor saw alone
    has no recorded work, and counting it would pass its whole time off as free time.
    ``gpu``: HTA's GPU event rows and their kernel types (:func:`_gpu`), when computed."""
    windows = fine_windows(events, meta)
    ws = windows["start_ns"].to_numpy(np.int64)
    we = windows["end_ns"].to_numpy(np.int64)
    dur = we - ws
    p = parts(components(events))
    # the columns made first and joined to the windows once (not a column inserted at a time)
    cols: dict[str, Any] = {}
    covered = np.zeros(len(windows), np.int64)
    for name in PARTS[:-1]:
        t = iv.overlap_per_interval(ws, we, p[name])
        cols[f"{name}_ns"] = t
        covered += t
    cols["free_ns"] = dur - covered
    with np.errstate(invalid="ignore", divide="ignore"):
        for name in PARTS:
            cols[f"{name}_pct"] = np.where(dur > 0, 100.0 * cols[f"{name}_ns"] / dur, 0.0)
    rows, types = _gpu(events) if gpu is None else gpu
    s, e = _intervals(events)
    figs = _hta_per_window(s[rows], e[rows], types, windows) if rows.size else \
        [hta_compat.HtaFigures(0, 0, 0, 0, 0, 0)] * len(windows)
    for key in ("idle_pct", "compute_pct", "non_compute_pct", "comm_comp_overlap_pct"):
        cols[key] = pd.Series([getattr(f, key) for f in figs], index=windows.index,
                              dtype=None if figs else np.float64)
    table = pd.concat([windows, pd.DataFrame(cols, index=windows.index)], axis=1)
    return table, device_idle_gaps(windows, p["device_busy"])


def _gpu(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """HTA's GPU event rows and their kernel types (computed once for both HTA figures)."""
    rows = hta_compat.gpu_rows(events)
    return rows, hta_compat.kernel_type_codes_at(events, rows) if rows.size else \
        np.empty(0, np.int8)


def _as_dict(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str) and raw:
        try:
            got = json.loads(raw)
        except ValueError:
            return {}
        return got if isinstance(got, dict) else {}
    return {}


def summary_steps(events: pd.DataFrame) -> pd.DataFrame:
    """The rank's steps that carry a vendor step summary (module docstring): one row per step
    window (``steps.step_windows``) holding a ``step`` event on ``steps.SUMMARY_LANE`` with
    ``computing_ns`` in its args; columns ``step, start_ns, end_ns, dur_ns`` and :data:`SUMMARY_KEYS` (ns, NaN where
    the row has none). Empty when the rank has none."""
    cols = ["step", "start_ns", "end_ns", "dur_ns", *SUMMARY_KEYS]
    empty = pd.DataFrame({c: np.empty(0, np.float64) for c in cols})
    if len(events) == 0 or not has_args(events):
        return empty
    idx = summary_rows(events)
    if idx.size == 0:
        return empty
    # a few step events per rank: one args dict each
    recs = [_as_dict(a) for a in args_of(events, idx)]
    keep = np.array(["computing_ns" in a for a in recs], bool)
    if not keep.any():
        return empty
    figs = pd.DataFrame([{k: recs[i].get(k) for k in SUMMARY_KEYS} for i in np.flatnonzero(keep)],
                        dtype=np.float64)
    windows = step_windows(events)
    ts = events["ts_ns"].to_numpy(np.int64)[idx[keep]]
    ws = windows["start_ns"].to_numpy(np.int64)
    k = np.searchsorted(ws, ts, side="right") - 1
    ok = (k >= 0) & (ts < windows["end_ns"].to_numpy(np.int64)[np.maximum(k, 0)])
    figs = figs[ok].assign(_w=k[ok]).drop_duplicates("_w")  # one summary row per window
    out = windows.iloc[figs["_w"].to_numpy()].reset_index(drop=True)
    return pd.concat([out, figs.drop(columns="_w").reset_index(drop=True)], axis=1)[cols]


def summary_needed(events: pd.DataFrame, summary: pd.DataFrame) -> bool:
    """The rank's events lack a part its step summary reports: no device computation inside
    the summary's steps while it reports computing time, or no communication while it reports
    communication time (the rule of the module docstring)."""
    if len(summary) == 0:
        return False
    u = components(events)
    ws, we = summary["start_ns"].to_numpy(np.int64), summary["end_ns"].to_numpy(np.int64)
    has_c = int(iv.overlap_per_interval(ws, we, u["C"]).sum()) > 0
    has_m = int(iv.overlap_per_interval(ws, we, u["M"]).sum()) > 0
    comm = summary["communication_ns"].fillna(
        summary["communication_not_overlapped_ns"].fillna(0) + summary["overlapped_ns"].fillna(0))
    return bool((not has_c and summary["computing_ns"].fillna(0).sum() > 0)
                or (not has_m and comm.sum() > 0))


def summary_tables(summary: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per_step, device_idle) of a rank analysed from its step summary (module docstring):
    the same columns as :func:`overlap_tables`; ``device_idle`` empty (not known)."""
    comp = summary["computing_ns"].fillna(0).clip(lower=0).to_numpy(np.int64)
    cno = summary["communication_not_overlapped_ns"].fillna(0).clip(lower=0).to_numpy(np.int64)
    free = summary["free_ns"].fillna(0).clip(lower=0).to_numpy(np.int64)
    ov = np.minimum(summary["overlapped_ns"].fillna(0).clip(lower=0).to_numpy(np.int64), comp)
    comm = summary["communication_ns"].fillna(pd.Series(cno + ov, index=summary.index))
    dur = comp + cno + free
    windows = summary[["step", "start_ns"]].astype(np.int64).assign(
        end_ns=lambda w: w["start_ns"] + dur, dur_ns=dur)
    cols: dict[str, Any] = {"computation_only_ns": comp - ov, "communication_only_ns": cno,
                            "overlapped_ns": ov, "host_bound_ns": np.zeros(len(dur), np.int64),
                            "free_ns": free}
    with np.errstate(invalid="ignore", divide="ignore"):
        for name in PARTS:
            cols[f"{name}_pct"] = np.where(dur > 0, 100.0 * cols[f"{name}_ns"] / dur, 0.0)
        cols["idle_pct"] = cols["free_pct"]
        cols["compute_pct"] = np.where(dur > 0, 100.0 * comp / dur, 0.0)
        cols["non_compute_pct"] = cols["communication_only_pct"]
        c = comm.to_numpy(np.float64)
        cols["comm_comp_overlap_pct"] = np.where(c > 0, 100.0 * ov / c, 0.0)
    table = pd.concat([windows, pd.DataFrame(cols, index=windows.index)], axis=1)
    return table, device_idle_gaps(windows.iloc[:0], iv.EMPTY)


def _summary_metrics(per_step: pd.DataFrame, summary: pd.DataFrame) -> dict[str, object]:
    """Per-rank metrics of a rank analysed from its step summary (time-weighted over steps)."""
    total = int(per_step["dur_ns"].sum())
    m: dict[str, object] = {f"{n}_pct": float(100.0 * per_step[f"{n}_ns"].sum() / total)
                            if total else 0.0 for n in PARTS}
    if total == 0:
        m["free_pct"] = 100.0
    busy = per_step["computation_only_ns"] + per_step["overlapped_ns"]
    comm = summary["communication_ns"].fillna(
        per_step["communication_only_ns"] + per_step["overlapped_ns"]).sum()
    m.update({"idle_pct": m["free_pct"],
              "compute_pct": float(100.0 * busy.sum() / total) if total else 0.0,
              "non_compute_pct": m["communication_only_pct"],
              "comm_comp_overlap_pct": float(100.0 * per_step["overlapped_ns"].sum() / comm)
              if comm > 0 else 0.0,
              "bubble_pct": float(100.0 * summary["bubble_ns"].fillna(0).sum() / total)
              if total else 0.0,
              "from_summary": True, "host_bound_known": False,
              "hta_kernel_time_ns": int(busy.sum() + per_step["communication_only_ns"].sum())})
    return m


@register("overlap", scope="rank")
def analyze(ctx: RankContext) -> AnalyzerResult:
    """Multi-component overlap: computation/communication/overlapped/host-bound/free % per step."""
    summary = summary_steps(ctx.events)
    if summary_needed(ctx.events, summary):
        per_step, idle = summary_tables(summary)
        metrics = _summary_metrics(per_step, summary)
        metrics.update(_step_metrics(ctx.events, per_step, source="step_summary"))
        return AnalyzerResult(name="overlap", tables={"per_step": per_step, "device_idle": idle},
                              metrics=metrics)
    gpu = _gpu(ctx.events)
    per_step, idle = overlap_tables(ctx.events, ctx.meta, gpu)
    total = int(per_step["dur_ns"].sum())
    metrics: dict[str, object] = {}
    for name in PARTS:
        metrics[f"{name}_pct"] = float(100.0 * per_step[f"{name}_ns"].sum() / total) if total \
            else 0.0
    if total == 0:
        metrics["free_pct"] = 100.0
    hta = hta_compat.hta_figures(ctx.events, *gpu)
    has_gpu = hta.kernel_time_ns > 0  # <= 0: no GPU event (or only sub-us ones on HTA's grid)
    for key in ("idle_pct", "compute_pct", "non_compute_pct"):
        # clipped to 0..100: HTA's negative sub-us durations can push a share a hair outside
        metrics[key] = min(max(getattr(hta, key), 0.0), 100.0) if has_gpu else 0.0
    if not has_gpu:
        metrics["idle_pct"] = 100.0
    # HTA gives NaN without communication; the JSON contract wants a number: 0 % overlapped
    ov = hta.comm_comp_overlap_pct
    metrics["comm_comp_overlap_pct"] = min(max(ov, 0.0), 100.0) if ov == ov else 0.0
    metrics.update(_step_metrics(ctx.events, per_step))
    metrics["hta_kernel_time_ns"] = max(int(hta.kernel_time_ns), 0)
    metrics["from_summary"] = False
    if len(summary):  # the vendor's figures beside the events' own, to compare
        sm = _summary_metrics(summary_tables(summary)[0], summary)
        metrics["summary_pct"] = {f"{n}_pct": sm[f"{n}_pct"] for n in PARTS}
    return AnalyzerResult(name="overlap", tables={"per_step": per_step, "device_idle": idle},
                          metrics=metrics)


def _step_metrics(events: pd.DataFrame, per_step: pd.DataFrame,
                  source: str | None = None) -> dict[str, object]:
    """Step counts and times of the analysed steps; ``source``: where the steps came from
    (default: the trace's step events, or the whole trace as one step)."""
    durs = per_step["dur_ns"].to_numpy(np.float64)
    return {
        "steps": int(len(per_step)),
        "monitored_only_steps": int(len(step_windows(events))) - int(len(per_step)),
        "windows": window_note(per_step) if len(per_step) else "no events",
        "step_source": source or ("none" if len(per_step) == 0 else
                                  ("trace" if int(per_step["step"].iloc[0]) == -1
                                   else "step_events")),
        "step_median_ms": float(np.median(durs) / 1e6) if durs.size else 0.0,
        "step_p90_ms": float(np.percentile(durs, 90) / 1e6) if durs.size else 0.0}
