"""Diff tests of the ``cluster`` analyzer (slow node, poor parallelism, bubbles)."""

from __future__ import annotations

import pandas as pd
import pytest

from hermes import devices
from hermes.analyzers.cluster import cluster, imbalance, slow_ranks
from hermes.analyzers.communication.cluster import communication_cluster
from hermes.analyzers.communication.rank import communication
from hermes.analyzers.computation.analysis import computation
from hermes.analyzers.engine.base import AnalyzerResult, ClusterContext, RankContext
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
        from hermes.analyzers.engine.invariants import check_result
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
    # the same operator "k" takes 1.5x as long on rank 1: a slower device, not more work
    assert f.evidence["same_op_slowdown"] == {1: 1.5}
    assert not [f for f in res.findings if f.category == "parallel"]


def _coll(name: str, ts: int, dur: int, seq: int, group: str = "dp") -> dict:
    return ev("collective", name, ts, dur, lane="c", lane_kind="link", coll_group=group,
              coll_seq=seq, coll_bytes=2 ** 30)


def test_poor_parallelism_and_bubble_by_hand() -> None:
    # compute 0-500 us; all-reduce A 500-700 us (starts when its input is ready), all-reduce B
    # 700-900 us queued behind A with the device idle; recv 900-1000 us: a pipeline bubble
    df = frame(step(0), ev("kernel", "fwd_bwd", 0, 500_000),
               _coll("allreduce", 500_000, 200_000, 1), _coll("allreduce", 700_000, 200_000, 2),
               _coll("recv", 900_000, 100_000, 1, group="pp"))
    res = run({0: df})
    t = res.tables["ranks"].iloc[0]
    assert (t["comm_only_ns"], t["comp_only_ns"], t["bubble_ns"]) == (500_000, 500_000, 100_000)
    # hideable = bubble 100 + min(queued B 200 - wait 0, computation alone 500) = 300 us of 1 ms
    (f,) = [f for f in res.findings if f.id == "parallel.poor_parallelism"]
    assert f.time_share == pytest.approx(0.3)
    assert res.metrics["bubble_pct_mean"] == pytest.approx(10.0)


def test_dependency_bound_communication_is_not_hideable() -> None:
    # tensor-parallel style: compute, all-reduce, compute, all-reduce -- each collective starts
    # when the computation before it ends and the next computation waits for it: nothing queued
    df = frame(step(0), ev("kernel", "a", 0, 200_000), _coll("allreduce", 200_000, 200_000, 1),
               ev("kernel", "b", 400_000, 200_000), _coll("allreduce", 600_000, 200_000, 2),
               ev("kernel", "c", 800_000, 200_000))
    res = run({0: df})
    assert res.tables["ranks"].iloc[0]["comm_only_ns"] == 400_000
    assert not [f for f in res.findings if f.category == "parallel"]


def test_uses_overlap_metrics_when_present() -> None:
    # A's partition: 20 % communication alone, 30 % computation alone, 20 % overlapped; B queued
    # 100 us behind A with nothing overlapping: hideable = min(100, 300) us of 1 ms
    df = frame(step(0), ev("kernel", "k", 0, 500_000),
               _coll("allreduce", 500_000, 100_000, 1), _coll("allreduce", 600_000, 100_000, 2))
    ov = AnalyzerResult("overlap", metrics={"communication_only_pct": 20.0,
                                             "computation_only_pct": 30.0,
                                             "overlapped_pct": 20.0})
    res = run({0: df}, {0: {"overlap": ov}})
    t = res.tables["ranks"].iloc[0]
    assert t["overlap_ratio"] == pytest.approx(0.5)
    (f,) = [f for f in res.findings if f.id == "parallel.poor_parallelism"]
    assert f.time_share == pytest.approx(0.1)


@pytest.mark.parametrize("rows", [(), (ev("kernel", "k", 0, 10),)])
def test_empty_and_one_event(rows) -> None:
    res = run({0: frame(*rows)})
    assert res.findings == []
    res = cluster(ClusterContext({}, META))
    assert res.findings == [] and res.metrics["ranks"] == 0
