/* hermes.analyzers.critical_path._lanes: the lane graph's shortest distances in one topological pass (C).
 *
 * The problem is analyzers/lanepass.py's: nodes 0..n-1, a chain edge k-1 -> k where chain[k]
 * (lost chain_lost[k]), cross edges cu -> cv (lost cl), source weights start; find
 *     D(v) = min(start[v], min over in-edges u -> v of D(u) + lost(u, v)).
 * Every lost time is >= 0. lanepass solves it in numpy by rounds of lane scans; on a DAG one
 * pass in topological order (Kahn's algorithm over the out-edges) gives the same D, which is
 * unique, in O(V + E), without the interpreter lock. A graph with a cycle (equal-time edges
 * closing a loop) is left to lanepass: distances() says so and writes nothing of use.
 *
 * ``inf`` (or -1: none): a source weight at or above it is no source edge, and a distance is
 * at most ``inf`` (a node no source reaches gets ``inf``), as lanepass's cross-edge rounds clip.
 *
 * The critical path's other per-node and per-event loops, each the compiled form of a numpy
 * fallback that gives the same arrays (the module is optional): graph_both() (graph.lane_both:
 * the step graph's forward distances, tie-rule predecessors and backward distances in one
 * topological pass), nodes() (stepgraph.node_arrays), bounds() and members()
 * (analysis.step_groups, analysis.group_members).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    int held;
} Buf;

/* A C-contiguous buffer of ``n`` items of ``itemsize`` bytes (writable where asked). */
static int
get(PyObject *obj, Buf *b, Py_ssize_t n, Py_ssize_t itemsize, int writable, const char *what)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &b->view, flags) < 0)
        return -1;
    b->held = 1;
    const char *f = b->view.format ? b->view.format : "B";
    if (f[0] == '<' || f[0] == '=' || f[0] == '@')
        f++;
    int ok = b->view.itemsize == itemsize && b->view.len == n * itemsize && f[1] == 0;
    if (itemsize == 8)
        ok = ok && (f[0] == 'q' || (f[0] == 'l' && sizeof(long) == 8));
    else if (itemsize == 4)
        ok = ok && (f[0] == 'i' || (f[0] == 'l' && sizeof(long) == 4));
    else
        ok = ok && (f[0] == '?' || f[0] == 'B' || f[0] == 'b');
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items of %s", what, n,
                     itemsize == 8 ? "int64" : itemsize == 4 ? "int32" : "bool");
        return -1;
    }
    return 0;
}

static void
release(Buf *bufs, int count)
{
    for (int i = 0; i < count; i++)
        if (bufs[i].held)
            PyBuffer_Release(&bufs[i].view);
}

static int
node_count(PyObject *obj, Py_ssize_t size, Py_ssize_t *n)
{
    Py_buffer probe;
    if (PyObject_GetBuffer(obj, &probe, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    *n = probe.len / size;
    PyBuffer_Release(&probe);
    return 0;
}

static int
check_edges(const int64_t *cu, const int64_t *cv, Py_ssize_t m, Py_ssize_t n)
{
    for (Py_ssize_t e = 0; e < m; e++)
        if (cu[e] < 0 || cu[e] >= n || cv[e] < 0 || cv[e] >= n) {
            PyErr_SetString(PyExc_IndexError, "cross edge node out of range");
            return -1;
        }
    return 0;
}

/* Relax u -> v with lost ``w``: d[v] lowered to d[u] + w (capped at ``inf`` where there is
 * one) when d[u] is finite. */
static inline void
relax(int64_t *d, int64_t du, int finite, int64_t v, int64_t w, int has_inf, int64_t inf)
{
    if (!finite)
        return;
    int64_t c = du + w;
    if (has_inf && c > inf)
        c = inf;
    if (c < d[v])
        d[v] = c;
}

/* The pass itself, on plain arrays; 1: done, 0: a cycle, -1: out of memory. Ready nodes wait
 * on a stack, and a node's chain successor, once ready, is taken at once: the pass walks each
 * lane in memory order and jumps between lanes only where a cross edge makes it wait. */
static int
solve(int64_t n, const unsigned char *chain, const int64_t *clost, int64_t m, const int64_t *cu,
      const int64_t *cv, const int64_t *cl, const int64_t *start, int has_inf, int64_t inf,
      int64_t *d)
{
    /* one block: row pointers (n + 1), out-edge targets and lost (m each), in-degrees and
     * the stack (n each) */
    int64_t *mem = malloc(((size_t)4 * (size_t)n + 2 * (size_t)m + 1) * sizeof(int64_t));
    if (mem == NULL)
        return -1;
    int64_t *optr = mem, *otgt = optr + n + 1, *olost = otgt + m, *indeg = olost + m;
    int64_t *stack = indeg + n;
    memset(optr, 0, ((size_t)n + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++)
        indeg[i] = i > 0 && chain[i];
    for (int64_t e = 0; e < m; e++) { /* out-edges by source (a counting sort) */
        optr[cu[e] + 1]++;
        indeg[cv[e]]++;
    }
    for (int64_t i = 0; i < n; i++)
        optr[i + 1] += optr[i];
    for (int64_t e = 0; e < m; e++) { /* (optr[u] walks to the next row's start) */
        int64_t at = optr[cu[e]]++;
        otgt[at] = cv[e];
        olost[at] = cl[e];
    }
    for (int64_t i = n; i > 0; i--) /* back to each row's start */
        optr[i] = optr[i - 1];
    optr[0] = 0;
    /* d holds the best so far: the source weight, or inf where there is none */
    for (int64_t i = 0; i < n; i++)
        d[i] = has_inf && start[i] >= inf ? inf : start[i];
    int64_t top = 0, done = 0;
    for (int64_t i = n - 1; i >= 0; i--) /* (the lowest node on top) */
        if (indeg[i] == 0)
            stack[top++] = i;
    while (top > 0) {
        int64_t u = stack[--top];
        for (;;) {
            int64_t du = d[u]; /* final: every in-edge of u is relaxed */
            int finite = !has_inf || du < inf;
            done++;
            for (int64_t j = optr[u]; j < optr[u + 1]; j++) {
                int64_t v = otgt[j];
                relax(d, du, finite, v, olost[j], has_inf, inf);
                if (--indeg[v] == 0)
                    stack[top++] = v;
            }
            if (u + 1 >= n || !chain[u + 1])
                break;
            relax(d, du, finite, u + 1, clost[u + 1], has_inf, inf);
            if (--indeg[u + 1] != 0)
                break;
            u++; /* the chain successor is ready: next */
        }
    }
    free(mem);
    return done == n;
}

/* graph_both(): graph.lane_both on the step graph's own arrays (the lane graph's lost times
 * computed here), int32 node numbers inside. 1: done, 0: declined (a cycle, or sums that could
 * overflow: the caller's numpy pass decides), -1: out of memory. */
static int
graph_pass(int64_t n, const int64_t *t, const int64_t *w, const unsigned char *first, int64_t m,
           const int64_t *cu, const int64_t *cv, const int64_t *cw, int64_t *dist,
           int64_t *pred, int64_t *bwd)
{
    int64_t t0 = t[0], t1 = t[0];
    for (int64_t i = 1; i < n; i++) {
        if (t[i] < t0)
            t0 = t[i];
        if (t[i] > t1)
            t1 = t[i];
    }
    /* one block: chain lost (n) and cross lost (m) as int64; row pointers (n + 1), targets
     * (m), in-degrees, stack, order (n each) as int32 */
    size_t words = (size_t)n + (size_t)m, small = 4 * (size_t)n + 1 + (size_t)m;
    int64_t *mem = malloc(words * sizeof(int64_t) + small * sizeof(int32_t));
    if (mem == NULL)
        return -1;
    int64_t *clost = mem, *olost = clost + n;
    int32_t *optr = (int32_t *)(olost + m), *otgt = optr + n + 1, *indeg = otgt + m;
    int32_t *stack = indeg + n, *order = stack + n;
    __int128 guard = (__int128)t1 - t0; /* lanes.shortest's: chain lost + span + cross lost */
    int64_t cmax = 0;
    memset(optr, 0, ((size_t)n + 1) * sizeof(int32_t));
    clost[0] = 0;
    indeg[0] = 0;
    for (int64_t i = 1; i < n; i++) {
        int64_t c = 0;
        if (!first[i]) {
            c = t[i] - t[i - 1] - w[i];
            if (c < 0)
                c = 0;
        }
        clost[i] = c;
        guard += c;
        indeg[i] = !first[i];
    }
    /* the forward cross edges (the others are dropped) */
    for (int64_t e = 0; e < m; e++)
        if (t[cv[e]] >= t[cu[e]]) {
            optr[cu[e] + 1]++;
            indeg[cv[e]]++;
        }
    for (int64_t i = 0; i < n; i++)
        optr[i + 1] += optr[i];
    for (int64_t e = 0; e < m; e++) {
        int64_t u = cu[e], v = cv[e];
        if (t[v] < t[u])
            continue;
        int64_t at = optr[u]++, c = t[v] - t[u] - cw[e];
        if (c < 0)
            c = 0;
        if (c > cmax)
            cmax = c;
        otgt[at] = (int32_t)v;
        olost[at] = c;
    }
    for (int64_t i = n; i > 0; i--)
        optr[i] = optr[i - 1];
    optr[0] = 0;
    guard += cmax;
    if (guard >= ((__int128)1 << 60) || t1 - t0 > ((int64_t)1 << 60)) {
        free(mem);
        return 0;
    }
    int64_t *d = dist, *b = bwd;
    for (int64_t i = 0; i < n; i++)
        d[i] = t[i] - t0;
    int64_t top = 0, done = 0;
    for (int64_t i = n - 1; i >= 0; i--)
        if (indeg[i] == 0)
            stack[top++] = (int32_t)i;
    while (top > 0) {
        int64_t u = stack[--top];
        for (;;) {
            int64_t du = d[u];
            order[done++] = (int32_t)u;
            for (int64_t j = optr[u]; j < optr[u + 1]; j++) {
                int64_t v = otgt[j], c = du + olost[j];
                if (c < d[v])
                    d[v] = c;
                if (--indeg[v] == 0)
                    stack[top++] = (int32_t)v;
            }
            if (u + 1 >= n || first[u + 1])
                break;
            int64_t c = du + clost[u + 1];
            if (c < d[u + 1])
                d[u + 1] = c;
            if (--indeg[u + 1] != 0)
                break;
            u++;
        }
    }
    if (done != n) {
        free(mem);
        return 0;
    }
    /* predecessors (lanes.py's tie rule): the chain predecessor where it attains D, then a
     * cross edge's source attaining D with a lesser D(u) (at equal D(u): the least source
     * among cross edges, the chain before them); the source wins every tie */
    for (int64_t v = 0; v < n; v++)
        pred[v] = v > 0 && !first[v] && d[v - 1] + clost[v] == d[v] ? v - 1 : n;
    for (int64_t u = 0; u < n; u++) {
        int64_t du = d[u];
        for (int64_t j = optr[u]; j < optr[u + 1]; j++) {
            int64_t v = otgt[j];
            if (du + olost[j] != d[v])
                continue;
            int64_t p = pred[v];
            if (p == n) {
                pred[v] = u;
                continue;
            }
            int64_t dp = d[p];
            int by_chain = p == v - 1 && !first[v] && dp + clost[v] == d[v];
            if (du < dp || (du == dp && !by_chain && u < p))
                pred[v] = u;
        }
    }
    for (int64_t v = 0; v < n; v++) {
        if (t[v] - t0 == d[v])
            pred[v] = n;
        d[v] = (t[v] - t0) - d[v]; /* the longest path ending at v */
    }
    /* the reversed graph's distances from t1 - t, in reverse order; then the longest path
     * starting at each node */
    for (int64_t i = n - 1; i >= 0; i--) {
        int64_t u = order[i], best = t1 - t[u];
        if (u + 1 < n && !first[u + 1]) {
            int64_t c = b[u + 1] + clost[u + 1];
            if (c < best)
                best = c;
        }
        for (int64_t j = optr[u]; j < optr[u + 1]; j++) {
            int64_t c = b[otgt[j]] + olost[j];
            if (c < best)
                best = c;
        }
        b[u] = best;
    }
    for (int64_t v = 0; v < n; v++)
        b[v] = (t1 - t[v]) - b[v];
    free(mem);
    return 1;
}

PyDoc_STRVAR(graph_both_doc,
"graph_both(t, w, first, cu, cv, cw, dist, pred, bwd) -> bool\n\n"
"graph.lane_both of a step graph (``t``, ``w``: int64 nodes; ``first``: bool, first of its\n"
"lane; ``cu``, ``cv``, ``cw``: int64 cross edges, those going back in time dropped), written\n"
"to ``dist``, ``pred``, ``bwd`` (int64, n) in one call. False where\n"
"it declines (a cycle; sums that could overflow int64; 2**31 nodes or edges or more): the\n"
"outputs then hold nothing of use.");

static PyObject *
graph_both(PyObject *self, PyObject *args)
{
    PyObject *o[9];
    if (!PyArg_ParseTuple(args, "OOOOOOOOO:graph_both", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8]))
        return NULL;
    Buf b[9];
    memset(b, 0, sizeof(b));
    Py_ssize_t n, m;
    if (node_count(o[0], 8, &n) < 0 || node_count(o[3], 8, &m) < 0)
        return NULL;
    if (n == 0 || n >= INT32_MAX - 1 || m >= INT32_MAX - 1)
        Py_RETURN_FALSE;
    const char *what[9] = {"t", "w", "first", "cu", "cv", "cw", "dist", "pred", "bwd"};
    for (int i = 0; i < 9; i++) {
        Py_ssize_t len = i >= 3 && i <= 5 ? m : n;
        if (get(o[i], &b[i], len, i == 2 ? 1 : 8, i >= 6, what[i]) < 0) {
            release(b, 9);
            return NULL;
        }
    }
    if (check_edges(b[3].view.buf, b[4].view.buf, m, n) < 0) {
        release(b, 9);
        return NULL;
    }
    int done;
    Py_BEGIN_ALLOW_THREADS
    done = graph_pass(n, b[0].view.buf, b[1].view.buf, b[2].view.buf, m, b[3].view.buf,
                      b[4].view.buf, b[5].view.buf, b[6].view.buf, b[7].view.buf,
                      b[8].view.buf);
    Py_END_ALLOW_THREADS
    release(b, 9);
    if (done < 0)
        return PyErr_NoMemory();
    return PyBool_FromLong(done);
}

/* nodes(): stepgraph.node_arrays' arrays in one pass over the node order (see its docstring). */
static void
lay_nodes(int64_t n, const int64_t *order, const int64_t *n_t, const int64_t *lane,
          const unsigned char *sync_ev, const unsigned char *host_ev, const int64_t *win,
          const int64_t *ws, int64_t *t, int64_t *ln, int64_t *w, int64_t *seg,
          int64_t *pos, unsigned char *first, int64_t *prev_t, int64_t *last)
{
    int64_t n_ev = n / 2, depth = 0, act = -1;
    /* last[depth]: the node of the latest start after which the depth is ``depth`` */
    for (int64_t i = 0; i <= n; i++)
        last[i] = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t o = order[i], ev = o >= n_ev ? o - n_ev : o, ti = n_t[o], lv = lane[ev];
        t[i] = ti;
        ln[i] = lv;
        pos[o] = i;
        if (i == 0 || lv != ln[i - 1]) {
            first[i] = 1;
            prev_t[i] = ws[win[ev]];
            seg[i] = -1;
            w[i] = 0;
        } else {
            first[i] = 0;
            prev_t[i] = t[i - 1];
            seg[i] = act;
            w[i] = act >= 0 && sync_ev[act] ? 0 : ti - t[i - 1];
        }
        if (seg[i] < 0 && host_ev[ev])
            w[i] = 0;
        if (o < n_ev) {
            depth++;
            act = ev;
            if (depth >= 1 && depth <= n)
                last[depth] = i;
        } else {
            depth--;
            act = -1;
            if (depth >= 1 && depth <= n) {
                int64_t j = last[depth];
                if (j >= 0 && ln[j] == lv)
                    act = order[j]; /* a start: its event is its order entry */
            }
        }
    }
}

PyDoc_STRVAR(nodes_doc,
"nodes(order, n_t, lane, sync_ev, host_ev, win, ws, t, ln, w, seg, pos, first, prev_t)\n\n"
"stepgraph.node_arrays' node arrays in one pass: ``order`` (int64, n = 2 * events) the node\n"
"layout of [starts, ends], ``n_t`` (int64, n) their times, ``lane``, ``win`` (int64, events),\n"
"``sync_ev``, ``host_ev`` (bool, events), ``ws`` (int64, windows); written: t, ln, w, seg,\n"
"pos (each event's start node then end node), prev_t (int64, n), first (bool, n).");

static PyObject *
nodes(PyObject *self, PyObject *args)
{
    PyObject *o[14];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOO:nodes", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &o[13]))
        return NULL;
    Buf b[14];
    memset(b, 0, sizeof(b));
    Py_ssize_t n, nw;
    if (node_count(o[0], 8, &n) < 0 || node_count(o[6], 8, &nw) < 0)
        return NULL;
    if (n % 2) {
        PyErr_SetString(PyExc_ValueError, "order: an even number of nodes expected");
        return NULL;
    }
    const char *what[14] = {"order", "n_t", "lane", "sync_ev", "host_ev", "win", "ws", "t",
                            "ln", "w", "seg", "pos", "first", "prev_t"};
    for (int i = 0; i < 14; i++) {
        Py_ssize_t len = i == 6 ? nw : (i >= 2 && i <= 5 ? n / 2 : n);
        int bool_ = i == 3 || i == 4 || i == 12;
        if (get(o[i], &b[i], len, bool_ ? 1 : 8, i >= 7, what[i]) < 0) {
            release(b, 14);
            return NULL;
        }
    }
    const int64_t *order = b[0].view.buf, *win = b[5].view.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (order[i] < 0 || order[i] >= n) {
            release(b, 14);
            PyErr_SetString(PyExc_IndexError, "node order out of range");
            return NULL;
        }
    for (Py_ssize_t i = 0; i < n / 2; i++)
        if (win[i] < 0 || win[i] >= nw) {
            release(b, 14);
            PyErr_SetString(PyExc_IndexError, "window out of range");
            return NULL;
        }
    int64_t *last = malloc(((size_t)n + 1) * sizeof(int64_t));
    if (last == NULL) {
        release(b, 14);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    lay_nodes(n, order, b[1].view.buf, b[2].view.buf, b[3].view.buf, b[4].view.buf, win,
              b[6].view.buf, b[7].view.buf, b[8].view.buf, b[9].view.buf, b[10].view.buf,
              b[11].view.buf, b[12].view.buf, b[13].view.buf, last);
    Py_END_ALLOW_THREADS
    free(last);
    release(b, 14);
    Py_RETURN_NONE;
}

/* The number of ``a``'s (n, ascending) items <= x (``right``) or < x, searched from ``hint``
 * outwards (galloping: the answers of consecutive events are mostly equal or close). */
static inline int64_t
count_below(const int64_t *a, int64_t n, int64_t x, int right, int64_t hint)
{
#define BELOW(i) (right ? a[i] <= x : a[i] < x)
    int64_t lo, hi; /* the answer in lo..hi: a[lo - 1] below, a[hi] not (where they exist) */
    if (hint > n)
        hint = n;
    if (hint > 0 && !BELOW(hint - 1)) { /* the answer is before hint */
        int64_t step = 1;
        hi = hint - 1;
        lo = hi - step;
        while (lo > 0 && !BELOW(lo - 1)) {
            hi = lo - 1;
            step *= 2;
            lo = hi - step;
        }
        if (lo < 0)
            lo = 0;
    } else { /* at or after hint */
        int64_t step = 1;
        lo = hint;
        hi = lo + step;
        while (hi < n && BELOW(hi)) {
            lo = hi + 1;
            step *= 2;
            hi = lo + step;
        }
        if (hi > n)
            hi = n;
    }
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (BELOW(mid))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
#undef BELOW
}

PyDoc_STRVAR(bounds_doc,
"bounds(ts, te, ws, we, lo, hi)\n\n"
"Each event's windows: ``lo`` (int32, events) = np.searchsorted(we, ts, 'right'), ``hi`` =\n"
"np.searchsorted(ws, te, 'left'); ``ts``, ``te``: int64 (events), ``ws``, ``we``: int64\n"
"(windows), ascending. Searched from the previous event's answers (galloping).");

static PyObject *
bounds(PyObject *self, PyObject *args)
{
    PyObject *o[6];
    if (!PyArg_ParseTuple(args, "OOOOOO:bounds", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5]))
        return NULL;
    Buf b[6];
    memset(b, 0, sizeof(b));
    Py_ssize_t n, nw;
    if (node_count(o[0], 8, &n) < 0 || node_count(o[2], 8, &nw) < 0)
        return NULL;
    if (nw >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "bounds: too many windows for int32");
        return NULL;
    }
    const char *what[6] = {"ts", "te", "ws", "we", "lo", "hi"};
    const Py_ssize_t len[6] = {n, n, nw, nw, n, n};
    for (int i = 0; i < 6; i++)
        if (get(o[i], &b[i], len[i], i >= 4 ? 4 : 8, i >= 4, what[i]) < 0) {
            release(b, 6);
            return NULL;
        }
    Py_BEGIN_ALLOW_THREADS
    const int64_t *ts = b[0].view.buf, *te = b[1].view.buf, *ws = b[2].view.buf,
                  *we = b[3].view.buf;
    int32_t *lo = b[4].view.buf, *hi = b[5].view.buf;
    int64_t hl = 0, hh = 0;
    for (int64_t i = 0; i < n; i++) {
        hl = count_below(we, nw, ts[i], 1, hl);
        hh = count_below(ws, nw, te[i], 0, hh);
        lo[i] = (int32_t)hl;
        hi[i] = (int32_t)hh;
    }
    Py_END_ALLOW_THREADS
    release(b, 6);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(members_doc,
"members(lo, hi, chunk, ptr, out) -> int\n\n"
"analysis.group_members in two counting passes: ``lo``, ``hi`` (int32, events), ``chunk``\n"
"(int64, windows: each window's group, non-decreasing from 0); ``ptr`` (int64, groups + 1)\n"
"and ``out`` (int32) get its (indptr, events). Returns the number of copies, written to\n"
"``out`` where it has room; else only ``ptr`` (then the groups' ends) is of use.");

static PyObject *
members(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    if (!PyArg_ParseTuple(args, "OOOOO:members", &o[0], &o[1], &o[2], &o[3], &o[4]))
        return NULL;
    Buf b[5];
    memset(b, 0, sizeof(b));
    Py_ssize_t n, nw, np1, cap;
    if (node_count(o[0], 4, &n) < 0 || node_count(o[2], 8, &nw) < 0
        || node_count(o[3], 8, &np1) < 0 || node_count(o[4], 4, &cap) < 0)
        return NULL;
    const char *what[5] = {"lo", "hi", "chunk", "ptr", "out"};
    const Py_ssize_t len[5] = {n, n, nw, np1, cap};
    const Py_ssize_t size[5] = {4, 4, 8, 8, 4};
    for (int i = 0; i < 5; i++)
        if (get(o[i], &b[i], len[i], size[i], i >= 3, what[i]) < 0) {
            release(b, 5);
            return NULL;
        }
    const int32_t *lo = b[0].view.buf, *hi = b[1].view.buf;
    const int64_t *chunk = b[2].view.buf;
    int64_t nc = np1 - 1, bad = nc < 0 || n >= INT32_MAX;
    for (Py_ssize_t w = 0; w < nw && !bad; w++)
        bad = chunk[w] < 0 || chunk[w] >= nc || (w && chunk[w] < chunk[w - 1]);
    for (Py_ssize_t i = 0; i < n && !bad; i++)
        bad = lo[i] < hi[i] && (lo[i] < 0 || hi[i] > nw);
    if (bad) {
        release(b, 5);
        PyErr_SetString(PyExc_ValueError, "members: windows or groups out of range");
        return NULL;
    }
    int64_t total;
    Py_BEGIN_ALLOW_THREADS
    int32_t *out = b[4].view.buf;
    int64_t *ptr = b[3].view.buf;
    memset(ptr, 0, (size_t)np1 * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++)
        if (lo[i] < hi[i])
            for (int64_t c = chunk[lo[i]]; c <= chunk[hi[i] - 1]; c++)
                ptr[c + 1]++;
    for (int64_t c = 0; c < nc; c++)
        ptr[c + 1] += ptr[c];
    total = ptr[nc];
    if (total <= cap) {
        for (int64_t i = 0; i < n; i++) /* (ptr[c] walks to the next group's start) */
            if (lo[i] < hi[i])
                for (int64_t c = chunk[lo[i]]; c <= chunk[hi[i] - 1]; c++)
                    out[ptr[c]++] = (int32_t)i;
        for (int64_t c = nc; c > 0; c--)
            ptr[c] = ptr[c - 1];
        ptr[0] = 0;
    }
    Py_END_ALLOW_THREADS
    release(b, 5);
    return PyLong_FromLongLong(total);
}

/* The k-th least of a[0..n-1] (0-based), moving a's items (quickselect, median of three). */
static int64_t
select_kth(int64_t *a, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    while (hi > lo) {
        int64_t mid = lo + (hi - lo) / 2, x = a[lo], y = a[mid], z = a[hi], p;
        p = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < p)
                i++;
            while (a[j] > p)
                j--;
            if (i <= j) {
                int64_t tmp = a[i];
                a[i] = a[j];
                a[j] = tmp;
                i++;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    return a[k];
}

PyDoc_STRVAR(group_stats_doc,
"group_stats(key, slack, sums_of, sums, med, least)\n\n"
"analysis.reduce_copies' per-key numbers: ``key`` (int64, items: 0 <= key < keys), ``slack``\n"
"(int64, items); ``sums_of``: int64 (items) arrays, ``sums`` as many int64 (keys) arrays,\n"
"zeroed and given each key's exact sum; ``med`` (float64, keys): the median of the key's\n"
"slack as pandas' groupby median (the mean of the two middle values; NaN for no item);\n"
"``least`` (int64, keys): the least slack (the int64 maximum for no item).");

static PyObject *
group_stats(PyObject *self, PyObject *args)
{
    PyObject *ko, *so, *lo_, *ls, *mo, *mino;
    if (!PyArg_ParseTuple(args, "OOO!O!OO:group_stats", &ko, &so, &PyList_Type, &lo_,
                          &PyList_Type, &ls, &mo, &mino))
        return NULL;
    Py_ssize_t nv = PyList_GET_SIZE(lo_);
    if (nv != PyList_GET_SIZE(ls) || nv > 8) {
        PyErr_SetString(PyExc_ValueError, "group_stats: sums_of and sums differ");
        return NULL;
    }
    Buf b[20];
    memset(b, 0, sizeof(b));
    Py_ssize_t n, nk;
    if (node_count(ko, 8, &n) < 0 || node_count(mo, 8, &nk) < 0)
        return NULL;
    int nb = 4 + 2 * (int)nv, bad = 0;
    bad = get(ko, &b[0], n, 8, 0, "key") < 0 || get(so, &b[1], n, 8, 0, "slack") < 0
          || get(mino, &b[3 + 2 * nv], nk, 8, 1, "least") < 0;
    if (!bad) { /* (med: float64, 8 bytes: checked by size and format 'd') */
        bad = PyObject_GetBuffer(mo, &b[2].view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT
                                 | PyBUF_WRITABLE) < 0;
        if (!bad) {
            b[2].held = 1;
            const char *f = b[2].view.format ? b[2].view.format : "B";
            if (f[0] == '<' || f[0] == '=' || f[0] == '@')
                f++;
            if (f[0] != 'd' || f[1] || b[2].view.len != nk * 8) {
                PyErr_SetString(PyExc_ValueError, "med: expected float64 per key");
                bad = 1;
            }
        }
    }
    for (Py_ssize_t i = 0; i < nv && !bad; i++)
        bad = get(PyList_GET_ITEM(lo_, i), &b[3 + i], n, 8, 0, "sums_of") < 0
              || get(PyList_GET_ITEM(ls, i), &b[3 + nv + i], nk, 8, 1, "sums") < 0;
    const int64_t *key = b[0].view.buf;
    for (Py_ssize_t i = 0; i < n && !bad; i++)
        if (key[i] < 0 || key[i] >= nk) {
            PyErr_SetString(PyExc_IndexError, "key out of range");
            bad = 1;
        }
    int64_t *mem = bad ? NULL : malloc(((size_t)n + 2 * (size_t)nk + 1) * sizeof(int64_t));
    if (!bad && mem == NULL) {
        PyErr_NoMemory();
        bad = 1;
    }
    if (bad) {
        release(b, nb);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    const int64_t *slack = b[1].view.buf;
    double *med = b[2].view.buf;
    int64_t *buf = mem, *ptr = buf + n, *pos = ptr + nk + 1;
    for (Py_ssize_t v = 0; v < nv; v++) {
        const int64_t *x = b[3 + v].view.buf;
        int64_t *out = b[3 + nv + v].view.buf;
        memset(out, 0, (size_t)nk * sizeof(int64_t));
        for (Py_ssize_t i = 0; i < n; i++)
            out[key[i]] += x[i];
    }
    memset(ptr, 0, ((size_t)nk + 1) * sizeof(int64_t));
    for (Py_ssize_t i = 0; i < n; i++)
        ptr[key[i] + 1]++;
    for (Py_ssize_t k = 0; k < nk; k++) {
        ptr[k + 1] += ptr[k];
        pos[k] = ptr[k];
    }
    for (Py_ssize_t i = 0; i < n; i++)
        buf[pos[key[i]]++] = slack[i];
    int64_t *least = b[3 + 2 * nv].view.buf;
    for (Py_ssize_t k = 0; k < nk; k++) {
        int64_t c = ptr[k + 1] - ptr[k], *g = buf + ptr[k];
        if (c == 0) {
            med[k] = Py_NAN;
            least[k] = INT64_MAX;
            continue;
        }
        int64_t mn = g[0];
        for (int64_t i = 1; i < c; i++)
            if (g[i] < mn)
                mn = g[i];
        least[k] = mn;
        int64_t hi = select_kth(g, c, c / 2), lo = hi;
        if (c % 2 == 0) { /* the middle one below: the greatest of those before c / 2 */
            lo = g[0];
            for (int64_t i = 1; i < c / 2; i++)
                if (g[i] > lo)
                    lo = g[i];
        }
        med[k] = ((double)lo + (double)hi) / 2;
    }
    Py_END_ALLOW_THREADS
    free(mem);
    release(b, nb);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(distances_doc,
"distances(chain, chain_lost, cu, cv, cl, start, inf, out) -> bool\n\n"
"D of the lane graph (module docstring) into ``out`` (int64, n); ``chain``: bool (n),\n"
"``chain_lost``, ``start``: int64 (n); ``cu``, ``cv``, ``cl``: int64 (m), 0 <= cu, cv < n;\n"
"``inf``: an int or None. False where the graph has a cycle (``out`` then holds nothing of\n"
"use). The caller keeps every sum below 2**62 (lanepass's guard).");

static PyObject *
distances(PyObject *self, PyObject *args)
{
    PyObject *o[8], *inf_obj;
    if (!PyArg_ParseTuple(args, "OOOOOOOO:distances", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &inf_obj, &o[7]))
        return NULL;
    Buf b[7];
    memset(b, 0, sizeof(b));
    Py_buffer probe;
    if (PyObject_GetBuffer(o[0], &probe, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    Py_ssize_t n = probe.len; /* bools: one byte each (checked below) */
    PyBuffer_Release(&probe);
    if (PyObject_GetBuffer(o[2], &probe, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    Py_ssize_t m = probe.len / 8;
    PyBuffer_Release(&probe);
    int64_t inf = 0;
    int has_inf = inf_obj != Py_None;
    if (has_inf) {
        inf = PyLong_AsLongLong(inf_obj);
        if (inf == -1 && PyErr_Occurred())
            return NULL;
    }
    if (get(o[0], &b[0], n, 1, 0, "chain") < 0 || get(o[1], &b[1], n, 8, 0, "chain_lost") < 0
        || get(o[2], &b[2], m, 8, 0, "cu") < 0 || get(o[3], &b[3], m, 8, 0, "cv") < 0
        || get(o[4], &b[4], m, 8, 0, "cl") < 0 || get(o[5], &b[5], n, 8, 0, "start") < 0
        || get(o[7], &b[6], n, 8, 1, "out") < 0) {
        release(b, 7);
        return NULL;
    }
    const int64_t *cu = b[2].view.buf, *cv = b[3].view.buf;
    for (Py_ssize_t e = 0; e < m; e++) {
        if (cu[e] < 0 || cu[e] >= n || cv[e] < 0 || cv[e] >= n) {
            release(b, 7);
            PyErr_SetString(PyExc_IndexError, "cross edge node out of range");
            return NULL;
        }
    }
    int done;
    Py_BEGIN_ALLOW_THREADS
    done = solve(n, b[0].view.buf, b[1].view.buf, m, cu, cv, b[4].view.buf, b[5].view.buf,
                 has_inf, inf, b[6].view.buf);
    Py_END_ALLOW_THREADS
    release(b, 7);
    if (done < 0)
        return PyErr_NoMemory();
    return PyBool_FromLong(done);
}

static PyMethodDef methods[] = {
    {"distances", distances, METH_VARARGS, distances_doc},
    {"graph_both", graph_both, METH_VARARGS, graph_both_doc},
    {"nodes", nodes, METH_VARARGS, nodes_doc},
    {"bounds", bounds, METH_VARARGS, bounds_doc},
    {"members", members, METH_VARARGS, members_doc},
    {"group_stats", group_stats, METH_VARARGS, group_stats_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lanes",
    "The lane graph's shortest distances in one topological pass (see analyzers/lanepass.py).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__lanes(void)
{
    return PyModule_Create(&module);
}
