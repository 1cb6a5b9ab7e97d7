"""The computation analyzer's grouped figures (``kernelstats``), computed once per rank from codes:
by hand on a tiny task table, and against a pandas group-by of each subset on a random one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.computation import devicework
from hermes.analyzers.computation.kernelstats import KernelStats
from hermes.analyzers.computation.roofline import CLASSES
from tests.analyzers.test_analysis_comp_families import run
from tests.tracegen import ev


def _tasks(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    names = np.array([f"k{i}" for i in range(7)], dtype=object)
    fams = np.array(["gemm", "elementwise", "other", "reduction"], dtype=object)
    fl = rng.random(n) * 1e9
    fl[rng.random(n) < 0.4] = np.nan
    by = rng.random(n) * 1e7
    by[rng.random(n) < 0.3] = np.nan
    by[rng.random(n) < 0.05] = 0.0                      # zero bytes: not known
    k = pd.DataFrame({"name": pd.Categorical(names[rng.integers(0, 7, n)]),
                      "dur_ns": rng.integers(1, 50, n) * 1000,
                      "flops": fl, "bytes": by,
                      "family": pd.Categorical(fams[rng.integers(0, 4, n)]),
                      "basis": np.where(rng.random(n) < 0.5, "family", "roofline"),
                      "elem": np.where(rng.random(n) < 0.5, 2.0, np.nan)})
    return k, rng.integers(0, len(CLASSES), n)


def test_kernel_and_family_tables_by_hand() -> None:
    # a (gemm): 100 us with 1e9 FLOPs, 300 us without; b (elementwise): 100 us, 1e6 bytes
    k = pd.DataFrame({"name": pd.Categorical(["a", "b", "a"]),
                      "dur_ns": [100_000, 100_000, 300_000],
                      "flops": [1e9, np.nan, np.nan], "bytes": [np.nan, 1e6, np.nan],
                      "family": pd.Categorical(["gemm", "elementwise", "gemm"]),
                      "basis": ["roofline", "roofline", "family"]})
    ks = KernelStats(k, np.array([0, 1, 0]), CLASSES)
    t = ks.kernels().set_index("name")
    assert list(t.index) == ["a", "b"]
    assert (t.loc["a", "count"], t.loc["a", "total_ns"], t.loc["a", "med_ns"]) == \
        (2, 400_000, 200_000)
    assert t.loc["a", "std_ns"] == 100_000
    assert t.loc["a", "share_pct"] == pytest.approx(80.0)
    assert t.loc["a", "tflops"] == pytest.approx(1e9 / 100e-6 / 1e12)   # over its known 100 us
    assert t.loc["b", "GBps"] == pytest.approx(1e6 / 100e-6 / 1e9)
    assert (t.loc["a", "bound"], t.loc["b", "bound"]) == ("compute_bound", "memory_bound")
    f = ks.families().set_index("family")
    assert f.loc["gemm", "flops_known_pct"] == pytest.approx(25.0)
    assert list(f.index) == ["gemm", "elementwise"]
    ev_ = devicework.class_evidence(ks, 0, 500_000.0, {"peak_flops": {"sm": 1e15}})
    assert ev_["family_basis_pct"] == 75.0
    assert [r["name"] for r in ev_["top_kernels"]] == ["a"]
    assert ev_["top_kernels"][0]["share_of_device_time_pct"] == 80.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grouped_figures_equal_a_groupby_of_each_subset(seed: int) -> None:
    k, cls = _tasks(3000, seed)
    ks = KernelStats(k, cls, CLASSES)
    fl, by = k["flops"].where(k["flops"] > 0), k["bytes"].where(k["bytes"] > 0)
    g = k.groupby("name", observed=True)
    ref = pd.DataFrame({"count": g.size(), "total_ns": g["dur_ns"].sum(),
                        "med_ns": g["dur_ns"].median(), "std_ns": g["dur_ns"].std(ddof=0),
                        "flops": fl.groupby(k["name"], observed=True).sum(min_count=1)})
    got = ks.kernels().set_index("name")
    for c in ref.columns:
        assert got[c].to_numpy().tolist() == ref[c].reindex(got.index).to_numpy().tolist(), c
    assert list(got["total_ns"]) == sorted(got["total_ns"], reverse=True)
    for c in range(len(CLASSES)):
        sub = k[cls == c]
        fam = ks.families(c).set_index("family")
        want = sub.groupby(sub["family"].astype(object))
        assert fam["time_ns"].to_dict() == want["dur_ns"].sum().to_dict()
        assert fam["flops"].fillna(-1).to_dict() == \
            fl[cls == c].groupby(sub["family"].astype(object)).sum(min_count=1).fillna(-1) \
            .to_dict()
        top = ks.top_kernels(c, 3)
        tot = sub.groupby("name", observed=True)["dur_ns"].sum().nlargest(3)
        assert sorted(zip(top["name"], top["total_ns"], strict=True)) == \
            sorted(zip(tot.index.astype(str), tot.to_numpy(), strict=True))
        ops = ks.op_table(cls=c)
        assert ops["sum"].to_dict() == \
            sub.groupby("name", observed=True, sort=False)["dur_ns"].sum().to_dict()
        assert list(ops.index) == list(pd.unique(sub["name"].astype(str)))
    # a mask rather than a class: the same table
    m = (k["dur_ns"] > 20_000).to_numpy()
    assert ks.op_table(mask=m)["count"].to_dict() == \
        k[m].groupby("name", observed=True, sort=False).size().to_dict()
    # bytes of zero count as unknown, like a missing figure
    assert ks.group("name")["gb_ns"].sum() == int(k.loc[by.notna(), "dur_ns"].sum())


def test_one_kernel_many_classes_bound_goes_to_the_larger_time() -> None:
    # one kernel name, 300 us compute-bound (with FLOPs at peak) and 100 us underutilized
    peak = 9.894e14
    r = run(ev("step", "ProfilerStep#1", 0, 1_000_000, step=1),
            ev("kernel", "nvjet_gemm", 0, 300_000, flops=0.9 * peak * 300e-6, bytes=1e6),
            ev("kernel", "nvjet_gemm", 400_000, 100_000, flops=0.1 * peak * 100e-6, bytes=1e6))
    t = r.tables["kernels"].set_index("name")
    assert t.loc["nvjet_gemm", "bound"] == "compute_bound"
    assert t.loc["nvjet_gemm", "count"] == 2
    top = r.tables["top_ops"].set_index("class")
    assert top.loc["underutilized", "time_ns"] == 100_000
    assert top.loc["compute_bound", "time_ns"] == 300_000
