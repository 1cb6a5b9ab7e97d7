"""Shortest paths from a virtual source on a DAG in one topological pass, compiled with numba.

The critical path (``cpgraph``) and the what-if replay solve ``D(v) = min(start[v], min over
in-edges (D(u) + lost(u, v)))`` with non-negative ``lost``. Every edge of those graphs goes
forward in time, so the graph is a DAG unless equal-time edges close a cycle; on a DAG one pass
in topological order gives ``D`` in O(V + E), where Dijkstra needs O(E log V). The pass is a
plain loop over CSR arrays, so it is compiled (numba, ``cache=True``: compiled once per install,
then loaded from ``__pycache__``); numba is imported only when a graph is large enough for the
pass to pay for that import (``cpgraph.DAG_MIN_NODES``): ``cpgraph`` imports this module
lazily.

Contract (all arrays int64; the CSR holds each node's out-edges, ``indptr`` of n + 1 entries):

* :func:`order` -- a topological order of the n nodes, or None when the graph has a cycle (the
  caller then falls back to Dijkstra, which handles zero-lost equal-time cycles);
* :func:`forward` -- ``(D, pred)`` exactly as scipy's Dijkstra from a virtual source ``n``
  linked to node i with weight ``start[i]``: ``D`` identical; ``pred[v] = n`` when the source
  edge attains ``D(v)`` (Dijkstra scans the source first and updates only on a strict
  improvement, so the source wins every tie), otherwise the in-neighbour ``u`` attaining
  ``D(v)`` with the least ``D(u)`` (Dijkstra scans nodes by increasing distance, so the first
  to attain the minimum has the least ``D(u)``); among in-neighbours with equal ``D(u)`` --
  the only case where the two may differ, Dijkstra deciding by its heap's order -- the first in
  the topological order wins. ``pred`` always forms a tree (a predecessor precedes its node in
  the order);
* :func:`backward` -- ``D`` of the reversed graph (longest path *from* each node), in reverse
  topological order on the same forward CSR (no transpose needed);
* :func:`walk` -- the path ending at a node, read back from ``pred``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit


def compiled(fn: Callable[..., Any]) -> Any:
    """``numba.njit(cache=True, nogil=True)``: compiled once per install, the machine code
    cached beside the source (or in numba's per-user cache directory, or ``NUMBA_CACHE_DIR``);
    where none of those is writable numba refuses ``cache=True`` (a RuntimeError on import),
    and the function is then compiled in each process that uses it instead."""
    try:
        return njit(cache=True, nogil=True)(fn)
    except RuntimeError:
        return njit(nogil=True)(fn)


@compiled
def _topo(n, indptr, indices):  # pragma: no cover - compiled
    indeg = np.zeros(n, np.int64)
    for e in range(indptr[n]):
        indeg[indices[e]] += 1
    # depth-first (a stack): a node's chain successor is usually the next one ready, so the
    # pass walks each lane's chain in memory order
    out = np.empty(n, np.int64)
    stack = np.empty(n, np.int64)
    top = 0
    for i in range(n - 1, -1, -1):
        if indeg[i] == 0:
            stack[top] = i
            top += 1
    k = 0
    while top > 0:
        top -= 1
        u = stack[top]
        out[k] = u
        k += 1
        for e in range(indptr[u + 1] - 1, indptr[u] - 1, -1):
            v = indices[e]
            indeg[v] -= 1
            if indeg[v] == 0:
                stack[top] = v
                top += 1
    return out, k


@compiled
def _fwd(n, indptr, indices, lost, start, order):  # pragma: no cover - compiled
    d = start.copy()
    pred = np.full(n, n, np.int64)
    for i in range(n):
        u = order[i]
        du = d[u]
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            c = du + lost[e]
            p = pred[v]
            if c < d[v] or (c == d[v] and p != n and du < d[p]):
                d[v] = c
                pred[v] = u
    return d, pred


@compiled
def _bwd(n, indptr, indices, lost, start, order):  # pragma: no cover - compiled
    b = start.copy()
    for i in range(n - 1, -1, -1):
        u = order[i]
        best = b[u]
        for e in range(indptr[u], indptr[u + 1]):
            c = b[indices[e]] + lost[e]
            if c < best:
                best = c
        b[u] = best
    return b


@compiled
def _walk(pred, end, n):  # pragma: no cover - compiled
    k, m = end, 1
    while 0 <= pred[k] < n and m <= n:  # m: a guard, predecessors form a tree
        k = pred[k]
        m += 1
    out = np.empty(m, np.int64)
    k = end
    for i in range(m - 1, -1, -1):
        out[i] = k
        k = pred[k]
    return out


@compiled
def _lane_csr(t, w, first, cu, cv, cw):  # pragma: no cover - compiled
    n = t.size
    indptr = np.zeros(n + 1, np.int64)
    for k in range(n - 1):
        if not first[k + 1]:
            indptr[k + 1] += 1
    for e in range(cu.size):
        if t[cv[e]] >= t[cu[e]]:
            indptr[cu[e] + 1] += 1
    for k in range(n):
        indptr[k + 1] += indptr[k]
    m = indptr[n]
    indices = np.empty(m, np.int64)
    lost = np.empty(m, np.int64)
    pos = indptr[:n].copy()
    for k in range(n - 1):
        if not first[k + 1]:
            indices[pos[k]] = k + 1
            lost[pos[k]] = max(t[k + 1] - t[k] - w[k + 1], 0)
            pos[k] += 1
    for e in range(cu.size):  # in their order: a stable sort by source
        u, v = cu[e], cv[e]
        if t[v] >= t[u]:
            indices[pos[u]] = v
            lost[pos[u]] = max(t[v] - t[u] - cw[e], 0)
            pos[u] += 1
    return indptr, indices, lost


@compiled
def _innermost(st, nev, ln):  # pragma: no cover - compiled
    n = st.size
    active = np.full(n, -1, np.int64)
    last = np.full(n + 2, -1, np.int64)  # the latest start at each depth so far
    depth = 0
    for i in range(n):
        if st[i] == 1:
            depth += 1
            active[i] = nev[i]
            last[depth] = i
        else:
            depth -= 1
            if depth > 0:
                j = last[depth]
                if j >= 0 and ln[j] == ln[i]:
                    active[i] = nev[j]
    return active


@compiled
def _nodes(order, s, e, lane, sync_ev, host_ev, win, ws):  # pragma: no cover - compiled
    n = order.size
    n_ev = n // 2
    t = np.empty(n, np.int64)
    ln = np.empty(n, np.int64)
    w = np.zeros(n, np.int64)
    seg = np.full(n, -1, np.int64)
    prev_t = np.empty(n, np.int64)
    first = np.zeros(n, np.bool_)
    start_node = np.empty(n_ev, np.int64)
    end_node = np.empty(n_ev, np.int64)
    last_ev = np.full(n + 2, -1, np.int64)  # the latest start at each nesting depth so far
    last_ln = np.full(n + 2, -1, np.int64)
    depth = 0
    act = -1
    for i in range(n):
        o = order[i]
        if o >= n_ev:
            ev = o - n_ev
            ti = e[ev]
            end_node[ev] = i
        else:
            ev = o
            ti = s[ev]
            start_node[ev] = i
        lv = lane[ev]
        t[i] = ti
        ln[i] = lv
        if i == 0 or lv != ln[i - 1]:
            first[i] = True
            prev_t[i] = ws[win[ev]]
        else:
            prev_t[i] = t[i - 1]
            seg[i] = act
            w[i] = ti - t[i - 1]
            if act >= 0 and sync_ev[act]:
                w[i] = 0
        if seg[i] < 0 and host_ev[ev]:
            w[i] = 0
        if o < n_ev:
            depth += 1
            act = ev
            last_ev[depth] = ev
            last_ln[depth] = lv
        else:
            depth -= 1
            act = -1
            if depth > 0 and last_ev[depth] >= 0 and last_ln[depth] == lv:
                act = last_ev[depth]
    return t, ln, w, seg, start_node, end_node, first, prev_t


def nodes(order: np.ndarray, s: np.ndarray, e: np.ndarray, lane: np.ndarray,
          sync_ev: np.ndarray, host_ev: np.ndarray, win: np.ndarray, ws: np.ndarray
          ) -> tuple[np.ndarray, ...]:
    """The node arrays of ``stepgraph._graph`` in one compiled pass over the node order
    (``order``: nodes as [starts, ends] of the events): t, lane, chain weight, attributed
    event, start node and end node of each event, first-of-lane, previous time on the lane."""
    return _nodes(_i64(order), _i64(s), _i64(e), _i64(lane),
                  np.ascontiguousarray(sync_ev, np.bool_),
                  np.ascontiguousarray(host_ev, np.bool_), _i64(win), _i64(ws))


def lane_csr(t: np.ndarray, w: np.ndarray, first: np.ndarray, cu: np.ndarray, cv: np.ndarray,
             cw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``cpgraph.lane_csr`` compiled: one counting pass, one filling pass (same arrays)."""
    return _lane_csr(_i64(t), _i64(w), np.ascontiguousarray(first, np.bool_), _i64(cu),
                     _i64(cv), _i64(cw))


def innermost(st: np.ndarray, nev: np.ndarray, ln: np.ndarray) -> np.ndarray:
    """``stepgraph.innermost_active`` compiled: one pass keeping the latest start per nesting
    depth (the same rule: after an end, the latest earlier start at its depth, on its lane)."""
    return _innermost(_i64(st), _i64(nev), _i64(ln))


def _i64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.int64)


def order(n: int, indptr: np.ndarray, indices: np.ndarray) -> np.ndarray | None:
    """A topological order of the graph's n nodes, or None if it has a cycle."""
    out, k = _topo(n, _i64(indptr), _i64(indices))
    return out if k == n else None


def forward(n: int, indptr: np.ndarray, indices: np.ndarray, lost: np.ndarray,
            start: np.ndarray, topo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(D, pred) from the virtual source ``n`` (edge weights ``start``); ``topo``: :func:`order`."""
    return _fwd(n, _i64(indptr), _i64(indices), _i64(lost), _i64(start), topo)


def backward(n: int, indptr: np.ndarray, indices: np.ndarray, lost: np.ndarray,
             start: np.ndarray, topo: np.ndarray) -> np.ndarray:
    """D of the reversed graph (virtual source edge weights ``start``), on the forward CSR."""
    return _bwd(n, _i64(indptr), _i64(indices), _i64(lost), _i64(start), topo)


def walk(pred: np.ndarray, end: int, n: int) -> np.ndarray:
    """Nodes of the path ending at ``end``, first to last, following ``pred`` (a predecessor
    outside 0..n-1 ends it): ``cpgraph.path_nodes`` compiled, for paths of millions of nodes."""
    return _walk(_i64(pred), end, n)
