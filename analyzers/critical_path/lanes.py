"""Shortest paths from a virtual source on a *lane graph*: the one solver of the step graph's
distances (the critical path's longest paths and the what-if replay's step times).

The problem: ``D(v) = min(start[v], min over in-edges (D(u) + lost(u, v)))`` with non-negative
``lost`` (integer ns). Nodes are laid out lane by lane; a **chain edge** links node ``k - 1`` to
node ``k`` (``chain[k]``), every other edge is a **cross edge**. Any edge list is a lane graph
(an edge ``k - 1 -> k`` is a chain edge, the others cross edges).

``D`` comes from one pass over the nodes in topological order, compiled (``_lanes.c``, built by
``pip install``: depth-first along each lane, without the interpreter lock). Where the module
is not compiled (optional: no C compiler at install time, or ``HERMES_NO_EXTENSION=1``), and on
a graph with a cycle (equal-time edges closing a loop: the compiled pass declines it), ``D``
comes from numpy rounds instead: within a lane ``D(k) = min(X(k), D(k - 1) + lost_k)``, where
``X(k)`` is the best of the node's source weight and its cross in-edges, is a min-plus prefix
scan (``P``: the prefix sum of the lane's lost times; ``D(k) = P(k) + min over j <= k (X(j) -
P(j))``, one ``np.minimum.accumulate``); a round scans the lanes whose ``X`` improved, then
relaxes the cross edges out of the nodes whose ``D`` changed, until nothing changes
(Bellman-Ford with whole lanes per step: exact for any non-negative weights). Both give the
same ``D``.

**Tie rule** for the predecessors (:func:`preds`, computed from ``D`` whichever pass gave it):
the source wins a tie; then the in-neighbour with the least ``D(u)``; between in-neighbours of
equal ``D(u)`` the chain predecessor, then the cross edge's source with the least index. On a
graph with a zero-lost cycle these choices can close a loop; the nodes whose predecessors do
not lead to the source then take, among their in-neighbours attaining ``D``, one that does,
in breadth-first order from those that do (least ``D(u)``, then least index, at each level).
"""

from __future__ import annotations

import os

import numpy as np

try:  # the same distances in one compiled pass where the graph is a DAG (``_lanes.c``)
    if os.environ.get("HERMES_NO_EXTENSION", "") not in ("", "0"):
        raise ImportError("HERMES_NO_EXTENSION is set")
    from hermes.analyzers.critical_path import _lanes
except ImportError:  # not compiled (no C compiler at install time), or switched off
    _lanes = None

#: whether the compiled pass is loaded in this process
COMPILED = _lanes is not None

_LIMIT = 2**62


#: segments scanned one slice each (one ``np.minimum.accumulate`` per segment, in place) when
#: there are at most this many; more are scanned in one pass with an offset per segment
FEW_SEGMENTS = 64


def _ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenated ``arange(lo[i], hi[i])``, the range number of each element (None when
    there are at most :data:`FEW_SEGMENTS` ranges: not needed) and where each range starts in
    the concatenation."""
    ln = hi - lo
    off = np.zeros(lo.size, np.int64)
    np.cumsum(ln[:-1], out=off[1:])
    if lo.size <= FEW_SEGMENTS:
        parts = [np.arange(x, y) for x, y in zip(lo.tolist(), hi.tolist(), strict=True)]
        return (np.concatenate(parts) if parts else np.empty(0, np.int64)), None, off
    total = int(ln.sum())
    rid = np.repeat(np.arange(lo.size), ln)
    return lo[rid] + (np.arange(total) - off[rid]), rid, off


def _scan(x: np.ndarray, p: np.ndarray, sid: np.ndarray | None, inf: int | None = None,
          starts: np.ndarray | None = None) -> np.ndarray | None:
    """Segmented ``p + prefix-min(x - p)`` (segments: equal, non-decreasing ``sid``; or
    beginning at ``starts``, ascending from 0: then ``sid`` may be None when there are at most
    :data:`FEW_SEGMENTS`); None when the offset that separates the segments would overflow
    int64. ``inf``: values of ``x`` at or above it are infinite (they stand in the scan for one
    more than the largest finite key, and a node whose minimum is one of them gets ``inf``).
    A few segments are scanned slice by slice, in place (the same minima as the offsets')."""
    key = x - p
    if key.size == 0:
        return key
    cap = None
    if inf is not None:
        fin = x < inf
        if not fin.all():
            cap = int(key[fin].max(initial=0)) + 1
            key[~fin] = cap
    lo, hi = int(key.min()), int(key.max())
    big = hi - lo + 1
    nseg = starts.size if starts is not None else int(sid[-1]) + 1
    if nseg * big + abs(lo) + abs(hi) >= _LIMIT:
        return None
    if starts is not None and nseg <= FEW_SEGMENTS:
        ends = [*starts[1:].tolist(), key.size]
        for a, b in zip(starts.tolist(), ends, strict=True):
            np.minimum.accumulate(key[a:b], out=key[a:b])
        m = key
    else:
        if sid is None:
            sid = np.repeat(np.arange(nseg), np.diff(np.append(starts, key.size)))
        off = sid * big
        key -= off
        m = np.minimum.accumulate(key, out=key)
        m += off
        del off
    over = m >= cap if cap is not None else None
    m += p
    if over is not None:
        m[over] = inf
    return m


def shortest(n: int, chain: np.ndarray, chain_lost: np.ndarray, cu: np.ndarray,
             cv: np.ndarray, cl: np.ndarray, start: np.ndarray, preds: bool = True,
             inf: int | None = None
             ) -> tuple[np.ndarray, np.ndarray | None] | None:  # long: one pass, its rounds
    """(D, pred) of the lane graph: ``chain[k]`` marks a chain edge ``k - 1 -> k`` of lost
    ``chain_lost[k]``; cross edges ``cu -> cv`` of lost ``cl`` (any order, duplicates allowed);
    ``start``: source weights (int64). ``pred`` (None unless ``preds``): ``n`` for the source.
    ``inf``: source weights at or above it mean no source edge; a node that stays unreachable
    gets ``D = inf`` (and the source as predecessor). None when the numbers could overflow
    int64 (sums beyond 2**60 ns)."""
    start = np.asarray(start, np.int64)
    chain = np.asarray(chain, bool).copy()
    if n == 0:
        z = np.empty(0, np.int64)
        return z, (z if preds else None)
    chain[0] = False
    c = np.where(chain, chain_lost, 0).astype(np.int64, copy=False)
    fin = start if inf is None else start[start < inf]
    # distances relative to the least source weight (clocks in ns since the epoch are ~2**61):
    # every D is some source weight plus lost times, so D - base is solved and base added back
    base = int(fin.min()) if fin.size else 0
    span = int(fin.max()) - base if fin.size else 0
    if int(c.sum()) + span + int(cl.max(initial=0)) >= _LIMIT // 4 \
            or (inf is not None and inf > _LIMIT // 2):
        return None
    if base:
        got = shortest(n, chain, chain_lost, cu, cv, cl,
                       np.where(start < inf, start - base, start) if inf is not None
                       else start - base, preds=preds, inf=inf)
        if got is None:
            return None
        d = got[0].copy()
        d[d < (inf if inf is not None else _LIMIT)] += base
        return d, got[1]
    cu, cv, cl = (np.asarray(a, np.int64) for a in (cu, cv, cl))
    if _lanes is not None:  # one compiled pass in topological order (not on a cycle)
        d = np.empty(n, np.int64)
        if _lanes.distances(*map(np.ascontiguousarray, (chain, c, cu, cv, cl, start)), inf, d):
            # (a DAG: every choice of the tie rule is free of loops)
            return d, (preds_of(n, d, chain, c, cu, cv, cl, start) if preds else None)
    seg0 = np.flatnonzero(~chain)  # each lane's (segment's) first node
    seg_end = np.append(seg0[1:], n)
    # lane of each node: only the offset scan of many lanes needs it for every node
    sid = np.cumsum(~chain) - 1 if seg0.size > FEW_SEGMENTS else None
    p = np.cumsum(c)
    # prefix sum of the chain's lost within the lane
    p -= np.repeat(p[seg0] - c[seg0], seg_end - seg0)
    d = _scan(start, p, sid, inf, seg0)
    if d is None:
        return None
    x = start.copy()
    o = np.argsort(cu, kind="stable")
    cu, cv, cl = cu[o], cv[o], cl[o]
    optr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(cu, minlength=n), out=optr[1:])
    e = np.arange(cu.size)  # cross edges out of the nodes whose D changed (first: all)
    while e.size:  # (each round settles at least one more node: at most n rounds)
        tv = cv[e]
        cand = d[cu[e]] + cl[e]
        if inf is not None:
            cand = np.minimum(cand, inf)
        better = cand < x[tv]
        if not better.any():
            break
        tv, cand = tv[better], cand[better]
        np.minimum.at(x, tv, cand)
        mark = np.zeros(n, bool)
        mark[tv] = True
        ch = np.flatnonzero(mark)  # nodes whose X improved, ascending
        s = sid[ch] if sid is not None else np.searchsorted(seg0, ch, side="right") - 1
        new = np.r_[True, s[1:] != s[:-1]]
        f, fe = ch[new], seg_end[s[new]]  # each lane's first improved node, the lane's end
        if f.size <= FEW_SEGMENTS:
            idx = _rescan(x, p, d, f, fe, inf)
            if idx is None:
                return None
        else:
            idx, rid, at = _ranges(f, fe)
            nd = _scan(x[idx], p[idx], rid, inf, at)
            if nd is None:
                return None
            imp = nd < d[idx]
            idx = idx[imp]
            d[idx] = nd[imp]
        e = _edges_out(optr, idx, cu)
    if not preds:
        return d, None
    pred = preds_of(n, d, chain, c.copy(), cu, cv, cl, start)
    if has_cycle(pred, d):
        pred = _unloop(n, d, pred, chain, c, cu, cv, cl)
    return d, pred


def compiled_pass():
    """The compiled module (``_lanes``: also the step graph's passes, ``graph.lane_both``'s), or
    None where it is not compiled or switched off (``HERMES_NO_EXTENSION=1``)."""
    return _lanes


def _rescan(x: np.ndarray, p: np.ndarray, d: np.ndarray, f: np.ndarray, fe: np.ndarray,
            inf: int | None) -> np.ndarray | None:
    """A round's scan of the lanes from ``f`` to ``fe`` (a few ranges), slice by slice:
    ``d`` lowered in place where the scan of ``x`` improves it; returns the nodes lowered,
    ascending (None: :func:`_scan`'s overflow, checked on all ranges together as it does)."""
    rng = list(zip(f.tolist(), fe.tolist(), strict=True))
    keys = [x[a:b] - p[a:b] for a, b in rng]
    cap = None
    if inf is not None:
        fins = [x[a:b] < inf for a, b in rng]
        if not all(fi.all() for fi in fins):
            cap = max(int(k[fi].max(initial=0)) for k, fi in zip(keys, fins, strict=True)) + 1
            for k, fi in zip(keys, fins, strict=True):
                k[~fi] = cap
    lo, hi = min(int(k.min()) for k in keys), max(int(k.max()) for k in keys)
    if len(keys) * (hi - lo + 1) + abs(lo) + abs(hi) >= _LIMIT:
        return None
    out = []
    for (a, b), k in zip(rng, keys, strict=True):
        np.minimum.accumulate(k, out=k)
        over = k >= cap if cap is not None else None
        k += p[a:b]
        if over is not None:
            k[over] = inf
        imp = np.flatnonzero(k < d[a:b])
        if imp.size:
            np.minimum(d[a:b], k, out=d[a:b])
            imp += a
            out.append(imp)
    return np.concatenate(out) if out else np.empty(0, np.int64)


def _edges_out(optr: np.ndarray, idx: np.ndarray, cu: np.ndarray) -> np.ndarray:
    """The cross edges out of the nodes ``idx`` (ascending), ascending (``cu`` sorted, its
    out-edge pointers ``optr``): through a mask of the nodes when they outnumber the edges,
    else by the nodes' pointer ranges (the cost of a round stays that of its nodes)."""
    if idx.size > cu.size:
        lowered = np.zeros(optr.size - 1, bool)
        lowered[idx] = True
        return np.flatnonzero(lowered[cu])
    lo, hi = optr[idx], optr[idx + 1]
    has = hi > lo
    lo, hi = lo[has], hi[has]
    ln = hi - lo
    total = int(ln.sum())
    if total == 0:
        return np.empty(0, np.int64)
    off = np.zeros(lo.size, np.int64)
    np.cumsum(ln[:-1], out=off[1:])
    rid = np.repeat(np.arange(lo.size), ln)
    return lo[rid] + (np.arange(total) - off[rid])


def preds_of(n: int, d: np.ndarray, chain: np.ndarray, c: np.ndarray, cu: np.ndarray,
             cv: np.ndarray, cl: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Each node's predecessor (``n``: the source) under the tie rule of the module docstring,
    from the distances ``d``; the arguments as :func:`shortest` takes them, ``c`` the chain's
    lost times (zero where no chain edge), which this overwrites."""
    pred = np.full(n, n, np.int64)
    tight = np.zeros(n, bool)  # the chain edge into the node attains D (chain[0] is False)
    c1 = np.add(c[1:], d[:-1], out=c[1:])  # (c is the caller's own, not needed after)
    np.equal(c1, d[1:], out=tight[1:])
    del c1
    tight &= chain
    k = np.flatnonzero(tight[1:])  # nodes k + 1
    pred[1:][k] = k
    del k
    t = np.flatnonzero(d[cu] + cl == d[cv])
    if t.size:
        du, u, v = d[cu[t]], cu[t], cv[t]
        if int(du.max()) < _LIMIT // (n + 1) and int(du.min()) >= 0:
            # the least (D(u), u) per target: one int64 key, np.minimum.at
            key = np.full(n, np.iinfo(np.int64).max)
            np.minimum.at(key, v, du * (n + 1) + u)
            v = np.unique(v)
            bu, bd = key[v] % (n + 1), key[v] // (n + 1)
        else:
            o = np.lexsort((u, du, v))  # by target, then D(u), then u
            u, du, v = u[o], du[o], v[o]
            first = np.r_[True, v[1:] != v[:-1]]
            bu, bd, v = u[first], du[first], v[first]
        # D(u) of the chain predecessor where it attains D (else none)
        best = np.where(tight[v], d[v - 1], np.iinfo(np.int64).max)
        take = bd < best
        pred[v[take]] = bu[take]
    pred[start == d] = n  # the source wins every tie
    return pred


def has_cycle(pred: np.ndarray, d: np.ndarray) -> bool:
    """Whether the predecessors close a loop. A loop keeps ``D`` equal (``D`` never increases
    along predecessors), so only nodes whose predecessor has their own ``D`` (zero-lost
    in-neighbours: an equal-time cycle of the graph) can be on one: pointer doubling on those."""
    n = pred.size
    # every step of a loop keeps D and one at least goes to a higher node: none such, no loop
    # (the nodes stepping up are few: predecessors are mostly the chain's k - 1)
    up = np.flatnonzero(pred > np.arange(n))
    up = up[pred[up] < n]
    if not (d[pred[up]] == d[up]).any():
        return False
    z = np.flatnonzero(pred < n)
    z = z[d[pred[z]] == d[z]]
    inz = np.zeros(n + 1, bool)
    inz[z] = True
    p = np.full(n + 1, n)
    p[z] = np.where(inz[pred[z]], pred[z], n)
    steps = 1
    while steps <= z.size:
        p = p[p]
        steps *= 2
    return bool((p[z] != n).any())


def _reaches_source(pred: np.ndarray) -> np.ndarray:
    """Nodes whose predecessors lead to the source (``n``), by pointer doubling."""
    n = pred.size
    p = np.append(np.where((pred >= 0) & (pred <= n), pred, n), n)
    for _ in range(max(1, int(n).bit_length())):
        p = p[p]
    return p[:n] == n


def _unloop(n: int, d: np.ndarray, pred: np.ndarray, chain: np.ndarray, c: np.ndarray,
            cu: np.ndarray, cv: np.ndarray, cl: np.ndarray) -> np.ndarray:
    """The predecessors with their loops broken (the module docstring's last rule): level by
    level from the nodes that reach the source, each node that does not takes the in-neighbour
    attaining ``D`` among those already reached with the least (``D(u)``, index)."""
    pred = pred.copy()
    k = np.flatnonzero(chain[1:]) + 1  # chain edges k - 1 -> k
    k = k[d[k - 1] + c[k] == d[k]]
    t = np.flatnonzero(d[cu] + cl == d[cv])
    tu = np.concatenate([k - 1, cu[t]])
    tv = np.concatenate([k, cv[t]])
    reached = _reaches_source(pred)
    while not reached.all():
        m = reached[tu] & ~reached[tv]
        if not m.any():
            break  # (cannot happen: every D is attained by some in-edge or the source)
        u, v = tu[m], tv[m]
        o = np.lexsort((u, d[u], v))
        u, v = u[o], v[o]
        first = np.r_[True, v[1:] != v[:-1]]
        pred[v[first]] = u[first]
        reached[v[first]] = True
    return pred
