"""Cluster analyzer ``communication_cluster``: synchronization wait vs transmission across ranks.

``communication_cluster(ctx: ClusterContext) -> AnalyzerResult`` over the per-rank
``communication`` results: matches the same collective across ranks by ``(coll_group,
coll_seq)`` and computes T_wait = sum_i(A_max - A_i) over the ranks' arrival times A_i,
R_wait = 1 - T_avg/T_max with T_i = A_i - (the moment the previous collective of the group
released every rank), the late rank, the per-rank waits and the communication matrix; where the
trace has no wait figures, transmission causes are judged with the wait removed
(transit_i = end_i - max_j A_j). Formulas: ``docs/analysis/communication.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common.opinfo import top_ops
from hermes.analyzers.common.p2p import is_p2p, p2p_keys
from hermes.analyzers.common.ranks import same_op_slowdown
from hermes.analyzers.communication.causes import (
    comm_finding,
    packet_findings,
    transmission_costs,
)
from hermes.analyzers.communication.columns import MATRIX_COLUMNS, PRE_PARTS
from hermes.analyzers.communication.rank import COLUMNS, P2P
from hermes.analyzers.engine.base import AnalyzerResult, ClusterContext, register
from hermes.findings import MIN_SHARE, Finding

#: collectives-table columns the cluster reduce reads (sync_table, the per-rank waits,
#: transmission_costs and the findings' top operators)
REDUCE_COLUMNS = [c for c in COLUMNS if c not in ("wait_ns", "link", "bw_GBps")]
#: A set of ranks *holds the job back* when the waits they cause (the other ranks' waits at the
#: collectives they reach last) are at least this share of all waiting, and the set is at most
#: half of the job's ranks; otherwise no rank is consistently last (arrival jitter).
HOLD_BACK_MIN = 2 / 3
#: Waiting that no rank in particular causes (jitter) is a finding only from this share of step
#: time: below it, it is the ordinary spread of arrivals, nothing to act on.
JITTER_MIN_SHARE = 0.05
#: A late rank that computes longer runs the operators every rank runs at least this much slower
#: than the others when its device is slow (clock, thermal, a weaker part); below it, it has
#: more work (msprof-analyze's slow-rank threshold, 5 %).
SLOW_DEVICE_RATIO = 1.05
#: What a late rank did instead of arriving, per part of ``PRE_PARTS``, for its summary.
DID_INSTEAD = {
    "compute": "computing on its device",
    "io": "loading data",
    "sync": "waiting on its device (host-device synchronization)",
    "host": "in host work (operators, launches)",
    "unrecorded": "with nothing recorded (unattributed: code the profiler did not capture -- "
                  "Python without with_stack, sleeps, file or network I/O, another process)",
}


def _per_rank(ctx: ClusterContext, name: str) -> dict[int, AnalyzerResult]:
    return {int(r): res[name] for r, res in ctx.per_rank.items() if name in res}


def sync_table(t: pd.DataFrame) -> pd.DataFrame:
    """Per collective matched on >= 2 ranks by (group, seq): T_wait, R_wait, late rank."""
    cols = ["group", "seq", "op", "ranks", "T_wait_ns", "R_wait", "late_rank", "skew_ns",
            "transit_ns", "late_by", "late_excess_ns"]
    t = matchable(t)
    if len(t) == 0:
        return pd.DataFrame(columns=cols)
    g = t.groupby(["group", "seq"], sort=False)
    n = g["rank"].transform("size")
    # the same collective has the same operator on every rank; a mismatch means the sequence
    # numbers do not line up (e.g. ranks sampled from a bigger job): not matched
    same = g["op"].transform("nunique") == 1
    t = t[(n >= 2) & same].copy()
    if len(t) == 0:
        return pd.DataFrame(columns=cols)
    g = t.groupby(["group", "seq"], sort=False)
    a_max = g["arrive_ns"].transform("max")
    ref = g["prev_end_ns"].transform("max")
    t["wait_i"] = waited(t, a_max)
    t["T_i"] = (t["arrive_ns"] - ref).clip(lower=0)
    t["tr_i"] = (t["end_ns"] - a_max).clip(lower=0)
    # a transfer's time after both sides are there is the receiver's (a send may return once
    # its data is handed over, before or after it arrived)
    p2p = is_p2p(t)
    if p2p.any():
        src = t.loc[p2p, "group"].astype(str).str.extract(r"^p2p (-?\d+)->")[0].astype("int64")
        t.loc[src.index[(t.loc[p2p, "rank"] == src).to_numpy()], "tr_i"] = np.nan
    idx_late = g["arrive_ns"].idxmax()
    out = g.agg(op=("op", "first"), ranks=("rank", "size"), T_wait_ns=("wait_i", "sum"),
                T_avg=("T_i", "mean"), T_max=("T_i", "max"), skew_ns=("wait_i", "max"),
                transit_ns=("tr_i", "min")).reset_index()
    out["R_wait"] = np.where(out["T_max"] > 0, 1.0 - out["T_avg"] / out["T_max"].where(
        out["T_max"] > 0, 1), 0.0)
    out["late_rank"] = t.loc[idx_late.to_numpy(), "rank"].to_numpy()
    out["late_by"], out["late_excess_ns"] = _late_by(t, idx_late.to_numpy())
    return out[cols].sort_values(["group", "seq"], kind="stable").reset_index(drop=True)


def matchable(t: pd.DataFrame) -> pd.DataFrame:
    """The rows of the ranks' collective tables that are matched by (group, seq): collectives
    with a sequence number, and point-to-point transfers keyed by their pair of ranks whose
    two sides agree -- as many receives on the destination as sends on the source, both in
    the trace (a peer read as a rank of a smaller process group gives counts that disagree,
    or a rank that never sends). Other point-to-point transfers pair two ranks outside any
    group and are not matched."""
    t = t[t["seq"].notna()]
    p2p = is_p2p(t)
    other = t["op"].astype(str).str.contains(P2P) & ~p2p
    if p2p.any():
        q = t[p2p]
        per = q.groupby(["group", "rank"], sort=False).size().unstack(fill_value=0)
        # (a rank's rows of a pair's group are its sends or receives: the ranks with rows are
        # the pair's own)
        ok = (per > 0).sum(axis=1).eq(2) & per.max(axis=1).eq(per.where(per > 0).min(axis=1))
        other |= p2p & ~t["group"].isin(ok.index[ok])
    return t[~other]


def waited(t: pd.DataFrame, a_max: pd.Series) -> pd.Series:
    """Each rank's wait at its matched collective: until the last participant arrives; none for
    a side of a point-to-point transfer that ended before the other arrived (a send of a small
    message returns before the receive is posted: it did not wait)."""
    w = a_max - t["arrive_ns"]
    p2p = is_p2p(t)
    if p2p.any():
        w = w.where(~p2p | (t["end_ns"] > a_max), 0)
    return w


def by_op(sync: pd.DataFrame, n: int = 20) -> list[dict[str, Any]]:
    """The matched collectives per (group, op), most waiting first (at most ``n``): count,
    summed wait (T_wait), median arrival skew and transfer, median bus bandwidth and message
    size, and the rank whose late arrivals cause most of its waiting."""
    if len(sync) == 0:
        return []
    g = sync.groupby(["group", "op"], sort=False)
    out = g.agg(count=("seq", "size"), wait_ns=("T_wait_ns", "sum"),
                skew_median_ns=("skew_ns", "median"), transfer_median_ns=("transit_ns", "median"),
                busbw_GBps_median=("busbw_GBps", "median"), bytes_median=("bytes", "median"))
    # the rank whose late arrivals cause most of the op's waiting
    caused = sync.groupby(["group", "op", "late_rank"], sort=False)["T_wait_ns"].sum()
    top = caused.reset_index().sort_values("T_wait_ns", ascending=False, kind="stable")
    top = top.drop_duplicates(["group", "op"]).set_index(["group", "op"])["late_rank"]
    out["waited_for_rank"] = top.reindex(out.index).astype("int64")
    out = out.reset_index().sort_values(["wait_ns", "count"], ascending=False, kind="stable")
    rows = out.head(n).to_dict("records")
    return [{k: (None if isinstance(v, float) and not np.isfinite(v) else
                 round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}
            for r in rows]


def union_per_rank(rank: pd.Series, start: pd.Series, end: pd.Series) -> pd.Series:
    """Per rank, the length of the union of its intervals [start, end): waits at collectives
    in flight together (queued on a communication stream, DDP's buckets) overlap in time and
    count once. Vectorized: intervals sorted by (rank, start), each adds what reaches past
    the furthest end before it on its rank."""
    if len(rank) == 0:
        return pd.Series(dtype="int64")
    r = rank.to_numpy(np.int64)
    s, e = start.to_numpy(np.int64), end.to_numpy(np.int64)
    o = np.lexsort((s, r))
    r, s, e = r[o], s[o], e[o]
    reach = pd.Series(e).groupby(r).cummax().to_numpy(np.int64)
    first = np.r_[True, r[1:] != r[:-1]]
    before = np.where(first, np.iinfo(np.int64).min, np.r_[0, reach[:-1]])
    add = np.clip(e - np.maximum(s, before), 0, None)
    return pd.Series(add).groupby(r).sum()


def _late_by(t: pd.DataFrame, late_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per matched collective (in ``late_idx`` order: one row label per group), what its last
    rank did instead of arriving: the part of ``PRE_PARTS`` (time from its last sync point to
    its arrival) in which it exceeds the other ranks' median most, and that excess (ns);
    ``""`` and 0 where it exceeds them in none (or the table has no such columns)."""
    cols = [f"pre_{p}_ns" for p in PRE_PARTS]
    if not all(c in t.columns for c in cols) or len(late_idx) == 0:
        return np.full(len(late_idx), "", object), np.zeros(len(late_idx), np.int64)
    keys = ["group", "seq"]
    is_late = pd.Series(False, index=t.index)
    is_late[late_idx] = True
    med = t[~is_late].groupby(keys, sort=False)[cols].median()
    late = t.loc[late_idx, keys + cols].set_index(keys)
    excess = (late[cols] - med.reindex(late.index)[cols].fillna(0)).clip(lower=0)
    x = excess.to_numpy(np.float64)
    best = x.argmax(axis=1)
    top = x[np.arange(len(x)), best]
    names = np.array(PRE_PARTS, object)[best]
    return np.where(top > 0, names, ""), top.astype(np.int64)


def holding_back(sync: pd.DataFrame, ranks: list[int]) -> tuple[list[int], pd.DataFrame]:
    """The ranks that hold the job back (``HOLD_BACK_MIN``), and one row per rank that was
    ever last: ``rank, wait_caused_ns, times_late, late_by`` (what it did instead, weighted
    by the wait each of its late arrivals caused), ``late_excess_ns`` (the median excess of
    its late arrivals in that part), sorted by wait caused."""
    cols = ["rank", "wait_caused_ns", "times_late", "late_by", "late_excess_ns"]
    s = sync[sync["T_wait_ns"] > 0]
    if len(s) == 0:
        return [], pd.DataFrame(columns=cols)
    g = s.groupby("late_rank")
    by = (s[s["late_by"] != ""].groupby(["late_rank", "late_by"])["T_wait_ns"].sum()
          .reset_index().sort_values(["late_rank", "T_wait_ns"], ascending=[True, False],
                                     kind="stable").drop_duplicates("late_rank")
          .set_index("late_rank")["late_by"])
    pr = pd.DataFrame({"wait_caused_ns": g["T_wait_ns"].sum(), "times_late": g.size()})
    pr["late_by"] = by.reindex(pr.index).fillna("")
    # the typical excess of a late arrival in that part (a median: collectives that share a
    # sync point, such as DDP's buckets, share the excess too)
    mine = s[s["late_by"] == s["late_rank"].map(pr["late_by"])]
    pr["late_excess_ns"] = mine.groupby("late_rank")["late_excess_ns"].median().reindex(
        pr.index).fillna(0).astype("int64")
    pr = pr.rename_axis("rank").reset_index().sort_values(
        ["wait_caused_ns", "rank"], ascending=[False, True], kind="stable")
    pr["rank"] = pr["rank"].astype("int64")
    share = pr["wait_caused_ns"].cumsum() / float(pr["wait_caused_ns"].sum())
    n = int(np.searchsorted(share.to_numpy(), HOLD_BACK_MIN - 1e-12) + 1)
    held = pr["rank"].head(n).tolist() if n <= max(1, len(ranks) // 2) else []
    return [int(r) for r in held], pr[cols].reset_index(drop=True)


@register("communication_cluster", scope="cluster")
def communication_cluster(ctx: ClusterContext) -> AnalyzerResult:
    """Synchronization wait vs transmission across ranks; the communication matrix."""
    per = _per_rank(ctx, "communication")
    res = AnalyzerResult("communication_cluster")
    # only the columns the reduce reads: on thousands of ranks the concatenation is the
    # driver's largest table (text columns such as link and peer cost most)
    # (each rank's table is unpacked once and cut at once: the full tables are never all held)
    tabs = []
    for r in per.values():
        x = r.tables.get("collectives")
        if x is not None and len(x):
            tabs.append(x[[c for c in REDUCE_COLUMNS if c in x.columns]].copy())
        del x
    t = pd.concat(tabs, ignore_index=True) if tabs else pd.DataFrame(columns=REDUCE_COLUMNS)
    del tabs
    p2p_keys(t)
    sync = sync_table(t)
    res.tables["sync"] = sync
    mats = [r.tables["matrix"] for r in per.values() if len(r.tables.get("matrix", ()))]
    res.tables["matrix"] = (pd.concat(mats, ignore_index=True) if mats
                            else pd.DataFrame(columns=MATRIX_COLUMNS))
    step_total = {r: int(v.metrics.get("step_total_ns", 0)) for r, v in per.items()}
    if len(sync) == 0:
        res.metrics.update({"matched": 0, "R_wait_mean": 0.0, "R_wait_max": 0.0,
                            "holding_back": []})
        res.tables["per_rank"] = pd.DataFrame(columns=["rank", "wait_ns", "exposed_wait_ns",
                                                       "wait_share", "times_late"])
        return res
    m = t[t["seq"].notna()].merge(sync[["group", "seq", "op", "transit_ns"]],
                                  on=["group", "seq", "op"], suffixes=("", "_matched"))
    m["wait_i"] = waited(m, m.groupby(["group", "seq"])["arrive_ns"].transform("max"))
    wait = union_per_rank(m["rank"], m["arrive_ns"], m["arrive_ns"] + m["wait_i"])
    # a wait costs the rank's step only where its device does not compute meanwhile (a
    # collective queued on a communication stream waits while the backward pass goes on):
    # each wait counts the share of its collective no kernel overlaps
    with np.errstate(divide="ignore", invalid="ignore"):
        busy = (m["overlap_compute_ns"].astype("float64") / m["dur_ns"].astype("float64")
                ).clip(0, 1).fillna(0.0)
    w = m["wait_i"].astype("float64")
    frac = ((w * (1 - busy)).groupby(m["rank"]).sum() / w.groupby(m["rank"]).sum()).fillna(0)
    late = sync["late_rank"].value_counts()
    pr = pd.DataFrame({"rank": sorted(per)})
    pr["wait_ns"] = pr["rank"].map(wait).fillna(0).astype("int64")
    pr["exposed_wait_ns"] = (pr["wait_ns"] * pr["rank"].map(frac).fillna(0)).round().astype(
        "int64")
    pr["wait_share"] = [w / step_total[r] if step_total.get(r) else 0.0
                        for r, w in zip(pr["rank"], pr["exposed_wait_ns"], strict=True)]
    pr["times_late"] = pr["rank"].map(late).fillna(0).astype("int64")
    res.tables["per_rank"] = pr
    # achieved bandwidth once every rank is there: the rank's bus bandwidth over its whole
    # collective, rescaled to the matched transfer (end - last arrival), median over ranks
    tr = (m["end_ns"] - m.groupby(["group", "seq"])["arrive_ns"].transform("max")).clip(lower=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        bw = m["busbw_GBps"].astype("float64") * m["dur_ns"].astype("float64") / tr.where(tr > 0)
    sync["busbw_GBps"] = sync.set_index(["group", "seq"]).index.map(
        bw.groupby([m["group"], m["seq"]]).median()).to_numpy(np.float64)
    sync["bytes"] = sync.set_index(["group", "seq"]).index.map(
        m["bytes"].astype("float64").groupby([m["group"], m["seq"]]).max()).to_numpy(np.float64)
    res.tables["sync"] = sync
    res.metrics["by_op"] = by_op(sync)
    res.metrics.update({"matched": int(len(sync)), "R_wait_mean": float(sync["R_wait"].mean()),
                        "R_wait_max": float(sync["R_wait"].max()),
                        "T_wait_ns": int(sync["T_wait_ns"].sum()),
                        "wait_ns_per_rank": {int(r): int(w) for r, w in
                                             zip(pr["rank"], pr["wait_ns"], strict=True)}})
    explicit = any(v.metrics.get("explicit_wait") for v in per.values())
    held, late_tab = holding_back(sync, sorted(per))
    res.tables["late"] = late_tab
    res.metrics["holding_back"] = held
    # the rank that waits most loses that share of its step: in synchronous training the job
    # gains it back once the late rank arrives on time (max over ranks, as merged findings)
    share = float(pr["wait_share"].max())
    if not explicit and share >= (MIN_SHARE if held else JITTER_MIN_SHARE):
        computing = [r for r in held if (late_tab.set_index("rank")["late_by"].get(r)
                                         == "compute")]
        slower = same_op_slowdown(ctx, computing) if computing else {}
        res.findings.append(_wait_finding(share, sync, pr, held, late_tab, slower))
    if not explicit:  # transmission apart from waiting, from the matched arrivals
        _cluster_transmission(res, m, step_total)
    return res


def _wait_finding(share: float, sync: pd.DataFrame, pr: pd.DataFrame, held: list[int],
                  late_tab: pd.DataFrame, slower: dict[int, float]) -> Finding:
    """``communication.synchronization_wait``: the ranks wait ``share`` of step time at
    collectives; named for the ranks that hold the job back and what they did instead of
    arriving, or as arrival jitter when no rank is consistently last."""
    total = float(sync["T_wait_ns"].sum())
    lt = late_tab.set_index("rank")
    ops = top_ops(sync.rename(columns={"op": "name", "T_wait_ns": "dur_ns"}))
    evidence: dict[str, Any] = {
        "R_wait_mean": round(float(sync["R_wait"].mean()), 4),
        "R_wait_max": round(float(sync["R_wait"].max()), 4),
        "T_wait_ns": int(total), "late_ranks": list(held),
        "max_wait_share": round(float(pr["wait_share"].max()), 4),
        "wait_caused_ns": {int(r): int(v) for r, v in lt["wait_caused_ns"].items()},
        "times_late": {int(r): int(v) for r, v in lt["times_late"].items()},
        "matched": int(len(sync)), "top_ops": ops}
    p2p = is_p2p(sync)
    where = ("collectives" if not p2p.any() else "point-to-point transfers" if p2p.all() else
             "collectives and point-to-point transfers")
    head = f"ranks wait {100 * share:.1f}% of step time at {where}"
    if not held:
        worst = int(late_tab["rank"].iloc[0]) if len(late_tab) else -1
        caused = float(lt["wait_caused_ns"].iloc[0]) / total if len(lt) and total else 0.0
        summary = (f"{head}, and no rank is consistently last (the most waited-for, rank "
                   f"{worst}, causes {100 * caused:.0f}% of the waiting): arrival jitter "
                   f"(R_wait mean {sync['R_wait'].mean():.2f})")
        return Finding("communication", "synchronization_wait", min(1.0, share), summary,
                       evidence={**evidence, "jitter": True},
                       ranks=tuple(int(r) for r in pr["rank"]))
    parts = []
    for r in held:
        caused = float(lt.loc[r, "wait_caused_ns"])
        what = str(lt.loc[r, "late_by"])
        did = (f"; before a late arrival it spends a median {lt.loc[r, 'late_excess_ns'] / 1e6:.1f}"
               f" ms more than the others {DID_INSTEAD[what]}" if what else "")
        if r in slower:  # computing longer: a slower device, or more work than the others
            did += (f", the operators every rank runs taking {slower[r]:.2f}x the others' time "
                    "there (a slow device)" if slower[r] >= SLOW_DEVICE_RATIO else
                    f", the operators every rank runs at the others' speed ({slower[r]:.2f}x): "
                    "it has more work (load imbalance)")
        parts.append(f"rank {r} (last at {int(lt.loc[r, 'times_late'])} of {len(sync)} "
                     f"collectives, {100 * caused / total:.0f}% of the waiting{did})")
    evidence["late_by"] = {int(r): str(lt.loc[r, "late_by"]) for r in held}
    if slower:
        evidence["same_op_slowdown"] = {int(r): v for r, v in slower.items()}
    evidence["late_excess_ns"] = {int(r): int(lt.loc[r, "late_excess_ns"]) for r in held}
    summary = f"{head} for {'; '.join(parts)}"
    return Finding("communication", "synchronization_wait", min(1.0, share), summary,
                   evidence=evidence, ranks=tuple(held))


def _cluster_transmission(res: AnalyzerResult, m: pd.DataFrame, step_total: dict[int, int]
                          ) -> None:
    """Bandwidth/retransmission causes with transit_i = end_i - max arrival (the wait removed);
    time_share = mean over ranks of the rank's cost / its step time."""
    m = m.copy()
    a_max = m.groupby(["group", "seq"])["arrive_ns"].transform("max")
    m["transit_ns"] = (m["end_ns"] - a_max).clip(lower=0)
    # collectives that transfer together (buckets in flight at once) share that time: they
    # cost a rank at most the union of its transfers
    comm_time = union_per_rank(m["rank"], a_max, np.maximum(m["end_ns"], a_max))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = m["dur_ns"].astype("float64") / m["transit_ns"].where(m["transit_ns"] > 0)
    m["busbw_GBps"] = m["busbw_GBps"].astype("float64") * scale
    m["overlap_compute_ns"] = np.minimum(m["overlap_compute_ns"].astype("float64"),
                                         m["transit_ns"])
    ranks = sorted(step_total)
    res.findings += packet_findings(m, step_total, comm_time.to_dict())
    for cause, cost in transmission_costs(m).items():
        by_rank = cost.groupby(m["rank"]).sum()
        shares = [min(by_rank.get(r, 0.0), comm_time.get(r, np.inf)) / step_total[r]
                  if step_total[r] else 0.0 for r in ranks]
        share = float(np.mean(shares)) if shares else 0.0
        if share >= MIN_SHARE:
            hit = tuple(int(r) for r, s in zip(ranks, shares, strict=True) if s > 0)
            res.findings.append(comm_finding(cause, share, m[cost > 0], hit,
                                         cost_ns=int(cost.sum())))
