"""Critical path of each step (rank analyzer): composition by component, operators, slack.

Per step window, ``cpgraph`` builds the dependency graph of the step's events (host thread
order, launch -> device task by ``corr_id``, stream order, device task -> sync end) and finds the
longest path. Outputs (times in ns, shares in percent):

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

import numpy as np
import pandas as pd

from hermes.analyzers import cpgraph, hta_compat
from hermes.analyzers.base import AnalyzerResult, RankContext, register
from hermes.analyzers.steps import step_windows
from hermes.trace.schema import EVENT_KINDS, LANE_KINDS

COMPONENTS = ("computation", "communication", "host", "io", "other")
# annotations, counters and unknown events (Kineto's whole-capture "Trace" span) are no work
SKIP_KINDS = ("step", "marker", "counter", "other")
COMP_KINDS = ("kernel", "memcpy_h2d", "memcpy_d2h", "memcpy_d2d", "memset")
IO_KINDS = ("data_read", "data_process", "data_fetch", "data_wait")
TOP_N = 20


_KIND = {k: i for i, k in enumerate(EVENT_KINDS)}
_LANE = {k: i for i, k in enumerate(LANE_KINDS)}
_KIND_NAMES = np.array([*EVENT_KINDS, "other"], dtype=object)


def _codes(col: pd.Series, vocab: dict[str, int]) -> np.ndarray:
    """Small-int codes of a string column in a fixed vocabulary (-1: unknown), computed once
    per distinct value: comparisons on millions of events are then integer operations."""
    cat = col.astype("category")
    table = np.array([vocab.get(str(c), -1) for c in cat.cat.categories] + [-1], np.int64)
    return table[cat.cat.codes.to_numpy()]


def _in(codes: np.ndarray, vocab: dict[str, int], names: tuple[str, ...]) -> np.ndarray:
    return np.isin(codes, [vocab[x] for x in names])


def _component(kind: np.ndarray, lane_kind: np.ndarray, nccl: np.ndarray) -> np.ndarray:
    device = ~_in(lane_kind, _LANE, hta_compat.HOST_LANES)
    comm = device & ((kind == _KIND["collective"]) | (lane_kind == _LANE["link"]) | nccl)
    comp = device & ~comm & _in(kind, _KIND, COMP_KINDS)
    io = _in(kind, _KIND, IO_KINDS) | (lane_kind == _LANE["loader"])
    return np.select([comm, comp, io], ["communication", "computation", "io"], "host")


def build(ev: pd.DataFrame, lo: int, hi: int) -> tuple[cpgraph.Graph, pd.DataFrame]:
    """Graph of one step's events clipped to [lo, hi). Returns the graph and the events used
    (index = local event id) with columns name, kind, component, start, end."""
    ts = ev["ts_ns"].to_numpy(np.int64)
    s = np.clip(ts, lo, hi)
    e = np.clip(ts + ev["dur_ns"].to_numpy(np.int64), lo, hi)
    kind = _codes(ev["kind"], _KIND)
    lane_kind = _codes(ev["lane_kind"], _LANE)
    keep = (e > s) & ~_in(kind, _KIND, SKIP_KINDS) & (lane_kind != _LANE["counter"])
    ev, s, e, kind, lane_kind = ev[keep], s[keep], e[keep], kind[keep], lane_kind[keep]
    n_ev = s.size
    nccl = hta_compat._match(ev["name"], hta_compat.NCCL_KERNEL_RE) & (kind == _KIND["kernel"])
    comp = _component(kind, lane_kind, nccl)
    info = pd.DataFrame({"name": ev["name"].to_numpy(), "kind": _KIND_NAMES[kind],
                         "component": comp, "start": s, "end": e})
    if n_ev == 0:
        z = np.empty(0, np.int64)
        return cpgraph.Graph(z, z, z, z, z, z, z, z, z, z), info
    lane = ev["lane"].astype("category").cat.codes.to_numpy().astype(np.int64)
    dur = e - s
    eid = np.arange(n_ev)
    # nodes: start (is_start 1) and end (0) of every event
    n_t = np.concatenate([s, e])
    n_lane = np.concatenate([lane, lane])
    n_ev_id = np.concatenate([eid, eid])
    n_is_start = np.concatenate([np.ones(n_ev, np.int64), np.zeros(n_ev, np.int64)])
    # equal times: ends before starts; starts outer (longer) first; ends inner (shorter) first
    tie = np.concatenate([-dur, dur])
    order = np.lexsort((n_ev_id, tie, n_is_start, n_t, n_lane))
    t, ln, nev, st = n_t[order], n_lane[order], n_ev_id[order], n_is_start[order]
    n = t.size
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    start_node, end_node = pos[:n_ev], pos[n_ev:]
    first = np.ones(n, bool)
    first[1:] = ln[1:] != ln[:-1]
    # innermost event active after each node: after a start, that event; after an end, the
    # event of the latest earlier start at the same depth on the lane (its enclosing event)
    depth = np.cumsum(np.where(st == 1, 1, -1))
    active = np.where(st == 1, nev, -1)
    starts = np.flatnonzero(st == 1)
    for d in np.unique(depth[st == 0]):
        if d <= 0:
            continue
        q = np.flatnonzero((st == 0) & (depth == d))
        cand = starts[depth[starts] == d]
        k = np.searchsorted(cand, q) - 1
        ok = k >= 0
        j = cand[np.maximum(k, 0)]
        ok &= ln[j] == ln[q]
        active[q[ok]] = nev[j[ok]]
    seg = np.full(n, -1, np.int64)
    seg[1:] = np.where(first[1:], -1, active[:-1])
    w = np.zeros(n, np.int64)
    w[1:] = np.where(first[1:], 0, t[1:] - t[:-1])
    w[(seg >= 0) & (kind[np.maximum(seg, 0)] == _KIND["sync"])] = 0  # waiting is not work
    # a host thread with nothing recorded is waiting, not working (HTA: zero-weight dependency
    # between top-level CPU ops); a stream gap is a device-side delay unless it waited for a launch
    w[(seg < 0) & _in(lane_kind[nev], _LANE, hta_compat.HOST_LANES)] = 0
    cu, cv, cw, ce = _cross_edges(ev, s, e, kind, lane_kind, lane, start_node, end_node, t, w, first)
    return cpgraph.Graph(t, ln, w, seg, cu, cv, cw, ce, start_node, end_node), info


def _cross_edges(ev: pd.DataFrame, s: np.ndarray, e: np.ndarray, kind: np.ndarray,
                 lane_kind: np.ndarray, lane: np.ndarray, start_node: np.ndarray,
                 end_node: np.ndarray, t: np.ndarray, w: np.ndarray, first: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Launch -> task edges and awaited task -> sync-end edges; zeroes stream gaps that were
    waits for a launch (``w`` is modified in place)."""
    host = _in(lane_kind, _LANE, hta_compat.HOST_LANES)
    task = ~host & _in(kind, _KIND, COMP_KINDS + ("collective",))
    eid = np.arange(s.size)
    us, vs, ws_, es = [], [], [], []
    if "corr_id" in ev.columns:
        corr = pd.to_numeric(ev["corr_id"], errors="coerce").to_numpy(np.float64)
        h = pd.DataFrame({"corr": corr[host], "h": eid[host]}).dropna()
        d = pd.DataFrame({"corr": corr[task], "d": eid[task]}).dropna()
        m = h.drop_duplicates("corr").merge(d, on="corr")
        if len(m):
            hi, di = m["h"].to_numpy(np.int64), m["d"].to_numpy(np.int64)
            # the task waited for its launch when launched after the stream's previous node:
            # then the launch delay is on the path and the stream gap is not (HTA's rule of an
            # empty queue); otherwise the launch is a dependency only (weight 0)
            k = start_node[di]
            waited = first[k] | (s[hi] >= t[np.maximum(k - 1, 0)])
            w[k[waited & ~first[k]]] = 0
            us.append(start_node[hi])
            vs.append(k)
            ws_.append(np.where(waited, np.maximum(s[di] - s[hi], 0), 0))
            es.append(hi)
    sync = np.flatnonzero(kind == _KIND["sync"])
    tasks = np.flatnonzero(task)
    if sync.size and tasks.size:
        o = tasks[np.argsort(e[tasks], kind="stable")]
        k = np.searchsorted(e[o], e[sync], side="right") - 1
        cand = o[np.maximum(k, 0)]
        ok = (k >= 0) & (e[cand] >= s[sync]) & (lane[cand] != lane[sync])
        us.append(end_node[cand[ok]])
        vs.append(end_node[sync[ok]])
        ws_.append(np.zeros(int(ok.sum()), np.int64))
        es.append(np.full(int(ok.sum()), -1, np.int64))
    if not us:
        z = np.empty(0, np.int64)
        return z, z, z, z
    return (np.concatenate(us).astype(np.int64), np.concatenate(vs).astype(np.int64),
            np.concatenate(ws_).astype(np.int64), np.concatenate(es).astype(np.int64))


def step_path(ev: pd.DataFrame, lo: int, hi: int) -> tuple[int, pd.DataFrame]:
    """Longest path of one step: (length ns, per-event table with cp_ns and slack_ns)."""
    g, info = build(ev, lo, hi)
    if g.n == 0:
        info["cp_ns"] = np.zeros(0, np.int64)
        info["slack_ns"] = np.zeros(0, np.int64)
        return 0, info
    dist, pred = cpgraph.longest(g)
    length = int(dist.max())
    on_ev, on_w = cpgraph.backtrack(g, dist, pred)
    gap = on_ev < 0
    cp = np.bincount(on_ev[~gap], weights=on_w[~gap], minlength=len(info)).astype(np.int64)
    bwd = cpgraph.longest_from(g)
    # longest path through a node = fwd + bwd; an event's slack uses the better of its two nodes
    through_node = dist + bwd
    through = np.maximum(through_node[g.event_start], through_node[g.event_end])
    info["cp_ns"] = cp
    info["slack_ns"] = np.maximum(length - through, 0)
    info.attrs["gap_ns"] = int(on_w[gap].sum())
    return length, info



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
    per_step_rows = []
    infos = []
    comp_ns = dict.fromkeys(COMPONENTS, 0)
    if len(ev):
        ts = ev["ts_ns"].to_numpy(np.int64)
        end = ts + ev["dur_ns"].to_numpy(np.int64)
    for step, lo, hi in windows[["step", "start_ns", "end_ns"]].itertuples(index=False):
        mask = (ts < hi) & (end > lo)  # every event overlapping the step, clipped to it
        length, info = step_path(ev[mask], int(lo), int(hi))
        by_comp = info.groupby("component")["cp_ns"].sum()
        row = {"step": int(step), "dur_ns": int(hi - lo), "length_ns": length}
        for c in COMPONENTS:
            v = int(by_comp.get(c, 0)) + (int(info.attrs.get("gap_ns", 0)) if c == "other" else 0)
            row[f"{c}_ns"] = v
            comp_ns[c] += v
        per_step_rows.append(row)
        info["step"] = int(step)
        infos.append(info)
    per_step = pd.DataFrame(per_step_rows, columns=["step", "dur_ns", "length_ns",
                                                    *(f"{c}_ns" for c in COMPONENTS)])
    total_len = int(per_step["length_ns"].sum()) if len(per_step) else 0
    total_dur = int(per_step["dur_ns"].sum()) if len(per_step) else 0
    if infos and sum(len(i) for i in infos):
        allev = pd.concat(infos, ignore_index=True)
        ops = allev.assign(dur_ns=allev["end"] - allev["start"]).groupby(
            ["name", "kind"], as_index=False, observed=True).agg(
            count=("cp_ns", "size"), dur_ns=("dur_ns", "sum"), cp_time_ns=("cp_ns", "sum"),
            min_slack_ns=("slack_ns", "min"), median_slack_ns=("slack_ns", "median"))
        ops = ops.sort_values(["cp_time_ns", "dur_ns"], ascending=False, kind="stable")
        ops = ops.reset_index(drop=True)
    else:
        ops = _empty_ops()
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
