"""Diff tests of the ``cluster`` analyzer (slow node, poor parallelism, bubbles)."""

from __future__ import annotations

import pandas as pd
import pytest
from hermes.analyzers.base import AnalyzerResult, ClusterContext, RankContext
from hermes.analyzers.cluster import cluster, imbalance, slow_ranks
from hermes.analyzers.communication import communication, communication_cluster
from hermes.analyzers.computation import computation

from hermes import devices
from hermes.trace.meta import TraceMeta
from hermes.trace.reader import table_to_pandas
from hermes.trace.schema import arrow_schema
from hermes.trace.writer import to_table
from tests.tracegen import ev, events

META = TraceMeta(device=devices.get("h100").to_meta())


def frame(*rows: dict) -> pd.DataFrame:
    if not rows:
        return table_to_pandas(arrow_schema().empty_table())
    return table_to_pandas(to_table(events(*rows)))


def run(frames: dict[int, pd.DataFrame], extra: dict[int, dict] | None = None):
    per = {}
    for r, df in frames.items():
        ctx = RankContext(r, df, META)
        per[r] = {"computation": computation(ctx), "communication": communication(ctx),
                  **(extra or {}).get(r, {})}
    cctx = ClusterContext(per, META)
    cctx.results["communication_cluster"] = communication_cluster(cctx)
    res = cluster(cctx)
    try:
        from hermes.analyzers.invariants import check_result
    except ImportError:
        assert all(0 <= f.time_share <= 1 for f in res.findings)
    else:
        check_result(res)
    return res


def step(rank: int) -> dict:
    return ev("step", "ProfilerStep#1", 0, 1_000_000, rank=rank, step=1)


def test_imbalance_rule() -> None:
    x = pd.Series([10.0, 10.0, 11.0], index=[0, 1, 2])
    assert imbalance(x) == pytest.approx(1.0 / (31 / 3))
    assert slow_ranks(x) == [2]
    assert slow_ranks(pd.Series([10.0, 10.4])) == []     # 3.9 % <= 5 %
    assert imbalance(pd.Series([5.0])) == 0.0


def test_slow_node_by_hand() -> None:
    # 1 ms steps; rank 0 computes 400 us, rank 1 600 us -> imbalance 0.2/0.5 = 40 %
    r0 = frame(step(0), ev("kernel", "k", 0, 400_000, rank=0))
    r1 = frame(step(1), ev("kernel", "k", 0, 600_000, rank=1))
    res = run({0: r0, 1: r1})
    assert res.metrics["compute_imbalance"] == pytest.approx(0.4)
    assert res.metrics["slow_compute_ranks"] == [1]
    (f,) = [f for f in res.findings if f.id == "computation.slow_node"]
    assert f.ranks == (1,)
    assert f.time_share == pytest.approx((0.6 - 0.4) / 1.0)
    assert not [f for f in res.findings if f.category == "parallel"]


def test_poor_parallelism_and_bubble_by_hand() -> None:
    # compute 0-600 us; all-reduce 600-900 us alone; recv 900-1000 us with the device idle
    df = frame(step(0), ev("kernel", "fwd_bwd", 0, 600_000),
               ev("collective", "allreduce", 600_000, 300_000, lane="c", lane_kind="link",
                  coll_group="dp", coll_seq=1, coll_bytes=2 ** 30),
               ev("collective", "recv", 900_000, 100_000, lane="c", lane_kind="link",
                  coll_group="pp", coll_seq=1, coll_bytes=2 ** 30))
    res = run({0: df})
    t = res.tables["ranks"].iloc[0]
    assert (t["comm_only_ns"], t["comp_only_ns"], t["bubble_ns"]) == (400_000, 600_000, 100_000)
    # hideable = bubble 100 + min(400 - 100 - 0, 600) = 400 us of a 1 ms step
    (f,) = [f for f in res.findings if f.id == "parallel.poor_parallelism"]
    assert f.time_share == pytest.approx(0.4)
    assert res.metrics["bubble_pct_mean"] == pytest.approx(10.0)


def test_uses_overlap_metrics_when_present() -> None:
    df = frame(step(0), ev("kernel", "k", 0, 500_000))
    ov = AnalyzerResult("overlap", metrics={"communication_only_pct": 20.0,
                                             "computation_only_pct": 30.0,
                                             "overlapped_pct": 20.0})
    res = run({0: df}, {0: {"overlap": ov}})
    t = res.tables["ranks"].iloc[0]
    assert t["overlap_ratio"] == pytest.approx(0.5)
    (f,) = [f for f in res.findings if f.id == "parallel.poor_parallelism"]
    assert f.time_share == pytest.approx(0.2)   # min(20 %, 30 %)


@pytest.mark.parametrize("rows", [(), (ev("kernel", "k", 0, 10),)])
def test_empty_and_one_event(rows) -> None:
    res = run({0: frame(*rows)})
    assert res.findings == []
    res = cluster(ClusterContext({}, META))
    assert res.findings == [] and res.metrics["ranks"] == 0
