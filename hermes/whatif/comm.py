"""Communication transforms: gradient collectives rescheduled (one sync per step, each alone)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hermes.analyzers.critical_path import edges as cpedges
from hermes.whatif.facts import duration, kinds, number
from hermes.whatif.replay import Change, StepGraph

#: ring algorithms: (latency steps, bandwidth factor) for a group of n ranks (Thakur et al.,
#: "Optimization of collective communication operations in MPICH", IJHPCA 2005)
RING = {"allreduce": lambda n: (2 * (n - 1), 2 * (n - 1) / n),
        "allgather": lambda n: (n - 1, (n - 1) / n),
        "reducescatter": lambda n: (n - 1, (n - 1) / n),
        "reduce_scatter": lambda n: (n - 1, (n - 1) / n)}


def _repeats(b: np.ndarray) -> int:
    """How many times the sequence ``b`` is one shorter sequence of two or more sizes, not all
    equal, repeated (1: not; equal sizes could as well be equal buckets)."""
    n = b.size
    if n < 4 or np.all(b == b[0]):
        return 1
    for p in range(2, n // 2 + 1):
        if n % p == 0 and np.array_equal(b, np.tile(b[:p], n // p)):
            return n // p
    return 1


def link_ns(sg: StepGraph, params: Mapping[str, Any], sel: np.ndarray) -> np.ndarray:
    """Link time (ns) of the collectives ``sel`` on an idle link: ring algorithm over the run's
    ranks, the device profile's intra-node bandwidth and latency (NaN where unknown)."""
    dev = params.get("device") or {}
    bw, lat = float(dev.get("intra_node_bw_Bps") or 0), float(dev.get("intra_node_latency_s") or 0)
    n = int(params.get("ranks") or 0)
    out = np.full(sel.size, np.nan)
    if bw <= 0 or n < 2:
        return out
    # (letters only: Kineto's ``nccl:all_reduce`` names an allreduce too)
    names = sg.info["name"].astype(str).str.lower().str.replace(r"[^a-z]", "", regex=True)
    nbytes = number(sg, "coll_bytes")
    for op, algo in RING.items():
        steps, factor = algo(n)
        m = sel & names.str.contains(op.replace("_", ""), regex=False).to_numpy()
        out[m] = (steps * lat + factor * nbytes[m] / bw) * 1e9
    return out


def reschedule_comm(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Gradient communication rescheduled: one gradient sync per step, each collective issued
    alone. A step whose collectives are one sequence of two or more sizes (not all equal)
    repeated r times -- accumulation micro-steps that each sync -- keeps its last repetition.
    A collective issued alone does not contend for links and memory: it runs at the best
    bandwidth the trace shows for a message of its size or smaller (bandwidth grows with the
    size) and not longer than a bigger message took, not faster than the ring algorithm's
    link time on the device profile's link
    (``2(n-1) alpha + 2(n-1)/n bytes / bw`` for an allreduce, where known), not slower than it
    ran. What slows every message of a size alike (small or misaligned messages, the network
    setup) is not what rescheduling changes: those keep their time."""
    coll = (kinds(sg) == "collective") & ~sg.info["host"].to_numpy(bool)
    if not coll.any():
        return
    win = sg.info["win"].to_numpy(np.int64)
    start = sg.info["start"].to_numpy()
    nbytes = number(sg, "coll_bytes")
    for w in np.unique(win[coll]):  # (one pass per step: steps are few)
        idx = np.flatnonzero(coll & (win == w))
        idx = idx[np.argsort(start[idx], kind="stable")]
        r = _repeats(np.nan_to_num(nbytes[idx], nan=-1.0))
        if r > 1:
            ch.scale[idx[: idx.size - idx.size // r]] = 0.0
    unqueue(sg, ch, coll)
    dur = np.maximum(duration(sg), 1.0)
    known = np.flatnonzero(coll & (nbytes > 0))
    if known.size:
        o = known[np.lexsort((-nbytes[known] / dur[known], nbytes[known]))]
        best = np.maximum.accumulate(nbytes[o] / dur[o])  # B/ns, sizes ascending
        # nor longer than a bigger message took (sizes ascending: the suffix minimum)
        bigger = np.minimum.accumulate(dur[o][::-1])[::-1]
        new = np.full(len(dur), np.nan)
        new[o] = np.minimum(nbytes[o] / best, bigger)
        new = np.fmax(new, link_ns(sg, params, coll))
        ok = np.isfinite(new)
        ch.scale[ok] = np.minimum(ch.scale[ok], np.minimum(new[ok] / dur[ok], 1.0))
    shrink_waits(sg, ch, coll)


def unqueue(sg: StepGraph, ch: Change, tasks: np.ndarray) -> None:
    """A task that started as the one before it on its lane ended (queued behind it, within
    ``cpedges.LINE_UP_NS``) waited for the lane, not for what its cross edges say: those
    edges (weighted with the measured delay, the queueing included) are dropped, so it
    starts when the task before it ends in the replay."""
    idx = np.flatnonzero(tasks)
    lane = sg.g.lane[sg.g.event_start[idx]]
    s, e = sg.info["start"].to_numpy(np.int64)[idx], sg.info["end"].to_numpy(np.int64)[idx]
    o = np.lexsort((s, lane))
    idx, lane, s, e = idx[o], lane[o], s[o], e[o]
    queued = np.zeros(idx.size, bool)
    queued[1:] = (lane[1:] == lane[:-1]) & (s[1:] - e[:-1] <= cpedges.LINE_UP_NS)
    is_start = np.zeros(sg.g.n, bool)
    is_start[sg.g.event_start[idx[queued]]] = True
    ch.drop |= is_start[sg.g.cv]


def shrink_waits(sg: StepGraph, ch: Change, tasks: np.ndarray,
                  waits: np.ndarray | None = None) -> None:
    """A wait (default: a device stream's wait for other streams, a sync event on a device
    lane) shrinks by the time the ``tasks`` it overlaps lost (where the trace has no edge from
    them into it)."""
    if waits is None:
        waits = (kinds(sg) == "sync") & ~sg.info["host"].to_numpy(bool)
    waits = np.flatnonzero(waits)
    if waits.size == 0:
        return
    s, e = sg.info["start"].to_numpy(np.int64), sg.info["end"].to_numpy(np.int64)
    t = np.flatnonzero(tasks)
    lost = (e[t] - s[t]) * (1.0 - ch.scale[t])
    for w in waits:  # (a few waits per step)
        over = np.clip(np.minimum(e[t], e[w]) - np.maximum(s[t], s[w]), 0, None)
        frac = np.divide(over, np.maximum(e[t] - s[t], 1))
        gone = float((lost * frac).sum())
        if gone > 0:
            ch.scale[w] = min(ch.scale[w], max(0.0, 1.0 - gone / max(e[w] - s[w], 1)))
            ch.full[w] = True
