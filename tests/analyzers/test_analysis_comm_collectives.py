"""Diff tests of ``communication`` (rank) and ``communication_cluster`` (cluster)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hermes import devices
from hermes.analyzers.communication.cluster import communication_cluster
from hermes.analyzers.communication.rank import communication
from hermes.analyzers.engine.base import ClusterContext, RankContext
from hermes.trace.meta import TraceMeta
from hermes.trace.reader import table_to_pandas
from hermes.trace.schema import arrow_schema
from hermes.trace.writer import to_table
from tests.tracegen import ev, events

H100 = TraceMeta(device=devices.get("h100").to_meta())
A910 = TraceMeta(device=devices.get("ascend910b").to_meta())
MB = 2 ** 20


def frame(*rows: dict) -> pd.DataFrame:
    if not rows:
        return table_to_pandas(arrow_schema().empty_table())
    return table_to_pandas(to_table(events(*rows)))


def coll(name: str, ts: int, dur: int, seq: int, nbytes: int, rank: int = 0, group: str = "dp",
         **args) -> dict:
    return ev("collective", name, ts, dur, rank=rank, lane="comm", lane_kind="link",
              coll_group=group, coll_seq=seq, coll_bytes=nbytes,
              args=json.dumps(args) if args else None)


def step(rank: int = 0, dur: int = 1_000_000) -> dict:
    return ev("step", "ProfilerStep#1", 0, dur, rank=rank, step=1)


def check(result) -> None:
    try:
        from hermes.analyzers.engine.invariants import check_result
    except ImportError:
        for f in result.findings:
            assert 0.0 <= f.time_share <= 1.0
        return
    check_result(result)


def cluster(frames: dict[int, pd.DataFrame], meta: TraceMeta = H100):
    per = {r: {"communication": communication(RankContext(r, df, meta))}
           for r, df in frames.items()}
    for v in per.values():
        check(v["communication"])
    return communication_cluster(ClusterContext(per, meta))


def test_sync_wait_by_hand() -> None:
    # rank 0 arrives at 100 us, rank 1 at 400 us; both finish at 500 us (64 MiB all-reduce)
    r0 = frame(step(0), coll("allreduce", 100_000, 400_000, 1, 64 * MB, rank=0))
    r1 = frame(step(1), coll("allreduce", 400_000, 100_000, 1, 64 * MB, rank=1))
    res = cluster({0: r0, 1: r1})
    check(res)
    sync = res.tables["sync"]
    want = pd.DataFrame({"group": ["dp"], "seq": [1.0], "op": ["allreduce"], "ranks": [2],
                         "T_wait_ns": [300_000], "R_wait": [1 - 250 / 400], "late_rank": [1],
                         "skew_ns": [300_000], "transit_ns": [100_000],
                         # rank 1's 400 us before arriving are unrecorded, rank 0's 100 us too
                         "late_by": ["unrecorded"], "late_excess_ns": [300_000],
                         # 64 MiB over the 100 us transfer, factor 2 (group size unknown)
                         "busbw_GBps": [2 * 64 * MB / 100e-6 / 1e9], "bytes": [64.0 * MB]})
    pd.testing.assert_frame_equal(sync, want, check_dtype=False)
    pr = res.tables["per_rank"].set_index("rank")
    assert pr.loc[0, "wait_ns"] == 300_000 and pr.loc[1, "wait_ns"] == 0
    assert pr.loc[1, "times_late"] == 1
    (f,) = [f for f in res.findings if f.cause == "synchronization_wait"]
    assert f.time_share == pytest.approx(max(0.3, 0.0))   # the rank that waits most
    assert f.ranks == (1,)
    assert f.evidence["R_wait_max"] == pytest.approx(0.375)


def test_r_wait_uses_previous_collective_as_sync_point() -> None:
    # second collective: previous one ended at 500 us on both ranks; arrivals 600 / 900 us
    rows0 = [step(0), coll("ar", 0, 500_000, 1, 64 * MB, rank=0),
             coll("ar", 600_000, 300_000, 2, 64 * MB, rank=0)]
    rows1 = [step(1), coll("ar", 0, 500_000, 1, 64 * MB, rank=1),
             coll("ar", 900_000, 50_000, 2, 64 * MB, rank=1)]
    res = cluster({0: frame(*rows0), 1: frame(*rows1)})
    sync = res.tables["sync"].set_index("seq")
    # T = (100, 400) us from the sync point 500 us: R_wait = 1 - 250/400
    assert sync.loc[2, "R_wait"] == pytest.approx(0.375)
    assert sync.loc[1, "R_wait"] == 0.0 and sync.loc[1, "T_wait_ns"] == 0


def test_clock_offsets_align_ranks() -> None:
    meta = TraceMeta(device=H100.device, clock_offsets_ns={1: -1_000_000})
    # rank 1's clock runs 1 ms ahead: its 1.1 ms arrival is 0.1 ms on rank 0's clock
    r0 = frame(step(0), coll("ar", 100_000, 100_000, 1, 64 * MB, rank=0))
    r1 = frame(ev("step", "s", 1_000_000, 1_000_000, rank=1, step=1),
               coll("ar", 1_100_000, 100_000, 1, 64 * MB, rank=1))
    res = cluster({0: r0, 1: r1}, meta)
    assert res.tables["sync"]["T_wait_ns"].tolist() == [0]
    assert not res.findings


def test_small_packets_and_alignment() -> None:
    # Ascend 910B: 16 MiB SDMA saturation; 10 x 1000 B all-reduces of 50 us in a 1 ms step
    rows = [step()] + [coll("hcom_allReduce", 100_000 * i, 50_000, i, 1000) for i in range(10)]
    r = communication(RankContext(0, frame(*rows), A910))
    check(r)
    ids = {f.cause: f for f in r.findings}
    # cost = transit beyond the link's 56 GB/s: bus bandwidth 2 x 1000 B / 50 us = 0.04 GB/s
    # (all-reduce, group size unknown: factor 2), so 50 us x (1 - 0.04/56) per message
    lost = 10 * 50_000 * (1 - 0.04 / 56) / 1e6
    assert ids["small_packet"].time_share == pytest.approx(lost)
    assert ids["small_packet"].evidence["traffic_share"] == 1.0
    assert ids["byte_alignment"].time_share == pytest.approx(lost)   # 1000 % 512 != 0
    assert ids["byte_alignment"].evidence["sizes_B"] == [1000]
    t = r.tables["collectives"]
    assert t["small"].all() and t["misaligned"].all()
    assert r.tables["matrix"].to_dict("records") == [
        {"rank": 0, "group": "dp", "op": "hcom_allReduce", "peer": -1, "count": 10,
         "bytes": 10000.0}]


def test_misaligned_messages_fall_short_of_their_ranks_aligned_median() -> None:
    # packet_findings over two ranks' collectives (the cluster's call): a misaligned message
    # costs transit x (1 - busbw / ref), ref = min(link, the median bus bandwidth of the rank's
    # aligned large messages). Rank 0: aligned 10, 20, 30, 40 GB/s -> median 25 (even count:
    # the two middle ones' mean); its misaligned one at 5 GB/s for 1000 ns -> 800 ns lost.
    # Rank 1: aligned 10, 20, 60 -> 20; 4 GB/s for 2000 ns -> 1600 ns lost. Step 10 / 20 us:
    # 8 % each, the finding's share their mean.
    from hermes.analyzers.communication.causes import packet_findings

    rows = [(0, 10, 100, False), (0, 40, 100, False), (0, 20, 100, False), (0, 30, 100, False),
            (0, 5, 1000, True), (1, 60, 100, False), (1, 10, 100, False), (1, 20, 100, False),
            (1, 4, 2000, True)]
    t = pd.DataFrame({"rank": [r[0] for r in rows], "group": "dp", "op": "allreduce",
                      "busbw_GBps": [float(r[1]) for r in rows],
                      "transit_ns": [float(r[2]) for r in rows],
                      "misaligned": [r[3] for r in rows], "small": False,
                      "latency_bound": False, "expected_GBps": 50.0, "bytes": 1000.0,
                      "dur_ns": [r[2] for r in rows]})
    (f,) = packet_findings(t, {0: 10_000, 1: 20_000}, {0: 10**9, 1: 10**9})
    assert f.cause == "byte_alignment" and f.ranks == (0, 1)
    assert f.evidence["cost_ns"] == 800 + 1600
    assert f.time_share == pytest.approx(0.08)
    # rank 1's communication caps its cost: 800 ns of a 20 us step -> (8 % + 4 %) / 2
    (g,) = packet_findings(t, {0: 10_000, 1: 20_000}, {0: 10**9, 1: 800})
    assert g.time_share == pytest.approx(0.06)
    # nothing misaligned and nothing small: no finding
    assert packet_findings(t.assign(misaligned=False), {0: 10_000, 1: 20_000}, {}) == []


def test_large_message_latency_bound_for_its_group() -> None:
    # Ascend 910B RDMA: 25 GB/s, 8 us a step. A 26 MiB all-reduce over 512 ranks: bandwidth
    # term 2 x 511/512 x 26 MiB / 25 GB/s = 2.18 ms, latency 2 x 511 x 8 us = 8.18 ms -> small
    # for its group although 26 MiB is over the 1 MiB saturation size. Over 16 ranks (latency
    # 0.24 ms) the same message is not. 10.4 ms each, 4 a 50 ms step.
    nb = 26 * MB
    meta = TraceMeta(device=A910.device, extra={"world_size": 512})
    # (the importer splits 0.1 ms of waiting from the 10.4 ms transit: one rank of a bigger
    # job is judged on its transmission only where the trace says which part it is)
    rows = [step(dur=50_000_000)] + [
        coll("allreduce", 12_000_000 * i, 10_500_000, i, nb, wait_ns=100_000,
             transit_ns=10_400_000, **{"Group size": g})
        for i, g in enumerate((512, 512, 16, 16))]
    r = communication(RankContext(0, frame(*rows), meta))
    check(r)
    t = r.tables["collectives"]
    assert t["latency_bound"].tolist() == [True, True, False, False]
    assert t["small"].tolist() == [True, True, False, False]
    assert set(t["link"]) == {"rdma"}   # groups larger than a node: the inter-node link
    (f,) = [f for f in r.findings if f.cause == "small_packet"]
    # cost = transit x (1 - busbw / 25 GB/s), busbw = 2 x 511/512 x 26 MiB / 10.4 ms
    busbw = 2 * 511 / 512 * nb / 10.4e-3 / 1e9
    assert f.time_share == pytest.approx(2 * 10.4e6 * (1 - busbw / 25) / 50e6)
    assert f.evidence["latency_bound"] == 2 and "latency-bound for their group" in f.summary
    # without wait figures one rank of a bigger job is not judged at all (waiting for the
    # others cannot be told from transmission): communication_cluster judges the matched job
    nowait = [step(dur=50_000_000),
              coll("allreduce", 0, 10_400_000, 0, nb, **{"Group size": 512})]
    assert not communication(RankContext(0, frame(*nowait), meta)).findings
    # without the job's size (one rank's file, no group size recorded) nothing is assumed
    bare = [step(dur=50_000_000), coll("allreduce", 0, 10_400_000, 0, nb)]
    t1 = communication(RankContext(0, frame(*bare), A910)).tables["collectives"]
    assert not t1["latency_bound"].any()
    # ... and with it (the collector's world_size), the group is taken as the whole job
    t2 = communication(RankContext(0, frame(*bare), meta)).tables["collectives"]
    assert t2["latency_bound"].tolist() == [True]


def test_world_size_from_metadata() -> None:
    from hermes.analyzers.communication.columns import world_size

    assert world_size(TraceMeta(ranks=(0, 1, 2))) == 3
    assert world_size(TraceMeta(ranks=(5,), extra={"world_size": 64})) == 64
    kineto = {"5": {"distributedInfo": {"rank": 5, "world_size": 32}}}
    assert world_size(TraceMeta(ranks=(5,), extra=kineto)) == 32
    # as the Kineto importer keeps it: per rank under extra.kineto (one rank's file of a
    # directory still knows the job's size)
    assert world_size(TraceMeta(ranks=(5,), extra={"kineto": kineto})) == 32
    assert world_size(TraceMeta(ranks=(5,), extra={"world_size": "64"})) == 1  # not a number
    assert world_size(TraceMeta(ranks=(5,), extra={"world_size": True})) == 1


def _bcast(seq: int, ts: int, transit: int, wait: int = 0) -> dict:
    return coll("hcom_broadcast", ts, wait + transit, seq, 2 ** 30, wait_ns=wait,
                transit_ns=transit, link="HCCS")


def test_explicit_wait_contention_and_retransmission() -> None:
    # importer figures (Ascend communication.json) on an 8 s step: 1 GiB broadcasts over HCCS
    # (56 GB/s expected). seq 1: wait 200 ms + transit 400 ms (2.68 GB/s) while a kernel runs;
    # seq 3 alone: 20 ms (53.7 GB/s, the link is fine) -> seq 1 is contention,
    # cost 400 ms x (1 - 2.68/56)
    rows = [ev("step", "s", 0, 8_000_000_000, step=1),
            ev("kernel", "mm", 0, 700_000_000),
            _bcast(1, 0, 400_000_000, wait=200_000_000),
            _bcast(2, 1_000_000_000, 5_000_000_000),   # 5 s: a tail outlier
            _bcast(3, 7_000_000_000, 20_000_000)]
    r = communication(RankContext(0, frame(*rows), A910))
    check(r)
    f = {x.cause: x for x in r.findings}
    step_ns = 8e9
    assert f["synchronization_wait"].time_share == pytest.approx(200e6 / step_ns)
    bw = 2 ** 30 / 0.4 / 1e9
    assert f["bandwidth_contention"].time_share == pytest.approx(400e6 * (1 - bw / 56) / step_ns)
    assert "network_configuration" not in f
    # seq 2: 5 s vs the median 210 ms of the same broadcast -> retransmission, cost 4.79 s
    assert f["rdma_retransmission"].time_share == pytest.approx(4.79e9 / step_ns)
    assert r.tables["collectives"]["link"].tolist() == ["hccs"] * 3


def test_slow_link_everywhere_is_network_configuration() -> None:
    # the same 2.68 GB/s with and without computation overlapping: the link itself is slow
    rows = [ev("step", "s", 0, 8_000_000_000, step=1),
            ev("kernel", "mm", 0, 700_000_000),
            _bcast(1, 0, 400_000_000, wait=200_000_000),
            _bcast(2, 2_000_000_000, 400_000_000),
            _bcast(3, 4_000_000_000, 400_000_000)]
    r = communication(RankContext(0, frame(*rows), A910))
    f = {x.cause: x for x in r.findings}
    bw = 2 ** 30 / 0.4 / 1e9
    assert f["network_configuration"].time_share == pytest.approx(
        3 * 400e6 * (1 - bw / 56) / 8e9)
    assert "bandwidth_contention" not in f


@pytest.mark.parametrize("rows", [(), (coll("ar", 0, 10, 1, 4096),), (ev("kernel", "k", 0, 5),)])
def test_empty_and_one_event(rows) -> None:
    df = frame(*rows)
    r = communication(RankContext(0, df, H100))
    check(r)
    # a lone 4 KiB collective is all small packets (and the whole trace); nothing else fires
    assert {f.cause for f in r.findings} <= {"small_packet"}
    res = communication_cluster(ClusterContext({0: {"communication": r}}, H100))
    check(res)
    assert res.findings == []
    assert len(res.tables["sync"]) == 0


def test_mismatched_or_point_to_point_are_not_matched() -> None:
    # seq 1 is an all-reduce on rank 0 but an all-gather on rank 1: sequences do not line up;
    # seq 2 is a send/recv pair: point-to-point, never matched by sequence
    r0 = frame(step(0), coll("allreduce", 100_000, 100_000, 1, 64 * MB, rank=0),
               coll("send", 300_000, 100_000, 2, 64 * MB, rank=0))
    r1 = frame(step(1), coll("allgather", 400_000, 100_000, 1, 64 * MB, rank=1),
               coll("recv", 600_000, 100_000, 2, 64 * MB, rank=1))
    res = cluster({0: r0, 1: r1})
    assert len(res.tables["sync"]) == 0
    assert not [f for f in res.findings if f.cause == "synchronization_wait"]


def test_link_from_ascend_transports_and_p2p_matrix() -> None:
    by = {"RDMA": 5_000, "HCCS": 20_000, "PCIE": 1_000, "SDMA": 90_000}
    rows = [step(), coll("hcom_allReduce", 0, 30_000, 1, 4096, transit_ns_by_transport=by),
            coll("send", 100_000, 10_000, 2, 2048, group="pp", peer=3),
            coll("send", 200_000, 10_000, 3, 2048, group="pp", peer=3)]
    r = communication(RankContext(0, frame(*rows), A910))
    assert r.tables["collectives"]["link"].tolist() == ["hccs", "hccs", "hccs"]
    m = r.tables["matrix"].set_index(["group", "peer"])
    assert m.loc[("pp", 3), "bytes"] == 4096 and m.loc[("pp", 3), "count"] == 2
    assert m.loc[("dp", -1), "bytes"] == 4096


def test_cluster_derives_transmission_without_wait_figures() -> None:
    # no importer wait figures (GPU / emulator traces): rank 0 arrives at 0, rank 1 at 100 ms,
    # both end at 500 ms -> transit = 400 ms on both. 1 GiB all-reduce at 2^30/0.4 s x 2 (bus
    # factor, group size unknown) = 5.37 GB/s vs NVLink 450 GB/s, a kernel running throughout
    # -> contention costing 400 ms x (1 - 5.37/450) on each 1 s step
    gib, ms = 2 ** 30, 1_000_000
    rows = {r: [ev("step", "s", 0, 1000 * ms, rank=r, step=1),
                ev("kernel", "k", 0, 600 * ms, rank=r),
                coll("allreduce", a * ms, (500 - a) * ms, 1, gib, rank=r)]
            for r, a in ((0, 0), (1, 100))}
    res = cluster({r: frame(*v) for r, v in rows.items()})
    f = {x.cause: x for x in res.findings}
    # rank 0 waits 100 ms, but its kernel runs all the while: the wait costs no step time
    assert res.tables["per_rank"].set_index("rank").loc[0, "wait_ns"] == 100 * ms
    assert res.tables["per_rank"].set_index("rank").loc[0, "exposed_wait_ns"] == 0
    assert "synchronization_wait" not in f
    busbw = 2 * gib / 0.4 / 1e9
    assert f["bandwidth_contention"].time_share == pytest.approx(0.4 * (1 - busbw / 450))
    assert f["bandwidth_contention"].ranks == (0, 1)
    assert "network_configuration" not in f


def test_group_larger_than_a_node_uses_the_inter_node_link() -> None:
    # 16 ranks, 8 devices per node, no link named: the group crosses RDMA (25 GB/s on a 910B)
    meta = TraceMeta(device=A910.device, ranks=tuple(range(16)))
    r = communication(RankContext(0, frame(step(), coll("allreduce", 0, 100_000, 1, 64 * MB)),
                                  meta))
    t = r.tables["collectives"].iloc[0]
    assert t["link"] == "rdma" and t["expected_GBps"] == 25.0
    # bus factor of a 16-rank all-reduce: 2 x 15/16
    assert t["busbw_GBps"] == pytest.approx(64 * MB / 100e-6 / 1e9 * 2 * 15 / 16)


@pytest.mark.parametrize("seed", [0, 1])
def test_matrix_is_the_groupby_of_its_keys(seed) -> None:
    # the matrix table as pandas' groupby by (rank, group, op, peer) makes it: keys sorted,
    # missing peers as -1 and missing bytes as 0, counts and (compensated) float sums
    import numpy as np

    from hermes.analyzers.communication.columns import MATRIX_COLUMNS, comm_matrix

    rng = np.random.default_rng(seed)
    n = 300
    t = pd.DataFrame({
        "rank": np.full(n, 3, np.int64),
        "group": pd.Series(rng.choice(["pg1", "default", "tp0"], n), dtype=object),
        "op": pd.Series(rng.choice(["ncclAllReduce", "ncclSendRecv", "allgather"], n),
                        dtype="str"),
        "peer": np.where(rng.random(n) < 0.5, np.nan, rng.integers(0, 4, n).astype(float)),
        "bytes": np.where(rng.random(n) < 0.1, np.nan, rng.random(n) * 1e7)})
    u = t.assign(peer=t["peer"].fillna(-1).astype("int64"), bytes=t["bytes"].fillna(0))
    g = u.groupby(["rank", "group", "op", "peer"], sort=True)["bytes"]
    want = g.sum().to_frame("bytes")
    want.insert(0, "count", g.size())
    want = want.reset_index()[MATRIX_COLUMNS]
    assert len(want) > 12
    pd.testing.assert_frame_equal(comm_matrix(t), want, check_exact=True)


def _job(late: dict[int, int] | list[dict[int, int]], steps: int = 4, n: int = 3,
         work: str = "host_op") -> dict:
    """``n`` ranks, ``steps`` 10 ms steps, each with one 64 MiB all-reduce that ends at 8 ms
    of the step; rank r arrives at 2 ms + late.get(r, 0) us (``late[k]`` in step k, for a
    list) and is busy before that with one ``work`` event from the step start (a host
    operator, a kernel or a data wait)."""
    ms, us = 1_000_000, 1_000
    frames = {}
    for r in range(n):
        rows = []
        for k in range(steps):
            t0 = k * 10 * ms
            lk = late[k] if isinstance(late, list) else late
            a = t0 + 2 * ms + lk.get(r, 0) * us
            rows += [ev("step", f"ProfilerStep#{k}", t0, 10 * ms, rank=r, step=k),
                     ev(work, "busy", t0, a - t0, rank=r),
                     coll("allreduce", a, t0 + 8 * ms - a, k, 64 * MB, rank=r)]
        frames[r] = frame(*rows)
    return frames


def test_the_rank_that_holds_the_job_back_is_named_with_what_it_did() -> None:
    # rank 2 arrives 3 ms late at every step after 3 ms more host work; ranks 0 and 1 wait
    # 3 ms each per 10 ms step: 30 % of step time, all of it caused by rank 2
    res = cluster(_job({2: 3000}))
    check(res)
    (f,) = [f for f in res.findings if f.cause == "synchronization_wait"]
    assert f.ranks == (2,)
    assert f.time_share == pytest.approx(0.3)
    assert f.evidence["wait_caused_ns"] == {2: 4 * 2 * 3_000_000}
    assert f.evidence["late_by"] == {2: "host"}
    assert f.evidence["late_excess_ns"] == {2: 3_000_000}
    assert "rank 2 (last at 4 of 4 collectives, 100% of the waiting" in f.summary
    assert "3.0 ms more than the others in host work" in f.summary
    late = res.tables["late"].set_index("rank")
    assert late.loc[2, "times_late"] == 4 and res.metrics["holding_back"] == [2]
    (op,) = res.metrics["by_op"]
    # 4 all-reduces of 64 MiB; transfer 8 ms - 5 ms = 3 ms after rank 2 arrives at 5 ms
    assert (op["op"], op["count"], op["wait_ns"], op["skew_median_ns"],
            op["transfer_median_ns"], op["waited_for_rank"]) == (
        "allreduce", 4, 24_000_000, 3_000_000, 3_000_000, 2)
    # bus bandwidth over the 3 ms transfer; the group's size is not recorded: the large-n
    # factor 2 -> 2 x 64 MiB / 3 ms
    assert op["busbw_GBps_median"] == pytest.approx(2 * 64 * MB / 3e-3 / 1e9, rel=1e-3)


@pytest.mark.parametrize("work, part", [("kernel", "compute"), ("data_wait", "io")])
def test_what_the_late_rank_did_instead(work: str, part: str) -> None:
    res = cluster(_job({1: 2000}, n=2, work=work))
    (f,) = [f for f in res.findings if f.cause == "synchronization_wait"]
    assert f.ranks == (1,) and f.evidence["late_by"] == {1: part}


def test_arrival_jitter_names_no_rank() -> None:
    # the last rank changes every step (0.2 ms): nobody holds the job back, and 2 % of step
    # time of spread arrivals is below the jitter threshold -> no finding
    res = cluster(_job([{0: 200}, {1: 200}, {2: 200}, {0: 200}]))
    assert res.metrics["holding_back"] == []
    assert not [f for f in res.findings if f.cause == "synchronization_wait"]
    # the same spread at 2 ms: 20 % of step time, reported as jitter over every rank
    res = cluster(_job([{0: 2000}, {1: 2000}, {2: 2000}, {0: 2000}]))
    (f,) = [f for f in res.findings if f.cause == "synchronization_wait"]
    assert f.evidence["jitter"] and f.ranks == (0, 1, 2) and "no rank is consistently last" \
        in f.summary


def test_gloo_collectives_overlapping_each_other_cost_at_most_their_time() -> None:
    # DDP over Gloo on GPUs: two gradient buckets in flight together, 10-40 ms and 20-50 ms of
    # a 100 ms step on both ranks; the ProcessGroup ranges record no message size, only their
    # input tensor (8 Mi floats = 33.6 MB). Transit 30 ms each at ~2 GB/s vs NVLink's 450:
    # each costs ~30 ms, but together they run 40 ms -> 40 % of step time, not 60 %
    ms = 1_000_000
    dims = json.dumps({"Input Dims": [[8 * MB]], "Input type": ["float"]})
    frames = {r: frame(ev("step", "ProfilerStep#1", 0, 100 * ms, rank=r, step=1),
                       *[ev("collective", "gloo:all_reduce", a * ms, 30 * ms, rank=r,
                            lane=f"thread {k}", lane_kind="host", coll_seq=k, args=dims)
                         for k, a in enumerate((10, 20))])
              for r in (0, 1)}
    res = cluster(frames)
    check(res)
    (f,) = [f for f in res.findings if f.cause == "network_configuration"]
    assert f.time_share == pytest.approx(0.4)
    assert f.evidence["backend"] == "gloo"
    assert f.summary.startswith("Gloo collectives (tensors staged through host memory")
    assert "gloo:all_reduce of 33.6 MB" in f.summary and "the link's 450 GB/s" in f.summary


def test_waits_of_collectives_in_flight_together_count_once_and_only_where_idle() -> None:
    # two all-reduces queued together on rank 0 at 0 and 1 ms; rank 1 reaches both at 4 ms;
    # both end at 5 ms in a 10 ms step. Rank 0 waits [0, 4) and [1, 4): 4 ms, not 7; a kernel
    # on rank 0 runs 0-2.5 ms, covering half of each collective's time there -> exposed
    # its exposed wait is the union scaled by the share of its waits no kernel overlaps
    ms = 1_000_000
    r0 = frame(ev("step", "s", 0, 10 * ms, rank=0, step=1), ev("kernel", "k", 0, 2_500_000),
               coll("allreduce", 0, 5 * ms, 1, 64 * MB, rank=0),
               coll("allreduce", 1 * ms, 4 * ms, 2, 64 * MB, rank=0))
    r1 = frame(ev("step", "s", 0, 10 * ms, rank=1, step=1),
               coll("allreduce", 4 * ms, 1 * ms, 1, 64 * MB, rank=1),
               coll("allreduce", 4 * ms, 1 * ms, 2, 64 * MB, rank=1))
    res = cluster({0: r0, 1: r1})
    pr = res.tables["per_rank"].set_index("rank")
    assert pr.loc[0, "wait_ns"] == 4 * ms
    # seq 1: wait 4 ms, kernel covers 2.5 of its 5 ms (busy 0.5); seq 2: wait 3 ms, kernel
    # covers 1.5 of its 4 ms (busy 0.375): exposed share (4 x 0.5 + 3 x 0.625) / 7
    frac = (4 * 0.5 + 3 * 0.625) / 7
    assert pr.loc[0, "exposed_wait_ns"] == round(4 * ms * frac)
    (f,) = [f for f in res.findings if f.cause == "synchronization_wait"]
    assert f.time_share == pytest.approx(4 * frac / 10) and f.ranks == (1,)


def test_small_messages_are_judged_on_the_transfer_after_the_last_arrival() -> None:
    # 910B, 4 KiB all-reduce: rank 0 arrives at 0, rank 1 at 50 ms, both end at 55 ms of a
    # 100 ms step. Rank 0's 55 ms in it are 50 ms of waiting and 5 ms of transfer: the small
    # message costs the 5 ms beyond what 4 KiB takes at 56 GB/s on each rank (5 % of step
    # time), not rank 0's whole 55 ms
    ms = 1_000_000
    r0 = frame(step(0, 100 * ms), coll("allreduce", 0, 55 * ms, 1, 4096, rank=0))
    r1 = frame(step(1, 100 * ms), coll("allreduce", 50 * ms, 5 * ms, 1, 4096, rank=1))
    res = cluster({0: r0, 1: r1}, A910)
    f = {x.cause: x for x in res.findings}
    busbw = 2 * 4096 / 5e-3 / 1e9   # group size unknown: factor 2
    assert f["small_packet"].time_share == pytest.approx(0.05 * (1 - busbw / 56))
    assert f["synchronization_wait"].ranks == (1,)


def p2p_call(kind: str, peer: int, ts: int, dur: int, inner: tuple[int, int], rank: int,
         seq: int) -> list[dict]:
    """A Gloo point-to-point call as PyTorch records it: the ProcessGroup op (c10d::send /
    c10d::recv_, its third input the peer) on the calling thread, the gloo:send / gloo:recv
    range inside it (numbered by order as the importer numbers group-less collectives)."""
    op = "c10d::send" if kind == "send" else "c10d::recv_"
    return [ev("host_op", op, ts, dur, rank=rank, lane="thread 1",
               args=json.dumps({"Concrete Inputs": ["", "", str(peer), "0"]})),
            ev("collective", f"gloo:{kind}", inner[0], inner[1], rank=rank, lane="thread 1",
               coll_seq=seq, args=json.dumps({"Input Dims": [[65536]],
                                              "Input type": ["float"]}))]


def test_point_to_point_pairs_matched_by_their_ranks_in_a_three_stage_pipeline() -> None:
    ms = 1_000_000
    # rank 0 sends to 1 at 10.1 ms (its gloo:send returns at 10.6); rank 1 posted its receive
    # at 2.1 ms and gets the data at 10.8 ms; rank 1 sends on to 2 at 40.1 ms, where rank 2
    # has waited since 5.1 ms. By order alone all three would be "collective 0"
    f = {0: frame(step(0, 100 * ms), *p2p_call("send", 1, 10 * ms, ms, (10_100_000, 500_000), 0, 0)),
         1: frame(step(1, 100 * ms),
                  *p2p_call("recv", 0, 2 * ms, 9 * ms, (2_100_000, 8_700_000), 1, 0),
                  *p2p_call("send", 2, 40 * ms, ms, (40_100_000, 500_000), 1, 1)),
         2: frame(step(2, 100 * ms),
                  *p2p_call("recv", 1, 5 * ms, 36 * ms, (5_100_000, 35_800_000), 2, 0))}
    res = cluster(f)
    s = res.tables["sync"].set_index("group")
    assert sorted(s.index) == ["p2p 0->1", "p2p 1->2"]
    assert (s["ranks"] == 2).all() and set(s["op"]) == {"gloo:send/recv"}
    # the receiver waits for the sender's arrival; the sender, late, waits nothing
    assert s.loc["p2p 0->1", "T_wait_ns"] == 8 * ms and s.loc["p2p 0->1", "late_rank"] == 0
    assert s.loc["p2p 1->2", "T_wait_ns"] == 35 * ms and s.loc["p2p 1->2", "late_rank"] == 1
    # the transfer after both are there is the receiver's: 10.8 - 10.1, 40.9 - 40.1 ms
    assert s.loc["p2p 0->1", "transit_ns"] == 700_000
    assert s.loc["p2p 1->2", "transit_ns"] == 800_000
    assert res.metrics["wait_ns_per_rank"] == {0: 0, 1: 8 * ms, 2: 35 * ms}


def test_an_eager_send_waits_nothing_and_disagreeing_pairs_are_not_matched() -> None:
    ms = 1_000_000
    # rank 0's send returns (0.5 ms) long before rank 1 posts its receive at 20 ms: nobody
    # waited (the late one is the receiver, and its own wait is 0)
    f = {0: frame(step(0, 50 * ms), *p2p_call("send", 1, 1 * ms, ms, (1_100_000, 500_000), 0, 0)),
         1: frame(step(1, 50 * ms), *p2p_call("recv", 0, 20 * ms, ms, (20_100_000, 300_000), 1, 0))}
    s = cluster(f).tables["sync"]
    assert len(s) == 1 and s["T_wait_ns"].iloc[0] == 0 and s["late_rank"].iloc[0] == 1
    # a peer read in a smaller process group's numbering: rank 2 receives "from 0" while rank 0
    # sends to 1 only -- neither pair has both sides: nothing matched
    f = {0: frame(step(0, 50 * ms), *p2p_call("send", 1, 1 * ms, ms, (1_100_000, 500_000), 0, 0)),
         2: frame(step(2, 50 * ms), *p2p_call("recv", 0, 2 * ms, ms, (2_100_000, 300_000), 2, 0))}
    assert len(cluster(f).tables["sync"]) == 0
