"""Name matching and category codes over event columns (shared by every analysis).

Every function here reads a column of one rank's events (``name``, ``kind``, ``lane_kind``,
...) and returns a numpy array with one entry per row; categorical columns (how the reader
loads them) are decided once per category, never per row.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd


def isin(col: pd.Series, values: tuple[str, ...]) -> np.ndarray:
    """``col.isin(values)`` as a numpy bool array; on categorical columns (how the reader loads
    ``kind``/``lane_kind``/``name``) this compares category codes, not millions of strings."""
    if isinstance(col.dtype, pd.CategoricalDtype):  # decided once per category
        return codes_in(col, [c in values for c in col.dtype.categories.tolist()])
    return col.isin(values).to_numpy(dtype=bool, na_value=False)


#: marked codes :func:`codes_in` compares one by one rather than looks up in a table
COMPARE_MAX = 12


def codes_in(s: pd.Series, hit: list[bool], missing: bool = False) -> np.ndarray:
    """Rows of the categorical ``s`` whose category is marked in ``hit`` (code -1, missing:
    ``missing``). Up to ``COMPARE_MAX`` marked codes are compared directly (one pass over the
    codes each), more are looked up in a table (one gather by code, whatever the number
    marked); when fewer codes are left unmarked, those are compared instead (the complement).
    Returns a bool array, one entry per row."""
    codes = s.array.codes
    marked = [i for i, h in enumerate(hit) if h] + ([-1] if missing else [])
    if len(marked) > COMPARE_MAX:
        unmarked = [i for i, h in enumerate(hit) if not h] + ([] if missing else [-1])
        if len(unmarked) > COMPARE_MAX:
            return np.array(hit + [missing], bool)[codes]  # code -1 reads the trailing entry
        out = np.ones(len(codes), bool)
        for m in unmarked:
            out &= codes != m
        return out
    out = np.zeros(len(codes), bool)
    for m in marked:
        out |= codes == m
    return out


def name_matches(names: pd.Series, pattern: str) -> np.ndarray:
    """``re.search`` of ``pattern`` on each name, evaluated once per distinct name."""
    if len(names) == 0:
        return np.zeros(0, bool)
    if isinstance(names.dtype, pd.CategoricalDtype):  # (a few matching names: compared codes)
        return codes_in(names, search_each([str(c) for c in names.dtype.categories.tolist()],
                                           pattern).tolist())
    # (as its categories would: each distinct value once, missing ones never match)
    codes, uniq = pd.factorize(names, use_na_sentinel=True)
    hit = search_each([str(c) for c in uniq], pattern)
    return np.append(hit, False)[codes]  # code -1 (missing) reads the trailing False


#: texts from which :func:`search_each` hands the search to pyarrow's RE2 (below, Python's
#: ``re`` one by one is as fast as building the Arrow array)
RE2_MIN_TEXTS = 64
# constructs whose meaning differs between Python's re and RE2 over ASCII text, or that RE2
# lacks: \s/\S (RE2's lacks \v, \x1c-\x1f), \Z, \u/\U/\N escapes, POSIX classes, a brace
# that is not {n}, {n,} or {n,m},
# any (?...) group but (?:...), (?P<name>...) and leading (?i)/(?s) flags, \b in a class
_RE2_DIFFERS = re.compile(r"\\[sSZuUN]|\[:|\{(?!\d+(,\d*)?\})|\(\?(?![:P])|\[[^\]]*\\b")
_LEADING_FLAGS = re.compile(r"^\(\?[is]+\)")


def search_each(texts: list[str], pattern: str) -> np.ndarray:
    """``re.search(pattern, t) is not None`` for each text, as a bool array. Over enough texts,
    those that are ASCII without a newline go through pyarrow's RE2 in one call when the
    pattern means the same there (an ASCII pattern without the constructs of
    ``_RE2_DIFFERS``; Python's ``$`` also matches before a final newline, and its case folding
    reaches non-ASCII letters: such texts stay with Python), the rest through Python's ``re``;
    a pattern RE2 rejects (backreferences, ...) goes through Python whole."""
    rx = re.compile(pattern)
    if len(texts) >= RE2_MIN_TEXTS:
        if _re2_reads_alike(pattern):
            import pyarrow as pa

            return _search_arrow(pa.array(texts, pa.string()), pattern, pattern,
                                 lambda rows: [texts[i] for i in rows.tolist()])
        wide = _without_lookarounds(pattern)
        if wide is not None and _re2_reads_alike(wide):
            # RE2 can take the pattern less its lookarounds, which match a superset (an
            # assertion only narrows): Python's ``re`` decides on those texts alone
            maybe = np.flatnonzero(search_each(texts, wide))
            out = np.zeros(len(texts), bool)
            out[maybe] = [rx.search(texts[i]) is not None for i in maybe.tolist()]
            return out
    return np.fromiter((rx.search(t) is not None for t in texts), bool, len(texts))


#: a lookahead / lookbehind with no group, escape or quantifier of its own
_LOOKAROUND = re.compile(r"\(\?<?[=!][^()\\]*\)(?![*+?{])")


@functools.lru_cache(maxsize=256)
def _without_lookarounds(pattern: str) -> str | None:
    """``pattern`` less its simple lookarounds (:data:`_LOOKAROUND`): a pattern matching every
    text ``pattern`` matches; None when it has none, or others are left (nested, quantified)."""
    wide, n = _LOOKAROUND.subn("", pattern)
    if n == 0 or re.search(r"\(\?<?[=!]", wide):
        return None
    try:
        re.compile(wide)
    except re.error:
        return None
    return wide


@functools.lru_cache(maxsize=256)
def _re2_reads_alike(pattern: str) -> bool:
    """Whether pyarrow's RE2 takes ``pattern`` and means by it what Python's ``re`` does over
    ASCII texts without a newline: an ASCII pattern without the constructs of
    ``_RE2_DIFFERS`` that RE2 compiles (it rejects backreferences, for one)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    flags = _LEADING_FLAGS.match(pattern)
    if not pattern.isascii() or _RE2_DIFFERS.search(pattern[flags.end():] if flags else pattern):
        return False
    try:
        pc.match_substring_regex(pa.array([""], pa.string()), pattern)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def col(events: pd.DataFrame, name: str) -> np.ndarray:
    """A string column as a numpy object array. Categoricals are expanded from their categories
    (``astype(str)`` of a million-row categorical costs seconds under pandas 3's Arrow strings)."""
    if len(events) == 0:
        return np.empty(0, object)
    s = events[name]
    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = np.array([str(c) for c in s.dtype.categories.tolist()] + ["nan"], dtype=object)
        return cats[s.array.codes]  # code -1 (missing) picks the trailing "nan"
    return s.astype(str).to_numpy(dtype=object)


def is_(events: pd.DataFrame, name: str, *values: str) -> np.ndarray:
    """Mask of the rows whose string column ``name`` is one of ``values`` (as
    ``np.isin(col(events, name), values)``), decided once per category: no per-row strings."""
    s = events[name] if len(events) else None
    if s is None or not isinstance(s.dtype, pd.CategoricalDtype):
        return np.isin(col(events, name), values) if len(events) else np.zeros(0, bool)
    return codes_in(s, [str(c) in values for c in s.dtype.categories.tolist()], "nan" in values)


def desc_order(x: np.ndarray, kind: str = "stable") -> np.ndarray:
    """The order of ``DataFrame.sort_values(col, ascending=False, kind=kind)`` on ``x`` (no
    NaN): pandas reverses, sorts ascending and reverses back."""
    idx = np.arange(len(x))[::-1]
    return idx[x[::-1].argsort(kind=kind)][::-1]


#: Python's ``\s`` on text over ASCII, in RE2's syntax (RE2's own ``\s`` lacks ``\v`` and
#: ``\x1c``-``\x1f``)
WS_ASCII = r"[\t\n\v\f\r\x1c-\x1f ]"


def rows_matching(text: pd.Series, pattern: str, ascii_pattern: str) -> np.ndarray:
    r"""``re.search(pattern)`` of each row of ``text`` (missing rows never match) without a
    Python search per row: plain ASCII rows by pyarrow's regex with ``ascii_pattern`` --
    ``pattern`` in RE2's syntax, which must match an ASCII text exactly when ``pattern`` does
    (over ASCII both fold case alike; spell ``\s`` as :data:`WS_ASCII`) --, the others by
    Python's ``re`` (:func:`_search_arrow`). For texts that differ per row (args), where
    :func:`name_matches` would search each."""
    import pyarrow as pa

    arr = pa.array(text.astype("string[pyarrow]"))
    return _search_arrow(arr, pattern, ascii_pattern, lambda i: text.iloc[i].tolist())


def _search_arrow(arr: Any, pattern: str, re2_pattern: str,
                  text_at: Callable[[np.ndarray], list[str]]) -> np.ndarray:
    """``re.search(pattern)`` of each element of the Arrow string array ``arr`` (null: no
    match), as a bool array: elements that are ASCII without a newline by pyarrow's RE2 with
    ``re2_pattern`` (Python's ``$`` also matches before a final newline, and its case folding
    reaches non-ASCII letters), the others by Python's ``re`` (``text_at(rows)``: their texts).
    Raises pyarrow's error for a pattern RE2 rejects."""
    import pyarrow.compute as pc

    out = np.array(pc.fill_null(pc.match_substring_regex(arr, re2_pattern), False).to_numpy(
        zero_copy_only=False), bool)
    plain = pc.fill_null(pc.and_(pc.string_is_ascii(arr),
                                 pc.invert(pc.match_substring(arr, "\n"))), True)
    other = np.flatnonzero(~plain.to_numpy(zero_copy_only=False))
    if other.size:
        rx = re.compile(pattern)
        out[other] = [rx.search(t) is not None for t in text_at(other)]
    return out
