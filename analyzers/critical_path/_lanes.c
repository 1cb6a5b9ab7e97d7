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
    else
        ok = ok && (f[0] == '?' || f[0] == 'B' || f[0] == 'b');
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items of %s", what, n,
                     itemsize == 8 ? "int64" : "bool");
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
