"""The replay's shortest distances with its plain chain runs folded first.

A node whose only in-edge comes from the node before it (a lane's next node with no launch or
wait edge into it) and with no release of its own is at its predecessor's distance plus that
edge's lost time. So the distances are solved (``cpgraph._shortest``: Dijkstra) on the other
nodes only -- the out-edges of a run's nodes leave from the run's first node, carrying the
run's lost time so far -- and the folded nodes are filled in after: about 400k -> 67k nodes on
a 200k-event rank. Lost times are integers, so every sum is exact and the distances are the
same as on the whole graph. Graphs the DAG pass solves (``cpgraph.DAG_MIN_NODES``) and graphs
with a node no release reaches are solved whole. The folding depends only on which edges and
releases there are, so a :class:`Plan` serves every replay with the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hermes.analyzers import cpgraph

_UNREACHED = np.iinfo(np.int64).min  # (``cpgraph``'s distance of a node nothing reaches)


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


def plan(n: int, u: np.ndarray, v: np.ndarray, start: np.ndarray) -> Plan:
    """The folding of the graph of edges ``u -> v`` (unique pairs) and releases ``start``
    (inf: none)."""
    if n >= cpgraph.DAG_MIN_NODES or u.size == 0:
        return Plan(n, True)
    chain = v == u + 1
    indeg = np.bincount(v, minlength=n)
    fold = np.zeros(n, bool)
    fold[v[chain]] = indeg[v[chain]] == 1
    fold &= np.isinf(start)
    into = np.flatnonzero(chain & fold[v])
    root = np.maximum.accumulate(np.where(fold, 0, np.arange(n)))
    kept = ~fold
    new = np.cumsum(kept) - 1
    nk = int(kept.sum())
    m = np.flatnonzero(kept[v])
    ku, kv = new[root[u[m]]], new[v[m]]
    order = np.argsort(ku * nk + kv, kind="stable")
    ks = (ku * nk + kv)[order]
    pairs = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    return Plan(n, False, root, kept, new, into, m, order, pairs, ku[order][pairs],
                kv[order][pairs])


def solve(p: Plan, u: np.ndarray, v: np.ndarray, lost: np.ndarray, start: np.ndarray
          ) -> np.ndarray:
    """Shortest distances (ns) of the graph ``p`` was made for, under lost times ``lost``
    (per edge) and releases ``start`` (finite where ``p``'s were)."""
    if p.whole:
        return cpgraph._shortest(p.n, u, v, lost, start)[0]
    assert p.root is not None and p.kept is not None and p.new is not None
    step = np.zeros(p.n, np.int64)
    step[v[p.into]] = lost[p.into]
    cum = np.cumsum(step)
    off = cum - cum[p.root]
    kl = lost[p.m] + off[u[p.m]]
    least = np.minimum.reduceat(kl[p.order], p.pairs)
    d = cpgraph._shortest(int(p.kept.sum()), p.ku, p.kv, least, start[p.kept])[0]
    if (d == _UNREACHED).any():
        return cpgraph._shortest(p.n, u, v, lost, start)[0]
    return d[p.new[p.root]] + off


def shortest(n: int, u: np.ndarray, v: np.ndarray, lost: np.ndarray, start: np.ndarray
             ) -> np.ndarray:
    """``cpgraph._shortest``'s distances of one graph (:func:`plan` then :func:`solve`)."""
    return solve(plan(n, u, v, start), u, v, lost, start)
