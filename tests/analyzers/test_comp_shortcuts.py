"""The shortcuts of the rank analyzers give what the long way gives (issue 15, first-call cost):
``opinfo.may_match`` (one regex search over a column's Arrow bytes), ``rich_args`` /
``dtype_bytes`` through it, ``kernelstats._fsums`` skipping an all-NaN column, the cpu
analyzer's inflation test on its candidates only, and the categorical-code paths of
``hostcalls.runtime_of`` / ``framework_of`` and ``io.name_matches``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.common import hostcalls, opinfo
from hermes.analyzers.common.names import name_matches
from hermes.analyzers.computation.kernelstats import fsums

ARROW = "string[pyarrow]"


def _rows(*values: str | None) -> pd.Series:
    return pd.Series(list(values), dtype=ARROW)


def test_may_match_is_false_only_when_no_row_matches() -> None:
    s = _rows('{"correlation": 1}', None, '{"device": 0, "Type": "MatMul"}')
    assert opinfo.may_match(s, opinfo.ARG_KEYS.pattern)
    assert not opinfo.may_match(s.iloc[:2], opinfo.ARG_KEYS.pattern)
    # a slice of the array (offset into the Arrow buffers) sees its own rows only
    assert opinfo.may_match(s.iloc[2:], '"Type"')
    assert not opinfo.may_match(s.iloc[:2], '"Type"')
    assert opinfo.may_match(_rows("x FLOAT32 y"), "float|double|fp32", ignore_case=True)
    assert not opinfo.may_match(_rows("x FLOAT32 y"), "float|double")


def test_may_match_does_not_decide_edge_sensitive_patterns_or_other_storage() -> None:
    s = _rows("ab", "cd")
    # "b" then "c" meet across the row boundary: '^c' matches row 2; anchors are not decided
    assert opinfo.may_match(s, "^c") and opinfo.may_match(s, r"\bzz") and \
        opinfo.may_match(s, "(?<=q)z")
    # a match spanning two rows is a "maybe" (the row-by-row scan decides)
    assert opinfo.may_match(s, "bc")
    assert opinfo.may_match(pd.Series(["ab"], dtype=object), "zz")


@pytest.mark.parametrize("rows", [
    ['{"correlation": 1, "device": 0}', '{"stream": 7}'],
    ['{"Type": "MatMul", "x": 1}', '{"stream": 7}', None, '{"aic_mac_ratio": 0.5}'],
])
def test_rich_args_as_the_row_by_row_scan(rows: list[str | None]) -> None:
    s = _rows(*rows)
    got = opinfo.rich_args(s)
    d = s.dropna()
    want = d[d.str.contains(opinfo.ARG_KEYS.pattern, regex=True).to_numpy()]
    pd.testing.assert_series_equal(got, want, check_exact=True)


def test_dtype_bytes_without_and_with_a_dtype() -> None:
    none = opinfo.dtype_bytes(_rows('{"stream": 7}', '{"device": 0}'))
    assert none.tolist() == [2.0, 2.0] and none.dtype == np.float64
    some = opinfo.dtype_bytes(_rows('{"dtype": "float"}', '{"stream": 7}', "c10::Double"))
    assert some.tolist() == [4.0, 2.0, 8.0]


def test_fsums_all_nan_column_and_nan_rows() -> None:
    key = np.array([0, 1, 0, -1, 1])
    out = fsums(key, 3, {"f": np.array([1.5, np.nan, 2.0, 9.0, np.nan]),
                          "b": np.full(5, np.nan)})
    np.testing.assert_array_equal(out["f"], [3.5, np.nan, np.nan])
    assert np.isnan(out["b"]).all()


def _host_frame(names: list[str | None]) -> pd.DataFrame:
    n = len(names)
    return pd.DataFrame({
        "lane_kind": pd.Categorical(["host"] * (n - 1) + ["device"],
                                    categories=["host", "device"]),
        "name": pd.Categorical(names, categories=sorted({x for x in names if x} | {"unused"})),
    })


def test_runtime_and_framework_from_codes() -> None:
    ev = _host_frame(["cudaLaunchKernel", "cudaLaunchKernel", "hipMalloc", None, "aten::mm",
                      "hipFree"])
    # cuda 2 calls, hip 1 on the host (the device row's hipFree does not count)
    assert hostcalls.runtime_of(ev) == "cuda"
    assert hostcalls.framework_of(ev) == "pytorch"
    plain = ev.assign(name=ev["name"].astype(object))
    assert hostcalls.runtime_of(plain) == "cuda" and hostcalls.framework_of(plain) == "pytorch"


def test_name_matches_plain_and_categorical_columns_agree() -> None:
    values = ["aten::add", None, "cudaMalloc", "aten::add", "gc"]
    want = [True, False, False, True, False]
    assert name_matches(pd.Series(values, dtype=object), "^aten::").tolist() == want
    assert name_matches(pd.Series(values, dtype="category"), "^aten::").tolist() == want
    assert name_matches(pd.Series(values, dtype=ARROW), "^aten::").tolist() == want


def test_top_ops_as_the_sorted_op_table() -> None:
    from hermes.analyzers.computation.analysis import CLASSES, top_ops
    from hermes.analyzers.computation.kernelstats import KernelStats

    rng = np.random.default_rng(7)
    n = 400
    names = [f"k{i}" for i in rng.integers(0, 40, n)]
    k = pd.DataFrame({"name": pd.Series(names, dtype="category"),
                      "family": pd.Series(["gemm"] * n, dtype="category"),
                      # few distinct durations: many names tie on their total
                      "dur_ns": rng.integers(1, 4, n) * 1000,
                      "flops": np.nan, "bytes": np.nan})
    cls = rng.integers(0, len(CLASSES), n)
    ks = KernelStats(k, cls, CLASSES)
    mask = rng.random(n) < 0.5
    for kw in ({"cls": 1}, {"mask": mask}, {"mask": mask, "n": 50}):
        g = ks.op_table(kw.get("mask"), kw.get("cls")).sort_values("sum", ascending=False)
        want = [{"name": str(a), "time_ns": int(r["sum"]), "count": int(r["count"])}
                for a, r in g.head(kw.get("n", 10)).iterrows()]
        assert top_ops(ks, **kw) == want
