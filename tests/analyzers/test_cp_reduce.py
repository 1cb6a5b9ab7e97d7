"""The critical path's tables reduced in numpy on category codes (``critical_path.reduce_copies``,
``group_medians``, ``group_sums``) equal their definition, pandas' groupby of the per-event-copy
table and ``np.add.at`` (written here): on random traces (names categorical, with
unused categories, events with no name, many categories), and on values that take the
fallbacks (slacks too large for the one-key sort, sums too large for float64)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.common.steps import step_windows
from hermes.analyzers.critical_path import analysis as critical_path
from tests.analyzers.test_cp_chunks import random_trace


def _reference(df: pd.DataFrame, windows: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    _, _, pre, c, cats = critical_path.copies(df, windows)
    info = pd.DataFrame({
        "name": pre.name.take(c["src"].astype(np.intp)),
        **{k: pd.Categorical.from_codes(c[k], categories=cats[k]) for k in ("kind", "component")},
        "dur_ns": c["dur_ns"], "win": c["win"].astype(np.int64), "cp_ns": c["cp_ns"],
        "slack_ns": c["slack_ns"]})
    by = np.zeros((len(windows), len(critical_path.COMPONENTS)), np.int64)
    np.add.at(by, (info["win"].to_numpy(np.int64), info["component"].cat.codes.to_numpy()),
              info["cp_ns"].to_numpy(np.int64))
    ops = info.groupby(["name", "kind"], as_index=False, observed=True).agg(
        count=("cp_ns", "size"), dur_ns=("dur_ns", "sum"), cp_time_ns=("cp_ns", "sum"),
        min_slack_ns=("slack_ns", "min"), median_slack_ns=("slack_ns", "median"))
    return by, ops


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("seed", range(8))
def test_reduced_is_the_groupby_of_the_table(seed, native, monkeypatch):
    from hermes.analyzers.critical_path import lanes
    if not native:  # the numpy reduction (the compiled module absent)
        monkeypatch.setattr(lanes, "_lanes", None)
    elif not lanes.COMPILED:
        pytest.skip("hermes.analyzers.critical_path._lanes not compiled")
    rng = np.random.default_rng(seed)
    df = random_trace(rng, int(rng.integers(3, 9)))
    names = sorted(set(df["name"])) + ["unused"]
    if seed % 2:  # many categories: only the keys present get a slot
        names += [f"x{i}" for i in range(20_000)]
    df["name"] = pd.Categorical(df["name"], categories=names[::-1])
    if seed % 4 == 3:  # some events have no name: in no group
        df.loc[rng.random(len(df)) < 0.3, "name"] = np.nan
    windows = step_windows(df)
    _, _, pre, c, _ = critical_path.copies(df, windows)
    by, ops = critical_path.reduce_copies(pre, c, len(windows))
    ref_by, ref_ops = _reference(df, windows)
    assert len(ops) > 1 and by.sum() > 0
    np.testing.assert_array_equal(by, ref_by)
    pd.testing.assert_frame_equal(ops, ref_ops, check_exact=True)


@pytest.mark.parametrize("big", [False, True])
def test_medians_and_sums_are_pandas(big):
    rng = np.random.default_rng(7)
    n, nkeys = 5000, 300
    key = rng.integers(0, nkeys, n)
    # big: slacks whose single sort key would overflow (the lexsort fallback), values whose
    # float64 sums would not be exact (np.add.at)
    hi = 2**61 if big else 1000
    slack = rng.integers(0, hi, n)
    slack[::5] = slack[1::5]  # ties
    df = pd.DataFrame({"k": key, "s": slack})
    ref = df.groupby("k")["s"].agg(["median", "sum"])
    cnt = np.bincount(key, minlength=nkeys)
    present = np.flatnonzero(cnt)
    med = critical_path.group_medians(key, slack, nkeys, cnt[present])
    assert big or (med != np.round(med)).any()  # even counts: means of two middle values
    np.testing.assert_array_equal(med, ref["median"].to_numpy())
    np.testing.assert_array_equal(critical_path.group_sums(key, slack, nkeys)[present],
                                  ref["sum"].to_numpy())
