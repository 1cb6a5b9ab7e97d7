"""The transmission causes of a table of collectives (``communication`` at rank scope,
``communication_cluster`` on the transfer after the last arrival): retransmission, bandwidth
contention, network configuration, small packets and byte misalignment, their costs and
findings. Thresholds and formulas: ``docs/analysis/communication.md``."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common.opinfo import top_ops
from hermes.findings import MIN_SHARE, Finding

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


def shortfall(transit: np.ndarray, busbw: np.ndarray, ref_GBps: np.ndarray) -> np.ndarray:
    """Transit time beyond what the bytes need at ``ref_GBps`` (bus bandwidth): transit x
    (1 - busbw / ref), within [0, transit]; the whole transit where the bandwidth is unknown
    (``transit``: ns, NaN read as 0)."""
    tr = np.nan_to_num(transit, nan=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.clip(1.0 - busbw / ref_GBps, 0.0, 1.0)
    return np.maximum(tr * np.where(np.isnan(frac), 1.0, frac), 0.0)


def _rank_sums(codes: np.ndarray, **columns: np.ndarray) -> dict[str, np.ndarray]:
    """Each column's sum per code (0 .. the largest code), pandas' groupby sum."""
    g = pd.DataFrame(columns).groupby(codes, sort=True).sum()
    return {k: g[k].to_numpy() for k in columns}


def _group_median(codes: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """The median of ``values`` (NaN left out) per group code in ``range(groups)``, NaN for a
    group with none (pandas' groupby median: the mean of the two middle values of an even
    count)."""
    ok = ~np.isnan(values)
    c, v = codes[ok], values[ok]
    order = np.lexsort((v, c))
    c, v = c[order], v[order]
    counts = np.bincount(c, minlength=groups)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    out = np.full(groups, np.nan)
    has = counts > 0
    lo, hi = starts[has] + (counts[has] - 1) // 2, starts[has] + counts[has] // 2
    out[has] = (v[lo] + v[hi]) / 2
    return out


def ops_of(sub: pd.DataFrame) -> list[dict[str, Any]]:
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


def small_traffic_share(t: pd.DataFrame) -> float:
    """Share of the collectives' transit time in small messages (for a link of known
    bandwidth)."""
    tr = t["transit_ns"].astype("float64").fillna(0.0) if len(t) else pd.Series(dtype="float64")
    total = float(tr.sum())
    small = t["small"].astype(bool) & t["expected_GBps"].notna() if len(t) else tr.astype(bool)
    return float(tr[small].sum()) / total if total else 0.0


def packet_findings(t: pd.DataFrame, step_total: dict[int, int], comm_ns: dict[int, int]
                    ) -> list[Finding]:
    """``small_packet`` and ``byte_alignment`` over the collectives of ``t`` (one or more
    ranks; ``transit_ns`` the transmission without waiting): per rank, cost / step time, its
    cost capped at ``comm_ns`` (collectives in flight together count once); the finding's
    share is the mean over the ranks of ``step_total``. Small messages (for a link of known
    bandwidth) count where they carry > 20 % of a rank's transit time; they cost the time
    beyond what they would take at the link's bandwidth; misaligned ones the time beyond what
    the rank's aligned large messages reach (else the link's bandwidth)."""
    out: list[Finding] = []
    if len(t) == 0:
        return out
    ranks = sorted(step_total)
    # numpy over the rows, per rank by rank codes; the sums by one groupby of their columns
    # (pandas' compensated sums, as each column's own groupby gives)
    uniq, rk = np.unique(t["rank"].astype("int64").to_numpy(), return_inverse=True)
    ng = len(uniq)
    tr = t["transit_ns"].astype("float64").fillna(0.0).to_numpy()
    exp = t["expected_GBps"].astype("float64").to_numpy()
    busbw = t["busbw_GBps"].astype("float64").to_numpy()
    small = t["small"].astype(bool).to_numpy() & ~np.isnan(exp)
    mis = t["misaligned"].astype(bool).to_numpy()
    if not small.any() and not mis.any():  # neither costs anything
        return out
    sums = _rank_sums(rk, tr=tr, small=np.where(small, tr, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        traffic = sums["small"] / np.where(sums["tr"] > 0, sums["tr"], np.nan)
    traffic = np.nan_to_num(traffic, nan=0.0)[rk]
    small_on = small & (traffic > SMALL_TRAFFIC_MIN)
    if not small_on.any() and not mis.any():
        return out
    ok = ~mis & ~small & ~np.isnan(busbw)
    ok_med = _group_median(rk, np.where(ok, busbw, np.nan), ng)[rk]
    ref = np.minimum(exp, np.where(np.isnan(ok_med), np.inf, ok_med))
    costs = {"small_packet": np.where(small_on, shortfall(tr, busbw, exp), 0.0),
             "byte_alignment": np.where(mis, shortfall(tr, busbw, ref), 0.0)}
    per_rank = _rank_sums(rk, **costs)
    for cause, cost in costs.items():
        per = dict(zip(uniq.tolist(), per_rank[cause].tolist(), strict=True))
        shares = [min(per.get(r, 0.0), comm_ns.get(r, np.inf)) / step_total[r]
                  if step_total.get(r) else 0.0 for r in ranks]
        share = float(np.mean(shares)) if shares else 0.0
        if share < MIN_SHARE:
            continue
        sub = t[cost > 0]
        hit = tuple(int(r) for r, x in zip(ranks, shares, strict=True) if x > 0)
        if cause == "small_packet":
            lat = int(sub["latency_bound"].astype(bool).sum())
            f = comm_finding(cause, share, sub, hit, cost_ns=int(cost.sum()),
                             traffic_share=round(float(traffic[small_on].max()), 4),
                             mean_bytes=float(sub["bytes"].mean()),
                             **({"latency_bound": lat} if lat else {}))
            if lat:  # small for their group: the algorithm's per-step latency outweighs bytes
                f = replace(f, summary=f.summary.replace(
                    "saturation size", "saturation size or latency-bound for their group "
                    f"({lat}: steps x link latency >= bytes / bandwidth)", 1))
        else:
            f = comm_finding(cause, share, sub, hit, alignment_B=ALIGN_B,
                             cost_ns=int(cost.sum()),
                             sizes_B=sorted({int(b) for b in sub["bytes"]})[:10])
        out.append(f)
    return out


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
                   evidence={"collectives": int(len(sub)), "top_ops": ops_of(sub), **extra,
                             **evidence},
                   ranks=ranks)
