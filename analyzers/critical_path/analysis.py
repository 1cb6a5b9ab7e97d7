"""Critical path of each step (rank analyzer): composition by component, operators, slack.

``stepgraph.build`` (shared with the what-if replay, hermes.whatif) makes one dependency
graph of all steps' events (each cut at step borders): host
thread order, stream order, launch -> device task by ``corr_id``, awaited device task -> sync end,
loader event -> data-wait end, and cross-stream waits inferred where one task's end lines up with
another's start; ``cpgraph`` finds each step's longest path (docs/analysis/critical_path.md).
Outputs (times in ns, shares in percent):

* metric ``components_pct``: the path's time per component {computation, communication, host,
  io, other} / path length, summed over steps. computation = device kernels, copies, memsets;
  communication = collectives (kind, ``link`` lanes or NCCL kernel names); io = ``data_*`` events
  and loader lanes; host = other host events and launch delays; other = lane gaps (a stream or
  thread with nothing recorded while on the path);
* metrics ``length_ms_median`` and ``length_pct`` (path length / step wall time, over all steps;
  <= 100 because every event is clipped to its step);
* table ``top_ops`` (name, kind, time_ns, share_pct, slack_ns): operators by time on the path;
  ``slack_ns`` is the median slack of the operator's instances;
* table ``ops``: every operator (name, kind): count, dur_ns, cp_time_ns, min_slack_ns,
  median_slack_ns. Slack of an event = path length - the longest path through its start or
  its end node (``max over those nodes of fwd(node) + bwd(node)``): how much its boundary could
  move later without lengthening the path; 0 for events on the path.

It emits no findings: the cause analyzers use the path's composition as evidence.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common.steps import step_windows
from hermes.analyzers.critical_path import edges as cpedges
from hermes.analyzers.critical_path import graph as cpgraph
from hermes.analyzers.critical_path import lanes, stepgraph
from hermes.analyzers.engine.base import AnalyzerResult, Keep, RankContext, register
from hermes.analyzers.engine.executor import usable_cpus

COMPONENTS = stepgraph.COMPONENTS
# annotations, counters and unknown events (Kineto's whole-capture "Trace" span) are no work
TOP_N = 20
LINE_UP_NS = cpedges.LINE_UP_NS  # (cross-stream waits are inferred in cpedges)


_Events = stepgraph.Events
build = stepgraph.build


#: Steps are analyzed in groups of about this many events (clipped pieces): each group is one
#: graph and one solve, so memory stays bounded on traces of tens of millions of events (steps
#: share no edge, so grouping does not change any path; each step's nodes keep their relative
#: order, hence the pass's tie rule its choices).
CHUNK_EVENTS = 750_000
#: Threads solving groups side by side (None: :func:`solver_threads` decides). The compiled
#: build and pass release the GIL; each thread's groups are half the size, so the memory of two
#: groups in flight is that of one.
THREADS: int | None = None


def solver_threads() -> int:
    """2 where this process has at least two cores and is not itself a worker of a process pool
    or a Dask cluster (those already keep every core busy, one rank each), else 1."""
    if THREADS is not None:
        return max(1, int(THREADS))
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        return 1
    return 2 if usable_cpus() >= 2 else 1


def step_groups(pre: _Events, ws: np.ndarray, we: np.ndarray, size: int = 0
            ) -> tuple[list[tuple[int, int, np.ndarray]], tuple[np.ndarray, np.ndarray]]:
    """Groups of consecutive windows (sorted by start) of about ``size`` events each (0:
    ``CHUNK_EVENTS``): [(first window, end window, indices of the events overlapping them)], and
    each event's first and end window (``lo``, ``hi``: it overlaps windows ``lo..hi - 1``)."""
    size = size or CHUNK_EVENTS
    nw = ws.size
    idx = np.int32 if nw < 2**31 - 1 else np.int64
    kern = lanes.compiled_pass()
    if kern is not None and idx is np.int32:  # (compiled: searched from the last event's)
        lo, hi = np.empty(pre.ts.size, idx), np.empty(pre.ts.size, idx)
        kern.bounds(*(np.ascontiguousarray(a, np.int64) for a in (pre.ts, pre.te, ws, we)),
                    lo, hi)
    else:
        lo = np.searchsorted(we, pre.ts, side="right").astype(idx)  # first window ending after
        hi = np.searchsorted(ws, pre.te, side="left").astype(idx)   # windows starting before
    inside = lo < hi
    if nw <= 1 or int(inside.sum()) <= size:
        return [(0, nw, np.flatnonzero(inside))], (lo, hi)
    cnt = np.bincount(lo[inside], minlength=nw)
    group = (np.cumsum(cnt) - 1) // size
    cuts = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), nw]
    del inside
    chunk = np.zeros(nw, np.int64)  # each window's group, 0, 1, ...
    chunk[1:] = np.cumsum(np.diff(group) != 0)
    ptr, members = group_members(lo, hi, chunk)
    return [(a, b, members[ptr[c]:ptr[c + 1]])
            for c, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True))], (lo, hi)


def _solved(ev: pd.DataFrame, windows: pd.DataFrame, pre: _Events, length: np.ndarray,
            gap_ns: np.ndarray, keep: Keep | None = None
            ) -> Iterator[tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]]:
    """The groups of steps (``CHUNK_EVENTS``) solved in order: yields, per group, its event
    copies (``stepgraph.build``'s table), their window (index into ``windows``), cp_ns and
    slack_ns; fills ``length`` and ``gap_ns`` (per window of ``windows``). With
    :func:`solver_threads` > 1 and several groups, the next group is built and solved while the
    caller reduces this one (groups share nothing; each writes its own slice of windows)."""
    nw = len(windows)
    o = np.argsort(windows["start_ns"].to_numpy(np.int64), kind="stable")
    wsorted = windows.iloc[o]
    ws = wsorted["start_ns"].to_numpy(np.int64)
    we = wsorted["end_ns"].to_numpy(np.int64)
    ln, gap = np.zeros(nw, np.int64), np.zeros(nw, np.int64)  # (in sorted order)
    threads = solver_threads() if len(pre.ts) > CHUNK_EVENTS else 1
    groups, (lo, hi) = step_groups(pre, ws, we, max(1, CHUNK_EVENTS // threads)) if nw else (
        [(0, 0, np.empty(0, np.int64))], (None, None))

    def one(a: int, b: int, sel: np.ndarray) -> tuple[pd.DataFrame, np.ndarray, np.ndarray,
                                                      np.ndarray]:
        g, info = stepgraph.build_sel(pre, sel, wsorted.iloc[a:b], bounds=(lo, hi, a, ws, we),
                                      keep=keep)
        cp, slack = _solve(g, info, b - a, ln[a:b], gap[a:b])
        del g
        return info, o[a + info["win"].to_numpy(np.int64)], cp, slack

    if threads <= 1 or len(groups) <= 1:
        for grp in groups:
            yield one(*grp)
    else:  # at most `threads` groups in flight, results in order (the same tables)
        with ThreadPoolExecutor(threads, thread_name_prefix="hermes-cp") as pool:
            pending: deque = deque()
            for grp in groups:
                if len(pending) == threads:
                    yield pending.popleft().result()
                pending.append(pool.submit(one, *grp))
            while pending:
                yield pending.popleft().result()
    # back from sorted order to the windows' order
    length[o], gap_ns[o] = ln, gap


def copies(ev: pd.DataFrame, windows: pd.DataFrame, keep: Keep | None = None
            ) -> tuple[np.ndarray, np.ndarray, _Events, dict[str, np.ndarray], dict[str, Any]]:
    """The longest path of every step, as arrays: (length ns per window, lane-gap ns on it per
    window, the per-event arrays, the columns of the per-event-copy table as arrays --
    ``_KEEP``, ``kind`` and ``component`` as category codes --, the categories of those two).
    ``keep``: the analysis run's store, where the step graphs are kept for the replay."""
    nw = len(windows)
    length, gap_ns = np.zeros(nw, np.int64), np.zeros(nw, np.int64)
    pre = _Events(ev)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in _KEEP}
    cats: dict[str, Any] = {k: list(v) for k, v in (("kind", stepgraph.KIND_NAMES),
                                                     ("component", COMPONENTS))}
    idx = np.int32 if max(len(ev), nw) < 2**31 else np.int64
    for info, win, cp, slack in _solved(ev, windows, pre, length, gap_ns, keep):
        # only what the tables need is kept across chunks (peak memory), as arrays: one
        # table at the end (the names taken once, categoricals from their codes)
        for k in ("kind", "component"):
            cats[k] = info[k].cat.categories
            cols[k].append(info[k].cat.codes.to_numpy())
        # (narrow copies, not views of info's columns: only these stay across groups)
        cols["src"].append(info["src"].to_numpy().astype(idx))
        cols["dur_ns"].append(info["end"].to_numpy(np.int64) - info["start"].to_numpy(np.int64))
        cols["win"].append(win.astype(idx))
        cols["cp_ns"].append(cp)
        cols["slack_ns"].append(slack)
        del info
    c = {}
    for k in _KEEP:  # (each column's pieces freed as soon as it is whole)
        v = cols.pop(k)
        c[k] = v[0] if len(v) == 1 else (np.concatenate(v) if v else np.empty(0, np.int64))
        del v
    for k in ("kind", "component"):
        c[k] = c[k].astype(np.int8, copy=False)
    return length, gap_ns, pre, c, cats


def reduce_copies(pre: _Events, c: dict[str, np.ndarray], nw: int
             ) -> tuple[np.ndarray, pd.DataFrame]:
    """(path ns per (window, component), the ``ops`` table before its sort) from
    :func:`copies`' arrays, in numpy on category codes (names categorical): the numbers of
    ``np.add.at`` and of pandas' groupby of the per-event-copy table by (name, kind) -- its groups
    in (name, kind) code order, its sums, least and median (of float64 values, the mean of the
    two middle ones for an even count) -- without building the table."""
    name = pre.name if isinstance(pre.name, pd.Categorical) else pd.Categorical(pre.name)
    nc_, nk = len(COMPONENTS), len(stepgraph.KIND_NAMES)
    cp, slack, dur = c["cp_ns"], c["slack_ns"], c["dur_ns"]
    by = group_sums(c["win"].astype(np.int64) * nc_ + c["component"], cp, nw * nc_).reshape(nw, nc_)
    if cp.size == 0:
        return by, _empty_ops()
    key = np.asarray(name.codes)[c["src"]].astype(np.int64)
    named = key >= 0  # (groupby drops events with no name)
    key = key * nk + c["kind"]
    if not named.all():
        key, cp, slack, dur = key[named], cp[named], slack[named], dur[named]
    nkeys = len(name.categories) * nk
    if nkeys > 4 * key.size + 2**16:  # (many names: only those present get a slot)
        present, key = np.unique(key, return_inverse=True)
        nkeys = present.size
    else:
        present = None
    count = np.bincount(key, minlength=nkeys)
    k = np.flatnonzero(count)
    cnt = count[k]
    kern = lanes.compiled_pass()
    mn = np.empty(nkeys, np.int64)
    if kern is not None:  # (compiled: exact sums, least, medians by a counting sort, selection)
        dsum, csum, med = np.empty(nkeys, np.int64), np.empty(nkeys, np.int64), np.empty(nkeys)
        kern.group_stats(*(np.ascontiguousarray(a, np.int64) for a in (key, slack)),
                         [np.ascontiguousarray(a, np.int64) for a in (dur, cp)], [dsum, csum],
                         med, mn)
        dsum, csum, med = dsum[k], csum[k], med[k]
    else:
        mn.fill(np.iinfo(np.int64).max)
        np.minimum.at(mn, key, slack)
        med = group_medians(key, slack, nkeys, cnt)
        dsum, csum = group_sums(key, dur, nkeys)[k], group_sums(key, cp, nkeys)[k]
    code = k if present is None else present[k]
    ops = pd.DataFrame({
        "name": pd.Categorical.from_codes(code // nk, dtype=name.dtype),
        "kind": pd.Categorical.from_codes(code % nk, categories=list(stepgraph.KIND_NAMES)),
        "count": cnt.astype(np.int64), "dur_ns": dsum,
        "cp_time_ns": csum, "min_slack_ns": mn[k],
        "median_slack_ns": med})
    return by, ops


def group_medians(key: np.ndarray, slack: np.ndarray, nkeys: int, cnt: np.ndarray) -> np.ndarray:
    """Median of ``slack`` per key (keys in 0..nkeys - 1; ``cnt``: the counts of the keys
    present, ascending), as pandas' groupby median: of the values as float64, the mean of the
    two middle ones for an even count."""
    first = np.cumsum(cnt) - cnt  # each group's first place in (key, slack) order
    lo, hi = first + (cnt - 1) // 2, first + cnt // 2  # its middle places
    if key.size and int(slack.min()) >= 0 and (nkeys + 1) * (int(slack.max()) + 1) < 2**62:
        b = int(slack.max()) + 1
        v = key * b
        v += slack
        v.sort()  # (one sort of a single int64 key: key * b + slack)
        a, z = v[lo] % b, v[hi] % b  # (the middle ones only)
    else:
        sv = slack[np.lexsort((slack, key))]
        a, z = sv[lo], sv[hi]
    return (a.astype(np.float64) + z.astype(np.float64)) / 2


def group_sums(idx: np.ndarray, w: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of ``w`` per ``idx`` (``np.add.at``'s): ``np.bincount``'s float64
    sums where no partial sum can reach 2**53 (then every one is exact), else ``np.add.at``."""
    if w.size == 0 or int(np.abs(w).max()) * w.size < 2**53:
        return np.bincount(idx, weights=w, minlength=size).astype(np.int64)
    out = np.zeros(size, np.int64)
    np.add.at(out, idx, w)
    return out


_KEEP = ("kind", "component", "src", "dur_ns", "win", "cp_ns", "slack_ns")


def _solve(g: cpgraph.Graph, info: pd.DataFrame, nw: int, length: np.ndarray,
           gap_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longest path of each of the ``nw`` windows of one graph: fills ``length`` and ``gap_ns``
    (views), returns (cp_ns, slack_ns) per event of the graph."""
    if g.n == 0:
        return np.zeros(len(info), np.int64), np.zeros(len(info), np.int64)
    dist, pred, bwd = cpgraph.both(g)
    win = info["win"].to_numpy(np.int64)
    loader = info["loader"].to_numpy(bool)
    loader_node = loader[_node_events(g)] if loader.any() else np.zeros(g.n, bool)
    # nodes are laid out step-major (chains keyed by (step, lane)): one slice per step, from
    # its first node (a start: the least start node of its events) to the next step's
    bounds = np.full(nw + 1, g.n, np.int64)
    np.minimum.at(bounds, win, g.event_start)
    bounds = np.minimum.accumulate(bounds[::-1])[::-1]  # (a step with no node: empty)
    index = cpgraph.CrossIndex(g)
    runs = cpgraph.chain_runs(pred)
    evs, wts = [], []
    for i in range(nw):
        a, b = int(bounds[i]), int(bounds[i + 1])
        if a == b:
            continue
        # the step ends on the training side: a loader worker prefetching in parallel is on
        # the path only through a data wait it feeds
        d = np.where(loader_node[a:b], -1, dist[a:b])
        end = a + int(np.argmax(d))
        length[i] = int(dist[end])
        on_ev, on_w = cpgraph.backtrack(g, dist, pred, end, index, runs)
        gap = on_ev < 0
        evs.append(on_ev[~gap])
        wts.append(on_w[~gap])
        gap_ns[i] = int(on_w[gap].sum())
    cp = np.zeros(len(info), np.int64)
    if evs:
        cp = np.bincount(np.concatenate(evs), weights=np.concatenate(wts),
                         minlength=len(info)).astype(np.int64)
    return _slack(g, dist, bwd, length, win, cp)


def _slack(g: cpgraph.Graph, dist: np.ndarray, bwd: np.ndarray, length: np.ndarray,
           win: np.ndarray, cp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cp, slack per event): the longest path through a node is fwd + bwd; an event's slack
    uses the better of its two nodes. (``bwd`` is summed into: the caller's own.)"""
    through_node = np.add(dist, bwd, out=bwd)
    through = through_node[g.event_start]
    np.maximum(through, through_node[g.event_end], out=through)
    slack = length[win]
    slack -= through
    return cp, np.maximum(slack, 0, out=slack)


def _node_events(g: cpgraph.Graph) -> np.ndarray:
    """Event of each node (from the start/end node maps)."""
    ev = np.empty(g.n, np.int64)
    ids = np.arange(g.event_start.size)
    ev[g.event_start] = ids
    ev[g.event_end] = ids
    return ev


def _empty_ops() -> pd.DataFrame:
    return pd.DataFrame({"name": pd.Series(dtype=str), "kind": pd.Series(dtype=str),
                         "count": pd.Series(dtype=np.int64), "dur_ns": pd.Series(dtype=np.int64),
                         "cp_time_ns": pd.Series(dtype=np.int64),
                         "min_slack_ns": pd.Series(dtype=np.int64),
                         "median_slack_ns": pd.Series(dtype=np.float64)})


@register("critical_path", scope="rank")
def analyze(ctx: RankContext) -> AnalyzerResult:
    """Critical path per step: composition by component, operators on it, slack."""
    ev = ctx.events
    windows = step_windows(ev)
    nw = len(windows)
    length, gap_ns, pre, c, _ = copies(ev, windows, ctx.keep)
    by, ops = reduce_copies(pre, c, nw)
    del c
    if len(ops):
        ops = ops.sort_values(["cp_time_ns", "dur_ns"], ascending=False, kind="stable")
        ops = ops.reset_index(drop=True)
    # lane gaps on the path count as "other"
    by[:, COMPONENTS.index("other")] += gap_ns
    per_step = pd.DataFrame({"step": windows["step"].to_numpy(np.int64),
                             "dur_ns": windows["dur_ns"].to_numpy(np.int64),
                             "length_ns": length,
                             **{f"{c}_ns": by[:, i] for i, c in enumerate(COMPONENTS)}})
    comp_ns = {c: int(by[:, i].sum()) for i, c in enumerate(COMPONENTS)}
    total_len = int(per_step["length_ns"].sum()) if len(per_step) else 0
    total_dur = int(per_step["dur_ns"].sum()) if len(per_step) else 0
    on = ops[ops["cp_time_ns"] > 0].head(TOP_N)
    top = pd.DataFrame({
        "name": on["name"].to_numpy(), "kind": on["kind"].to_numpy(),
        "time_ns": on["cp_time_ns"].to_numpy(np.int64),
        "share_pct": 100.0 * on["cp_time_ns"].to_numpy(np.float64) / total_len if total_len
        else np.zeros(len(on)),
        "slack_ns": on["median_slack_ns"].to_numpy(np.float64)})
    metrics = {
        "components_pct": {c: (100.0 * comp_ns[c] / total_len if total_len else 0.0)
                           for c in COMPONENTS},
        "length_ms_median": float(per_step["length_ns"].median() / 1e6) if len(per_step) else 0.0,
        "length_pct": 100.0 * total_len / total_dur if total_dur else 0.0,
        "steps": int(len(per_step)),
    }
    return AnalyzerResult(name="critical_path",
                          tables={"top_ops": top, "ops": ops, "per_step": per_step},
                          metrics=metrics)


def group_members(lo: np.ndarray, hi: np.ndarray, chunk: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Events of each group of windows: ``chunk`` is the group of each window (0, 1, ...,
    non-decreasing), event i overlaps windows ``lo[i]..hi[i] - 1``; returns (indptr, events):
    group c's events, ascending, are ``events[indptr[c]:indptr[c + 1]]`` (an event overlapping
    windows of several groups is in each). Compiled (``_lanes.members``: two counting passes)
    where the module is and the numbers fit int32; else numpy (a stable sort by group)."""
    nc = int(chunk[-1]) + 1 if chunk.size else 0
    kern = lanes.compiled_pass()
    if kern is not None and lo.dtype == np.int32 == hi.dtype and lo.size < 2**31 - 1:
        ptr = np.empty(nc + 1, np.int64)
        ch = np.ascontiguousarray(chunk, np.int64)
        out = np.empty(lo.size, np.int32)
        total = kern.members(lo, hi, ch, ptr, out)
        if total > out.size:  # (events in several groups: room for every copy)
            out = np.empty(total, np.int32)
            total = kern.members(lo, hi, ch, ptr, out)
        return ptr, out[:total]
    inside = np.flatnonzero(lo < hi)
    first = chunk[lo[inside]]
    span = chunk[hi[inside] - 1] - first + 1  # groups each event is in (mostly 1)
    if span.size and int(span.max()) == 1:  # (the usual case: no event spans two groups)
        ev, grp = inside, first
    else:
        ev = np.repeat(inside, span)
        grp = np.repeat(first, span) + (np.arange(ev.size) - np.repeat(np.cumsum(span) - span,
                                                                        span))
    # by group, events ascending within each (a stable sort: radix on 16-bit group numbers)
    o = np.argsort(grp.astype(np.uint16) if nc <= 2**16 else grp, kind="stable")
    ptr = np.zeros(nc + 1, np.int64)
    np.cumsum(np.bincount(grp, minlength=nc), out=ptr[1:])
    dtype = np.int32 if lo.size < 2**31 - 1 else np.int64  # (narrow: peak memory)
    return ptr, ev[o].astype(dtype)
