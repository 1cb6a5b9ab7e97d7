"""What-if replay of several ranks together: collectives matched across ranks, worked by hand."""

from __future__ import annotations

import json

import pytest

from hermes.whatif import cluster, graphs, predict
from hermes.whatif import replay as rp
from tests.tracegen import ev
from tests.whatif.test_whatif_replay import frame

# three ranks: own work of 70, 80, 100 ns, then one all-reduce that ends for all at 110
# (rank 2 arrives last at 100, transmission 10); a Gloo-style collective on the host thread
WORK = {0: 70, 1: 80, 2: 100}


def allreduce(seq: bool = True, steps: int = 1) -> list[dict]:
    rows = []
    for s in range(steps):
        t0 = 110 * s
        for r, work in WORK.items():
            kw = {"coll_group": "dp", "coll_seq": s} if seq else {}
            rows += [ev("step", f"ProfilerStep#{s}", t0, 110, rank=r),
                     ev("host_op", "work", t0, work, rank=r),
                     ev("collective", "allreduce", t0 + work, 110 - work, rank=r, lane="thread 1",
                        lane_kind="host", **kw)]
    return rows


@pytest.mark.parametrize("seq", [True, False])
def test_collectives_matched_by_sequence_or_by_order(seq):
    df = frame(*allreduce(seq, steps=2))
    cl = cluster.match(graphs(df))
    assert cl is not None and cl.matched == 2
    # each rank waited for rank 2's arrival at 100 (then 210)
    waits = cl.table.sort_values(["step", "rank"])["wait_ns"].tolist()
    assert waits == [30, 20, 0, 30, 20, 0]
    # nothing changed: the joint replay is the measured step on every rank
    assert {r: v.tolist() for r, v in cluster.replay(cl).items()} == \
        {0: [110, 110], 1: [110, 110], 2: [110, 110]}


def test_straggler_removed_gives_the_second_slowest_rank_time():
    # rank 2's own pace (100) scaled to the next slowest rank's (80): it arrives at 80, the
    # all-reduce ends at 80 + 10 on every rank: the step is rank 1's pace, 90
    p = predict(graphs(frame(*allreduce())), ["communication.fix_straggler"])
    assert p.applied == ["communication.fix_straggler"] and not p.unknown
    assert p.measured_ms * 1e6 == pytest.approx(110)
    assert p.replay_ms * 1e6 == pytest.approx(110)
    assert p.predicted_ms * 1e6 == pytest.approx(90)
    # the others' waits shrank: every rank's step is 90
    assert {r: v["predicted_ms"] * 1e6 for r, v in p.per_rank.items()} == \
        pytest.approx({0: 90, 1: 90, 2: 90})


def test_a_faster_rank_alone_gains_nothing():
    # rank 0's work halved: it only waits longer for rank 2
    gs = graphs(frame(*allreduce()))
    cl = cluster.match(gs)
    ch = {0: rp.Change.none(gs[0])}
    ch[0].scale[:] = 0.5
    assert {r: v.tolist() for r, v in cluster.replay(cl, ch).items()} == \
        {0: [110], 1: [110], 2: [110]}


def test_one_step_per_rank_is_the_same_step_on_every_rank():
    # rank 0's steps take 100, 300, 200; rank 1's 250, 100, 150 (each rank's own median:
    # step 2); the slowest rank per step takes 250, 300, 200, whose median is step 0's: both
    # ranks replay step 0, where their collectives would meet
    rows = []
    for r, durs in ((0, (100, 300, 200)), (1, (250, 100, 150))):
        t = 0
        for s, d in enumerate(durs):
            rows += [ev("step", f"ProfilerStep#{s}", t, d, rank=r),
                     ev("host_op", "work", t, d, rank=r)]
            t += d
    gs = graphs(frame(*rows), median_only=True)
    assert {r: sg.windows["step"].tolist() for r, sg in gs.items()} == {0: [0], 1: [0]}


def test_device_side_collective_matched_and_straggler_removed():
    # Kineto-like: the host launches a kernel (compute 50 ns on rank 0, 80 on rank 1) and an
    # NCCL all-reduce on the same stream, then syncs; the all-reduce ends at 100 on both
    # (rank 1 arrives at 82: transmission 18), the sync returns 2 ns later, 3 ns of tail.
    rows = []
    for r, c in ((0, 50), (1, 80)):
        rows += [ev("step", "ProfilerStep#1", 0, 105, rank=r),
                 ev("launch", "cudaLaunchKernel", 0, 1, corr_id=1, rank=r),
                 ev("launch", "cudaLaunchKernel", 1, 1, corr_id=2, rank=r),
                 ev("sync", "cudaStreamSynchronize", 2, 100, rank=r),
                 ev("kernel", "gemm", 2, c, corr_id=1, stream=7, rank=r),
                 ev("collective", "ncclKernel_AllReduce", 2 + c, 98 - c, corr_id=2, stream=7,
                    rank=r, coll_group="0", coll_seq=0)]
    gs = graphs(frame(*rows))
    cl = cluster.match(gs)
    assert cl is not None and cl.matched == 1
    assert cl.table.sort_values("rank")["wait_ns"].tolist() == [30, 0]
    # rank 0's own pace: 2 + 50 + 18 + 2 + 3 = 75; rank 1's 105. Rank 1 brought to 75 (what
    # does not scale: the launch delay 2, the transmission 18, the return 2, the tail 3 = 25;
    # its compute x (75 - 25) / (105 - 25)): it arrives at 52, the all-reduce ends at 70 on
    # both, the steps end at 75
    p = predict(gs, ["isolate_slow_node"])
    assert (p.measured_ms * 1e6, p.replay_ms * 1e6) == pytest.approx((105, 105))
    assert {r: v["predicted_ms"] * 1e6 for r, v in p.per_rank.items()} == \
        pytest.approx({0: 75, 1: 75})


def test_emulated_straggler_with_a_pin_memory_thread(tmp_path) -> None:
    """An emulated 2-rank run (its ranks have a pin-memory helper thread and loader workers)
    with one slow rank: removing the straggler is predicted within 10 % of what emulating the
    run with the slow rank isolated measures (a pin thread taken for a loader with its own
    clock had pinned the slow rank's data waits at their measured times: 1.5x vs 2.9x)."""
    from hermes.commands.emulate import trace_collector
    from hermes.npu.emulate import emulate, plan
    from hermes.trace.reader import load

    def run(opts: list[str], out):
        p = plan("resnet50", ranks=2, inject_specs=["computation.slow_node"], opt_specs=opts,
                 device="ascend910b", seed=0)
        return emulate(p, trace_collector(p, out), 6).median_step_ms

    before = run([], tmp_path / "before")
    after = run(["isolate_slow_node"], tmp_path / "after")
    t = load(tmp_path / "before")
    assert (t.events["kind"] == "data_fetch").any()  # the pin thread is there
    got = predict(graphs(t.events), ["isolate_slow_node"], t.meta).speedup
    assert got == pytest.approx(before / after, rel=0.10)


def _p2p(kind: str, peer: int, ts: int, dur: int, rank: int) -> dict:
    return ev("collective", f"gloo:{kind}", ts, dur, rank=rank, lane="thread 1",
              lane_kind="host", args=json.dumps({"peer": peer}))


def test_point_to_point_transfers_join_the_ranks_of_a_pipeline():
    # a ping-pong (us): rank 0 works 0-10 and sends to rank 1 (10-11); rank 1 waits in its
    # receive (0-11), works 11-30 and sends back (30-31) while rank 0 waits (11-31)
    us = 1000
    rows = [ev("step", "ProfilerStep#1", 0, 31 * us, rank=0),
            ev("host_op", "work", 0, 10 * us, rank=0, lane="thread 1"),
            _p2p("send", 1, 10 * us, us, 0), _p2p("recv", 1, 11 * us, 20 * us, 0),
            ev("step", "ProfilerStep#1", 0, 31 * us, rank=1),
            _p2p("recv", 0, 0, 11 * us, 1),
            ev("host_op", "work", 11 * us, 19 * us, rank=1, lane="thread 1"),
            _p2p("send", 0, 30 * us, us, 1)]
    gs = graphs(frame(*rows))
    cl = cluster.match(gs)
    assert cl is not None and cl.matched == 2
    # rank 1 waited 10 us for rank 0's send, rank 0 19 us for rank 1's
    assert sorted(cl.table["wait_ns"].tolist()) == [0, 0, 10 * us, 19 * us]
    assert {r: v.tolist() for r, v in cluster.replay(cl).items()} == {0: [31 * us], 1: [31 * us]}
    # rank 1's work halved (9.5 us): its send at 20.5, rank 0's receive ends 1 us later
    ch = {1: rp.Change.none(gs[1])}
    ch[1].scale[:] = 0.5
    assert {r: v.tolist() for r, v in cluster.replay(cl, ch).items()} == \
        {0: [21_500], 1: [21_500]}


def test_an_eager_send_is_not_held_until_its_receiver_arrives():
    # rank 0's send returns at 1.1 us, long before rank 1 posts its receive (5-5.3 us): rank 0
    # goes on working (1.1-8 us) as measured; joined, rank 1 still cannot receive before 1 us
    rows = [ev("step", "ProfilerStep#1", 0, 8000, rank=0), _p2p("send", 1, 1000, 100, 0),
            ev("host_op", "work", 1100, 6900, rank=0, lane="thread 1"),
            ev("step", "ProfilerStep#1", 0, 8000, rank=1),
            ev("host_op", "work", 0, 5000, rank=1, lane="thread 1"),
            _p2p("recv", 0, 5000, 300, 1),
            ev("host_op", "work", 5300, 2700, rank=1, lane="thread 1")]
    gs = graphs(frame(*rows))
    cl = cluster.match(gs)
    assert cl is not None and cl.matched == 1 and cl.rel.tolist().count(False) == 1
    assert {r: v.tolist() for r, v in cluster.replay(cl).items()} == {0: [8000], 1: [8000]}


def test_point_to_point_counts_that_disagree_are_not_joined():
    # rank 0 sends to 1 twice, rank 1 receives from 0 once: which send it got is unknown
    rows = [ev("step", "ProfilerStep#1", 0, 5000, rank=0), _p2p("send", 1, 0, 100, 0),
            _p2p("send", 1, 200, 100, 0),
            ev("step", "ProfilerStep#1", 0, 5000, rank=1), _p2p("recv", 0, 0, 400, 1)]
    assert cluster.match(graphs(frame(*rows))) is None
