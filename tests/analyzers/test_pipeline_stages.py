"""Pipeline stages named from point-to-point transfers (analyzers/common/stages.py and the
``cluster`` analyzer): their work per step, the slow stage, and what balancing them would save,
by hand (the real 2-rank Gloo pipeline: tests/analyzers/test_p2p_real.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hermes import devices
from hermes.advisor.advice import recommend
from hermes.analyzers.cluster import cluster
from hermes.analyzers.common.stages import balance_gain, pairs, pipelines
from hermes.analyzers.communication.cluster import communication_cluster
from hermes.analyzers.communication.rank import communication
from hermes.analyzers.computation.analysis import computation
from hermes.analyzers.engine.base import ClusterContext, RankContext
from hermes.trace.meta import TraceMeta
from hermes.trace.reader import table_to_pandas
from hermes.trace.writer import to_table
from tests.tracegen import ev, events

META = TraceMeta(device=devices.get("h100").to_meta())
MS = 1_000_000


def _call(kind: str, peer: int, ts: float, dur: float, rank: int, seq: int) -> list[dict]:
    """A Gloo send / receive as PyTorch records it: c10d::send / c10d::recv_ (third input the
    peer) around the gloo:send / gloo:recv range (times in ms)."""
    op = "c10d::send" if kind == "send" else "c10d::recv_"
    s, d = round(ts * MS), round(dur * MS)
    return [ev("host_op", op, s, d, rank=rank, lane="thread 1",
               args=json.dumps({"Concrete Inputs": ["", "", str(peer), "0"]})),
            ev("collective", f"gloo:{kind}", s, d, rank=rank, lane="thread 1", coll_seq=seq)]


def _run(ranks: dict[int, list[dict]], step_ms: float):
    per = {}
    for r, rows in ranks.items():
        df = table_to_pandas(to_table(events(
            ev("step", "ProfilerStep#1", 0, round(step_ms * MS), rank=r, step=1), *rows)))
        ctx = RankContext(r, df, META)
        per[r] = {"computation": computation(ctx), "communication": communication(ctx)}
    cctx = ClusterContext(per, META)
    cctx.results["communication_cluster"] = communication_cluster(cctx)
    return cluster(cctx)


def test_pipelines_are_the_components_of_the_transfer_pairs() -> None:
    sync = pd.DataFrame({"group": ["p2p 0->1", "p2p 1->0", "p2p 2->3", "p2p 0->1", "dp"]})
    assert pairs(sync) == [(0, 1), (1, 0), (2, 3)]
    assert pipelines(pairs(sync)) == [[0, 1], [2, 3]]          # two pipelines (DP x PP)
    assert pipelines([(3, 4), (4, 5), (5, 3), (9, 3)]) == [[3, 4, 5, 9]]
    assert pipelines([]) == []


def test_pipelined_stages_of_unequal_work_by_hand() -> None:
    # one 20 ms step. Rank 1 receives from rank 0 in 0-0.2 ms, works, and sends back in
    # 19.8-20 ms: 19.6 ms of work. Rank 0 sends in 0-0.2 ms, works, and waits for rank 1's data
    # in 10-20 ms: 9.8 ms. The step is the slow stage's work plus 0.4 ms, so the stages
    # overlap: pipelined = 1 - (20 - 19.6) / (29.4 - 19.6) = 1 - 0.4 / 9.8; balanced at the
    # mean (14.7 ms) the step saves pipelined x (19.6 - 14.7) = 9.4 / 9.8 x 4.9 = 4.7 ms
    res = _run({0: [*_call("send", 1, 0, 0.2, 0, 0), *_call("recv", 1, 10, 10, 0, 1)],
                1: [*_call("recv", 0, 0, 0.2, 1, 0), *_call("send", 0, 19.8, 0.2, 1, 1)]}, 20)
    st = res.tables["stages"].set_index("rank")
    assert st["work_ms"].to_dict() == pytest.approx({0: 9.8, 1: 19.6})
    (p,) = res.metrics["pipelines"]
    assert p["ranks"] == [0, 1] and p["slow_ranks"] == [1]
    assert p["pipelined"] == pytest.approx(1 - 0.4 / 9.8, abs=1e-4)
    assert p["gain_ms"] == pytest.approx(4.7, abs=1e-3)
    (f,) = [f for f in res.findings if f.evidence.get("reason") == "unequal_stages"]
    assert f.id == "parallel.poor_parallelism" and f.ranks == (1,)
    assert f.time_share == pytest.approx(4.7 / 20, abs=1e-4)
    assert "rank 1 (19.6 ms of work per step" in f.summary and "rank 0's 9.8 ms" in f.summary
    assert f.evidence["stage_ratio"] == pytest.approx(2.0)
    # its advice: balance the stages (the whole saving: 20 / (20 - 4.7) = 1.307x), and only that
    shown = {"accelerator": False, "collectives": True, "pipeline": True}
    (rec,) = recommend(f, META, facts={"shown": shown})
    assert rec.rule == "parallel.balance_stages" and "rank(s) 1 works 2x" in rec.how
    assert rec.estimated_speedup == pytest.approx(20 / 15.3, abs=0.01)
    assert recommend(f, META, facts={"shown": {**shown, "pipeline": False}}) == []


def test_stages_that_take_turns_gain_nothing_from_balance_but_are_named() -> None:
    # a ping-pong: rank 0 works 0-10 ms and sends (10-10.2); rank 1 waits for it (0-10.2),
    # works 20 ms, sends back (30.2-30.4) while rank 0 waits (10.2-30.4). Work 10 vs 20 ms,
    # the step (30.4 ms) is their sum: one after the other, balance saves nothing
    res = _run({0: [*_call("send", 1, 10, 0.2, 0, 0), *_call("recv", 1, 10.2, 20.2, 0, 1)],
                1: [*_call("recv", 0, 0, 10.2, 1, 0), *_call("send", 0, 30.2, 0.2, 1, 1)]},
               30.4)
    (p,) = res.metrics["pipelines"]
    assert p["work_ms"] == pytest.approx({0: 10.0, 1: 20.0})
    assert p["pipelined"] == 0.0 and p["gain_ms"] == 0.0
    assert not [f for f in res.findings if f.evidence.get("reason") == "unequal_stages"]
    # the bubbles finding names the slow stage all the same
    (f,) = [f for f in res.findings if f.id == "parallel.poor_parallelism"]
    assert "the slowest pipeline stage is rank 1 (20.0 ms" in f.summary
    assert f.evidence["stages"]["slow_ranks"] == [1]


def test_balance_gain_of_one_stage_or_equal_stages() -> None:
    t = pd.DataFrame({"work_ms": [5.0, 5.0], "step_ms": [6.0, 6.0]})
    assert balance_gain(t)["gain_ms"] == 0.0
    assert balance_gain(pd.DataFrame({"work_ms": [5.0], "step_ms": [6.0]}))["pipelined"] == 0.0
