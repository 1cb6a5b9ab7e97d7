/* hermes.trace._columns: columns out of lists of Python objects, in one C loop each.
 *
 * The Kineto importer decodes events into msgspec structs and then reads each field of every
 * event into a numpy column: `np.fromiter(map(attrgetter("ts"), events), np.float64, n)`.
 * Those per-field passes cost about as much as the JSON decode itself (a call through
 * `map` and `attrgetter` per event and field). The functions here do the same passes in C,
 * reading a field's slot directly where the object's type stores it in one (a member
 * descriptor, as msgspec structs and __slots__ classes do).
 *
 * Every function gives exactly what the Python expression it replaces gives, or says it
 * cannot (returns False / None) and the caller runs that expression: values of another type
 * than the fast path takes (an int where a float is expected, a bool, a subclass) are never
 * converted here. hermes/trace/columns.py holds the pure-Python equivalents and the dispatch.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

/* A field's reader for one type: the member (slot) where the type keeps it, or NULL to go
 * through the generic attribute lookup. */
typedef struct {
    PyTypeObject *type; /* a strong reference while cached */
    PyMemberDef *member;
} Reader;

static void
reader_release(Reader *r)
{
    Py_CLEAR(r->type);
}

static void
reader_for(Reader *r, PyTypeObject *type, PyObject *name)
{
    Py_INCREF(type);
    Py_XSETREF(r->type, type);
    r->member = NULL;
    if (type->tp_getattro != PyObject_GenericGetAttr)
        return;
    PyObject *descr = _PyType_Lookup(type, name); /* borrowed */
    if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type == T_OBJECT_EX || m->type == T_OBJECT)
            r->member = m;
    }
}

/* New reference to item.name, as getattr(item, name) gives it. */
static inline PyObject *
read_field(Reader *r, PyObject *item, PyObject *name)
{
    PyTypeObject *type = Py_TYPE(item);
    if (type != r->type)
        reader_for(r, type, name);
    if (r->member != NULL) {
        PyObject *v = *(PyObject **)((char *)item + r->member->offset);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
        if (r->member->type == T_OBJECT) {
            Py_RETURN_NONE;
        }
    }
    Py_INCREF(item); /* the attribute lookup may run code that drops it from the list */
    PyObject *v = PyObject_GetAttr(item, name);
    Py_DECREF(item);
    return v;
}

static int
check_list(PyObject *seq)
{
    if (!PyList_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "expected a list");
        return -1;
    }
    return 0;
}

/* A writable, C-contiguous buffer of n items of `itemsize` bytes and format `fmt`. */
static int
get_out(PyObject *out, Py_buffer *view, Py_ssize_t n, Py_ssize_t itemsize, char fmt)
{
    if (PyObject_GetBuffer(out, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (f[0] == '<' || f[0] == '=' || f[0] == '@')
        f++;
    if (view->itemsize != itemsize || view->len != n * itemsize || f[0] != fmt || f[1] != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "output buffer of the wrong type or length");
        return -1;
    }
    return 0;
}

/* ``seq`` is a list and ``out`` a writable buffer of len(seq) items of ``kind``: 'd' float64,
 * 'q' int64 (numpy's is 'q', or 'l' where long is 64 bits), 'i' int32. */
static int
list_and_out(PyObject *seq, PyObject *out, Py_buffer *view, char kind)
{
    if (check_list(seq) < 0)
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(seq);
    Py_ssize_t size = kind == 'd' ? (Py_ssize_t)sizeof(double)
                      : kind == 'i' ? (Py_ssize_t)sizeof(int) : (Py_ssize_t)sizeof(long long);
    if (get_out(out, view, n, size, kind) == 0)
        return 0;
    if (kind != 'q' || sizeof(long) != 8)
        return -1;
    PyErr_Clear();
    return get_out(out, view, n, sizeof(long), 'l');
}

PyDoc_STRVAR(objects_doc,
"objects(items: list, name: str) -> list\n\n"
"[getattr(x, name) for x in items], as list(map(attrgetter(name), items)).");

static PyObject *
objects(PyObject *self, PyObject *args)
{
    PyObject *seq, *name;
    if (!PyArg_ParseTuple(args, "OU:objects", &seq, &name) || check_list(seq) < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(seq);
    PyObject *res = PyList_New(n);
    if (res == NULL)
        return NULL;
    Reader r = {NULL, NULL};
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i >= PyList_GET_SIZE(seq)) { /* the list shrank under a __getattr__ */
            reader_release(&r);
            Py_DECREF(res);
            PyErr_SetString(PyExc_RuntimeError, "list changed size during iteration");
            return NULL;
        }
        PyObject *v = read_field(&r, PyList_GET_ITEM(seq, i), name);
        if (v == NULL) {
            reader_release(&r);
            Py_DECREF(res);
            return NULL;
        }
        PyList_SET_ITEM(res, i, v);
    }
    reader_release(&r);
    return res;
}

PyDoc_STRVAR(floats_doc,
"floats(items: list, name: str, out: float64 buffer) -> bool\n\n"
"Fills out[i] with getattr(items[i], name) where every value is a float (exactly);\n"
"False, with out partly filled, as soon as one is not.");

static PyObject *
floats(PyObject *self, PyObject *args)
{
    PyObject *seq, *name, *out;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "OUO:floats", &seq, &name, &out) ||
        list_and_out(seq, out, &view, 'd') < 0)
        return NULL;
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(double);
    double *dst = (double *)view.buf;
    Reader r = {NULL, NULL};
    int ok = 1;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        if (i >= PyList_GET_SIZE(seq)) { ok = 0; break; }
        PyObject *v = read_field(&r, PyList_GET_ITEM(seq, i), name);
        if (v == NULL) {
            reader_release(&r);
            PyBuffer_Release(&view);
            return NULL;
        }
        if (PyFloat_CheckExact(v))
            dst[i] = PyFloat_AS_DOUBLE(v);
        else
            ok = 0;
        Py_DECREF(v);
    }
    reader_release(&r);
    PyBuffer_Release(&view);
    return PyBool_FromLong(ok);
}

PyDoc_STRVAR(ints_doc,
"ints(items: list, name: str | None, out: int64 buffer) -> bool\n\n"
"Fills out[i] with getattr(items[i], name) (items[i] itself where name is None) where every\n"
"value is an int (exactly, not a bool) in int64's range; False, with out partly filled, as\n"
"soon as one is not.");

static PyObject *
ints(PyObject *self, PyObject *args)
{
    PyObject *seq, *name, *out;
    if (!PyArg_ParseTuple(args, "OOO:ints", &seq, &name, &out))
        return NULL;
    if (name != Py_None && !PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "name must be a str or None");
        return NULL;
    }
    Py_buffer view;
    if (list_and_out(seq, out, &view, 'q') < 0)
        return NULL;
    Py_ssize_t n = view.len / 8;
    long long *dst = (long long *)view.buf;
    Reader r = {NULL, NULL};
    int ok = 1;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        if (i >= PyList_GET_SIZE(seq)) { ok = 0; break; }
        PyObject *item = PyList_GET_ITEM(seq, i);
        PyObject *v;
        if (name == Py_None) {
            v = item;
            Py_INCREF(v);
        } else {
            v = read_field(&r, item, name);
            if (v == NULL) {
                reader_release(&r);
                PyBuffer_Release(&view);
                return NULL;
            }
        }
        if (PyLong_CheckExact(v)) {
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow)
                ok = 0;
            else
                dst[i] = x;
        } else {
            ok = 0;
        }
        Py_DECREF(v);
    }
    reader_release(&r);
    PyBuffer_Release(&view);
    return PyBool_FromLong(ok);
}

PyDoc_STRVAR(lengths_doc,
"lengths(items: list, out: int64 buffer) -> bool\n\n"
"Fills out[i] with len(items[i]); False, with out partly filled, as soon as one has no\n"
"length (the caller's len() then raises its own error).");

static PyObject *
lengths(PyObject *self, PyObject *args)
{
    PyObject *seq, *out;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "OO:lengths", &seq, &out) || list_and_out(seq, out, &view, 'q') < 0)
        return NULL;
    long long *dst = (long long *)view.buf;
    int ok = 1;
    for (Py_ssize_t i = 0; i < view.len / 8 && ok; i++) {
        if (i >= PyList_GET_SIZE(seq)) { ok = 0; break; } /* shrunk under a __len__ */
        PyObject *v = PyList_GET_ITEM(seq, i);
        if (PyBytes_CheckExact(v)) {
            dst[i] = PyBytes_GET_SIZE(v);
            continue;
        }
        Py_INCREF(v); /* len() may run code that drops it from the list */
        Py_ssize_t len = PyObject_Size(v); /* len() itself, whatever the type */
        Py_DECREF(v);
        if (len < 0) {
            PyErr_Clear();
            ok = 0;
        } else {
            dst[i] = len;
        }
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(ok);
}

PyDoc_STRVAR(codes_doc,
"codes(values: list, out: int32 buffer, name: str | None = None) -> list\n\n"
"Dictionary codes: out[i] is the number of values[i] (with a name: of getattr(values[i],\n"
"name)) among the distinct values in order of first appearance (equal values share one, as\n"
"dict keys do); returns those values.");

static PyObject *
codes(PyObject *self, PyObject *args)
{
    PyObject *seq, *out, *name = Py_None;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "OO|O:codes", &seq, &out, &name))
        return NULL;
    if (name != Py_None && !PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "name must be a str or None");
        return NULL;
    }
    if (list_and_out(seq, out, &view, 'i') < 0)
        return NULL;
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(int);
    int *dst = (int *)view.buf;
    Reader r = {NULL, NULL};
    PyObject *last = NULL; /* runs of one value (the same object) skip the lookup */
    int last_code = 0;
    PyObject *index = PyDict_New();
    PyObject *keys = PyList_New(0);
    if (index == NULL || keys == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i >= PyList_GET_SIZE(seq)) {
            PyErr_SetString(PyExc_RuntimeError, "list changed size during iteration");
            goto fail;
        }
        PyObject *v = PyList_GET_ITEM(seq, i);
        if (name != Py_None) { /* the item's field: a new reference */
            v = read_field(&r, v, name);
            if (v == NULL)
                goto fail;
        } else {
            Py_INCREF(v); /* hashing and comparing may run code that drops it from the list */
        }
        if (v == last) {
            Py_DECREF(v);
            dst[i] = last_code;
            continue;
        }
        PyObject *code = PyDict_GetItemWithError(index, v); /* borrowed */
        long c;
        if (code == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(v);
                goto fail;
            }
            c = (long)PyList_GET_SIZE(keys);
            PyObject *pc = c > INT32_MAX ? NULL : PyLong_FromLong(c);
            int err = pc == NULL ? -1 : PyDict_SetItem(index, v, pc);
            Py_XDECREF(pc);
            if (err < 0 || PyList_Append(keys, v) < 0) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_OverflowError, "more than 2**31 distinct values");
                Py_DECREF(v);
                goto fail;
            }
        } else {
            c = PyLong_AsLong(code);
        }
        dst[i] = (int)c;
        Py_XSETREF(last, v); /* keeps the reference taken above */
        last_code = (int)c;
    }
    reader_release(&r);
    Py_XDECREF(last);
    Py_DECREF(index);
    PyBuffer_Release(&view);
    return keys;
fail:
    reader_release(&r);
    Py_XDECREF(last);
    Py_XDECREF(index);
    Py_XDECREF(keys);
    PyBuffer_Release(&view);
    return NULL;
}

PyDoc_STRVAR(take_doc,
"take(items: list, rows: int64 buffer) -> list\n\n"
"[items[i] for i in rows] (negative rows count from the end, as list indexing does).");

static PyObject *
take(PyObject *self, PyObject *args)
{
    PyObject *seq, *rows;
    if (!PyArg_ParseTuple(args, "OO:take", &seq, &rows) || check_list(seq) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(rows, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    const char *f = view.format ? view.format : "B";
    if (f[0] == '<' || f[0] == '=' || f[0] == '@')
        f++;
    if (view.itemsize != 8 || (f[0] != 'q' && f[0] != 'l') || f[1] != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "rows must be int64");
        return NULL;
    }
    Py_ssize_t m = view.len / 8;
    const long long *idx = (const long long *)view.buf;
    PyObject *res = PyList_New(m);
    if (res == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(seq);
    for (Py_ssize_t k = 0; k < m; k++) {
        long long i = idx[k];
        if (i < 0)
            i += n;
        if (i < 0 || i >= n) {
            Py_DECREF(res);
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            return NULL;
        }
        PyObject *v = PyList_GET_ITEM(seq, (Py_ssize_t)i);
        Py_INCREF(v);
        PyList_SET_ITEM(res, k, v);
    }
    PyBuffer_Release(&view);
    return res;
}

static PyMethodDef methods[] = {
    {"objects", objects, METH_VARARGS, objects_doc},
    {"floats", floats, METH_VARARGS, floats_doc},
    {"ints", ints, METH_VARARGS, ints_doc},
    {"lengths", lengths, METH_VARARGS, lengths_doc},
    {"codes", codes, METH_VARARGS, codes_doc},
    {"take", take, METH_VARARGS, take_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_columns",
    "Columns out of lists of Python objects in one C loop each (see hermes/columns.py).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__columns(void)
{
    return PyModule_Create(&module);
}
