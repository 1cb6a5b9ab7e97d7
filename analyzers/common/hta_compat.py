"""HTA-compatible figures: Holistic Trace Analysis 0.5's temporal breakdown and comm/comp overlap.

These reproduce HTA's definitions exactly, quirks included, so a Hermes figure can be compared
with an HTA figure on the same Kineto trace (``benchmarks/hta_parity.py``). Formulas, with all
times in ns (HTA works in us; percentages are unit-free):

* **GPU events** (HTA: ``stream != -1``): device-side kernels, copies, memsets, collectives and
  stream-level syncs (``Stream Sync``, which HTA counts as busy time) with a stream id >= 0.
  Annotations (``step``/``marker``) and event/context syncs (stream -1) are not GPU events.
* **Last-step filter** (HTA ``_filter_irrelevant_gpu_kernels``): when the trace holds two or more
  distinct ``ProfilerStep*`` names, let ``T`` be the latest start of any ``ProfilerStep`` event
  (host *or* device lane). Keep only GPU events whose ``corr_id`` matches a host event starting
  before ``T`` (their launch). This drops the last step, and GPU events with no launch.
* **Kernel type** by name, HTA's regexes, plus our kind for traces that are not from Kineto:
  communication if ``^nccl.*Kernel`` or kind ``collective``; else memory if
  ``^(Memcpy|Memset|dma)`` or a memcpy/memset kind; else computation if kind ``kernel`` and the
  name does not match HTA's non-compute regex ``(^nccl.*Kernel)|(.*Memcpy|Memset)|(.*Sync)``;
  else other.
* **Time grid**: HTA holds times as float64 us and rounds ns-resolution times to us, start up
  and end down (sub-us events may get a negative duration, which HTA's merge keeps); we replay
  the same float arithmetic (epoch-scale stamps keep only ~0.25 us of their fraction).
* ``kernel_time`` = end of the last merged group - start of the first;
  ``idle`` = kernel_time - |union of all GPU events|; ``compute`` = |union of computation|;
  ``non_compute`` = kernel_time - compute - idle; each as % of kernel_time (HTA rounds to 2
  decimals; we do not round).
* ``comm_comp_overlap`` = |union(computation) ∩ union(communication)| / |union(communication)|,
  in % (HTA returns NaN without communication; we return NaN too and callers decide).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hermes.analyzers.common import intervals as iv
from hermes.analyzers.common.names import codes_in, isin
from hermes.trace.schema import DEVICE_KINDS, HOST_LANES, MEMORY_KINDS

# HTA 0.5 hta/utils/utils.py, verbatim
#: HTA's own communication-kernel pattern, kept as HTA writes it for parity. Kernels of other
#: libraries (hermes/trace/comm_patterns.toml: RCCL, DeepEP, MSCCL++, ...) are already kind
#: ``collective`` when imported, which both this module and ``overlap`` count as communication,
#: so the two agree without reading the table here.
NCCL_KERNEL_RE = r"^nccl.*Kernel"
MEMORY_KERNEL_RE = r"(^Memcpy)|(^Memset)|(^dma)"
NON_COMPUTE_RE = r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)"




PROFILER_STEP = "ProfilerStep"


@dataclass(frozen=True)
class HtaFigures:
    """HTA's per-rank figures. Times in ns; ``*_pct`` in percent of ``kernel_time_ns``."""

    kernel_time_ns: int
    idle_ns: int
    compute_ns: int
    non_compute_ns: int
    comm_ns: int
    overlap_ns: int

    def _pct(self, x: int) -> float:
        return 100.0 * x / self.kernel_time_ns if self.kernel_time_ns > 0 else float("nan")

    @property
    def idle_pct(self) -> float:
        return self._pct(self.idle_ns)

    @property
    def compute_pct(self) -> float:
        return self._pct(self.compute_ns)

    @property
    def non_compute_pct(self) -> float:
        return self._pct(self.non_compute_ns)

    @property
    def comm_comp_overlap_pct(self) -> float:
        return 100.0 * self.overlap_ns / self.comm_ns if self.comm_ns > 0 else float("nan")








def match_names(names: pd.Series, pattern: str) -> np.ndarray:
    """Anchored regex match per name (like ``re.match``), evaluated once per distinct name."""
    cat = names.astype("category")
    rx = re.compile(pattern)
    # (code -1, a missing name, matches nothing)
    return codes_in(cat, [rx.match(str(c)) is not None for c in cat.dtype.categories.tolist()])


def gpu_rows(events: pd.DataFrame) -> np.ndarray:
    """Row positions of HTA's GPU events (``stream >= 0`` device-side tasks), before the
    last-step filter."""
    if len(events) == 0:
        return np.empty(0, np.int64)
    is_sync = isin(events["kind"], ("sync",))
    on_device = ~isin(events["lane_kind"], HOST_LANES) & isin(events["kind"], DEVICE_KINDS)
    if "stream" in events.columns:
        stream = pd.to_numeric(events["stream"], errors="coerce").to_numpy(np.float64,
                                                                           na_value=np.nan)
    else:
        stream = np.full(len(events), np.nan)
    # a sync without a stream id is an event/context sync (HTA stream -1): not a GPU event
    has_stream = (stream >= 0) | (np.isnan(stream) & ~is_sync)
    return np.flatnonzero(on_device & has_stream)


def gpu_events(events: pd.DataFrame) -> pd.DataFrame:
    """HTA's GPU events (:func:`gpu_rows`): their name, kind, lane_kind, ts_ns, dur_ns,
    corr_id and stream columns."""
    if len(events) == 0:
        return events
    # only the columns the HTA figures read (a masked copy of every column costs seconds on
    # millions of kernels)
    cols = [c for c in ("name", "kind", "lane_kind", "ts_ns", "dur_ns", "corr_id", "stream")
            if c in events.columns]
    mask = np.zeros(len(events), bool)
    mask[gpu_rows(events)] = True
    return events.loc[mask, cols]


def last_step_rows(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """HTA's quirk: with >= 2 ProfilerStep names, drop GPU events not launched before the start
    of the last ProfilerStep (on any lane). ``rows``: positions of the GPU events; returns
    those kept."""
    if rows.size == 0:
        return rows
    is_ps = match_names(events["name"], f".*{PROFILER_STEP}")
    if events["name"][is_ps].nunique() < 2:
        return rows
    last_start = int(events["ts_ns"].to_numpy(np.int64)[is_ps].max())
    if "corr_id" not in events.columns:
        return rows[:0]  # no launch can be matched: HTA keeps nothing either
    corr = events["corr_id"]
    valid = corr.notna().to_numpy()
    host = isin(events["lane_kind"], HOST_LANES) & valid
    before = host & (events["ts_ns"].to_numpy(np.int64) < last_start)
    if corr.dtype == "Int64":  # the ids as int64 (exact), compared in numpy
        ids = corr.to_numpy(np.int64, na_value=0)
        return rows[valid[rows] & np.isin(ids[rows], ids[before])]
    launched = corr[before].dropna().unique()
    keep = corr.iloc[rows].isin(launched)
    return rows[keep.fillna(False).to_numpy(bool)]


def kernel_types(gpu: pd.DataFrame) -> np.ndarray:
    """Per GPU event: 'communication', 'memory', 'computation' or 'other' (HTA's KernelType)."""
    return kernel_types_at(gpu, np.arange(len(gpu)))


#: HTA's kernel types, in the order of their codes (:func:`kernel_type_codes_at`)
KERNEL_TYPES = ("communication", "memory", "computation", "other")


def kernel_types_at(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """:func:`kernel_types` of the events at positions ``rows`` (decided per distinct name and
    kind on the whole columns, no copy of the rows)."""
    return np.array(KERNEL_TYPES)[kernel_type_codes_at(events, rows)]


def kernel_type_codes_at(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """:func:`kernel_types_at` as int8 codes into ``KERNEL_TYPES`` (compared and taken without
    a string per event)."""
    kind = events["kind"]
    names = events["name"]
    comm = (match_names(names, NCCL_KERNEL_RE) | isin(kind, ("collective",)))[rows]
    mem = ~comm & (match_names(names, MEMORY_KERNEL_RE) | isin(kind, MEMORY_KINDS))[rows]
    comp = ~comm & ~mem & (isin(kind, ("kernel",)) & ~match_names(names, NON_COMPUTE_RE))[rows]
    return np.select([comm, mem, comp], [0, 1, 2], 3).astype(np.int8)


def hta_merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HTA's ``merge_kernel_intervals``: sort by start; a new group starts where the start lies
    beyond every earlier end; each group is [min start, max end). Unlike ``intervals.union`` it
    keeps intervals whose end precedes their start (HTA's rounding makes some), as HTA does."""
    if start.size == 0:
        return start, end
    o = np.argsort(start, kind="stable")
    s, e = start[o], end[o]
    new = np.ones(s.size, bool)
    new[1:] = s[1:] > np.maximum.accumulate(e)[:-1]
    idx = np.flatnonzero(new)
    return np.minimum.reduceat(s, idx), np.maximum.reduceat(e, idx)


def _hta_overlap(comp: tuple[np.ndarray, np.ndarray], comm: tuple[np.ndarray, np.ndarray]
                 ) -> int:
    """HTA's sweep: +-1 at merged communication bounds, +-2 at merged computation bounds; time
    while the running sum is 3 (order within equal times does not change the sum)."""
    t = np.concatenate([comm[0], comm[1], comp[0], comp[1]])
    d = np.concatenate([np.ones(comm[0].size), -np.ones(comm[1].size),
                        np.full(comp[0].size, 2.0), np.full(comp[1].size, -2.0)])
    if t.size == 0:
        return 0
    o = np.argsort(t, kind="stable")
    t, run = t[o], np.cumsum(d[o])
    seg = np.diff(t)
    return int(seg[run[:-1] == 3].sum())


def figures_of(start: np.ndarray, end: np.ndarray, types: np.ndarray,
               hta_merging: bool = False) -> HtaFigures:
    """HTA's figures from GPU event intervals [start, end) and their kernel types (strings, or
    codes into ``KERNEL_TYPES``; same unit in and out). ``hta_merging`` uses HTA's own merge
    and sweep (exact on HTA's rounded times); otherwise exact interval unions."""
    if start.size == 0:
        return HtaFigures(0, 0, 0, 0, 0, 0)
    if types.dtype.kind in "iu":  # (codes: kernel_type_codes_at)
        comp_m, comm_m = types == KERNEL_TYPES.index("computation"), \
            types == KERNEL_TYPES.index("communication")
    else:
        comp_m, comm_m = types == "computation", types == "communication"
    if hta_merging:
        allm = hta_merge(start, end)
        span = int(allm[1][-1] - allm[0][0])
        busy = int((allm[1] - allm[0]).sum())
        comp_u = hta_merge(start[comp_m], end[comp_m])
        comm_u = hta_merge(start[comm_m], end[comm_m])
        compute = int((comp_u[1] - comp_u[0]).sum())
        comm = int((comm_u[1] - comm_u[0]).sum())
        overlap = _hta_overlap(comp_u, comm_u)
    else:
        span = int(end.max() - start.min())
        busy = iv.total(iv.union(start, end))
        cu = iv.union(start[comp_m], end[comp_m])
        mu = iv.union(start[comm_m], end[comm_m])
        compute, comm = iv.total(cu), iv.total(mu)
        overlap = iv.total(iv.intersect(cu, mu))
    idle = span - busy
    return HtaFigures(kernel_time_ns=span, idle_ns=idle, compute_ns=compute,
                      non_compute_ns=span - compute - idle, comm_ns=comm, overlap_ns=overlap)


def hta_time_grid(ts_ns: np.ndarray, dur_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end in whole us as HTA 0.5 computes them: it parses ``ts``/``dur`` (us, with
    up to 3 decimals) to float64, then takes ``ceil(ts)`` and ``floor(ts + dur)``.

    Epoch-scale stamps (~1.7e15 us) keep only a quarter-us of their fraction in a float64, so
    the rounding is replayed exactly: the integer us part ``q`` is exact, the fraction is
    rounded to the float spacing at ``q``'s magnitude (``2**(exponent(q) - 52)``), the end's
    fraction (fraction + duration, which HTA adds in float64) too. Whole-us stamps are exact."""
    q, r = np.divmod(ts_ns, 1000)
    _, exp2 = np.frexp(np.maximum(np.abs(q), 1).astype(np.float64))  # q = m * 2**exp2, m in [.5,1)
    spacing = np.ldexp(1.0, exp2 - 53)  # float64 spacing at q's magnitude
    frac = np.round((r / 1000.0) / spacing) * spacing
    end_frac = np.round((frac + dur_ns / 1000.0) / spacing) * spacing
    return q + np.ceil(frac).astype(np.int64), q + np.floor(end_frac).astype(np.int64)


def hta_figures(events: pd.DataFrame, rows: np.ndarray | None = None,
                types: np.ndarray | None = None) -> HtaFigures:
    """HTA's temporal breakdown and comm/comp overlap for one rank's events (``rows``, ``types``:
    :func:`gpu_rows` and :func:`kernel_type_codes_at` -- or :func:`kernel_types_at` -- of them,
    when the caller has them).

    Times are first put on HTA's grid: HTA rounds nanosecond-resolution Kineto times to whole
    microseconds, the start *up* and the end *down* (``round_down_time_stamps``), so sub-us
    events can get a negative duration; the figures are then computed in us with HTA's merge.
    The returned ``*_ns`` fields are those us figures times 1000."""
    if rows is None or types is None:
        rows = gpu_rows(events)
        types = kernel_type_codes_at(events, rows)
    kept = last_step_rows(events, rows)
    if kept.size == 0:
        return HtaFigures(0, 0, 0, 0, 0, 0)
    if kept.size != rows.size:
        types = types[np.isin(rows, kept)]
    s_us, e_us = hta_time_grid(events["ts_ns"].to_numpy(np.int64)[kept],
                               events["dur_ns"].to_numpy(np.int64)[kept])
    f = figures_of(s_us, e_us, types, hta_merging=True)
    return HtaFigures(*(1000 * x for x in (f.kernel_time_ns, f.idle_ns, f.compute_ns,
                                             f.non_compute_ns, f.comm_ns, f.overlap_ns)))
