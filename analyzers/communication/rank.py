"""Communication analyzers: ``communication`` (rank) and ``communication_cluster`` (cluster).

A collective costs synchronization (waiting for the last rank to arrive) plus transmission.
``communication(ctx) -> AnalyzerResult`` builds the per-collective table of one rank and judges
transmission: small packets, byte misalignment, retransmission (tail outliers), bandwidth
contention (low bandwidth while computation overlaps) and network configuration (low bandwidth
with nothing overlapping). ``communication_cluster(ctx)`` matches the same collective across ranks
by ``(coll_group, coll_seq)`` and measures synchronization: T_wait = sum_i(A_max - A_i) over the
ranks' arrival times A_i, R_wait = 1 - T_avg/T_max with T_i = A_i - (the moment the previous
collective of the group released every rank), the late rank and the communication matrix.
Formulas and thresholds: ``docs/analysis/communication.md``.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
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
    peaks,
    profile_of,
    top_ops,
    union_time,
)
from hermes.analyzers.common.steps import step_windows
from hermes.analyzers.communication.columns import (
    MATRIX_COLUMNS,
    PRE_PARTS,
    before_arrival,
    bus_factor,
    comm_matrix,
    input_bytes,
    latency_bound,
    world_size,
)
from hermes.analyzers.engine.base import AnalyzerResult, RankContext, register
from hermes.findings import MIN_SHARE, Finding
from hermes.trace.schema import COMPUTE_KINDS

#: Bandwidth below this fraction of the link's expected bandwidth is "low" (msprof-analyze's
#: SDMA rule: below 0.8 x 18 GB/s is contention).
LOW_BW_RATIO = 0.8
#: A collective whose computation overlap covers at least this share of its transmission runs
#: "while computation runs" (contention) rather than alone (network configuration).
OVERLAP_MIN = 0.5
#: The link's uncontended bandwidth is the bus bandwidth this quantile of its large collectives
#: reaches: the best one, since no transfer runs faster than its link allows -- a link that
#: reaches its bandwidth once is not misconfigured, and its slower transfers shared it.
LINK_REF_QUANTILE = 1.0
#: RDMA retransmission: transmission >= 4 s (Hermes, msprof-analyze), and a tail outlier: at
#: least 3x the typical transmission of the same collective.
RETRANS_MIN_NS = 4_000_000_000
RETRANS_TAIL = 3.0
#: Small packets must carry more than 20 % of the communication time to matter (msprof-analyze).
SMALL_TRAFFIC_MIN = 0.2
ALIGN_B = 512  # HCCS byte alignment (Hermes, msprof-analyze)
#: A collective starting within this time of the previous one's end was queued behind it
#: (launch latencies of a few microseconds separate back-to-back collectives).
QUEUED_TOL_NS = 10_000
#: Saturation sizes when the device profile has none (GPUs): NCCL's bus bandwidth over NVLink
#: plateaus only for messages in the tens of MB, like Ascend SDMA (16 MB); over InfiniBand/RoCE
#: from about 1 MB, like Ascend RDMA. Hermes's choice, by analogy with msprof-analyze's figures.
GPU_SMALL_PACKET_B = {"intra": 16 * 2 ** 20, "inter": 2 ** 20}
INTER_LINKS = ("rdma", "roce", "ib", "infiniband", "net", "socket", "ethernet")
P2P = re.compile(r"send|recv|p2p", re.I)
COLUMNS = ["rank", "group", "seq", "op", "bytes", "arrive_ns", "end_ns", "dur_ns", "wait_ns",
           "transit_ns", "sync_ns", "idle_ns", "link", "peer", "bw_GBps", "busbw_GBps",
           "expected_GBps", "prev_end_ns",
           "overlap_compute_ns", "small", "misaligned", "latency_bound", *(
               f"pre_{k}_ns" for k in PRE_PARTS)]


def _busiest_transport(args: pd.Series, index: ArgKeys | None = None) -> pd.Series:
    """The transport that carried most transit time (Ascend ``transit_ns_by_transport``:
    HCCS / PCIE / RDMA; SDMA is the DMA engine behind HCCS and PCIe, so it is not a link)."""
    out = pd.Series(np.nan, index=args.index, dtype=object)
    if index is not None:  # the same rows, scanned as pyarrow strings
        s = index.s
        m = s.index[s.str.contains("transit_ns_by_transport", regex=False).to_numpy(bool)]
    else:
        m = args.notna() & args.astype(str).str.contains("transit_ns_by_transport", regex=False)
    for i, raw in args[m].items():
        try:
            by = json.loads(raw).get("transit_ns_by_transport") or {}
        except (ValueError, AttributeError):
            continue
        links = {k: float(v or 0) for k, v in by.items() if k.upper() != "SDMA"}
        if links and max(links.values()) > 0:
            out[i] = max(links, key=links.get)
    return out


def by_transport(ctx: RankContext, t: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Bytes, transit time and bandwidth per link type over the rank's collectives, from the
    importer's ``transit_bytes`` / ``transit_ns_by_transport`` (Ascend communication.json:
    HCCS, PCIE, RDMA, SDMA): ``{transport: {"bytes", "transit_ns", "GBps"}}`` with GBps =
    bytes / transit time (what msprof-analyze's totals compute); empty without them."""
    ev = ctx.events
    coll = (ev["kind"] == "collective").to_numpy() if len(ev) else np.zeros(0, bool)
    if not len(t) or not coll.any():
        return {}
    args = base_frame(ev, coll, text_args=True)["args"]
    has = args.notna() & args.astype(str).str.contains("transit_ns_by_transport", regex=False)
    rows: list[dict[str, Any]] = []
    for raw in args[has]:  # one per collective that carries per-transport figures
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
    ev = ctx.events
    if len(ev) == 0:
        return pd.DataFrame(columns=COLUMNS)
    c = base_frame(ev, (ev["kind"] == "collective").to_numpy(), text_args=True)
    if len(c) == 0:
        return pd.DataFrame(columns=COLUMNS)
    offset = int((getattr(ctx.meta, "clock_offsets_ns", {}) or {}).get(int(ctx.rank), 0))
    # pyarrow strings (what ArgKeys reads), not one Python string per collective
    args = c["args"].astype("string[pyarrow]")
    pk, prof = peaks(ctx), profile_of(ctx)
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
        "link": link, "peer": arg_numbers(args, "peer", "peer_rank", "Dst Rank", "dst_rank", "dst",
                                    index=ix),
        "bw_GBps": bw, "busbw_GBps": bw * bus, "expected_GBps": exp,
        "small": (nbytes > 0) & ((nbytes < small_b) | lat_bound),
        "misaligned": (nbytes > 0) & (nbytes.fillna(0) % max(align, 1) != 0) & (align > 0),
        "latency_bound": (nbytes > 0) & lat_bound}, index=idx)
    # previous sync point: end of the previous collective of the same group on this rank, else
    # the start of the step (both on rank 0's clock)
    t = t.sort_values("arrive_ns", kind="stable")
    prev = t.groupby("group", sort=False)["end_ns"].shift(1)
    ws = windows["start_ns"].to_numpy(np.int64) + offset if len(windows) else np.zeros(1, np.int64)
    k = np.clip(np.searchsorted(ws, t["arrive_ns"].to_numpy(np.int64), side="right") - 1, 0, None)
    t["prev_end_ns"] = prev.fillna(pd.Series(ws[k], index=t.index)).astype("int64")
    t["overlap_compute_ns"] = _compute_overlap(ev, t, offset, comp)
    first = ws[k] - offset if len(windows) else np.full(len(t), int(ev["ts_ns"].min()))
    for part, v in before_arrival(ev, t, first, offset).items():
        t[f"pre_{part}_ns"] = v
    del pk
    return t[COLUMNS].reset_index(drop=True)


def _shortfall(t: pd.DataFrame, ref_GBps: pd.Series) -> pd.Series:
    """Transit time beyond what the bytes need at ``ref_GBps`` (bus bandwidth): transit x
    (1 - busbw / ref), within [0, transit]; the whole transit where the bandwidth is unknown."""
    tr = t["transit_ns"].astype("float64").fillna(0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = (1.0 - t["busbw_GBps"].astype("float64") / ref_GBps.astype("float64")).clip(0, 1)
    return (tr * frac.fillna(1.0)).clip(lower=0)


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


def _ops(sub: pd.DataFrame) -> list[dict[str, Any]]:
    return top_ops(sub.rename(columns={"op": "name"}))


def transmission_costs(t: pd.DataFrame) -> dict[str, pd.Series]:
    """Per collective, the time (ns) each transmission cause costs (0 where it does not apply).

    ``t`` needs transit_ns, bytes, busbw_GBps, expected_GBps, overlap_compute_ns, small,
    misaligned, group, op. Low bandwidth = bus bandwidth < LOW_BW_RATIO x expected on a large,
    aligned message; it costs transit x (1 - busbw / expected): all of it network configuration
    when no computation overlaps; when computation overlaps, the part the link loses even
    uncontended (its median bandwidth alone, if < 0.8 x expected) is network configuration and
    the rest contention."""
    z = pd.Series(0.0, index=t.index)
    if len(t) == 0:
        return {k: z for k in ("rdma_retransmission", "bandwidth_contention",
                               "network_configuration")}
    tr = t["transit_ns"].astype("float64").fillna(0.0)
    # retransmission: a tail outlier >= 4 s; reference = median transit of the same collective
    # below 4 s, else the time the message needs at the expected bandwidth
    normal = tr.where(tr < RETRANS_MIN_NS)
    ref_tr = normal.groupby([t["group"], t["op"]]).transform("median")
    ideal = (t["bytes"].astype("float64") / (t["expected_GBps"] * 1e9) * 1e9)
    ref_tr = ref_tr.fillna(ideal).fillna(0.0)
    retrans = (tr >= RETRANS_MIN_NS) & (tr >= RETRANS_TAIL * ref_tr)
    busbw, exp = t["busbw_GBps"].astype("float64"), t["expected_GBps"].astype("float64")
    # small and misaligned messages are slow for their own reason (their own findings)
    big = ~retrans & ~t["small"].astype(bool) & ~t["misaligned"].astype(bool) & (tr > 0) & \
        busbw.notna() & exp.notna()
    overlapped = t["overlap_compute_ns"].astype("float64") >= OVERLAP_MIN * tr
    # the link's uncontended bandwidth: what its large collectives that ran with no computation
    # overlapping demonstrably reach (the LINK_REF_QUANTILE of their bus bandwidth, per
    # expected bandwidth, i.e. per link class); the expected bandwidth when none ran alone
    alone = big & ~overlapped
    ref = exp.map(busbw[alone].groupby(exp[alone]).quantile(LINK_REF_QUANTILE)).fillna(exp)
    ref = np.minimum(ref, exp)
    low = big & (busbw < LOW_BW_RATIO * exp)
    excess = (tr * (1.0 - busbw / exp)).where(low, 0.0).fillna(0.0)
    # a slow link itself (uncontended bandwidth < 0.8 x expected) is network configuration;
    # a collective slower than its link runs while something else uses it: contention, when
    # computation overlaps it or when the link demonstrably runs at its bandwidth otherwise
    link_ok = ref >= LOW_BW_RATIO * exp
    contended = overlapped | link_ok
    net_part = (tr * (1.0 - ref / exp)).where(~link_ok, 0.0).fillna(0.0)
    net = excess.where(~contended, np.minimum(excess, net_part))
    return {"rdma_retransmission": (tr - ref_tr).where(retrans, 0.0).clip(lower=0),
            "bandwidth_contention": (excess - net).where(contended, 0.0).clip(lower=0),
            "network_configuration": net}


_TEXT = {
    "small_packet": "small messages below the link's saturation size",
    "byte_alignment": "message sizes not a multiple of 512 B",
    "rdma_retransmission": "transmissions of 4 s or more (tail outliers): RDMA retransmission",
    "bandwidth_contention": "bandwidth below 0.8x the link's while computation overlaps",
    "network_configuration": "bandwidth below 0.8x the link's with nothing overlapping",
    "synchronization_wait": "waiting for other ranks to reach the collective",
}


#: Collective libraries by the prefix PyTorch gives their ProcessGroup ranges (``gloo:all_reduce``).
BACKEND_PREFIX = re.compile(r"^(gloo|nccl|mpi|ucc|hccl|xccl):", re.I)


def backend_of(ops: pd.Series) -> str | None:
    """The collective library every one of ``ops`` names (``gloo:all_reduce`` -> ``gloo``),
    None when they name none or several."""
    found = {m.group(1).lower() if (m := BACKEND_PREFIX.match(str(o))) else None
             for o in pd.unique(ops.astype(str))}
    return found.pop() if len(found) == 1 and None not in found else None


def comm_finding(cause: str, share: float, sub: pd.DataFrame, ranks: tuple[int, ...],
             **evidence: Any) -> Finding:
    share = float(min(1.0, max(0.0, share)))
    backend = backend_of(sub["op"]) if len(sub) else None
    text = _TEXT[cause]
    if backend == "gloo" and cause in ("network_configuration", "bandwidth_contention"):
        # Gloo moves device tensors through host memory and reduces them on the CPU
        text = ("Gloo collectives (tensors staged through host memory, reduced on the CPU) "
                "at a bus bandwidth far below the device link's")
    extra: dict[str, Any] = {"backend": backend} if backend else {}
    detail = ""
    if len(sub) and sub["busbw_GBps"].notna().any():
        extra["busbw_GBps_median"] = round(float(sub["busbw_GBps"].median()), 3)
        extra["expected_GBps"] = round(float(sub["expected_GBps"].median()), 3)
        if cause in ("network_configuration", "bandwidth_contention"):
            # the collective that costs most, its size and achieved vs expected bandwidth
            top = sub.loc[sub["transit_ns"].astype("float64").fillna(0).idxmax()]
            detail = (f" (most time: {top['op']} of {float(top['bytes']) / 1e6:.1f} MB at "
                      f"{extra['busbw_GBps_median']:.3g} GB/s bus bandwidth, median; the "
                      f"link's {extra['expected_GBps']:.3g} GB/s)")
    return Finding("communication", cause, share,
                   f"{text}: {len(sub)} collectives, {100 * share:.1f}% of step time{detail}",
                   evidence={"collectives": int(len(sub)), "top_ops": _ops(sub), **extra,
                             **evidence},
                   ranks=ranks)


@register("communication", scope="rank")
def communication(ctx: RankContext) -> AnalyzerResult:
    """Per-collective table; transmission causes; overlap figures for the cluster analyzers."""
    ev = ctx.events
    windows = step_windows(ev)
    step_total = int(windows["dur_ns"].sum()) if len(windows) else 0
    offset = int((getattr(ctx.meta, "clock_offsets_ns", {}) or {}).get(int(ctx.rank), 0))
    comp = _compute_union(ev) if len(ev) else iv.EMPTY
    t = collective_table(ctx, windows, comp)
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
    tr = t["transit_ns"].astype("float64") if len(t) else pd.Series(dtype="float64")
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
        "by_transport": by_transport(ctx, t),
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
    total_tr = float(tr.sum())
    # small for a link whose bandwidth is known: what they lose is measured against it (an
    # unknown device -- a CPU-only Gloo job -- has no link to fall short of)
    small = t["small"].astype(bool) & t["expected_GBps"].notna()
    small_traffic = float(tr[small].sum()) / total_tr if total_tr else 0.0
    res.metrics["small_packet_traffic_share"] = small_traffic
    if small_traffic > SMALL_TRAFFIC_MIN:
        # what small messages cost: the time beyond what they would take at the link's bandwidth
        cost = _shortfall(t[small], t.loc[small, "expected_GBps"])
        share = min(float(cost.sum()), comm_ns) / step_total  # (concurrent ones: once)
        if share >= MIN_SHARE:
            lat = int((t["latency_bound"].astype(bool) & small).sum())
            f = comm_finding("small_packet", share, t[small], ranks, cost_ns=int(cost.sum()),
                         traffic_share=round(small_traffic, 4),
                         mean_bytes=float(t.loc[small, "bytes"].mean()),
                         **({"latency_bound": lat} if lat else {}))
            if lat:  # small for their group: the algorithm's per-step latency outweighs bytes
                f = replace(f, summary=f.summary.replace(
                    "saturation size", "saturation size or latency-bound for their group "
                    f"({lat}: steps x link latency >= bytes / bandwidth)", 1))
            res.findings.append(f)
    mis = t["misaligned"].astype(bool)
    if mis.any():
        # against what aligned large messages reach on the same rank (else the link's bandwidth)
        ok = ~mis & ~small & t["busbw_GBps"].notna()
        ref = t["expected_GBps"].astype("float64")
        if ok.any():
            ref = np.minimum(ref, float(t.loc[ok, "busbw_GBps"].median()))
        cost = _shortfall(t[mis], ref[mis])
        share = min(float(cost.sum()), comm_ns) / step_total  # (concurrent ones: once)
        if share >= MIN_SHARE:
            res.findings.append(comm_finding(
                "byte_alignment", share, t[mis], ranks, alignment_B=ALIGN_B,
                cost_ns=int(cost.sum()),
                sizes_B=sorted({int(b) for b in t.loc[mis, "bytes"]})[:10]))
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

