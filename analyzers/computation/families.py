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
from collections.abc import Sequence
from functools import cache, lru_cache
from importlib import resources

import numpy as np
import pandas as pd

from hermes.analyzers.common.names import RE2_MIN_TEXTS, search_each

FAMILIES_FILE = "families.toml"
OTHER = "other"
#: host-operator families (``opcost``) -> kernel families: softmax kernels are reductions
HOST_TO_KERNEL = {"softmax": "reduction"}


@cache
def table() -> tuple[tuple[tuple[str, re.Pattern[str]], ...], dict[str, str]]:
    """(ordered (family, compiled regex) patterns, family -> usual bound), read once."""
    raw = tomllib.loads(resources.files(__package__).joinpath(FAMILIES_FILE)
                        .read_text(encoding="utf-8"))
    bounds = {name: str(spec["bound"]) for name, spec in raw["family"].items()}
    pats = []
    for i, p in enumerate(raw["pattern"]):
        if p["family"] not in bounds:
            raise ValueError(f"{FAMILIES_FILE} pattern #{i + 1}: unknown family {p['family']!r}")
        pats.append((str(p["family"]), re.compile(p["regex"], re.I)))
    return tuple(pats), bounds


@lru_cache(maxsize=65536)
def family_of(name: str) -> str:
    for fam, rx in table()[0]:
        if rx.search(name):
            return fam
    return OTHER


#: families found by :func:`families_of`, by name (an analysis asks again for the same
#: names: the fusion replay for each of its transforms); cleared when it grows past this
_KNOWN_MAX = 65536
_known: dict[str, str] = {}


def families_of(names: Sequence[str]) -> list[str]:
    """:func:`family_of` of each name: names not seen before go pattern by pattern through
    ``names.search_each`` together (one RE2 call a pattern for ASCII names, Python's ``re``
    for the rest: the same answers as ``re.search``) instead of every pattern per name in
    Python; real traces carry thousands of distinct names (TraceLens xdit_sd_3.5: ~44k regex
    searches, 0.14 s, in one analysis)."""
    texts = [str(n) for n in names]
    new = list(dict.fromkeys(t for t in texts if t not in _known))
    if len(new) < RE2_MIN_TEXTS:
        found = [family_of(t) for t in new]
    else:
        out = np.full(len(new), OTHER, dtype=object)
        left = np.arange(len(new))
        for fam, rx in table()[0]:
            if not left.size:
                break
            hit = search_each([new[i] for i in left.tolist()], "(?i)" + rx.pattern)
            out[left[hit]] = fam
            left = left[~hit]
        found = out.tolist()
    if len(_known) + len(new) > _KNOWN_MAX:
        _known.clear()
    _known.update(zip(new, found, strict=True))
    return [_known[t] if t in _known else family_of(t) for t in texts]


def bound_of(family: str) -> str:
    return table()[1].get(family, table()[1][OTHER])


def classify(names: pd.Series) -> pd.Series:
    """The family of each kernel name (a categorical), matched once per distinct name."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes, uniq = names.array.codes, names.dtype.categories
    else:
        codes, uniq = pd.factorize(names.astype(object), use_na_sentinel=True)
    fams = [*families_of([str(u) for u in uniq]), OTHER]
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


# read when the module is imported, not on an analysis's first call
table()
