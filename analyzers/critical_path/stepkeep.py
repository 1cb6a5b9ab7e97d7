"""What a kept step graph is matched by (``stepgraph``'s kept graphs): a build's inputs
compared exactly with a kept graph's (``same_inputs``), and two frames of events compared on what a
graph and its steps are made of (``same_events``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.trace.args import ROW, SOURCE, has_args

__all__ = ["SOURCE_COLUMNS", "name_key", "same_inputs", "same_events", "same_values"]


#: the event columns a step graph and its steps are made of (:class:`Events`,
#: ``steps.step_windows``), besides the args: a column either comes to read must be added here
#: (``kept_steps`` hands a kept graph over to events equal in these)
SOURCE_COLUMNS = ("ts_ns", "dur_ns", "kind", "lane_kind", "name", "lane", "corr_id", "stream",
                  "step")


def _same_column(x: pd.Series, y: pd.Series) -> bool:
    """Equal columns: dtype and values (NaN / NA where the other has it); a categorical's
    categories in the same order (its codes are what a graph is made of)."""
    if x.dtype != y.dtype or len(x) != len(y):
        return False
    if isinstance(x.dtype, pd.CategoricalDtype):
        return x.cat.categories.equals(y.cat.categories) and np.array_equal(
            x.cat.codes.to_numpy(), y.cat.codes.to_numpy())
    return bool(x.array.equals(y.array))


def same_values(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Equal frames by position (their indexes aside): the same columns, each equal."""
    return list(a.columns) == list(b.columns) and all(
        _same_column(a[c].reset_index(drop=True), b[c].reset_index(drop=True))
        for c in a.columns)


def same_events(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Whether the events ``a`` and ``b`` make the same step graph and steps: the same index,
    the same :data:`SOURCE_COLUMNS` (each present in both or neither, equal) and the same
    args (an equal column, or the same file's rows)."""
    if a is b:
        return True
    if len(a) != len(b) or not a.index.equals(b.index):
        return False
    for c in SOURCE_COLUMNS:
        if (c in a.columns) != (c in b.columns):
            return False
        if c in a.columns and not _same_column(a[c], b[c]):
            return False
    if ("args" in a.columns) != ("args" in b.columns) or has_args(a) != has_args(b):
        return False
    if "args" in a.columns:
        return _same_column(a["args"], b["args"])
    if not has_args(a):
        return True
    return a.attrs.get(SOURCE) is b.attrs.get(SOURCE) and _same_column(a[ROW], b[ROW])


def same_inputs(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two graphs' inputs (:func:`build_sel`'s ``made_of``) are the same: arrays of
    the same dtype, shape and values (NaN equal to NaN), indexes equal. Compared exactly,
    cheapest first (the first difference ends it): no digest of every array on each build."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x is y:
            continue
        if isinstance(x, pd.Index) or isinstance(y, pd.Index):
            if not (isinstance(x, pd.Index) and isinstance(y, pd.Index) and x.dtype == y.dtype
                    and x.equals(y)):
                return False
        elif x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(
                x, y, equal_nan=x.dtype.kind in "fc"):
            return False
    return True


def name_key(name: Any, src: np.ndarray) -> tuple[Any, ...]:
    """The names of the events ``src`` as what to compare: category codes and the categories
    when categorical, else the names' hashes."""
    if isinstance(name, pd.Categorical):
        return np.asarray(name.codes)[src], name.categories
    return (pd.util.hash_array(np.asarray(name.take(src), dtype=object)),)
