"""Point-to-point transfers keyed for matching across ranks (shared by the communication
cluster analysis, which matches them, and the critical path across ranks, which joins ranks at
them): docs/analysis/communication.md, "Point-to-point transfers"."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

#: the group of a point-to-point transfer matched across ranks: every message from src to dst
P2P_GROUP = "p2p {src}->{dst}"
_SEND = re.compile(r"send", re.I)
_RECV = re.compile(r"recv", re.I)


def p2p_keys(t: pd.DataFrame) -> None:
    """Point-to-point transfers of the ranks' collective tables ``t`` (each rank's rows in
    arrival order) keyed for matching across ranks, in place: a send to ``peer`` or a receive
    from it gets the group ``p2p src->dst`` and its order among that pair's messages on its
    rank as ``seq`` (messages between two ranks arrive in the order they were sent), and its op
    name with the direction spelled ``send/recv`` (both sides of a transfer carry one op)."""
    if len(t) == 0 or "peer" not in t.columns:
        return
    peer = pd.to_numeric(t["peer"], errors="coerce").to_numpy(np.float64)
    rank = t["rank"].to_numpy(np.int64)
    cand = np.flatnonzero(~np.isnan(peer) & (peer >= 0) & (peer != rank))
    if cand.size == 0:  # (the usual case: no text read on a job's every collective)
        return
    op = t["op"].iloc[cand].astype(str)
    send = (op.str.contains(_SEND) & ~op.str.contains(_RECV)).to_numpy(bool)
    recv = (op.str.contains(_RECV) & ~op.str.contains(_SEND)).to_numpy(bool)
    keep = send | recv
    if not keep.any():
        return
    rows, op, send = cand[keep], op[keep], send[keep]
    pe, rk = peer[rows].astype(np.int64), rank[rows]
    src = np.where(send, rk, pe)
    dst = np.where(send, pe, rk)
    group = pd.Series([P2P_GROUP.format(src=a, dst=b) for a, b in zip(src, dst, strict=True)])
    idx = t.index[rows]
    t["group"] = t["group"].astype(object)
    t.loc[idx, "group"] = group.to_numpy(object)
    t.loc[idx, "seq"] = group.groupby([rk, group], sort=False).cumcount().to_numpy(np.float64)
    t["op"] = t["op"].astype(object)
    t.loc[idx, "op"] = op.str.replace(r"(?i)i?(send|recv)", "send/recv", n=1,
                                      regex=True).to_numpy(object)


def is_p2p(t: pd.DataFrame) -> pd.Series:
    """Rows keyed as point-to-point transfers (:func:`p2p_keys`)."""
    return t["group"].astype(str).str.startswith("p2p ")
