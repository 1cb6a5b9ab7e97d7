"""The job's critical path across ranks (``critical_path_cluster``), by hand on a 2-rank,
3-collective job, and on the real 2-rank Gloo straggler job."""

from __future__ import annotations

import pytest

from hermes.analyzers.common.steps import step_windows
from hermes.analyzers.communication.cluster import communication_cluster
from hermes.analyzers.communication.rank import communication
from hermes.analyzers.critical_path.crossrank import critical_path_cluster
from hermes.analyzers.engine.base import AnalyzerResult, ClusterContext, RankContext
from tests.analyzers.test_analysis_comm_collectives import H100, MB, coll, frame
from tests.tracegen import ev

MS = 1_000_000


def _job(arrivals: dict[int, list[tuple[int, int]]], ends: dict[int, int]):
    per = {}
    for r, cs in arrivals.items():
        df = frame(ev("step", "ProfilerStep#1", 0, ends[r] * MS, rank=r, step=1),
                   *[coll("allreduce", a * MS, (e - a) * MS, k, 64 * MB, rank=r, group="g")
                     for k, (a, e) in enumerate(cs, 1)])
        per[r] = {"communication": communication(RankContext(r, df, H100)),
                  "steps": AnalyzerResult("steps", tables={"windows": step_windows(df)})}
    cc = communication_cluster(ClusterContext(per, H100))
    return critical_path_cluster(ClusterContext(per, H100, results={"communication_cluster": cc}))


def test_two_ranks_three_collectives_by_hand() -> None:
    # (arrival, end) in ms. Releases: 20 (rank 1 last), 40 (rank 0 last), 80 (rank 1 last).
    # The path: rank 1 0-20, transfer 20-30, rank 0 30-40, transfer 40-60, rank 1 60-80,
    # transfer 80-90 (rank 0's end of it), rank 0 90-100 (the job's last step end)
    res = _job({0: [(10, 30), (40, 60), (70, 90)], 1: [(20, 30), (35, 60), (80, 95)]},
               {0: 100, 1: 98})
    m = res.metrics
    assert m["path_ns"] == 100 * MS and m["lost_ns"] == 0
    assert m["rank_pct"] == {0: 20.0, 1: 40.0} and m["transfer_pct"] == 40.0
    assert m["ranks_on_path"] == [0, 1] and m["collectives_on_path"] == 3
    path = res.tables["path"]
    assert path[["kind", "rank", "start_ns", "end_ns"]].values.tolist() == [
        ["rank", 1, 0, 20 * MS], ["transfer", 0, 20 * MS, 30 * MS], ["rank", 0, 30 * MS, 40 * MS],
        ["transfer", 1, 40 * MS, 60 * MS], ["rank", 1, 60 * MS, 80 * MS],
        ["transfer", 0, 80 * MS, 90 * MS], ["rank", 0, 90 * MS, 100 * MS]]


def test_one_rank_late_everywhere_is_the_path() -> None:
    # rank 1 arrives 5 ms after rank 0 at each collective: the path runs on rank 1 between
    # collectives and through every transfer
    res = _job({0: [(10, 20), (30, 40)], 1: [(15, 20), (35, 40)]}, {0: 48, 1: 50})
    m = res.metrics
    assert m["rank_pct"][1] == pytest.approx(100 * (15 + 15 + 10) / 50)
    assert m["transfer_pct"] == pytest.approx(100 * 10 / 50)


def test_a_single_rank_has_no_cross_rank_path() -> None:
    res = _job({0: [(10, 20)]}, {0: 30})
    assert res.metrics["ranks_on_path"] == [] and len(res.tables["path"]) == 0


def test_a_pipeline_path_runs_through_its_point_to_point_transfers() -> None:
    # rank 0 works 0-10.1 ms, sends to rank 1 (its gloo:send returns at 10.6); rank 1 posted
    # its receive at 1.1 ms, has the data at 10.8 and works to 30 ms; rank 0 idles to 25 ms.
    # Path: rank 0 0-10.1, transfer 10.1-10.8 (the receiver's), rank 1 10.8-30 -- not rank 1
    # alone, as when its 9.7 ms receive counted as its own time
    from tests.analyzers.test_analysis_comm_collectives import p2p_call

    per = {}
    rows = {0: p2p_call("send", 1, 10 * MS, MS, (10_100_000, 500_000), 0, 0),
            1: p2p_call("recv", 0, 1 * MS, 10 * MS, (1_100_000, 9_700_000), 1, 0)}
    for r, ends in ((0, 25), (1, 30)):
        df = frame(ev("step", "ProfilerStep#1", 0, ends * MS, rank=r, step=1), *rows[r])
        per[r] = {"communication": communication(RankContext(r, df, H100)),
                  "steps": AnalyzerResult("steps", tables={"windows": step_windows(df)})}
    cc = communication_cluster(ClusterContext(per, H100))
    res = critical_path_cluster(ClusterContext(per, H100, results={"communication_cluster": cc}))
    path = res.tables["path"]
    assert path[["kind", "rank", "start_ns", "end_ns"]].values.tolist() == [
        ["rank", 0, 0, 10_100_000], ["transfer", 1, 10_100_000, 10_800_000],
        ["rank", 1, 10_800_000, 30 * MS]]
    assert res.metrics["path_ns"] == 30 * MS and res.metrics["lost_ns"] == 0
    assert res.metrics["collectives_on_path"] == 1
