"""The rank communication analyzer ``communication`` (its cluster twin ``communication_cluster``
is in ``cluster.py``).

A collective costs synchronization (waiting for the last rank to arrive) plus transmission.
``communication(ctx) -> AnalyzerResult`` builds the per-collective table of one rank and judges
transmission: small packets, byte misalignment, retransmission (tail outliers), bandwidth
contention (low bandwidth while computation overlaps) and network configuration (low bandwidth
with nothing overlapping). ``cluster.py``'s ``communication_cluster(ctx)`` matches the same
collective across ranks by ``(coll_group, coll_seq)`` and measures synchronization: T_wait =
sum_i(A_max - A_i) over the ranks' arrival times A_i, R_wait = 1 - T_avg/T_max with T_i = A_i -
(the moment the previous collective of the group released every rank), the late rank and the
communication matrix. The causes' costs and findings are in ``causes.py``, the table's derived
columns in ``columns.py``. Formulas and thresholds: ``docs/analysis/communication.md``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common import intervals as iv
from hermes.analyzers.common.names import is_
from hermes.analyzers.common.opinfo import (
    ArgKeys,
    arg_numbers,
    arg_values,
    base_frame,
    clip_to_windows,
    profile_of,
    union_time,
)
from hermes.analyzers.common.steps import step_windows
from hermes.analyzers.communication.causes import (
    comm_finding,
    packet_findings,
    small_traffic_share,
    transmission_costs,
)
from hermes.analyzers.communication.columns import (
    PRE_PARTS,
    before_arrival,
    bus_factor,
    comm_matrix,
    input_bytes,
    latency_bound,
    world_size,
)
from hermes.analyzers.engine.base import AnalyzerResult, RankContext, register
from hermes.findings import MIN_SHARE
from hermes.trace.schema import COMPUTE_KINDS

#: A collective starting within this time of the previous one's end was queued behind it
#: (launch latencies of a few microseconds separate back-to-back collectives).
QUEUED_TOL_NS = 10_000
#: Saturation sizes when the device profile has none (GPUs): NCCL's bus bandwidth over NVLink
#: plateaus only for messages in the tens of MB, like Ascend SDMA (16 MB); over InfiniBand/RoCE
#: from about 1 MB, like Ascend RDMA. Hermes's choice, by analogy with msprof-analyze's figures.
GPU_SMALL_PACKET_B = {"intra": 16 * 2 ** 20, "inter": 2 ** 20}
INTER_LINKS = ("rdma", "roce", "ib", "infiniband", "net", "socket", "ethernet")
P2P = re.compile(r"send|recv|p2p", re.I)
#: the args that name a point-to-point transfer's peer rank
PEER_KEYS = ("peer", "peer_rank", "Dst Rank", "dst_rank", "dst")
COLUMNS = ["rank", "group", "seq", "op", "bytes", "arrive_ns", "end_ns", "dur_ns", "wait_ns",
           "transit_ns", "sync_ns", "idle_ns", "link", "peer", "bw_GBps", "busbw_GBps",
           "expected_GBps", "prev_end_ns",
           "overlap_compute_ns", "small", "misaligned", "latency_bound", *(
               f"pre_{k}_ns" for k in PRE_PARTS)]


def _busiest_transport(args: pd.Series, index: ArgKeys) -> pd.Series:
    """The transport that carried most transit time (Ascend ``transit_ns_by_transport``:
    HCCS / PCIE / RDMA; SDMA is the DMA engine behind HCCS and PCIe, so it is not a link);
    ``index``: the ``ArgKeys`` of ``args``."""
    out = pd.Series(np.nan, index=args.index, dtype=object)
    m = index.s.index[index.carries("transit_ns_by_transport")]
    for i, raw in args[m].items():
        try:
            by = json.loads(raw).get("transit_ns_by_transport") or {}
        except (ValueError, AttributeError):
            continue
        links = {k: float(v or 0) for k, v in by.items() if k.upper() != "SDMA"}
        if links and max(links.values()) > 0:
            out[i] = max(links, key=links.get)
    return out


def by_transport(index: ArgKeys) -> dict[str, dict[str, float]]:
    """Bytes, transit time and bandwidth per link type over the rank's collectives (``index``:
    the ``ArgKeys`` of their args), from the importer's ``transit_bytes`` /
    ``transit_ns_by_transport`` (Ascend communication.json: HCCS, PCIE, RDMA, SDMA):
    ``{transport: {"bytes", "transit_ns", "GBps"}}`` with GBps = bytes / transit time (what
    msprof-analyze's totals compute); empty without them."""
    has = index.carries("transit_ns_by_transport")
    rows: list[dict[str, Any]] = []
    for raw in index.s[has]:  # one per collective that carries per-transport figures
        try:
            a = json.loads(raw)
        except ValueError:
            continue
        tb, tn = a.get("transit_bytes") or {}, a.get("transit_ns_by_transport") or {}
        rows += [{"link": k, "bytes": float(tb.get(k) or 0), "transit_ns": float(v or 0)}
                 for k, v in tn.items()]
    if not rows:
        return {}
    g = pd.DataFrame(rows).groupby("link")[["bytes", "transit_ns"]].sum()
    return {str(k): {"bytes": float(r["bytes"]), "transit_ns": float(r["transit_ns"]),
                     "GBps": float(r["bytes"] / r["transit_ns"]) if r["transit_ns"] > 0 else 0.0}
            for k, r in g.iterrows()}


def _link_class(link: pd.Series) -> pd.Series:
    """``inter`` where the link's name (lowercased) contains one of ``INTER_LINKS``, else
    ``intra``; each distinct name searched once."""
    codes, uniq = pd.factorize(link.astype(str))
    inter = np.array([_INTER.search(str(u).lower()) is not None for u in uniq] + [False], bool)
    return pd.Series(np.where(inter[codes], "inter", "intra"), index=link.index)


_INTER = re.compile("|".join(INTER_LINKS))


def collective_table(ctx: RankContext, windows: pd.DataFrame,
                     comp: iv.Union | None = None) -> pd.DataFrame:
    """One row per collective of the rank (columns ``COLUMNS``; times on rank 0's clock);
    ``comp``: the union of the rank's kernels (``_compute_union``) when the caller has it."""
    return _table(ctx, windows, comp)[0]


def _table(ctx: RankContext, windows: pd.DataFrame, comp: iv.Union | None = None
           ) -> tuple[pd.DataFrame, ArgKeys | None]:
    """``collective_table`` and an ``ArgKeys`` of the collectives' args (None without any)."""
    ev = ctx.events
    if len(ev) == 0:
        return pd.DataFrame(columns=COLUMNS), None
    c = base_frame(ev, (ev["kind"] == "collective").to_numpy(), text_args=True)
    if len(c) == 0:
        return pd.DataFrame(columns=COLUMNS), None
    offset = int((getattr(ctx.meta, "clock_offsets_ns", {}) or {}).get(int(ctx.rank), 0))
    # pyarrow strings (what ArgKeys reads), not one Python string per collective
    args = c["args"].astype("string[pyarrow]")
    prof = profile_of(ctx)
    dev = {**(prof.fields if prof is not None else {}), **ctx.device}
    # columns built as Series / arrays on the collectives' index, the frame made once
    idx = c.index
    dur = c["dur_ns"]
    ix = ArgKeys(args)  # one scan for which keys the rows carry, shared by the lookups
    wait = arg_numbers(args, "wait_ns", index=ix).clip(lower=0).fillna(0).clip(upper=dur)
    transit = arg_numbers(args, "transit_ns", index=ix)
    transit = transit.where(transit.notna(), dur - wait)
    # what an importer recorded of the rest (Ascend communication.json): synchronization (the
    # part of the wait before the first transfer) and idle time inside the collective
    sync = arg_numbers(args, "sync_ns", index=ix).clip(lower=0)
    idle = arg_numbers(args, "idle_ns", index=ix).clip(lower=0)
    link = arg_values(args, "link", "link_type", "transport", index=ix)
    link = link.where(link.notna() & (link != ""), _busiest_transport(args, ix))
    n = arg_numbers(args, "Group size", "group_size", index=ix)
    world = world_size(ctx.meta)
    if world >= 2:  # a group has at most every rank of the job
        n = n.fillna(float(world))
    # without a named link: a group larger than one node crosses the inter-node network (the
    # slower link, so its expected bandwidth is the lower one)
    per_node = float(dev.get("devices_per_node") or 8)
    unnamed = ~(link.notna() & (link != ""))
    default = np.where(n.fillna(0).to_numpy() > per_node,
                       str(dev.get("inter_node_link") or "inter"),
                       str(dev.get("intra_node_link") or "intra"))
    link = link.where(~unnamed, pd.Series(default, index=idx)).astype(str).str.lower()
    op = c["name"].astype(str)
    nbytes = c["coll_bytes"].where(c["coll_bytes"].notna(), c["bytes"])
    if nbytes.isna().any():  # a ProcessGroup range (gloo:all_reduce): its input tensor's size
        nbytes = nbytes.fillna(input_bytes(args[nbytes.isna()]))
    cls = _link_class(link)
    with np.errstate(divide="ignore", invalid="ignore"):
        bw = nbytes / (transit.where(transit > 0) * 1e-9) / 1e9
    exp = np.where(cls == "inter", float(dev.get("inter_node_bw_Bps") or np.nan),
                   float(dev.get("intra_node_bw_Bps") or np.nan)) / 1e9
    small_b = np.where(cls == "inter",
                       float(dev.get("rdma_small_packet_B") or GPU_SMALL_PACKET_B["inter"]),
                       float(dev.get("sdma_small_packet_B") or GPU_SMALL_PACKET_B["intra"]))
    # byte alignment is a property of a link that has one (HCCS: 512 B); a device whose
    # profile names none (GPUs, a CPU-only job) has no misaligned messages
    align = int(dev.get("hccs_alignment_B") or 0)
    bus = bus_factor(op, n)
    alpha = np.where(cls == "inter", float(dev.get("inter_node_latency_s") or np.nan),
                     float(dev.get("intra_node_latency_s") or np.nan))
    lat_bound = latency_bound(op, n, nbytes, bus, exp, alpha)
    t = pd.DataFrame({
        "rank": pd.Series(int(ctx.rank), index=idx),
        "group": c["coll_group"].astype(object).where(c["coll_group"].notna(), "default"),
        "seq": c["coll_seq"], "op": op, "bytes": nbytes, "arrive_ns": c["ts_ns"] + offset,
        "end_ns": c["end_ns"] + offset, "dur_ns": dur, "wait_ns": wait, "transit_ns": transit,
        "sync_ns": sync, "idle_ns": idle,
        "link": link, "peer": arg_numbers(args, *PEER_KEYS, index=ix),
        "bw_GBps": bw, "busbw_GBps": bw * bus, "expected_GBps": exp,
        "small": (nbytes > 0) & ((nbytes < small_b) | lat_bound),
        "misaligned": (nbytes > 0) & (nbytes.fillna(0) % max(align, 1) != 0) & (align > 0),
        "latency_bound": (nbytes > 0) & lat_bound}, index=idx)
    t["peer"] = _p2p_peers(ev, c, t["peer"])
    t = t.sort_values("arrive_ns", kind="stable")
    # previous sync point: end of the previous collective of the same group on this rank, else
    # the start of the step (both on rank 0's clock)
    prev = t.groupby("group", sort=False)["end_ns"].shift(1)
    ws = windows["start_ns"].to_numpy(np.int64) + offset if len(windows) else np.zeros(1, np.int64)
    k = np.clip(np.searchsorted(ws, t["arrive_ns"].to_numpy(np.int64), side="right") - 1, 0, None)
    t["prev_end_ns"] = prev.fillna(pd.Series(ws[k], index=t.index)).astype("int64")
    t["overlap_compute_ns"] = _compute_overlap(ev, t, offset, comp)
    first = ws[k] - offset if len(windows) else np.full(len(t), int(ev["ts_ns"].min()))
    for part, v in before_arrival(ev, t, first, offset, comp).items():
        t[f"pre_{part}_ns"] = v
    return t[COLUMNS].reset_index(drop=True), ix


#: the ProcessGroup ops a Gloo send/recv range runs inside; their third input is the peer
P2P_PARENTS = ("c10d::send", "c10d::recv_")


def peers(ev: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """The peer rank of the point-to-point collectives at positions ``rows`` of ``ev`` (NaN:
    not a send/recv, or its peer unknown), as :func:`collective_table` reads it (the args'
    peer, else the enclosing ProcessGroup op's): for the what-if replay's step graphs."""
    rows = np.asarray(rows, np.int64)
    out = np.full(rows.size, np.nan)
    if rows.size == 0:
        return out
    mask = np.zeros(len(ev), bool)
    mask[rows] = True
    c = base_frame(ev, mask, text_args=True)
    p2p = c["name"].astype(str).str.contains(P2P).to_numpy(bool)
    if not p2p.any():
        return out
    peer = arg_numbers(c["args"].astype("string[pyarrow]"), *PEER_KEYS) \
        if "args" in c.columns else pd.Series(np.nan, index=c.index)
    got = _p2p_peers(ev, c, peer.where(p2p)).to_numpy(np.float64)
    return got[np.searchsorted(np.flatnonzero(mask), rows)]


def _p2p_peers(ev: pd.DataFrame, c: pd.DataFrame, peer: pd.Series) -> pd.Series:
    """The peer rank of each point-to-point collective of ``c`` (NaN: unknown): the args' own
    peer, else the enclosing ``c10d::send`` / ``c10d::recv_`` op's third input (its
    ``Concrete Inputs``: tensors, process group, peer, tag) on the same thread. That peer is
    the rank within the op's process group: the cluster keeps a pairing only where the two
    ranks' counts agree (:func:`~hermes.analyzers.communication.cluster.sync_table`)."""
    peer = peer.reindex(c.index)
    p2p = c["name"].astype(str).str.contains(P2P) & peer.isna()
    if not p2p.any() or "lane" not in c.columns:
        return peer
    par = is_(ev, "name", *P2P_PARENTS) & (ev["kind"] == "host_op").to_numpy()
    if not par.any():
        return peer
    pf = base_frame(ev, par)
    vals = []
    for a in pf["args"].tolist():  # (one per send/recv call: few next to the events)
        try:
            v = json.loads(a).get("Concrete Inputs") if isinstance(a, str) else None
            vals.append(float(int(v[2])) if isinstance(v, list) and len(v) > 2 else np.nan)
        except (ValueError, TypeError, AttributeError):
            vals.append(np.nan)
    pf = pd.DataFrame({"lane": pf["lane"].astype(str).to_numpy(), "ts": pf["ts_ns"].to_numpy(),
                       "end": pf["end_ns"].to_numpy(), "peer": vals}).sort_values("ts")
    kids = pd.DataFrame({"lane": c.loc[p2p, "lane"].astype(str).to_numpy(),
                         "ts": c.loc[p2p, "ts_ns"].to_numpy(), "row": c.index[p2p]}
                        ).sort_values("ts")
    got = pd.merge_asof(kids, pf, on="ts", by="lane", direction="backward")
    inside = got["end"].to_numpy(np.float64) >= got["ts"].to_numpy(np.float64)
    found = pd.Series(np.where(inside, got["peer"].to_numpy(np.float64), np.nan),
                      index=got["row"].to_numpy())
    return peer.fillna(found.reindex(peer.index))


def _queued(t: pd.DataFrame) -> np.ndarray:
    """Collectives that started the moment the rank's previous collective ended (within
    QUEUED_TOL_NS): they were ready earlier and queued behind communication, so issued earlier
    they could have run under the computation that produced them. The first collective of a
    back-to-back run started when its input was ready and is not counted."""
    if len(t) == 0:
        return np.zeros(0, bool)
    order = np.argsort(t["arrive_ns"].to_numpy(np.int64), kind="stable")
    a = t["arrive_ns"].to_numpy(np.int64)[order]
    e = t["end_ns"].to_numpy(np.int64)[order]
    prev_end = np.concatenate([a[:1], np.maximum.accumulate(e)[:-1]])
    has_prev = np.arange(len(a)) > 0
    q = np.zeros(len(t), bool)
    q[order] = has_prev & (a >= prev_end) & (a - prev_end <= QUEUED_TOL_NS)
    return q


def _compute_union(ev: pd.DataFrame) -> iv.Union:
    """The device's computation: kernels, copies and memsets (the breakdown's computation)."""
    m = is_(ev, "kind", *COMPUTE_KINDS)
    ts = ev["ts_ns"].to_numpy(np.int64)[m]
    return iv.union(ts, ts + ev["dur_ns"].to_numpy(np.int64)[m])


def _compute_overlap(ev: pd.DataFrame, t: pd.DataFrame, offset: int,
                     comp: iv.Union | None = None) -> np.ndarray:
    """Computation time overlapping each collective's transmission (its last transit_ns)."""
    end = t["end_ns"].to_numpy(np.int64) - offset
    start = end - t["transit_ns"].fillna(t["dur_ns"]).to_numpy(np.float64).astype(np.int64)
    return iv.overlap_per_interval(start, end, _compute_union(ev) if comp is None else comp)


def _span_share(sub: pd.DataFrame, windows: pd.DataFrame, offset: int, step_total: int) -> float:
    if len(sub) == 0 or not step_total:
        return 0.0
    return union_time(sub["arrive_ns"].to_numpy(np.int64) - offset,
                      sub["end_ns"].to_numpy(np.int64) - offset, windows) / step_total


@register("communication", scope="rank")
def communication(ctx: RankContext) -> AnalyzerResult:
    """Per-collective table; transmission causes; overlap figures for the cluster analyzers."""
    ev = ctx.events
    windows = step_windows(ev)
    step_total = int(windows["dur_ns"].sum()) if len(windows) else 0
    offset = int((getattr(ctx.meta, "clock_offsets_ns", {}) or {}).get(int(ctx.rank), 0))
    comp = _compute_union(ev) if len(ev) else iv.EMPTY
    t, ix = _table(ctx, windows, comp)
    res = AnalyzerResult("communication", tables={"collectives": t})
    ranks = (int(ctx.rank),)
    # overlap figures (ns, within the steps): communication, computation, pipeline bubbles
    if len(t):
        cs, ce = clip_to_windows(t["arrive_ns"].to_numpy(np.int64) - offset,
                                 t["end_ns"].to_numpy(np.int64) - offset, windows)
        comm = iv.union(cs, ce)
        p2p = t["op"].str.contains(P2P).to_numpy()
        bubble = iv.total(iv.subtract(iv.union(cs[p2p], ce[p2p]), comp))
        queued = _queued(t) & ~p2p
        queued_only = iv.total(iv.subtract(iv.union(cs[queued], ce[queued]), comp))
    else:
        comm, bubble, queued_only = iv.EMPTY, 0, 0
    if len(windows):
        comp = iv.union(*clip_to_windows(comp[0], comp[1], windows))
    comm_only = iv.total(iv.subtract(comm, comp))
    comm_ns = iv.total(comm)  # what the rank's collectives cost at most: the time they run
    comp_only = iv.total(iv.subtract(comp, comm))
    explicit = (t["wait_ns"] > 0).any() if len(t) else False
    res.metrics.update({
        "collectives": int(len(t)), "step_total_ns": step_total,
        "comm_ns": iv.total(comm), "comm_only_ns": comm_only, "comp_only_ns": comp_only,
        "overlapped_ns": iv.total(comm) - comm_only, "bubble_ns": int(bubble),
        "queued_comm_only_ns": int(queued_only),
        "bubble_pct": 100.0 * bubble / step_total if step_total else 0.0,
        "wait_ns": int(t["wait_ns"].sum()) if len(t) else 0,
        "sync_ns": int(t["sync_ns"].fillna(0).sum()) if len(t) else 0,
        "idle_ns": int(t["idle_ns"].fillna(0).sum()) if len(t) else 0,
        "by_transport": by_transport(ix) if ix is not None else {},
        "explicit_wait": bool(explicit),
        "bytes": int(t["bytes"].fillna(0).sum()) if len(t) else 0,
    })
    res.tables["matrix"] = comm_matrix(t)
    if len(t) == 0 or not step_total:
        return res
    if explicit:  # the importer split wait from transit (Ascend communication.json)
        share = float(t["wait_ns"].sum()) / step_total
        if share >= MIN_SHARE:
            res.findings.append(comm_finding("synchronization_wait", share, t[t["wait_ns"] > 0],
                                         ranks, wait_ns=int(t["wait_ns"].sum()),
                                         sync_ns=res.metrics["sync_ns"],
                                         idle_ns=res.metrics["idle_ns"],
                                         source="importer wait figures"))
    # small for a link whose bandwidth is known: what they lose is measured against it (an
    # unknown device -- a CPU-only Gloo job -- has no link to fall short of)
    res.metrics["small_packet_traffic_share"] = small_traffic_share(t)
    # small and misaligned messages lose transmission time: only where the trace splits it
    # from waiting, or where no other rank is waited for (a one-rank job); otherwise
    # communication_cluster judges them on the transfer after the last arrival
    if explicit or world_size(ctx.meta) < 2:
        res.findings += packet_findings(t, {int(ctx.rank): step_total}, {int(ctx.rank): comm_ns})
    # bandwidth and retransmission need transmission apart from waiting: only where the trace
    # says so here; otherwise communication_cluster derives it from the other ranks' arrivals
    if explicit:
        for cause, cost in transmission_costs(t).items():
            # collectives that overlap each other (buckets in flight together) share time: they
            # cost at most the time communication runs
            share = min(float(cost.sum()), comm_ns) / step_total
            if share >= MIN_SHARE:
                res.findings.append(comm_finding(cause, share, t[cost > 0], ranks,
                                             cost_ns=int(cost.sum())))
    return res

