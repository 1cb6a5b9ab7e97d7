"""Ranks replayed together: the same collective on every rank is one rendezvous.

A collective on rank ``r`` (start ``s_r``, end ``e_r``) cannot end before every participant has
arrived: in the joint replay each participant's collective ends at ``max over participants of
their arrival + the transmission`` (as in the ``communication_cluster`` analyzer: arrival
``A_i``, transmission the time after the last arrival). One **virtual node** per collective
(no O(R^2) edges): ``start_p -> X`` weighs 0 and ``X -> end_r`` weighs ``e_r - max_p s_p``,
rank r's measured time from the last arrival to its end (the last rank's: its transmission;
on the others the same up to clock jitter, so a replay with nothing changed keeps every time).
The collective's own chain segments weigh 0 (its wait for the others is not work): a rank that
arrives earlier in a replay makes every participant's collective end earlier.

Matching: by ``(coll_group, coll_seq)`` where the trace records them (Kineto
``record_param_comms`` args, Hermes ``args``), else by the order of the collectives of the same
name and group within the same step number. A point-to-point transfer whose peer is known (the
args', else the enclosing ``c10d::send`` / ``c10d::recv_`` op's) is a rendezvous of its two
ranks, keyed by the pair and its order among the pair's messages (``p2p_keys``, as the
communication cluster analysis matches them; a pair whose two ranks disagree on its count is
left out); a side that ended before the other arrived (an eager send) is not released by it
and keeps its measured time. Unknown peers are left alone. Times across ranks are compared on one clock (``meta.clock_offsets_ns``
added). All ranks' graphs and the virtual nodes are one shortest-path problem, solved by the
critical path's solver (``cpgraph.shortest``) as a single rank's replay is (``replay``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hermes.analyzers.common.p2p import is_p2p as is_p2p_group
from hermes.analyzers.common.p2p import p2p_keys
from hermes.analyzers.communication.rank import P2P
from hermes.analyzers.critical_path import graph as cpgraph
from hermes.whatif import chains
from hermes.whatif import replay as rp


@dataclass
class Cluster:
    """Ranks' step graphs with their matched collectives: node ``i`` of rank ``r`` is node
    ``base[r] + i`` of the joint graph, virtual node ``k`` is node ``n + k`` (time ``xt[k]`` on
    the common clock); ``in_u -> in_x`` and ``out_x -> out_v`` (weight ``out_w``) link them."""

    gs: Mapping[int, rp.StepGraph]
    base: dict[int, int]
    n: int
    offset: dict[int, int]
    xt: np.ndarray
    in_u: np.ndarray
    in_x: np.ndarray
    out_x: np.ndarray
    out_v: np.ndarray
    out_w: np.ndarray
    #: per node of rank r's graph: True inside a matched collective (its chain edge weighs 0)
    wait: dict[int, np.ndarray]
    #: per matched collective on each rank: rank, graph event id, step, time waited for the
    #: last arrival (ns)
    table: pd.DataFrame
    #: per row of ``table`` (and of ``in_u``): released by its rendezvous (``out_*`` are those
    #: rows'); False for a point-to-point side that ended before the other arrived
    rel: np.ndarray

    @property
    def matched(self) -> int:
        return int(self.xt.size)


def _keys(sg: rp.StepGraph, rank: int) -> pd.DataFrame:
    c = sg.coll
    if c is None or len(c) == 0:
        return pd.DataFrame(columns=["rank", "ev", "key", "start", "step", "p2p"])
    c = c.sort_values("start", kind="stable")
    is_p2p = c["name"].str.contains(P2P).to_numpy(bool)
    p = c[is_p2p]
    c = c[~is_p2p]
    by_seq = c["seq"].to_numpy(np.int64) >= 0
    key = ("s|" + c["group"] + "|" + c["seq"].astype(str)).to_numpy(object)
    if not by_seq.all():
        order = c.groupby(["step", "name", "group"], sort=False).cumcount()
        key = np.where(by_seq, key, "o|" + c["step"].astype(str) + "|" + c["name"] + "|"
                       + c["group"] + "|" + order.astype(str))
    out = pd.DataFrame({"rank": rank, "ev": c["ev"].to_numpy(np.int64), "key": key,
                        "start": c["start"].to_numpy(np.int64),
                        "step": c["step"].to_numpy(np.int64), "p2p": False})
    if "peer" in p.columns and p["peer"].notna().any():
        # point-to-point transfers with a known peer: keyed by their pair of ranks and their
        # order among that pair's messages (as the communication cluster analysis matches them)
        t = pd.DataFrame({"rank": rank, "peer": p["peer"].to_numpy(np.float64),
                          "op": p["name"].to_numpy(object), "group": "", "seq": -1.0,
                          "ev": p["ev"].to_numpy(np.int64), "start": p["start"].to_numpy(np.int64),
                          "step": p["step"].to_numpy(np.int64)})
        p2p_keys(t)
        t = t[is_p2p_group(t)]
        if len(t):
            out = pd.concat([out, pd.DataFrame({
                "rank": rank, "ev": t["ev"].to_numpy(np.int64),
                "key": ("s|" + t["group"] + "|" + t["seq"].astype(int).astype(str)).to_numpy(object),
                "start": t["start"].to_numpy(np.int64), "step": t["step"].to_numpy(np.int64),
                "p2p": True})], ignore_index=True)
    return out


def _pairable(k: pd.DataFrame) -> pd.DataFrame:
    """``k`` without the point-to-point transfers of a pair of ranks whose two ranks do not
    both have that pair's messages in equal numbers (a peer numbered within a smaller process
    group, a rank missing from the trace: by order they would pair the wrong messages)."""
    p = k["p2p"].to_numpy(bool)
    if not p.any():
        return k
    pair = k.loc[p, "key"].str.rsplit("|", n=1).str[0]
    cnt = pd.crosstab(pair, k.loc[p, "rank"])
    ok = cnt.index[((cnt > 0).sum(axis=1) == 2) &
                   (cnt.where(cnt > 0).min(axis=1) == cnt.max(axis=1))]
    keep = np.ones(len(k), bool)
    keep[np.flatnonzero(p)] = pair.isin(ok).to_numpy(bool)
    return k[keep]


def match(gs: Mapping[int, rp.StepGraph], offsets: Mapping[int, int] | None = None
          ) -> Cluster | None:
    """The ranks' collectives matched across ranks (None: fewer than two ranks, or no
    collective found on two of them)."""
    if len(gs) < 2:
        return None
    offsets = {int(r): int(v) for r, v in (offsets or {}).items()}
    keys = [_keys(sg, r) for r, sg in gs.items()]
    k = pd.concat([x for x in keys if len(x)], ignore_index=True) if any(
        len(x) for x in keys) else pd.DataFrame()
    if len(k) == 0:
        return None
    k = _pairable(k.drop_duplicates(["rank", "key"]))  # (one arrival per rank)
    k = k[k.groupby("key")["rank"].transform("size") >= 2].reset_index(drop=True)
    if len(k) == 0:
        return None
    base, n = {}, 0
    for r, sg in gs.items():
        base[r] = n
        n += rp.size(sg)
    rank = k["rank"].to_numpy(np.int64)
    ev = k["ev"].to_numpy(np.int64)
    x, _ = pd.factorize(k["key"])
    local_s = np.empty(len(k), np.int64)
    local_e = np.empty(len(k), np.int64)
    node_s = np.empty(len(k), np.int64)
    node_e = np.empty(len(k), np.int64)
    off = np.array([offsets.get(r, 0) for r in rank], np.int64)
    wait = {}
    for r, sg in gs.items():
        m = rank == r
        s_node, e_node = sg.g.event_start[ev[m]], sg.g.event_end[ev[m]]
        local_s[m], local_e[m] = sg.g.t[s_node], sg.g.t[e_node]
        node_s[m], node_e[m] = base[r] + s_node, base[r] + e_node
    arrive = local_s + off
    xt = np.full(int(x.max()) + 1, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(xt, x, arrive)
    # a side of a point-to-point transfer that ended before the other arrived (a send that
    # returned once its data was handed over) is not released by the rendezvous: its time is
    # its own, as measured
    rel = ~(k["p2p"].to_numpy(bool) & (local_e + off < xt[x]))
    for r, sg in gs.items():
        # the chain edges inside each released collective (its lane's nodes after its start
        # up to its end; a child range that outlives its op, Gloo's recv inside c10d::recv_,
        # is labelled with the op past the op's end) weigh 0
        mine = (rank == r) & rel
        mark = np.zeros(sg.g.n + 1, np.int64)
        np.add.at(mark, node_s[mine] - base[r] + 1, 1)
        np.add.at(mark, node_e[mine] - base[r] + 1, -1)
        wait[r] = np.cumsum(mark)[:sg.g.n] > 0
    out_w = np.maximum(local_e + off - xt[x], 0)[rel]
    table = pd.DataFrame({"rank": rank, "ev": ev, "step": k["step"].to_numpy(np.int64),
                          "wait_ns": np.where(rel, xt[x] - arrive, 0)})
    return Cluster(gs, base, n, {r: offsets.get(r, 0) for r in gs}, xt, node_s, x, x[rel],
                   node_e[rel], out_w, wait, table, rel)


def replay_nodes(cl: Cluster, changes: Mapping[int, rp.Change] | None = None,
                 solo: bool = False) -> dict[int, np.ndarray]:
    """Every rank's replayed node times (ns, on its own clock) under ``changes`` (per rank;
    missing: as measured), all ranks and their collectives solved together. ``solo``: no rank
    waits for another (each collective ends its own transmission after its own arrival): each
    rank's own pace."""
    us, vs, losts, starts, ts = [], [], [], [], []
    for r, sg in cl.gs.items():
        ch = (changes or {}).get(r)
        u, v, lost, start = rp.edges(sg, ch, cl.wait[r])
        us.append(u + cl.base[r])
        vs.append(v + cl.base[r])
        losts.append(lost)
        starts.append(start)
        ts.append(rp.times(sg) + cl.offset[r])
    t = np.concatenate(ts)
    out_w = _transmissions(cl, changes)
    m = 0 if solo else cl.xt.size
    if solo:  # arrival -> own end: the transmission (lost: the time waited)
        us.append(cl.in_u[cl.rel])
        vs.append(cl.out_v)
        losts.append(np.maximum(t[cl.out_v] - t[cl.in_u[cl.rel]] - out_w, 0))
    else:
        xid = cl.n + np.arange(m)
        # arrival -> rendezvous: weight 0 (lost = the time to the last arrival, >= 0);
        # rendezvous -> each end: its measured time after the last arrival (lost 0)
        us += [cl.in_u, xid[cl.out_x]]
        vs += [xid[cl.in_x], cl.out_v]
        losts += [cl.xt[cl.in_x] - t[cl.in_u], cl.out_w - out_w]
        # a rendezvous starts only when its participants arrive (no release of its own)
        starts.append(np.full(m, np.inf))
    u, v, lost = np.concatenate(us), np.concatenate(vs), np.concatenate(losts)
    n = cl.n + m
    if solo:  # (an arrival -> end edge may repeat a chain edge: pairs unique, least lost kept)
        order = cpgraph.sort_by_key(u * n + v, lost)
        u, v, lost = u[order], v[order], lost[order]
        keep = np.ones(u.size, bool)
        keep[1:] = (u[1:] != u[:-1]) | (v[1:] != v[:-1])
        u, v, lost = u[keep], v[keep], lost[keep]
    d = chains.shortest(n, u, v, lost, np.concatenate(starts))
    return {r: rp.times(sg) - d[cl.base[r]:cl.base[r] + rp.size(sg)]
            for r, sg in cl.gs.items()}


def _transmissions(cl: Cluster, changes: Mapping[int, rp.Change] | None) -> np.ndarray:
    """Each rendezvous -> end weight under ``changes``: the measured time after the last
    arrival times the change's transmission factor (``Change.tx``) of that rank's collective."""
    f = np.ones(cl.out_w.size)
    rank = cl.table["rank"].to_numpy(np.int64)[cl.rel]
    ev = cl.table["ev"].to_numpy(np.int64)[cl.rel]
    for r, ch in (changes or {}).items():
        if ch is not None and ch.tx is not None:
            m = rank == r
            f[m] = np.clip(ch.tx[ev[m]], 0.0, 1.0)
    return np.rint(cl.out_w * f).astype(np.int64)


def replay(cl: Cluster, changes: Mapping[int, rp.Change] | None = None,
           solo: bool = False) -> dict[int, np.ndarray]:
    """Every rank's replayed step durations (ns) under ``changes``, ranks replayed together
    (``solo``: each at its own pace, see :func:`replay_nodes`)."""
    r = replay_nodes(cl, changes, solo)
    return {k: rp.step_times(sg, r[k]) for k, sg in cl.gs.items()}


def pace(cl: Cluster, changes: Mapping[int, rp.Change] | None = None) -> dict[int, float]:
    """Each rank's own pace: its median replayed step when no rank waits for another (the
    straggler's is the largest; the others' are what they would take without it)."""
    return {r: float(np.median(v)) if v.size else 0.0
            for r, v in replay(cl, changes, solo=True).items()}
