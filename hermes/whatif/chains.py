"""The replay's shortest distances with its plain chain runs folded first.

A node whose only in-edge comes from the node before it (a lane's next node with no launch or
wait edge into it) and with no release of its own is at its predecessor's distance plus that
edge's lost time. So the distances are solved on the other nodes only -- the out-edges of a
run's nodes leave from the run's first node, carrying the run's lost time so far -- and the
folded nodes are filled in after: about 400k -> 67k nodes on a 200k-event rank. Lost times are
whole ns (fractional ones rounded, as :func:`hermes.analyzers.critical_path.graph.shortest`
does), so every sum is exact and the distances are the same as on the whole graph. Graphs with
a node no release reaches are solved whole (``cpgraph.shortest``). The folding depends only on
which edges and releases there are, so a :class:`Plan` serves every replay with the same ones.

The folded graph is still a lane graph (a kept node's chain predecessor is the kept node before
it), so it is solved by the critical path's solver (:mod:`hermes.analyzers.critical_path.lanes`,
distances only). A replay's steps run in sequence: they are solved as parts (:class:`Parts`),
every step at once. All are exact: the distances are the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hermes.analyzers.critical_path import graph as cpgraph
from hermes.analyzers.critical_path import lanes as lanepass


@dataclass
class Plan:
    """How a graph of ``n`` nodes folds: per node its run's first node ``root`` and whether it
    is ``kept`` (its index among the kept ``new``); the chain edges whose lost time adds up
    along a run (``into``: positions in the edge list); the kept graph's edges (positions
    ``m`` of the edges into kept nodes, from ``root[u]`` to ``v``), their order by pair and
    each distinct pair's start in it (``pairs``; ``ku``, ``kv`` per pair). ``whole``: solve
    the whole graph (nothing gained by folding it)."""

    n: int
    whole: bool
    root: np.ndarray | None = None
    kept: np.ndarray | None = None
    new: np.ndarray | None = None
    into: np.ndarray | None = None
    m: np.ndarray | None = None
    order: np.ndarray | None = None
    pairs: np.ndarray | None = None
    ku: np.ndarray | None = None
    kv: np.ndarray | None = None
    #: per kept pair: a chain edge of the kept graph (``kv == ku + 1``), for the lane pass
    chain: np.ndarray | None = None
    #: the kept graph cut at its parts' entry nodes (:class:`Parts`; None: solved whole)
    parts: Parts | None = None


@dataclass
class Parts:
    """A kept graph made of parts in sequence (a replay's steps): every pair links two nodes
    of one part, except the pairs ``into`` part ``k + 1``'s entry node ``cut[k + 1]`` from
    nodes of part ``k`` (a step's lane ends -> the next step's start). Its distances are then
    ``D(v) = min(A(v), D(cut[part(v)]) + B(v))``: ``A`` the distances without the entry nodes
    (releases only), ``B`` those from each part's entry node alone -- two lane passes over
    all parts at once, each taking the rounds of one part, not of all of them in a row -- and
    ``D`` of the entry nodes one recurrence over the parts."""

    cut: np.ndarray  # kept index of each part's entry node
    part: np.ndarray  # part of each kept node
    inner: np.ndarray  # mask of the kept pairs within a part
    chain: np.ndarray  # per kept node: its in-pair from the node before is an inner chain pair
    into: np.ndarray  # the pairs into an entry node, by target part
    into_starts: np.ndarray  # the start of each target part's run in ``into``
    into_part: np.ndarray  # the target part of each run


def plan(n: int, u: np.ndarray, v: np.ndarray, start: np.ndarray,
         part: np.ndarray | None = None, cut: np.ndarray | None = None) -> Plan:
    """The folding of the graph of edges ``u -> v`` (unique pairs) and releases ``start``
    (inf: none); ``part`` per node and ``cut``, each part's entry node: the graph's parts in
    sequence (:class:`Parts`; used when the edges keep to that shape)."""
    if u.size == 0:
        return Plan(n, True)
    chain = v == u + 1
    indeg = np.bincount(v, minlength=n)
    fold = np.zeros(n, bool)
    vc = v[chain]  # (gathered once)
    fold[vc] = indeg[vc] == 1
    del vc
    fold &= np.isinf(start)
    into = np.flatnonzero(chain & fold[v])
    root = np.arange(n)  # (in place: no index-sized temporaries)
    root[fold] = 0
    np.maximum.accumulate(root, out=root)
    kept = ~fold
    new = np.cumsum(kept)
    new -= 1
    nk = int(kept.sum())
    m = np.flatnonzero(kept[v])
    ku, kv = new[root[u[m]]], new[v[m]]
    order = np.argsort(ku * nk + kv, kind="stable")
    ks = (ku * nk + kv)[order]
    pairs = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]) if ks.size else \
        np.empty(0, np.int64)
    ku, kv = ku[order][pairs], kv[order][pairs]
    p = Plan(n, False, root, kept, new, into, m, order, pairs, ku, kv, kv == ku + 1)
    if part is not None and cut is not None:
        p.parts = _parts(p, part[kept], new[cut], kept[cut])
    return p


def _parts(p: Plan, part: np.ndarray, cut: np.ndarray, cut_kept: np.ndarray) -> Parts | None:
    """:class:`Parts` of the kept graph of ``p`` (``part``: per kept node; ``cut``: each
    part's entry node, kept index), None when its pairs do not keep to that shape."""
    assert p.ku is not None and p.kv is not None and p.chain is not None
    nk = part.size
    if cut.size < 2 or not cut_kept.all() or \
            not np.array_equal(part[cut], np.arange(cut.size)):
        return None
    is_cut = np.zeros(nk, bool)
    is_cut[cut] = True
    pu, pv = part[p.ku], part[p.kv]
    into = is_cut[p.kv]
    inner = ~into
    if not (np.array_equal(pu[inner], pv[inner]) and np.array_equal(pu[into] + 1, pv[into])):
        return None
    chain = np.zeros(nk, bool)
    chain[p.kv[p.chain & inner]] = True
    pos = np.flatnonzero(into)
    o, starts = _groups(pv[pos])
    return Parts(cut, part, inner, chain, pos[o], starts, pv[pos[o]][starts])


def solve(p: Plan, u: np.ndarray, v: np.ndarray, lost: np.ndarray, start: np.ndarray
          ) -> np.ndarray:
    """Shortest distances (ns) of the graph ``p`` was made for, under lost times ``lost``
    (per edge) and releases ``start`` (finite where ``p``'s were)."""
    if p.whole:
        return cpgraph.shortest(p.n, u, v, lost, start, preds=False)[0]
    assert p.root is not None and p.kept is not None and p.new is not None
    step = np.zeros(p.n, np.int64)
    step[v[p.into]] = lost[p.into]
    cum = np.cumsum(step)
    off = cum - cum[p.root]
    kl = lost[p.m] + off[u[p.m]]
    least = np.minimum.reduceat(kl[p.order], p.pairs) if p.pairs.size else kl
    d = _kept(p, least, start[p.kept])
    if d is None:  # (unreached: as the whole graph gives it)
        return cpgraph.shortest(p.n, u, v, lost, start, preds=False)[0]
    return d[p.new[p.root]] + off


def _kept(p: Plan, least: np.ndarray, start: np.ndarray) -> np.ndarray | None:
    """Distances (int64) of the kept graph under per pair lost times ``least`` and releases
    ``start`` (inf: none): by parts where the plan has them, else one lane pass; None when a
    node is unreached."""
    assert p.ku is not None and p.kv is not None and p.chain is not None
    nk = start.size
    s, big, lost = cpgraph.int_weights(start, least)
    if p.parts is not None:
        d = _by_parts(p.parts, p.ku, p.kv, lost, s)
        if d is not None:
            return None if bool((d >= cpgraph.UNREACHED).any()) else d
    ch = p.chain
    chain = np.zeros(nk, bool)
    chain[p.kv[ch]] = True
    clost = np.zeros(nk, np.int64)
    clost[p.kv[ch]] = lost[ch]
    x = ~ch
    got = lanepass.shortest(nk, chain, clost, p.ku[x], p.kv[x], lost[x], s, preds=False,
                            inf=big)
    if got is None:
        raise OverflowError("replay distances do not fit int64 ns")
    d = got[0]
    return None if big is not None and bool((d >= big).any()) else d


def _by_parts(pt: Parts, ku: np.ndarray, kv: np.ndarray, lost: np.ndarray, start: np.ndarray
              ) -> np.ndarray | None:
    """Distances of a kept graph of parts (:class:`Parts`) under per pair ``lost`` and
    releases ``start`` (int64, :data:`cpgraph.UNREACHED`: none); reaching
    ``cpgraph.UNREACHED``: unreached. None when the sums could overflow int64."""
    big = cpgraph.UNREACHED
    nk = start.size
    clost = np.zeros(nk, np.int64)
    cin = pt.inner & (kv == ku + 1)
    clost[kv[cin]] = lost[cin]
    x = pt.inner & ~cin
    cu, cv, cl = ku[x], kv[x], lost[x]
    s_a = start.copy()
    s_a[pt.cut] = big
    s_b = np.full(nk, big, np.int64)
    s_b[pt.cut] = 0
    # (no release but the entries' -- a replay without loader workers --: nothing reaches a
    # node without an entry, A is unreached everywhere and needs no pass)
    got_a = lanepass.shortest(nk, pt.chain, clost, cu, cv, cl, s_a, preds=False, inf=big) \
        if bool((s_a < big).any()) else (np.full(nk, big, np.int64), None)
    got_b = lanepass.shortest(nk, pt.chain, clost, cu, cv, cl, s_b, preds=False, inf=big) \
        if got_a is not None else None
    if got_a is None or got_b is None:
        return None
    a, b = got_a[0], got_b[0]
    # each part's entry: the least over its in-pairs of (A or the previous entry + B) + lost
    # (one recurrence over the parts, on per part minima: no per-event loop)
    e = pt.into
    via_a = np.minimum(a[ku[e]] + lost[e], big)
    via_b = np.minimum(b[ku[e]] + lost[e], big)
    if e.size:
        via_a = np.minimum.reduceat(via_a, pt.into_starts)
        via_b = np.minimum.reduceat(via_b, pt.into_starts)
    best_a = np.full(pt.cut.size, big, np.int64)
    best_b = np.full(pt.cut.size, big, np.int64)
    best_a[pt.into_part], best_b[pt.into_part] = via_a, via_b
    own = start[pt.cut].tolist()
    ba, bb = best_a.tolist(), best_b.tolist()
    entry = [min(own[0], big)]
    for k in range(1, pt.cut.size):
        entry.append(min(own[k], ba[k], entry[-1] + bb[k], big))
    ent = np.asarray(entry, np.int64)
    return np.minimum(np.minimum(a, ent[pt.part] + b), big)


def shortest(n: int, u: np.ndarray, v: np.ndarray, lost: np.ndarray, start: np.ndarray,
             part: np.ndarray | None = None, cut: np.ndarray | None = None) -> np.ndarray:
    """``cpgraph.shortest``'s distances of one graph (:func:`plan` then :func:`solve`;
    ``part``, ``cut``: as :func:`plan` takes them)."""
    return solve(plan(n, u, v, start, part, cut), u, v, lost, start)


@dataclass
class RawPlan:
    """:class:`Plan` of a graph given as raw edges (``ru -> rv``; pairs may repeat, each pair
    weighing its least lost time), of which the edges in ``use`` (``idx``) count: maps each
    counted raw edge straight to where its lost time goes (``into``: a folded node's run step,
    one edge per folded node, whose node is ``into_v``; ``kept``: the edges into kept nodes,
    by kept pair, each pair's run starting at ``kept_starts``), so a replay never builds the
    deduplicated edge list. The plan is made of the raw edges themselves: a repeated pair
    counts twice in a node's in-degree (such a node is kept, not folded: the distances are the
    same) and the kept pairs take their least lost time as every kept pair does.
    :meth:`pairs` gives the deduplicated pairs where a whole-graph solve needs them."""

    plan: Plan
    idx: np.ndarray | None  # (None: every edge counts)
    into: np.ndarray | None = None  # raw edges into folded nodes
    into_v: np.ndarray | None = None
    kept: np.ndarray | None = None  # raw edges into kept nodes, by kept pair
    kept_starts: np.ndarray | None = None
    ru: np.ndarray | None = None
    rv: np.ndarray | None = None
    _pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(order, starts, pu, pv)``: the counted edges' stable order by pair, the start of
        each distinct pair in it and each pair's nodes (computed on first use)."""
        if self._pairs is None:
            assert self.ru is not None and self.rv is not None
            u, v = (self.ru, self.rv) if self.idx is None else \
                (self.ru[self.idx], self.rv[self.idx])
            order, starts = _groups(u * self.plan.n + v)
            head = order[starts]
            self._pairs = (order, starts, u[head], v[head])
        return self._pairs

    def least(self, lost: np.ndarray) -> np.ndarray:
        """Each distinct pair's least lost time (:meth:`pairs`) under per raw edge ``lost``."""
        order, starts, _, _ = self.pairs()
        counted = lost if self.idx is None else lost[self.idx]
        return np.minimum.reduceat(counted[order], starts) if starts.size else lost[:0]


def _groups(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stable order of ``key`` and the start of each run of equal keys in it."""
    o = np.argsort(key, kind="stable")
    k = key[o]
    return o, (np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if k.size else
               np.empty(0, np.int64))


def raw_plan(n: int, ru: np.ndarray, rv: np.ndarray, use: np.ndarray, start: np.ndarray,
             part: np.ndarray | None = None, cut: np.ndarray | None = None) -> RawPlan:
    """The :class:`RawPlan` of raw edges ``ru -> rv`` (those in ``use``), releases ``start``
    (``part``, ``cut``: as :func:`plan` takes them)."""
    every = bool(use.all())  # (every edge counts: no index of them, no gathers)
    idx = None if every else np.flatnonzero(use)
    rp = RawPlan(Plan(n, True), idx, ru=ru, rv=rv)
    if (ru.size if idx is None else idx.size) == 0:
        return rp
    u, v = (ru, rv) if idx is None else (ru[idx], rv[idx])
    p = rp.plan = plan(n, u, v, start, part, cut)
    assert p.into is not None and p.m is not None and p.order is not None \
        and p.pairs is not None
    rp.into, rp.into_v = (p.into if idx is None else idx[p.into]), v[p.into]
    kept = p.m[p.order]
    rp.kept, rp.kept_starts = (kept if idx is None else idx[kept]), p.pairs
    return rp


def raw_solve(rp: RawPlan, ru: np.ndarray, lost: np.ndarray, start: np.ndarray,
              at: np.ndarray | None = None) -> np.ndarray:
    """:func:`solve` of the graph ``rp`` was made for under per raw edge lost times ``lost``
    (the counted ones used) and releases ``start`` (finite where ``rp``'s were); ``at``: the
    distances of those nodes only (the folded nodes' others are not unfolded)."""
    p = rp.plan
    if p.whole or rp.into is None or rp.kept is None or rp.kept_starts is None:
        _, _, pu, pv = rp.pairs()
        d = cpgraph.shortest(p.n, pu, pv, rp.least(lost), start, preds=False)[0]
        return d if at is None else d[at]
    assert p.root is not None and p.kept is not None and p.new is not None
    step = np.zeros(p.n, np.int64)
    step[rp.into_v] = lost[rp.into]  # (one edge into each folded node)
    cum = np.cumsum(step, out=step)
    # a node's offset from its run's first node: cum - cum[root] (where it is needed)
    ku = ru[rp.kept]
    kl = lost[rp.kept] + (cum[ku] - cum[p.root[ku]])
    least = np.minimum.reduceat(kl, rp.kept_starts) if rp.kept_starts.size < kl.size else kl
    d = _kept(p, least, start[p.kept])
    if d is None:  # (unreached: as the whole graph gives it)
        _, _, pu, pv = rp.pairs()
        d = cpgraph.shortest(p.n, pu, pv, rp.least(lost), start, preds=False)[0]
        return d if at is None else d[at]
    if at is None:
        return d[p.new[p.root]] + (cum - cum[p.root])
    root = p.root[at]
    return d[p.new[root]] + (cum[at] - cum[root])
