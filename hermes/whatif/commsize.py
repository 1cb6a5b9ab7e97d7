"""Communication transforms that change how a message moves: bigger gradient buckets, sizes
aligned to the link, the network setup corrected.

Every one of them rests on one **per-message model** of a collective's transmission,

    T(s) = steps * alpha + factor * s / bw(s),   bw(s) = B0 * min(1, s / sat) ** e

``steps`` and ``factor`` of the collective's algorithm on ``n`` ranks (ring; binomial tree for a
broadcast: Thakur et al., "Optimization of collective communication operations in MPICH",
IJHPCA 2005), ``alpha`` the device profile's link latency. Below the saturation size ``sat``
(DOMAIN.md, msprof-analyze's packet rule: SDMA < 16 MB, RDMA < 1 MB are small packets; the
device profile's ``sdma_small_packet_B`` / ``rdma_small_packet_B``) bandwidth falls as a power
of the size: a straight line on the log-log bandwidth-vs-size plots collective benchmarks print
(nccl-tests, HCCL's hccl_test), flat from ``sat`` on. Its two numbers are **measured on the
trace's own collectives**, not assumed: ``B0`` from the messages at or above ``sat`` (else the
line's intercept), ``e`` the slope of the line through the messages below it (messages of one
size only: the slope from them to ``B0``; ``B0`` then the link's bandwidth). A factor that
slows every size alike (a mis-set environment, misalignment) leaves the slope alone and shows
in ``B0``. Each message's measured time is its size's fastest (the least waiting for others).

A transform's factor on a collective is a ratio of two model times, the changed message's over
the one the trace shows, so what the change does not fix (the model's error, what the
``B0`` carries) stays. It applies to the collective's own time on one rank and to its
transmission when ranks are replayed together (``Change.tx``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.critical_path import edges as cpedges
from hermes.whatif.comm import shrink_waits, unqueue
from hermes.whatif.facts import duration, number
from hermes.whatif.replay import Change, StepGraph

#: (alpha steps, bandwidth factor) per collective on n ranks: ring algorithms, a binomial tree
#: for broadcast (Thakur et al. 2005)
ALGOS = {"allreduce": lambda n: (2 * (n - 1), 2 * (n - 1) / n),
         "allgather": lambda n: (n - 1, (n - 1) / n),
         "reducescatter": lambda n: (n - 1, (n - 1) / n),
         "alltoall": lambda n: (n - 1, (n - 1) / n),
         "broadcast": lambda n: (np.ceil(np.log2(n)), np.ceil(np.log2(n)))}
#: a bucket cap when the option gives none: the one the small-packet rule recommends (MB)
BUCKET_MB = 100.0
#: slopes measured below saturation only from sizes at least this far apart (ratio)
SPAN = 2.0


@dataclass(frozen=True)
class Link:
    bw: float      # B/s
    alpha: float   # s
    sat: float     # B (0: unknown, bandwidth flat)
    align: float   # B (0: unknown)
    n: int


def link(params: Mapping[str, Any]) -> Link | None:
    """The link the run's collectives use (device profile): intra-node when the ranks fit in
    one node, else inter-node (None: no bandwidth known). Fewer than 2 ranks known: 2."""
    dev = params.get("device") or {}
    n = max(int(params.get("ranks") or 0), 2)
    per_node = int(dev.get("devices_per_node") or 0)
    where, sat_key = ("inter", "rdma_small_packet_B") if per_node and n > per_node else \
        ("intra", "sdma_small_packet_B")
    bw = float(dev.get(f"{where}_node_bw_Bps") or 0)
    if bw <= 0:
        return None
    return Link(bw, float(dev.get(f"{where}_node_latency_s") or 0), float(dev.get(sat_key) or 0),
                float(dev.get("hccs_alignment_B") or 0), n)


def _colls(sg: StepGraph) -> np.ndarray:
    """Mask of the device collectives."""
    return (sg.info["kind"] == "collective").to_numpy(bool) & ~sg.info["host"].to_numpy(bool)


def ops(sg: StepGraph) -> np.ndarray:
    """The collective algorithm (a key of :data:`ALGOS`) of every device collective by its name
    ('' elsewhere, or where the name names none); each distinct name is read once."""
    out = np.full(len(sg.info), "", object)
    idx = np.flatnonzero(_colls(sg))
    if idx.size == 0:
        return out
    codes, uniq = pd.factorize(sg.info["name"].take(idx).astype(object), use_na_sentinel=False)
    names = pd.Series(np.asarray(uniq, dtype=object)).astype(str).str.lower() \
        .str.replace(r"[^a-z]", "", regex=True)
    op = np.full(len(names), "", object)
    for k in ALGOS:
        op[(op == "") & names.str.contains(k, regex=False).to_numpy()] = k
    out[idx] = op[codes]
    return out


def algo(op: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(steps, factor) per event of algorithm ``op`` (:func:`ops`; NaN: none known)."""
    steps, factor = np.full(op.size, np.nan), np.full(op.size, np.nan)
    for k, f in ALGOS.items():
        m = op == k
        steps[m], factor[m] = f(n)
    return steps, factor


def messages(sg: StepGraph, op: np.ndarray | None = None) -> np.ndarray:
    """Mask of the device collectives the model covers (known algorithm, size > 0)."""
    op = ops(sg) if op is None else op
    return (op != "") & (number(sg, "coll_bytes") > 0)


def missing(sg: StepGraph, params: Mapping[str, Any]) -> str | None:
    """What the model needs: collectives with their sizes, the link's bandwidth."""
    if not _colls(sg).any():
        return "the trace records no collectives"
    if not messages(sg).any():
        return "the trace records no message sizes of its collectives"
    if link(params) is None:
        return "the device profile gives no link bandwidth"
    return None


def align_missing(sg: StepGraph, params: Mapping[str, Any]) -> str | None:
    why = missing(sg, params)
    if why is None and not link(params).align:  # type: ignore[union-attr]
        return "the device profile gives no link alignment"
    return why


def model_ns(s: np.ndarray, steps: np.ndarray, factor: np.ndarray, lk: Link, b0: float,
             e: float) -> np.ndarray:
    """Transmission (ns) of messages of ``s`` bytes on the model (see the module)."""
    frac = np.minimum(s / lk.sat, 1.0) if lk.sat > 0 else np.ones_like(s)
    return (steps * lk.alpha + factor * s / (b0 * frac ** e)) * 1e9


def fit(s: np.ndarray, t_ns: np.ndarray, steps: np.ndarray, factor: np.ndarray, lk: Link
        ) -> tuple[float, float]:
    """``(B0, e)`` of the model measured on messages of ``s`` bytes taking ``t_ns`` (each
    size's fastest is used); ``(link bandwidth, 0)`` where nothing can be measured."""
    d = pd.DataFrame({"s": s, "t": t_ns, "a": steps * lk.alpha * 1e9, "f": factor})
    d = d.groupby(["s", "f"], sort=False).agg(t=("t", "min"), a=("a", "first")).reset_index()
    d = d[d["t"] > d["a"]]
    if len(d) == 0:
        return lk.bw, 0.0
    bw = np.log(d["f"] * d["s"] / ((d["t"] - d["a"]) * 1e-9)).to_numpy()
    sz = d["s"].to_numpy(np.float64)
    big = sz >= lk.sat if lk.sat > 0 else np.ones(sz.size, bool)
    b0 = float(np.exp(np.median(bw[big]))) if big.any() else np.nan
    x = np.log(sz[~big] / lk.sat) if lk.sat > 0 else np.empty(0)
    y = bw[~big]
    if x.size == 0:
        return b0, 0.0
    if np.isnan(b0) and sz[~big].max() >= SPAN * sz[~big].min():
        e, c = np.polyfit(x, y, 1)
        return float(np.exp(c)), float(np.clip(e, 0.0, 2.0))
    if np.isnan(b0):
        b0 = lk.bw
    return b0, float(np.clip(np.median((y - np.log(b0)) / x), 0.0, 2.0))


def _setup(sg: StepGraph, params: Mapping[str, Any]
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Link, np.ndarray]:
    """(messages, sizes, steps, factor, link, algorithm) of the graph's events."""
    lk = link(params)
    assert lk is not None  # (missing() said so otherwise)
    op = ops(sg)
    steps, factor = algo(op, lk.n)
    return messages(sg, op), number(sg, "coll_bytes"), steps, factor, lk, op


def _apply(sg: StepGraph, ch: Change, sel: np.ndarray, f: np.ndarray) -> None:
    """Factor ``f`` (0..1) on the collectives ``sel``: on their own time and, ranks replayed
    together, on their transmission; a collective (changed or not) queued behind the one
    before it on its lane starts when that one ends (``comm._unqueue``); a device wait with no
    edge into it (the trace does not say what it awaited) shrinks by the time the collectives
    it overlaps lost (``comm._shrink_waits``)."""
    f = np.clip(np.nan_to_num(f, nan=1.0), 0.0, 1.0)
    ch.scale[sel] = np.minimum(ch.scale[sel], f[sel])
    if ch.tx is None:
        ch.tx = np.ones(len(sg.info))
    ch.tx[sel] = np.minimum(ch.tx[sel], f[sel])
    unqueue(sg, ch, _colls(sg))
    shrink_waits(sg, ch, sel, _loose_waits(sg, ch))


def _loose_waits(sg: StepGraph, ch: Change) -> np.ndarray:
    """Device waits the graph does not tie to what they awaited: none of its edges leads into
    them, or the one that does comes from a collective that ended over ``cpedges.LINE_UP_NS``
    before the wait did (it awaited a later one, e.g. one ending a clock tick after it); that
    edge is dropped (``ch.drop``)."""
    waits = (sg.info["kind"] == "sync").to_numpy(bool) & ~sg.info["host"].to_numpy(bool)
    is_end = np.zeros(sg.g.n, bool)
    is_end[sg.g.event_end[waits]] = True
    src = sg.node_ev[sg.g.cu]
    stale = is_end[sg.g.cv] & _colls(sg)[src] & (sg.g.event_end[src] == sg.g.cu) & \
        (sg.cw > cpedges.LINE_UP_NS)
    ch.drop |= stale
    fed = np.zeros(sg.g.n, bool)
    fed[sg.g.cv[sg.g.forward_cross() & ~ch.drop]] = True
    return waits & ~fed[sg.g.event_end]


def fix_network(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """The collective library's environment corrected: every message moves at the link's
    bandwidth (device profile) on the trace's own size curve (slope ``e``), where it moved
    slower (``B0`` below the link's)."""
    sel, s, steps, factor, lk, op = _setup(sg, params)
    b0, e = fit(s[sel], duration(sg)[sel], steps[sel], factor[sel], lk)
    before = model_ns(s, steps, factor, lk, b0, e)
    _apply(sg, ch, sel, model_ns(s, steps, factor, lk, max(b0, lk.bw), e) / before)


def align_sizes(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Sizes padded to the link's alignment (HCCS: 512 B, device profile
    ``hccs_alignment_B``): a misaligned message moves ``ceil(s / a) * a`` bytes at the
    bandwidth aligned messages get. That bandwidth is measured on the trace's aligned
    messages (the model fitted on them); with none, the link's, on the slope of the misaligned
    ones (misalignment taken to slow every size alike)."""
    sel, s, steps, factor, lk, op = _setup(sg, params)
    dur = duration(sg)
    off = sel & (np.mod(s, lk.align) != 0)
    if not off.any():
        return
    on = sel & ~off
    b0m, em = fit(s[off], dur[off], steps[off], factor[off], lk)
    b0a, ea = fit(s[on], dur[on], steps[on], factor[on], lk) if on.any() else (max(b0m, lk.bw),
                                                                                em)
    padded = np.ceil(s / lk.align) * lk.align
    new = model_ns(padded, steps, factor, lk, b0a, ea)
    _apply(sg, ch, off, new / model_ns(s, steps, factor, lk, b0m, em))


def _runs(sg: StepGraph, sel: np.ndarray, op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The collectives ``sel`` in issue order and their run number: a run is consecutive
    collectives of one kind (algorithm) and group within a step."""
    idx = np.flatnonzero(sel)
    win = sg.info["win"].to_numpy(np.int64)[idx]
    start = sg.info["start"].to_numpy(np.int64)[idx]
    group = (sg.info["coll_group"].astype(object).fillna("").astype(str).to_numpy()[idx]
             if "coll_group" in sg.info.columns else np.full(idx.size, ""))
    op = op[idx]
    o = np.lexsort((start, win))
    idx, win, group, op = idx[o], win[o], group[o], op[o]
    new = np.ones(idx.size, bool)
    new[1:] = (win[1:] != win[:-1]) | (group[1:] != group[:-1]) | (op[1:] != op[:-1])
    return idx, np.cumsum(new) - 1


def bigger_buckets(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Gradient buckets of up to ``bucket_mb`` MB: each run of consecutive same-kind,
    same-group collectives of a step (the all-reduces a DDP backward issues) regrouped in issue
    order, a bucket closing with the message that takes it past a multiple of the cap (as
    DDP's ``compute_bucket_assignment_by_size`` closes one that reaches it). A bucket moves
    its members' bytes in one message of the model's time; it goes when its last member would
    have gone: its time is placed on its members, last first, each up to its own time (the
    members queue on one link, so the bucket ends when the last one would end)."""
    sel, s, steps, factor, lk, op = _setup(sg, params)
    cap = float(params.get("bucket_mb") or BUCKET_MB) * 2**20
    dur = duration(sg)
    b0, e = fit(s[sel], dur[sel], steps[sel], factor[sel], lk)
    before = model_ns(s, steps, factor, lk, b0, e)
    idx, run = _runs(sg, sel, op)
    if idx.size == 0:
        return
    sz = s[idx]
    cum = np.cumsum(sz)
    run_first = np.r_[0, np.flatnonzero(np.diff(run)) + 1]
    base = (cum - sz)[run_first][run]  # bytes before the run
    before_me = cum - sz - base
    kb = np.floor(before_me / cap)
    bucket = np.cumsum(np.r_[True, (run[1:] != run[:-1]) | (kb[1:] != kb[:-1])]) - 1
    total = np.bincount(bucket, weights=sz)
    t_b = model_ns(total[bucket], steps[idx], factor[idx], lk, b0, e)
    old = before[idx]
    # the time of each member and of the later ones of its bucket (buckets are contiguous)
    tot = np.bincount(bucket, weights=old)
    done = np.cumsum(old) - old
    first = np.r_[0, np.flatnonzero(np.diff(bucket)) + 1]
    later = tot[bucket] - (done - done[first][bucket])
    alloc = np.clip(t_b - (later - old), 0.0, old)
    f = np.ones(len(sg.info))
    f[idx] = np.where(tot[bucket] > t_b, alloc / np.maximum(old, 1e-9), 1.0)
    _apply(sg, ch, sel, f)
