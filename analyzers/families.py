"""Kernel families by name: the data table ``families.toml`` (next to this module), loaded once.

``classify(names)`` gives each device kernel its family (``gemm``, ``conv``, ``attention``,
``elementwise``, ``reduction``, ``norm``, ``copy``, ``embedding``, ``communication``, ``other``)
from the first matching name pattern, and ``BOUNDS[family]`` the family's usual roofline bound
(``compute_bound`` / ``memory_bound`` / ``communication``) for kernels without FLOP/byte data.
Patterns run once per distinct name (kernel names repeat: millions of kernels, hundreds of names).
"""

from __future__ import annotations

import re
import tomllib
from functools import cache, lru_cache
from importlib import resources

import numpy as np
import pandas as pd

FAMILIES_FILE = "families.toml"
OTHER = "other"
#: host-operator families (``opcost``) -> kernel families: softmax kernels are reductions
HOST_TO_KERNEL = {"softmax": "reduction"}


@cache
def table() -> tuple[tuple[tuple[str, re.Pattern[str]], ...], dict[str, str]]:
    """(ordered (family, compiled regex) patterns, family -> usual bound), read once."""
    bounds, regexes = _raw()
    return tuple((fam, re.compile(rx, re.I)) for fam, rx in regexes), bounds


@cache
def _raw() -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """(family -> usual bound, ordered (family, regex source) patterns) of the file."""
    raw = tomllib.loads(resources.files(__package__).joinpath(FAMILIES_FILE)
                        .read_text(encoding="utf-8"))
    bounds = {name: str(spec["bound"]) for name, spec in raw["family"].items()}
    pats = []
    for i, p in enumerate(raw["pattern"]):
        if p["family"] not in bounds:
            raise ValueError(f"{FAMILIES_FILE} pattern #{i + 1}: unknown family {p['family']!r}")
        pats.append((str(p["family"]), str(p["regex"])))
    return bounds, tuple(pats)


@cache
def _ascii_table() -> tuple[tuple[str, re.Pattern[str]], ...] | None:
    """The patterns compiled for ASCII names (``re.I | re.A``: a third of the compile time of
    Unicode case folding), None when a pattern is not ASCII or uses ``\\s``. On an ASCII name
    such a pattern matches the same either way: the extra Unicode case pairs (Kelvin sign, long
    s, dotless i) all involve a non-ASCII character, and ``\\w``, ``\\b``, ``\\d`` agree on
    ASCII (``\\s`` does not: Unicode counts ``\\x1c``-``\\x1f`` as spaces)."""
    regexes = _raw()[1]
    if not all(ascii_safe(rx) for _, rx in regexes):
        return None
    return tuple((fam, re.compile(rx, re.I | re.A)) for fam, rx in regexes)


#: escapes that may name a non-ASCII character (``\\N{..}``, ``\\u``, ``\\x``, octal) or
#: differ under ``re.ASCII`` (``\\s``): a pattern with one is compiled for Unicode only
_UNSAFE = re.compile(r"\\[sSNuUx0-9]|\(\?[a-zA-Z]*u")


def ascii_safe(pattern: str) -> bool:
    """Whether ``pattern`` matches an ASCII string the same compiled with ``re.ASCII``."""
    return pattern.isascii() and not _UNSAFE.search(pattern)


@lru_cache(maxsize=65536)
def family_of(name: str) -> str:
    pats = _ascii_table() if name.isascii() else None
    for fam, rx in pats or table()[0]:
        if rx.search(name):
            return fam
    return OTHER


def bound_of(family: str) -> str:
    return _raw()[0].get(family, _raw()[0][OTHER])


def classify(names: pd.Series) -> pd.Series:
    """The family of each kernel name (a categorical), matched once per distinct name."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes, uniq = names.array.codes, names.dtype.categories
    else:
        codes, uniq = pd.factorize(names.astype(object), use_na_sentinel=True)
    fams = [family_of(str(u)) for u in uniq] + [OTHER]
    per = np.asarray(codes, np.int64)
    per = np.where(per >= 0, per, len(uniq))
    used = np.bincount(per, minlength=len(fams)) > 0   # the families of the names present
    cats = sorted({f for f, u in zip(fams, used, strict=True) if u})
    to = np.array([cats.index(f) if u else -1 for f, u in zip(fams, used, strict=True)])
    return pd.Series(pd.Categorical.from_codes(to[per], categories=cats), index=names.index)


def bounds(families: pd.Series) -> pd.Series:
    """The usual bound of each family (object strings), looked up once per distinct family."""
    codes, uniq = pd.factorize(families.astype(object), use_na_sentinel=True)
    vals = np.array([bound_of(u) for u in uniq] + [bound_of(None)], dtype=object)
    return pd.Series(vals[np.where(codes >= 0, codes, len(uniq))], index=families.index,
                     dtype=object)
