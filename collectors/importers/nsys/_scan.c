/* hermes.collectors.importers.nsys._scan: a SQLite query's rows as column buffers, read in C
 * with the GIL released.
 *
 * An Nsight Systems export holds millions of kernel, runtime-call and NVTX rows. Reading them
 * through a DB-API cursor costs a Python object per value; ADBC's SQLite driver builds Arrow
 * batches in C but infers each column's type from its first rows and spends most of its time
 * on that bookkeeping (NULL-only and text columns above all). Here every column's type is
 * given by the caller (int64 or text), the rows of a chunk are stepped through with
 * sqlite3_step into plain buffers while other threads run (the importer maps one chunk while
 * the next is read), and the buffers come back as bytes laid out as Arrow arrays are:
 *
 *   int64 column: (values, validity)           values: n little-endian int64
 *   text column:  (offsets, data, validity, bad)  offsets: n + 1 int64 into data (UTF-8)
 *
 * validity is an Arrow bitmap (bit i set: row i is not NULL), or None when no row is NULL;
 * bad counts the text values that are not valid UTF-8 (the caller repairs those). A value of
 * another type where an integer belongs (text, a blob, a non-integral or out-of-range real)
 * stops the scan with ScanError(message, row, column): the caller names the table and row.
 * hermes/collectors/importers/nsys/sql.py holds the caller and the fallback (ADBC).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyObject *ScanError;

/* ---- growable byte buffers ------------------------------------------------------------- */
typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static int
buf_reserve(Buf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static void
buf_free(Buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ---- UTF-8 check (RFC 3629: no overlongs, no surrogates, at most U+10FFFF) ------------- */
static int
utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) {
            k = 1;
            cp = c & 0x1F;
        }
        else if ((c & 0xF0) == 0xE0) {
            k = 2;
            cp = c & 0x0F;
        }
        else if ((c & 0xF8) == 0xF0) {
            k = 3;
            cp = c & 0x07;
        }
        else
            return 0;
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* ---- the scan ----------------------------------------------------------------------------- */
enum { T_INT = 'i', T_TEXT = 't' };

typedef struct {
    Buf values;  /* int64s, or text offsets (int64) */
    Buf data;    /* text bytes */
    Buf valid;   /* one byte per row while reading, packed into a bitmap at the end */
    Py_ssize_t nulls, bad;
} Column;

typedef struct {
    PyObject_HEAD
    sqlite3 *db;
    sqlite3_stmt *stmt;
    char *types;
    int ncols;
    long long row;  /* rows handed out so far */
    int done, busy;
} Scan;

static void
scan_close_handles(Scan *self)
{
    if (self->stmt != NULL) {
        sqlite3_finalize(self->stmt);
        self->stmt = NULL;
    }
    if (self->db != NULL) {
        sqlite3_close_v2(self->db);
        self->db = NULL;
    }
}

static void
Scan_dealloc(Scan *self)
{
    scan_close_handles(self);
    free(self->types);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
Scan_init(Scan *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"path", "sql", "types", NULL};
    const char *path, *sql, *types;
    Py_ssize_t ntypes;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sss#", kwlist, &path, &sql, &types, &ntypes))
        return -1;
    for (Py_ssize_t i = 0; i < ntypes; i++) {
        if (types[i] != T_INT && types[i] != T_TEXT) {
            PyErr_SetString(PyExc_ValueError, "types: 'i' (int64) or 't' (text) per column");
            return -1;
        }
    }
    scan_close_handles(self);
    free(self->types);
    self->types = malloc(ntypes + 1);
    if (self->types == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(self->types, types, ntypes);
    self->ncols = (int)ntypes;
    self->row = 0;
    self->done = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sqlite3_open_v2(path, &self->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(self->db, sql, -1, &self->stmt, NULL);
    Py_END_ALLOW_THREADS
    if (rc != SQLITE_OK) {
        PyErr_SetString(ScanError, self->db ? sqlite3_errmsg(self->db) : sqlite3_errstr(rc));
        scan_close_handles(self);
        return -1;
    }
    if (sqlite3_column_count(self->stmt) != self->ncols) {
        PyErr_Format(PyExc_ValueError, "the query has %d columns, types names %d",
                     sqlite3_column_count(self->stmt), self->ncols);
        scan_close_handles(self);
        return -1;
    }
    return 0;
}

/* Why a value cannot be an int64 (NULL when it can: *out set). */
static const char *
as_int64(sqlite3_value *v, int type, int64_t *out)
{
    switch (type) {
    case SQLITE_INTEGER:
        *out = sqlite3_value_int64(v);
        return NULL;
    case SQLITE_FLOAT: {
        double d = sqlite3_value_double(v);
        if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == (double)(int64_t)d) {
            *out = (int64_t)d;
            return NULL;
        }
        return "double";
    }
    case SQLITE_TEXT:
        return "string";
    default:
        return "binary";
    }
}

static PyObject *
bitmap_of(Column *col, Py_ssize_t n)
{
    if (col->nulls == 0)
        Py_RETURN_NONE;
    PyObject *bits = PyBytes_FromStringAndSize(NULL, (n + 7) / 8);
    if (bits == NULL)
        return NULL;
    unsigned char *b = (unsigned char *)PyBytes_AS_STRING(bits);
    memset(b, 0, (n + 7) / 8);
    const char *v = col->valid.p;
    for (Py_ssize_t i = 0; i < n; i++)
        b[i >> 3] |= (unsigned char)((v[i] != 0) << (i & 7));
    return bits;
}

static PyObject *
Scan_fetch(Scan *self, PyObject *arg)
{
    Py_ssize_t want = PyLong_AsSsize_t(arg);
    if (want == -1 && PyErr_Occurred())
        return NULL;
    if (want <= 0) {
        PyErr_SetString(PyExc_ValueError, "fetch(n): n > 0 rows");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "a Scan is read by one thread at a time");
        return NULL;
    }
    if (self->done || self->stmt == NULL)
        Py_RETURN_NONE;
    int ncols = self->ncols;
    Column *cols = calloc(ncols, sizeof(Column));
    if (cols == NULL)
        return PyErr_NoMemory();
    Py_ssize_t n = 0;
    int rc = SQLITE_ROW, oom = 0, bad_col = -1;
    const char *bad_type = NULL;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    for (int c = 0; c < ncols && !oom; c++) {
        oom |= buf_reserve(&cols[c].values, 8 * (size_t)(want + 1));
        oom |= buf_reserve(&cols[c].valid, (size_t)want);
        if (!oom && self->types[c] == T_TEXT) {
            memset(cols[c].values.p, 0, 8);
            cols[c].values.len = 8;
        }
    }
    while (!oom && n < want) {
        rc = sqlite3_step(self->stmt);
        if (rc != SQLITE_ROW)
            break;
        for (int c = 0; c < ncols; c++) {
            Column *col = &cols[c];
            /* one call into the statement per value (each sqlite3_column_* is one) */
            sqlite3_value *val = sqlite3_column_value(self->stmt, c);
            int type = sqlite3_value_type(val);
            int null = type == SQLITE_NULL;
            col->valid.p[n] = (char)!null;
            col->nulls += null;
            if (self->types[c] == T_INT) {
                int64_t v = 0;
                if (!null && (bad_type = as_int64(val, type, &v)) != NULL) {
                    bad_col = c;
                    break;
                }
                memcpy(col->values.p + 8 * (size_t)n, &v, 8);
            }
            else {
                const unsigned char *s = null ? NULL : sqlite3_value_text(val);
                size_t len = s ? (size_t)sqlite3_value_bytes(val) : 0;
                if (len) {
                    if (buf_reserve(&col->data, len)) {
                        oom = 1;
                        break;
                    }
                    memcpy(col->data.p + col->data.len, s, len);
                    col->data.len += len;
                    col->bad += !utf8_valid(s, len);
                }
                int64_t end = (int64_t)col->data.len;
                memcpy(col->values.p + 8 * (size_t)(n + 1), &end, 8);
            }
        }
        if (bad_col >= 0 || oom)
            break;
        n++;
    }
    Py_END_ALLOW_THREADS
    self->busy = 0;
    PyObject *result = NULL;
    if (oom) {
        PyErr_NoMemory();
        goto out;
    }
    if (bad_col >= 0) {
        PyObject *e = Py_BuildValue("(sLi)", bad_type, self->row + (long long)n, bad_col);
        if (e != NULL)
            PyErr_SetObject(ScanError, e);
        Py_XDECREF(e);
        self->done = 1;
        goto out;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        PyObject *e = Py_BuildValue("(sLi)", sqlite3_errmsg(self->db), self->row + (long long)n, -1);
        if (e != NULL)
            PyErr_SetObject(ScanError, e);
        Py_XDECREF(e);
        self->done = 1;
        goto out;
    }
    if (rc == SQLITE_DONE)
        self->done = 1;
    if (n == 0) {
        result = Py_None;
        Py_INCREF(result);
        goto out;
    }
    PyObject *list = PyList_New(ncols);
    if (list == NULL)
        goto out;
    for (int c = 0; c < ncols; c++) {
        Column *col = &cols[c];
        PyObject *item, *bits = bitmap_of(col, n);
        if (bits == NULL) {
            Py_DECREF(list);
            goto out;
        }
        if (self->types[c] == T_INT)
            item = Py_BuildValue("(y#N)", col->values.p, (Py_ssize_t)(8 * n), bits);
        else
            item = Py_BuildValue("(y#y#Nn)", col->values.p, (Py_ssize_t)(8 * (n + 1)),
                                 col->data.p ? col->data.p : "", (Py_ssize_t)col->data.len,
                                 bits, col->bad);
        if (item == NULL) {
            Py_DECREF(list);
            goto out;
        }
        PyList_SET_ITEM(list, c, item);
    }
    self->row += n;
    result = Py_BuildValue("(nN)", n, list);
out:
    for (int c = 0; c < ncols; c++) {
        buf_free(&cols[c].values);
        buf_free(&cols[c].data);
        buf_free(&cols[c].valid);
    }
    free(cols);
    return result;
}

static PyObject *
Scan_close(Scan *self, PyObject *Py_UNUSED(ignored))
{
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the Scan is being read");
        return NULL;
    }
    scan_close_handles(self);
    self->done = 1;
    Py_RETURN_NONE;
}

static PyMethodDef Scan_methods[] = {
    {"fetch", (PyCFunction)Scan_fetch, METH_O,
     "fetch(n) -> (rows, columns) of up to n more rows, or None at the end"},
    {"close", (PyCFunction)Scan_close, METH_NOARGS, "finalize the query, close the file"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hermes.collectors.importers.nsys._scan.Scan",
    .tp_basicsize = sizeof(Scan),
    .tp_dealloc = (destructor)Scan_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Scan(path, sql, types): a read-only query over a SQLite file, fetched in chunks",
    .tp_methods = Scan_methods,
    .tp_init = (initproc)Scan_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan",
    "A SQLite query's rows as Arrow-shaped column buffers, read with the GIL released.", -1,
    NULL,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    if (PyType_Ready(&ScanType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    ScanError = PyErr_NewException("hermes.collectors.importers.nsys._scan.ScanError",
                                   NULL, NULL);
    Py_INCREF(&ScanType);
    if (ScanError == NULL || PyModule_AddObject(m, "ScanError", ScanError) < 0 ||
        PyModule_AddObject(m, "Scan", (PyObject *)&ScanType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddStringConstant(m, "sqlite_version", sqlite3_libversion());
    return m;
}
