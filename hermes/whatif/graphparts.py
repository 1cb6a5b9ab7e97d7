"""Parts of a replay's step graph built from the critical path's (``hermes.whatif.replay.build``):
the collectives ``cluster`` matches across ranks, the edges into device tasks and helper
threads nothing launches in the trace, and each step's main thread."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from hermes.analyzers.communication.rank import peers
from hermes.analyzers.critical_path import edges as cpedges
from hermes.analyzers.critical_path import graph as cpgraph


def collectives(ev: pd.DataFrame, info: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """The step graph's collective events with what matches them across ranks (a collective
    cut at a step border is left out: its copies are not one arrival); ``peer``: a
    point-to-point transfer's other rank (NaN: not one, or unknown)."""
    is_c = (info["kind"] == "collective").to_numpy(bool)
    if not is_c.any():
        z = np.empty(0, np.int64)
        return pd.DataFrame({"ev": z, "group": np.empty(0, object), "seq": z,
                             "name": np.empty(0, object), "step": z, "start": z,
                             "peer": np.empty(0, np.float64)})
    src = info["src"].to_numpy(np.int64)
    once = np.bincount(src, minlength=len(ev)) == 1 if src.size else np.zeros(0, bool)
    sel = np.flatnonzero(is_c & once[src]) if src.size else np.empty(0, np.int64)
    rows = src[sel]
    group = (ev["coll_group"].take(rows).astype(object).fillna("").astype(str).to_numpy()
             if "coll_group" in ev.columns else np.full(sel.size, ""))
    seq = (pd.to_numeric(ev["coll_seq"].take(rows), errors="coerce").fillna(-1)
           .to_numpy(np.int64) if "coll_seq" in ev.columns else np.full(sel.size, -1))
    step = windows["step"].to_numpy(np.int64)[info["win"].to_numpy(np.int64)[sel]] \
        if "step" in windows.columns else info["win"].to_numpy(np.int64)[sel]
    return pd.DataFrame({"ev": sel, "group": group, "seq": seq,
                         "name": ev["name"].take(rows).astype(str).to_numpy(), "step": step,
                         "start": info["start"].to_numpy(np.int64)[sel],
                         "peer": peers(ev, rows)})


def fed_tasks(g: cpgraph.Graph, info: pd.DataFrame, node_ev: np.ndarray, first: np.ndarray
               ) -> cpgraph.Graph:
    """Edges into device tasks nothing launches in the trace (a batch's H2D copy issued by a
    pin-memory thread, DMA requests): from the latest event end on another lane of the step
    at most ``cpedges.LINE_UP_NS`` before the task's start (the rule ``cpedges`` uses between
    streams), so the task moves when what fed it moves. Without it the task would start at its
    measured time in every replay and pin the rest of the step. Edge weight: the measured
    delay, so an unchanged replay keeps every time."""
    has_in = np.zeros(g.n, bool)
    has_in[g.cv[g.forward_cross()]] = True
    dev = ~info["host"].to_numpy(bool)
    st = g.event_start
    # (also a helper host thread's first event in the step, or its batch work after a gap: a
    # pin-memory thread woken by the loop; loader workers run ahead on their own, the main
    # thread's gaps are its own unrecorded work and other threads' (autograd's) stay as
    # measured)
    data = np.asarray(info["kind"].cat.categories.str.startswith("data_"), bool)[
        info["kind"].cat.codes.to_numpy()]
    helper = info["host"].to_numpy(bool) & ~info["loader"].to_numpy(bool) & \
        (first[st] | ((g.seg_event[st] < 0) & data)) & ~main_chain(g, info)
    sel = (dev | helper) & ~has_in[st]
    tgt = st[sel]
    # a helper thread follows whatever ended last before it, however long before (it was
    # asleep until woken)
    is_helper = helper[sel]
    if tgt.size == 0:
        return g
    win = info["win"].to_numpy(np.int64)[node_ev]
    ends = g.event_end
    key_span = int(g.t.max() - g.t.min()) + 1
    t0 = int(g.t.min())
    ekey = win[ends] * key_span + (g.t[ends] - t0)
    o = np.argsort(ekey, kind="stable")
    ends, ekey = ends[o], ekey[o]
    tkey = win[tgt] * key_span + (g.t[tgt] - t0)
    j = np.searchsorted(ekey, tkey, side="right") - 1
    src = np.full(tgt.size, -1, np.int64)
    for back in range(4):  # the latest end on another lane among the last few
        jj = j - back
        c = ends[np.maximum(jj, 0)]
        ok = (src < 0) & (jj >= 0) & (win[c] == win[tgt]) & (g.lane[c] != g.lane[tgt]) & \
            ((g.t[tgt] - g.t[c] <= cpedges.LINE_UP_NS) | is_helper)
        src[ok] = c[ok]
    ok = src >= 0
    u, v = src[ok], tgt[ok]
    return replace(g, cu=np.concatenate([g.cu, u]), cv=np.concatenate([g.cv, v]),
                   cw=np.concatenate([g.cw, g.t[v] - g.t[u]]),
                   ce=np.concatenate([g.ce, np.full(u.size, -1, np.int64)]))


def main_chain(g: cpgraph.Graph, info: pd.DataFrame) -> np.ndarray:
    """Per event: True on its step's main thread (the host lane, not a loader's, with the
    most events in the step)."""
    chain = g.lane[g.event_start]
    host = info["host"].to_numpy(bool) & ~info["loader"].to_numpy(bool)
    if not host.any():
        return np.zeros(len(info), bool)
    # events per (step, chain), then per step the chain with the most (a tie: the higher
    # chain), in numpy (no pandas groupby)
    win, ch = info["win"].to_numpy(np.int64)[host], chain[host]
    span = int(ch.max()) + 1
    keys, cnt = np.unique(win * span + ch, return_counts=True)
    kw, kc = keys // span, keys % span
    o = np.lexsort((kc, cnt, kw))
    last = np.r_[kw[o][1:] != kw[o][:-1], True]
    return np.isin(chain, kc[o][last])
