"""``opcost.one_cost`` over many operator signatures at once, with numpy.

A trace with dynamic shapes (variable sequence lengths, ragged batches) has as many distinct
operator signatures as operators, so a per-signature Python call is the analysis's hot spot. Here
the signatures whose inputs are plain (``Input Dims`` a list of lists of non-negative integers,
``Input type`` a list of plain strings) of the common families (GEMM, elementwise, reduction,
norm, softmax, copy) are parsed with one ``json.loads`` per column (the items are checked by
regex first, so the joined text is valid JSON and each item stays one element) and costed with
array arithmetic that repeats ``opcost``'s formulas operation for operation (same order, same
float64 rounding), so the numbers are identical. Every other signature -- other families,
TensorLists, scalar arguments the formula reads, more than ``MAX_INPUTS`` inputs or ``MAX_RANK``
dimensions -- goes through ``opcost.one_cost``.
"""

from __future__ import annotations

import json
import math
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hermes.analyzers.common import opinfo
from hermes.analyzers.computation import opcost

MAX_INPUTS = 8
MAX_RANK = 8
_INT = r"(?:0|[1-9][0-9]{0,17})"  # fits int64
_SHAPE = rf"\[\s*(?:{_INT}\s*(?:,\s*{_INT}\s*)*)?\]"
#: a list of shapes of plain integers (no TensorList, no negative or huge dims)
CLEAN_DIMS = rf"^\[\s*(?:{_SHAPE}\s*(?:,\s*{_SHAPE}\s*)*)?\]$"
_STR = r'"[^"\\]*"'
#: a list of plain strings (no escapes)
CLEAN_STRS = rf"^\[\s*(?:{_STR}\s*(?:,\s*{_STR}\s*)*)?\]$"
VECTOR_FAMILIES = ("gemm", "elementwise", "reduction", "norm", "softmax", "copy")
#: reductions and ``_to_copy`` read argument 1 (dims, dtype): vectorized only when it is empty
READS_ARG1 = ("reduction", "_to_copy")
_WRITE_ONLY = ("fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_")


def _clean(raw: np.ndarray, pattern: str) -> np.ndarray:
    """Items (strings, "" for none) matching ``pattern`` or empty."""
    arr = pa.array(raw, pa.string())
    ok = pc.or_(pc.equal(arr, ""), pc.match_substring_regex(arr, pattern))
    return np.asarray(ok.to_numpy(zero_copy_only=False), bool)


def _loads(items: np.ndarray) -> list[Any]:
    """One ``json.loads`` of the (regex-checked) list items; "" reads as []."""
    text = ",".join(np.where(items == "", "[]", items).tolist())
    return json.loads("[" + text + "]")  # type: ignore[no-any-return]


def _elem_of(types: list[str]) -> np.ndarray:
    """``Op.elem`` of each type spelling (looked up once per distinct spelling)."""
    codes, uniq = pd.factorize(pd.Series(types, dtype=object))
    table = np.array([float(opcost.DTYPE_BYTES.get(str(t).strip().lower(), math.nan))
                      for t in uniq] + [math.nan])
    return table[codes] if len(types) else np.zeros(0)


#: items parsed at a time by ``parse_dims`` (its int64 arrays are per byte of text: 766k
#: distinct shapes of a 1 GB trace, 15 MiB of text, took ~0.3 GiB at once)
PARSE_CHUNK = 1 << 15


def parse_dims(items: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Input Dims`` strings that match ``CLEAN_DIMS`` ("" for none) read with numpy over
    their bytes: inputs per item, rank per input, the integers in order (= ``json.loads``);
    ``PARSE_CHUNK`` items at a time (each item is read alone: the chunks' results follow
    each other)."""
    if items.size <= PARSE_CHUNK:
        return _parse_dims(items)
    parts = [_parse_dims(items[lo:lo + PARSE_CHUNK])
             for lo in range(0, items.size, PARSE_CHUNK)]
    nin, rank, flat = (np.concatenate(p) for p in zip(*parts, strict=True))
    return nin, rank, flat


def _parse_dims(items: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    text = ",".join(np.where(items == "", "[]", items).tolist()).encode("ascii")
    b = np.frombuffer(text, np.uint8)
    opn, cls = b == ord("["), b == ord("]")
    depth = np.cumsum(opn, dtype=np.int64) - np.cumsum(cls, dtype=np.int64)  # after the char
    item_open, in_open = opn & (depth == 1), opn & (depth == 2)
    dig = (b >= ord("0")) & (b <= ord("9"))
    first = dig & ~np.r_[False, dig[:-1]]
    last = dig & ~np.r_[dig[1:], False]
    starts, ends = np.flatnonzero(first), np.flatnonzero(last)
    dpos = np.flatnonzero(dig)
    lens = ends - starts + 1
    run = np.repeat(np.arange(starts.size), lens)
    digits = (b[dpos] - ord("0")).astype(np.int64) * 10 ** (ends[run] - dpos)
    flat = np.add.reduceat(digits, np.cumsum(lens) - lens) if starts.size else \
        np.zeros(0, np.int64)
    in_id = np.cumsum(in_open) - 1
    item_id = np.cumsum(item_open) - 1
    n_in = int(in_open.sum())
    rank = np.bincount(in_id[starts], minlength=n_in).astype(np.int64)
    nin = np.bincount(item_id[np.flatnonzero(in_open)], minlength=items.size).astype(np.int64)
    return nin, rank, flat


def _type_elems(types: list[Any], nj: int) -> tuple[np.ndarray, np.ndarray]:
    """``Op.elem`` of inputs 0..nj-1 and ``Op.first_elem`` of each ``Input type`` list."""
    u = len(types)
    nt = np.fromiter(map(len, types), np.int64, u)
    e = _elem_of(list(chain.from_iterable(types)))
    sig_t = np.repeat(np.arange(u), nt)
    j_t = np.arange(e.size) - np.repeat(np.cumsum(nt) - nt, nt)
    elem = np.full((u, nj), np.nan)
    kt = j_t < nj
    elem[sig_t[kt], j_t[kt]] = e[kt]
    first_elem = np.full(u, np.nan)
    valid = np.flatnonzero(~np.isnan(e))
    if valid.size:
        sig_v, first = np.unique(sig_t[valid], return_index=True)
        first_elem[sig_v] = e[valid[first]]
    return elem, first_elem


class Sigs:
    """Dense per-signature input arrays: ``dims`` (S, J, R) int64 left-aligned (1 past the
    rank), ``rank`` (S, J) (-1: no such input), ``elem`` (S, J), ``first_elem`` (S,); from
    ``CLEAN_DIMS`` / ``CLEAN_STRS`` strings (types: None when not needed)."""

    def __init__(self, dims_raw: np.ndarray, types_raw: np.ndarray | None = None) -> None:
        s = dims_raw.size
        nin, rank, flat = parse_dims(dims_raw)
        n_inputs = rank.size
        sig_in = np.repeat(np.arange(s), nin)
        j_in = np.arange(n_inputs) - np.repeat(np.cumsum(nin) - nin, nin)
        self.too_big = nin > MAX_INPUTS
        if rank.size:
            np.logical_or.at(self.too_big, sig_in[rank > MAX_RANK], True)
        nj = int(min(max(nin.max(initial=0), 1), MAX_INPUTS))
        nr = int(min(max(rank.max(initial=0), 1), MAX_RANK))
        self.j, self.r = nj, nr
        keep_in = j_in < nj
        self.rank = np.full((s, nj), -1, np.int64)
        self.rank[sig_in[keep_in], j_in[keep_in]] = np.minimum(rank[keep_in], nr)
        self.dims = np.ones((s, nj, nr), np.int64)
        in_of = np.repeat(np.arange(n_inputs), rank)
        r_of = np.arange(flat.size) - np.repeat(np.cumsum(rank) - rank, rank)
        ok = (j_in[in_of] < nj) & (r_of < nr)
        self.dims[sig_in[in_of[ok]], j_in[in_of[ok]], r_of[ok]] = flat[ok]
        # products past int64 (np.prod wraps around there): left to one_cost
        shift = np.arange(nr)[None, None, :] - (nr - np.maximum(self.rank, 0))[:, :, None]
        self.right = np.where(shift >= 0, np.take_along_axis(self.dims, np.maximum(shift, 0),
                                                             axis=2), 1)  # right-aligned
        for d in (self.dims, self.right):
            self.too_big |= np.prod(d.max(axis=1).astype(np.float64), axis=1) > 2.0 ** 62
        # element sizes by input position, from the types list: each distinct list read once
        self.elem = np.full((s, nj), np.nan)
        self.first_elem = np.full(s, np.nan)
        if types_raw is not None and s:
            tcode, tuniq = pd.factorize(pd.Series(types_raw, dtype=object))
            el, fe = _type_elems(_loads(np.asarray(tuniq, dtype=object)), nj)
            self.elem, self.first_elem = el[tcode], fe[tcode]
        self.tensor = (self.rank >= 0) & ~np.isnan(self.elem)
        with np.errstate(invalid="ignore"):
            self.numel = np.where(self.tensor, np.prod(self.dims, axis=2).astype(np.float64),
                                  np.nan)
            self.nbytes = self.numel * self.elem

    def col(self, a: np.ndarray, j: int | None, fill: Any) -> np.ndarray:
        """Column ``j`` of a per-input array (``fill`` where the input does not exist)."""
        if j is None or j >= self.j:
            return np.full(a.shape[0], fill, dtype=a.dtype)
        return a[:, j]

    def col_dims(self, j: int) -> np.ndarray:
        """The dims of input ``j`` (all 1 where it does not exist)."""
        if j >= self.j:
            return np.ones((self.dims.shape[0], self.r), np.int64)
        return self.dims[:, j]

    def nth_tensor(self, k: int) -> np.ndarray:
        """Index of each signature's ``k``-th tensor input (-1 when it has fewer)."""
        c = np.cumsum(self.tensor, axis=1)
        hit = self.tensor & (c == k + 1)
        return np.where(hit.any(axis=1), hit.argmax(axis=1), -1)


def _by_name(names: np.ndarray, test: Any) -> np.ndarray:
    """``test(name)`` of each row, decided once per distinct name."""
    uniq, inv = np.unique(names.astype(str), return_inverse=True)
    return np.array([bool(test(str(u))) for u in uniq], bool)[inv.reshape(-1)]


def _at(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``a[s, idx[s]]`` (NaN where idx is -1)."""
    rows = np.arange(a.shape[0])
    return np.where(idx >= 0, a[rows, np.maximum(idx, 0)], np.nan)


def _prod_where(dims: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """float(np.prod(the dims selected by ``mask``)) per row (int64 product, like np.prod)."""
    return np.prod(np.where(mask, dims, 1), axis=1).astype(np.float64)


def _gemm(g: Sigs, rows: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    ia, ib, transposed, ibias = opcost.GEMM_OPS[name]
    ra, rb = g.col(g.rank, ia, -1)[rows], g.col(g.rank, ib, -1)[rows]
    ok = g.col(g.tensor, ia, False)[rows] & g.col(g.tensor, ib, False)[rows] & (ra > 0) & (rb > 0)
    if not ok.any():  # (then input ib may lie past the arrays)
        return np.full(ok.size, np.nan), np.full(ok.size, np.nan)
    rows, ra, rb = rows[ok], ra[ok], rb[ok]
    a, b = g.dims[rows, ia], g.dims[rows, ib]
    r = np.arange(g.r)
    n_idx = np.arange(len(rows))
    k = a[n_idx, ra - 1].astype(np.float64)
    if transposed:
        n = np.where(rb == 1, 1, b[:, 0]).astype(np.float64)
        extra = np.ones(len(rows))
    else:
        n = np.where(rb == 1, 1, b[n_idx, rb - 1]).astype(np.float64)
        batched = (ra <= 2) & (rb > 2)
        extra = np.where(batched, _prod_where(b, r[None, :] < (rb - 2)[:, None]), 1.0)
    m_rows = np.where(ra > 1, _prod_where(a, r[None, :] < (ra - 1)[:, None]), 1.0)
    nrows = m_rows * extra
    flops = 2.0 * nrows * n * k
    out_elem = np.full(len(rows), 2.0) if name == "_scaled_mm" else g.elem[rows, ia]
    byts = g.nbytes[rows, ia] + g.nbytes[rows, ib] + nrows * n * out_elem
    if ibias is not None:
        bias = g.col(g.tensor, ibias, False)[rows]
        byts = np.where(bias, byts + g.col(g.nbytes, ibias, np.nan)[rows], byts)
    full_f = np.full(ok.size, np.nan)
    full_b = np.full(ok.size, np.nan)
    full_f[ok], full_b[ok] = flops, byts
    return full_f, full_b


def _elementwise(g: Sigs, rows: np.ndarray, names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t, numel, nb = g.tensor[rows], g.numel[rows], g.nbytes[rows]
    right = g.right[rows]  # np.broadcast_shapes over the tensor inputs, right-aligned
    notone = (right != 1) & t[:, :, None]
    hi = np.where(notone, right, -1).max(axis=1)
    lo = np.where(notone, right, np.iinfo(np.int64).max).min(axis=1)
    anyn = notone.any(axis=1)
    fits = (~anyn | (hi == lo)).all(axis=1)
    bshape = np.prod(np.where(anyn, hi, 1), axis=1).astype(np.float64)
    biggest = np.where(t, numel, -np.inf).max(axis=1)
    out = np.where(fits, bshape, biggest)
    t0 = g.nth_tensor(0)[rows]
    inplace = _by_name(names, lambda n: n.endswith("_") and not n.startswith("_"))
    out = np.where(inplace, _at(numel, t0), out)
    reads = np.zeros(len(rows))
    for j in range(g.j):
        reads = np.where(t[:, j], reads + nb[:, j], reads)
    reads = np.where(np.isin(names, _WRITE_ONLY), 0.0, reads)
    byts = reads + out * _at(g.elem[rows], t0)
    none = t0 < 0
    return np.where(none, np.nan, out), np.where(none, np.nan, byts)


def _one_input(g: Sigs, rows: np.ndarray, fam: str, backward: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Reduction (no dims argument), norm and softmax: by the first input's size."""
    x = g.tensor[rows, 0]
    n, e0, nb0 = g.numel[rows, 0], g.elem[rows, 0], g.nbytes[rows, 0]
    if fam == "reduction":
        flops, byts = n, nb0 + 1.0 * e0
    elif fam == "softmax":
        flops = np.where(backward, 4.0 * n, 5.0 * n)
        byts = np.where(backward, 3 * n * e0, 2 * n * e0)
    else:  # norm: the smaller tensors after the first are its parameters
        params = np.zeros(len(rows))
        for j in range(1, g.j):
            use = g.tensor[rows, j] & (g.numel[rows, j] < n)
            params = np.where(use, params + g.nbytes[rows, j], params)
        flops = np.where(backward, 10.0 * n, 5.0 * n)
        byts = np.where(backward, 3 * n * e0 + 2 * params, 2 * n * e0 + params)
    return np.where(x, flops, np.nan), np.where(x, byts, np.nan)


def _copy(g: Sigs, rows: np.ndarray, names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t0, t1 = g.nth_tensor(0)[rows], g.nth_tensor(1)[rows]
    numel, nb, el = g.numel[rows], g.nbytes[rows], g.elem[rows]
    generic = _at(nb, t0) + _at(numel, t0) * _at(el, t0)
    byts = np.where((names == "copy_") & (t1 >= 0), _at(nb, t1) + _at(nb, t0), generic)
    none = t0 < 0
    return np.where(none, np.nan, 0.0), np.where(none, np.nan, byts)


def _arg1_empty(conc: np.ndarray, need: np.ndarray) -> np.ndarray:
    """Rows (of ``need``) whose Concrete Inputs argument 1 is empty or absent."""
    out = np.zeros(conc.size, bool)
    idx = np.flatnonzero(need)
    idx = idx[_clean(conc[idx], CLEAN_STRS)]
    if idx.size:
        vals = _loads(conc[idx])
        nc = np.fromiter(map(len, vals), np.int64, len(vals))
        flat = np.array(list(chain.from_iterable(vals)), dtype=object)
        two = nc >= 2
        second = pd.Series(flat[(np.cumsum(nc) - nc)[two] + 1], dtype=object)
        empty = np.ones(idx.size, bool)
        empty[two] = (second.astype(str).str.strip() == "").to_numpy(bool)
        out[idx] = empty
    return out


def costs(names: np.ndarray, dims: np.ndarray, types: np.ndarray, conc: np.ndarray
          ) -> pd.DataFrame:
    """``one_cost`` of each signature (arrays of the operator name and raw JSON list strings,
    "" for none): columns flops, bytes, elem (float64)."""
    m = len(names)
    out = pd.DataFrame({"flops": np.full(m, np.nan), "bytes": np.full(m, np.nan),
                        "elem": np.full(m, np.nan)})
    if m == 0:
        return out
    uname, ncode = np.unique(names.astype(object).astype(str), return_inverse=True)
    fam_of = {u: opcost.family_of(u) for u in uname}
    ufam = np.array([f[0] if f else "" for f in fam_of.values()], object)
    ubase = np.array([opcost.base_name(u) for u in uname], object)
    fam, base = ufam[ncode], ubase[ncode]
    vec = np.isin(fam, VECTOR_FAMILIES)
    vec &= _clean(dims, CLEAN_DIMS) & _clean(types, CLEAN_STRS)
    arg1 = vec & ((fam == "reduction") | (base == "_to_copy"))
    vec &= ~arg1 | _arg1_empty(conc, arg1)
    rows = np.flatnonzero(vec)
    g = Sigs(dims[rows], types[rows]) if rows.size else None
    if g is not None:
        rows = rows[~g.too_big]
        sub = np.flatnonzero(~g.too_big)  # positions in g
        f, b = _vector(g, sub, fam[rows], base[rows])
        out.loc[rows, "flops"] = f
        out.loc[rows, "bytes"] = b
        out.loc[rows, "elem"] = g.first_elem[sub]
    rest = np.ones(m, bool)
    rest[rows] = False
    rest = np.flatnonzero(rest & (fam != ""))  # families without a formula: NaN
    if rest.size:
        got = [opcost.one_cost(n, d, t, c)[:3] for n, d, t, c in
               zip(names[rest], dims[rest], types[rest], conc[rest], strict=True)]
        out.iloc[rest, :] = np.array(got, np.float64).reshape(-1, 3)
    return out


def _vector(g: Sigs, sub: np.ndarray, fam: np.ndarray, base: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    f, b = np.full(sub.size, np.nan), np.full(sub.size, np.nan)
    for name in np.unique(base[fam == "gemm"]):
        at = np.flatnonzero((fam == "gemm") & (base == name))
        f[at], b[at] = _gemm(g, sub[at], str(name))
    at = np.flatnonzero(fam == "elementwise")
    if at.size:
        f[at], b[at] = _elementwise(g, sub[at], base[at])
    for fm in ("reduction", "norm", "softmax"):
        at = np.flatnonzero(fam == fm)
        if at.size:
            bw = _by_name(base[at], lambda n: "backward" in n)
            f[at], b[at] = _one_input(g, sub[at], fm, bw)
    at = np.flatnonzero(fam == "copy")
    if at.size:
        f[at], b[at] = _copy(g, sub[at], base[at])
    return f, b


def _extract(s: pa.ChunkedArray, rx: Any) -> pa.ChunkedArray:
    """The capture group of ``rx`` (an ``opcost`` pattern) per row, "" where absent."""
    pat = rx.pattern.replace(r":\s*(\[", r":\s*(?P<v>\[", 1)
    got = pc.struct_field(pc.extract_regex(s, pat), [0])
    return pc.fill_null(got, "")


#: ``s`` holds Arrow strings (pandas' pyarrow string dtypes): opinfo's test, shared
arrow_text = opinfo.is_arrow


def op_costs(names: pd.Series, args: pd.Series) -> pd.DataFrame:
    """``opcost.op_costs`` (same columns, same numbers), vectorized: the signature fields
    extracted with pyarrow's regex kernel, each distinct signature costed by ``costs``."""
    out = pd.DataFrame({"flops": np.nan, "bytes": np.nan, "elem": np.nan, "family": None},
                       index=names.index)
    if len(names) == 0:
        return out
    nm = names.astype(str)
    fams = {n: (f[0] if (f := opcost.family_of(n)) else None) for n in pd.unique(nm)}
    out["family"] = nm.map(fams).to_numpy(object)  # by name, with or without shapes
    sel = out["family"].notna().to_numpy() & args.notna().to_numpy()
    if not sel.any():
        return out
    sub = args[sel]
    if arrow_text(sub):  # the loaded trace's own Arrow strings: no Python string per row
        a = pa.chunked_array(pa.array(sub.array)).cast(pa.large_string())
    else:
        a = pa.chunked_array([pa.array(sub.astype(object).to_numpy(), pa.large_string())])
    n = pa.chunked_array([pa.array(nm[sel].to_numpy(object), pa.large_string())])
    d, t, c = (_extract(a, rx) for rx in (opcost.DIMS_RE, opcost.TYPES_RE, opcost.CONCRETE_RE))
    key = pc.binary_join_element_wise(n, d, t, c, pa.scalar("\x1f", pa.large_string()))
    codes, uniq = pd.factorize(pd.Series(key, dtype=pd.ArrowDtype(pa.large_string())))
    first = np.full(len(uniq), -1, np.int64)
    first[codes[::-1]] = np.arange(codes.size)[::-1]  # each signature's first row
    def col(x: pa.ChunkedArray) -> np.ndarray:
        return np.asarray(x.take(pa.array(first)).to_numpy(zero_copy_only=False), dtype=object)
    table = costs(col(n), col(d), col(t), col(c))
    rows = np.flatnonzero(sel)
    got = table.to_numpy(np.float64)[codes]
    for j, name in enumerate(("flops", "bytes", "elem")):
        v = np.full(len(out), np.nan)
        v[rows] = got[:, j]
        out[name] = v
    return out


def gemm_bytes(shape_raw: pd.Series, elem: pd.Series) -> pd.Series:
    """``opinfo.gemm_bytes`` (same numbers), each distinct Kineto ``Input Dims`` string parsed
    in one ``json.loads`` and sized with numpy; other spellings (Ascend ``Input Shapes``,
    TensorLists, ...) by ``opinfo.gemm_bytes``."""
    uniq = pd.unique(shape_raw.dropna())
    raw = np.asarray(uniq, dtype=object)
    is_str = np.fromiter((type(x) is str for x in raw), bool, raw.size)
    val = np.full(raw.size, np.nan)
    clean = np.zeros(raw.size, bool)
    clean[is_str] = _clean(raw[is_str].astype(str), CLEAN_DIMS) & \
        (raw[is_str] != "")
    done = np.zeros(raw.size, bool)
    idx = np.flatnonzero(clean)
    if idx.size:
        g = Sigs(raw[idx].astype(str))
        ra, rb = g.col(g.rank, 0, -1), g.col(g.rank, 1, -1)
        ok = ~g.too_big
        found = (ra > 0) & (rb > 0)  # both of the first two shapes recorded
        a, b = g.dims[:, 0], g.col_dims(1)
        rows, r = np.arange(idx.size), np.arange(g.r)[None, :]
        pa, pb = np.prod(a, axis=1), np.prod(b, axis=1)
        m = np.prod(np.where(r < (ra - 1)[:, None], a, 1), axis=1)
        k = a[rows, np.maximum(ra - 1, 0)]
        b1, b2 = b[rows, np.maximum(rb - 1, 0)], b[rows, np.maximum(rb - 2, 0)]
        n = np.where(rb > 1, np.where(b2 == k, b1, b2), 1)
        big = pa.astype(np.float64) + pb + m.astype(np.float64) * n > 2.0 ** 62
        ok &= ~(found & big)
        with np.errstate(over="ignore"):
            tot = (pa + pb + m * n).astype(np.float64)
        val[idx[ok]] = np.where(found, tot, np.nan)[ok]
        done[idx[ok]] = True
    rest = np.flatnonzero(~done)
    if rest.size:
        val[rest] = opinfo.gemm_bytes(pd.Series(raw[rest], dtype=object),
                                      pd.Series(np.ones(rest.size))).to_numpy(np.float64)
    table = pd.Series(val, index=pd.Index(uniq), dtype="float64")
    return shape_raw.map(table).astype("float64") * elem


def misaligned(raw: np.ndarray, n_inputs: int, align: int) -> np.ndarray:
    """``[opinfo.misaligned(r, n_inputs, align) for r in raw]`` for many (distinct) shape
    strings: Kineto ``Input Dims`` parsed in one ``json.loads``, the rest one by one."""
    raw = np.asarray(raw, dtype=object)
    out = np.zeros(raw.size, bool)
    done = np.zeros(raw.size, bool)
    is_str = np.fromiter((type(x) is str for x in raw), bool, raw.size)
    clean = np.zeros(raw.size, bool)
    clean[is_str] = _clean(raw[is_str].astype(str), CLEAN_DIMS) & (raw[is_str] != "")
    idx = np.flatnonzero(clean)
    if idx.size:
        g = Sigs(raw[idx].astype(str))
        rank, dims = g.rank[:, :n_inputs], g.dims[:, :n_inputs]
        last = np.take_along_axis(dims, np.maximum(rank - 1, 0)[:, :, None], axis=2)[..., 0]
        out[idx] = ((rank > 0) & (last % align != 0)).any(axis=1)
        done[idx] = ~g.too_big  # many inputs or dims: one by one, below
    for i in np.flatnonzero(~done):
        out[i] = opinfo.misaligned(raw[i], n_inputs, align)
    return out
