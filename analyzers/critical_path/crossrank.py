"""Cluster analyzer ``critical_path_cluster``: the critical path of the job through every rank.

``critical_path_cluster(ctx: ClusterContext) -> AnalyzerResult`` over the per-rank
``communication`` tables, ``steps`` windows and ``communication_cluster``'s matched
collectives. The job is a graph of time points: on each rank, its step starts and ends and its
arrival at and end of every matched collective, in time order, linked by *rank edges* (the
rank's own time); per matched collective a *release* node at the last arrival (every rank's
arrival -> release: the time it waits) and release -> each rank's end of the collective (the
transfer). A rank edge counts as the rank's time where it lies inside the analyzed steps and
outside the rank's matched collectives (inside them the rank waits or transfers: the release
route carries that); elsewhere it is lost time. The critical path is the path to the job's last
step end that loses least -- the longest chain of work, waiting only where nothing else could
run -- found by the step graph's one shortest-distance solver (``graph.shortest``): it goes
through the rank that arrives last at each collective, the collective's transfer, and the
rank that ends the step last. Formulas: ``docs/analysis/critical_path.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common import intervals as iv
from hermes.analyzers.common.p2p import p2p_keys
from hermes.analyzers.critical_path.graph import shortest
from hermes.analyzers.engine.base import AnalyzerResult, ClusterContext, register

PATH_COLUMNS = ["kind", "rank", "start_ns", "end_ns", "dur_ns", "group", "seq"]
#: time points of a rank, in this order where they coincide
_WINDOW_END, _END, _ARRIVE, _WINDOW_START = 0, 1, 2, 3


def _rank_points(rank: int, windows: pd.DataFrame, offset: int, c: pd.DataFrame
                 ) -> pd.DataFrame:
    """The rank's time points (rank 0's clock): window starts/ends and its arrival at / end of
    each matched collective (``c``: key, arrive_ns, end_ns)."""
    ws = windows["start_ns"].to_numpy(np.int64) + offset
    we = windows["end_ns"].to_numpy(np.int64) + offset
    parts = [pd.DataFrame({"t": ws, "what": _WINDOW_START, "key": -1}),
             pd.DataFrame({"t": we, "what": _WINDOW_END, "key": -1}),
             pd.DataFrame({"t": c["arrive_ns"].to_numpy(np.int64), "what": _ARRIVE,
                           "key": c["key"].to_numpy(np.int64)}),
             pd.DataFrame({"t": c["end_ns"].to_numpy(np.int64), "what": _END,
                           "key": c["key"].to_numpy(np.int64)})]
    p = pd.concat(parts, ignore_index=True).sort_values(["t", "what"], kind="stable")
    p["rank"] = int(rank)
    return p.reset_index(drop=True)


def _rank_time(p: pd.DataFrame, windows: pd.DataFrame, offset: int, c: pd.DataFrame
               ) -> np.ndarray:
    """For each rank edge (point i -> i + 1), its time inside the steps and outside the rank's
    matched collectives."""
    t = p["t"].to_numpy(np.int64)
    if t.size < 2:
        return np.zeros(0, np.int64)
    steps = iv.union(windows["start_ns"].to_numpy(np.int64) + offset,
                     windows["end_ns"].to_numpy(np.int64) + offset)
    inside = iv.union(c["arrive_ns"].to_numpy(np.int64), c["end_ns"].to_numpy(np.int64))
    own = iv.subtract(steps, inside)
    return iv.overlap_per_interval(t[:-1], t[1:], own)


@register("critical_path_cluster", scope="cluster", needs=("communication_cluster",))
def critical_path_cluster(ctx: ClusterContext) -> AnalyzerResult:
    """The job's critical path across ranks, joined at matched collectives and point-to-point
    transfers."""
    res = AnalyzerResult("critical_path_cluster")
    sync_res = ctx.results.get("communication_cluster")
    sync = sync_res.tables.get("sync") if sync_res is not None else None
    res.tables["path"] = pd.DataFrame(columns=PATH_COLUMNS)
    res.metrics.update({"ranks_on_path": [], "rank_pct": {}, "transfer_pct": 0.0,
                        "wait_pct": 0.0, "path_ns": 0})
    if sync is None or len(sync) == 0 or len(ctx.per_rank) < 2:
        return res
    keys = sync[["group", "seq"]].reset_index(drop=True)
    keys["key"] = np.arange(len(keys), dtype=np.int64)
    offsets = getattr(ctx.meta, "clock_offsets_ns", {}) or {}
    pts, rank_lost = [], []
    for r, rr in sorted(ctx.per_rank.items()):
        if "communication" not in rr or "steps" not in rr:
            continue
        t = rr["communication"].tables.get("collectives")
        w = rr["steps"].tables.get("windows")
        if t is None or w is None or len(w) == 0:
            continue
        if "peer" in t.columns:  # point-to-point transfers keyed as the cluster matched them
            t = t.copy()
            p2p_keys(t)
        c = t.merge(keys, on=["group", "seq"])[["key", "arrive_ns", "end_ns"]]
        off = int(offsets.get(int(r), offsets.get(str(r), 0)) or 0)
        p = _rank_points(int(r), w, off, c)
        own = _rank_time(p, w, off, c)
        dt = np.diff(p["t"].to_numpy(np.int64))
        rank_lost.append((own, dt - own))
        pts.append(p)
    if len(pts) < 2:
        return res
    return _solve(res, pts, rank_lost, sync, keys)


def _solve(res: AnalyzerResult, pts: list[pd.DataFrame],
           rank_lost: list[tuple[np.ndarray, np.ndarray]], sync: pd.DataFrame,
           keys: pd.DataFrame) -> AnalyzerResult:
    p = pd.concat(pts, ignore_index=True)
    n_rank = len(p)
    first = np.cumsum([0] + [len(x) for x in pts])[:-1]
    # rank edges: i -> i + 1 within each rank
    cu = np.concatenate([f + np.arange(len(x) - 1) for f, x in zip(first, pts, strict=True)])
    own = np.concatenate([o for o, _ in rank_lost])
    c_lost = np.concatenate([lo for _, lo in rank_lost])
    t = p["t"].to_numpy(np.int64)
    key = p["key"].to_numpy(np.int64)
    what = p["what"].to_numpy(np.int64)
    # release nodes: the last arrival of each matched collective
    arr = what == _ARRIVE
    release_t = pd.Series(t[arr]).groupby(key[arr]).max()
    k_ids = release_t.index.to_numpy(np.int64)
    rel_node = np.full(len(keys), -1, np.int64)
    rel_node[k_ids] = n_rank + np.arange(len(k_ids))
    rt = np.full(len(keys), 0, np.int64)
    rt[k_ids] = release_t.to_numpy(np.int64)
    a_idx = np.flatnonzero(arr)
    e_idx = np.flatnonzero(what == _END)
    e_idx = e_idx[rel_node[key[e_idx]] >= 0]
    # a side of a point-to-point transfer that ended before the other arrived (a send that
    # returned once its data was handed over) does not wait for the release
    p2p = keys["group"].astype(str).str.startswith("p2p ").to_numpy(bool)
    e_idx = e_idx[~(p2p[key[e_idx]] & (t[e_idx] < rt[key[e_idx]]))]
    u = np.concatenate([cu, a_idx, rel_node[key[e_idx]]])
    v = np.concatenate([cu + 1, rel_node[key[a_idx]], e_idx])
    wait = rt[key[a_idx]] - t[a_idx]
    lost = np.concatenate([c_lost, wait, np.zeros(len(e_idx), np.int64)])
    n = n_rank + len(k_ids)
    node_t = np.concatenate([t, release_t.to_numpy(np.int64)])
    t0 = int(node_t.min())
    d, pred = shortest(n, u, v, lost.clip(min=0), node_t - t0, preds=True)
    assert pred is not None
    # the job's last step end (of the ends tied there, the one reached losing least)
    ends = np.flatnonzero(what == _WINDOW_END)
    ends = ends[t[ends] == t[ends].max()]
    sink = int(ends[np.argmin(d[ends])])
    segs = _walk(sink, pred, n, n_rank, p, node_t, own, first, pts, keys, rel_node)
    path = pd.DataFrame(segs, columns=PATH_COLUMNS)
    res.tables["path"] = path
    rank_ns = path[path["kind"] == "rank"].groupby("rank")["dur_ns"].sum()
    transfer = int(path.loc[path["kind"] == "transfer", "dur_ns"].sum())
    total = int(rank_ns.sum()) + transfer
    waited = int(path.loc[path["kind"] == "wait", "dur_ns"].sum())
    res.metrics.update({
        "path_ns": total, "lost_ns": int(d[sink]),
        "ranks_on_path": [int(r) for r in rank_ns.index[rank_ns > 0]],
        "rank_pct": {int(r): round(100.0 * v / total, 3) for r, v in rank_ns.items()
                     if total},
        "transfer_pct": round(100.0 * transfer / total, 3) if total else 0.0,
        "wait_pct": round(100.0 * waited / total, 3) if total else 0.0,
        "collectives_on_path": int((path["kind"] == "transfer").sum())})
    return res


def _walk(sink: int, pred: np.ndarray, n: int, n_rank: int, p: pd.DataFrame,
          node_t: np.ndarray, own: np.ndarray, first: np.ndarray, pts: list[pd.DataFrame],
          keys: pd.DataFrame, rel_node: np.ndarray) -> list[dict[str, Any]]:
    """The path's segments from the source to ``sink``, in time order: ``rank`` (its own time
    on a rank edge), ``transfer`` (release -> the end of the collective) and ``wait`` (an
    arrival before the release, on the path only where no rank was later). The predecessors
    are followed once (plain integers), the segments then made column-wise."""
    pl = pred.tolist()
    nodes = [sink]
    v = sink
    while True:
        u = pl[v]
        if u == n or u < 0:
            break
        nodes.append(u)
        v = u
    path = np.array(nodes[::-1], np.int64)
    u, v = path[:-1], path[1:]
    rank_of = np.append(p["rank"].to_numpy(np.int64), np.full(n - n_rank, -1))
    key = np.append(p["key"].to_numpy(np.int64), np.full(n - n_rank, -1))
    rel_key = np.full(n, -1, np.int64)
    rel_key[rel_node[rel_node >= 0]] = np.flatnonzero(rel_node >= 0)
    # the rank edge out of node i has index i - (its lane's number) in ``own``
    lane = np.searchsorted(first, np.arange(n_rank), side="right") - 1
    is_rank = (u < n_rank) & (v < n_rank) & (v == u + 1) & (rank_of[u] == rank_of[v])
    to_rel = v >= n_rank
    from_rel = u >= n_rank
    dur = np.zeros(u.size, np.int64)
    if is_rank.any():
        dur[is_rank] = own[u[is_rank] - lane[u[is_rank]]]
    dur[to_rel | from_rel] = np.maximum(node_t[v] - node_t[u], 0)[to_rel | from_rel]
    kind = np.where(is_rank, "rank", np.where(to_rel, "wait", np.where(from_rel, "transfer",
                                                                          "")))
    keep = (kind != "") & (dur > 0) | (kind == "transfer")
    k = np.where(to_rel, rel_key[v], np.where(from_rel, key[v], -1))
    who = np.where(from_rel, rank_of[v], rank_of[u])
    g = keys["group"].to_numpy(object)
    sq = keys["seq"].to_numpy()
    out = pd.DataFrame({"kind": kind, "rank": who, "start_ns": node_t[u], "end_ns": node_t[v],
                        "dur_ns": dur,
                        "group": np.where(k >= 0, g[np.maximum(k, 0)], None),
                        "seq": np.where(k >= 0, sq[np.maximum(k, 0)], None)})[keep]
    return out.to_dict("records")
