"""Names that match across runs: a kernel compiled with other template arguments, an operator
with an address or a counter in its name, are the same thing in both runs.

``normalize("void foo<128, float>(float*, int)")`` is ``"void foo"``, as is the ``<256, float>``
instance; ``"nccl:all_reduce#17"`` becomes ``"nccl:all_reduce"``. Traces hold few distinct names
(thousands) for millions of events, so the regular expressions run once per distinct name (the
trace's categorical categories), never per event.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

_HEX = re.compile(r"0x[0-9a-fA-F]+")
#: The innermost template argument list; applied until none is left (they nest).
_TEMPLATE = re.compile(r"<[^<>]*>")
#: The innermost parameter list of a signature: ``(int, float*)`` right after a name or a
#: template (``foo(...)``, ``foo<4>(...)``). A parenthesis after a space is words, not
#: parameters, and is kept: ``Memcpy HtoD (Pinned -> Device)`` differs from ``(Pageable ...)``.
_PARAMS = re.compile(r"(?<=[\w>\])])\([^()]*\)")
#: A trailing instance counter: ``_17``, ``#3``, ``.2``, `` 5`` (not part of a word like ``fp16``).
_SUFFIX = re.compile(r"(?:[_#.\s]\d+)+$")
_SPACES = re.compile(r"\s+")


def _strip(pattern: re.Pattern[str], s: str) -> str:
    while True:
        out = pattern.sub("", s)
        if out == s:
            return out
        s = out


def normalize(name: str) -> str:
    """The run-independent form of an operator or kernel name (see the module docstring).

    A name that would normalize to nothing (``"(anonymous)"``) is kept as it is.
    """
    raw = str(name)
    s = _strip(_PARAMS, _strip(_TEMPLATE, _HEX.sub("", raw)))
    cut = _SUFFIX.sub("", s.strip())
    if cut != s.strip() or _HEX.search(raw):  # drop the separator an address/counter hung on
        cut = cut.rstrip(" _#.-")
    s = _SPACES.sub(" ", cut).strip()
    return s or str(name).strip()


def normalize_series(names: pd.Series) -> pd.Series:
    """:func:`normalize` over a column, computed once per distinct value; a categorical whose
    categories are the normalized names (several raw names may share one)."""
    cat = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    norm = np.array([normalize(c) for c in cat.cat.categories], dtype=object)
    uniq, inverse = np.unique(norm, return_inverse=True) if norm.size else (norm, norm)
    codes = cat.cat.codes.to_numpy()
    new_codes = np.where(codes >= 0, inverse.astype(np.int64)[codes.clip(min=0)], -1) \
        if norm.size else codes
    return pd.Series(pd.Categorical.from_codes(new_codes, categories=pd.Index(uniq)),
                     index=names.index)
