"""What-if transforms of message size, alignment and the network setup (``commsize``): tiny
step graphs whose replayed step times are worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.critical_path.stepgraph import serial_starts
from hermes.trace.meta import TraceMeta
from hermes.whatif import graphs, predict
from hermes.whatif.commsize import Link, fit
from tests.tracegen import ev
from tests.tracegen import frame as tg_frame

MiB = 2**20
#: a link that moves 1 MiB in 1000 ns, no latency; saturation at 8 MiB
LINK = {"intra_node_bw_Bps": MiB / 1e-6, "intra_node_latency_s": 0.0,
        "sdma_small_packet_B": 8 * MiB, "hccs_alignment_B": 512}
META = TraceMeta(device=LINK, ranks=(0, 1))


def frame(*rows: dict) -> pd.DataFrame:
    df = tg_frame(*rows)
    if "coll_bytes" not in df.columns:
        df["coll_bytes"] = None
    return df


def step_ns(df: pd.DataFrame, spec: str, meta: TraceMeta = META
            ) -> tuple[float, float, dict[str, str]]:
    p = predict(graphs(df), [spec], meta)
    return p.replay_ms * 1e6, p.predicted_ms * 1e6, p.reasons


def comm_step(sizes: list[int], durs: list[int]) -> tuple[dict, ...]:
    """Backward [0, 1000); the collectives back to back from 1000 on their own stream while
    the compute stream waits for them; the optimizer 1000 ns after the last one ends."""
    t, rows = 1000, []
    for s, d in zip(sizes, durs, strict=True):
        rows.append(ev("collective", "allreduce", t, d, lane="comm", stream=9, coll_bytes=s))
        t += d
    return (ev("step", "ProfilerStep#1", 0, t + 1000),
            ev("kernel", "backward", 0, 1000, stream=7), *rows,
            ev("sync", "wait allreduce", 1000, t - 1000, lane_kind="device"),
            ev("kernel", "adam", t, 1000, stream=7))


def test_eight_small_allreduces_merged_into_one_bucket():
    # 8 allreduces of 1 MiB, 2000 ns each: half the link's rate. Below the 8 MiB saturation
    # size the trace's one size gives the slope: (1/8) ** e = 1/2 -> e = 1/3. One 8 MiB
    # bucket (cap 8 MB) is saturated: 2 ranks, ring factor 2 (n-1)/n = 1: 8 MiB at the full
    # link = 8000 ns, not 16000: the step 1000 + 16000 + 1000 = 18000 becomes 10000
    df = frame(*comm_step([MiB] * 8, [2000] * 8))
    m, p, why = step_ns(df, "grad_bucket_mb=8")
    assert not why
    assert (m, p) == pytest.approx((18000, 10000), abs=2)
    # buckets of 4 MB: two of 4 MiB, each at (4/8) ** (1/3) of the link: 4000 / 0.7937 ns
    m, p, _ = step_ns(df, "grad_bucket_mb=4")
    assert p == pytest.approx(2000 + 2 * 4000 / 0.5 ** (1 / 3), abs=2)
    # the rule id names the same transform (the rule's cap: 100 MB, one bucket)
    assert step_ns(df, "communication.bigger_buckets")[1] == pytest.approx(10000, abs=2)


def test_a_bucket_never_makes_its_members_slower():
    # the messages already ran at the link's full rate (e = 0): a bucket of 8 MiB takes what
    # the 8 took, nothing changes
    df = frame(*comm_step([MiB] * 8, [1000] * 8))
    m, p, _ = step_ns(df, "grad_bucket_mb=100")
    assert (m, p) == pytest.approx((10000, 10000), abs=2)


def test_a_misaligned_message_is_padded_and_moved_at_the_aligned_rate():
    # 8 MiB + 100 B (not a multiple of 512) took 16000 ns. No aligned message to measure:
    # the link's rate for 8 MiB + 512 B: 8000 + 512 / 1048.576 = 8000.49 ns
    s = 8 * MiB + 100
    m, p, why = step_ns(frame(*comm_step([s], [16000])), "align_sizes")
    assert not why
    assert (m, p) == pytest.approx((18000, 2000 + 8000 + 512 / 1048.576), abs=2)
    # an aligned 8 MiB message that took 10000 ns says what aligned messages get here: the
    # padded one takes (8 MiB + 512) / (8 MiB / 10000 ns) = 10000.61 ns; the aligned one stays
    df = frame(*comm_step([s, 8 * MiB], [16000, 10000]))
    m, p, _ = step_ns(df, "communication.align_512")
    assert (m, p) == pytest.approx((28000, 2000 + 10000 * (1 + 512 / (8 * MiB)) + 10000),
                                   abs=2)


def test_the_network_setup_restores_the_link_rate():
    # 16 MiB (saturated) in 64000 ns: a quarter of the link's 16000 ns; 8 MiB in 32000 ns
    # (the same quarter): both move at the link's rate
    df = frame(*comm_step([16 * MiB, 8 * MiB], [64000, 32000]))
    m, p, why = step_ns(df, "hccl_env")
    assert not why
    assert (m, p) == pytest.approx((98000, 2000 + 16000 + 8000), abs=2)
    # at the link's rate already: nothing to gain
    df = frame(*comm_step([16 * MiB], [16000]))
    assert step_ns(df, "communication.network_env")[:2] == pytest.approx((18000, 18000), abs=2)


def test_without_sizes_or_a_link_the_formula_stands():
    df = frame(*comm_step([MiB] * 2, [2000] * 2))
    df["coll_bytes"] = None
    m, p, why = step_ns(df, "grad_bucket_mb=100")
    assert why == {"grad_bucket_mb=100": "the trace records no message sizes of its collectives"}
    assert p == m
    df = frame(*comm_step([MiB] * 2, [2000] * 2))
    _, _, why = step_ns(df, "hccl_env", TraceMeta(ranks=(0, 1)))
    assert why == {"hccl_env": "the device profile gives no link bandwidth"}
    _, _, why = step_ns(df, "align_sizes", TraceMeta(
        device={k: v for k, v in LINK.items() if k != "hccs_alignment_B"}, ranks=(0, 1)))
    assert why == {"align_sizes": "the device profile gives no link alignment"}
    no_coll = frame(ev("step", "ProfilerStep#1", 0, 10), ev("kernel", "k", 0, 10))
    assert step_ns(no_coll, "hccl_env")[2] == {"hccl_env": "the trace records no collectives"}


def test_the_size_curve_is_measured_on_the_trace():
    lk = Link(bw=1e12, alpha=0.0, sat=8 * MiB, align=512, n=2)
    one = pd.Series([1.0])
    # two sizes below saturation, 1 and 4 MiB, at (s/sat) ** 0.5 of 2e11 B/s: the line's
    # slope and intercept
    s = pd.Series([MiB, 4 * MiB], dtype=float).to_numpy()
    t = s / (2e11 * (s / (8 * MiB)) ** 0.5) * 1e9
    b0, e = fit(s, t, (one * 2).repeat(2).to_numpy(), one.repeat(2).to_numpy(), lk)
    assert (b0, e) == pytest.approx((2e11, 0.5))
    # a message at or above saturation sets B0; the one below then gives the slope
    s = pd.Series([16 * MiB, MiB], dtype=float).to_numpy()
    t = pd.Series([16 * MiB / 5e11, MiB / (5e11 * (1 / 8) ** 0.25)]).to_numpy() * 1e9
    b0, e = fit(s, t, (one * 2).repeat(2).to_numpy(), one.repeat(2).to_numpy(), lk)
    assert (b0, e) == pytest.approx((5e11, 0.25))


def test_ranks_replayed_together_move_the_transmission():
    # two ranks, the same allreduce (group dp, seq 0) of 16 MiB in 64000 ns, a quarter of the
    # link's rate: replayed together, the transmission after the last arrival is what shrinks
    # (its own time weighs 0 there): 1000 + 16000 + 1000 on both ranks
    rows = [dict(r, rank=k, coll_group="dp", coll_seq=0) if r["kind"] == "collective"
            else dict(r, rank=k) for k in (0, 1) for r in comm_step([16 * MiB], [64000])]
    p = predict(graphs(frame(*rows)), ["hccl_env"], META)
    assert p.applied == ["hccl_env"]
    assert (p.replay_ms * 1e6, p.predicted_ms * 1e6) == pytest.approx((66000, 18000), abs=2)
    assert {r: v["predicted_ms"] * 1e6 for r, v in p.per_rank.items()} == \
        pytest.approx({0: 18000, 1: 18000}, abs=2)


def test_a_wait_starting_a_tick_before_the_kernel_ends_is_still_a_wait():
    # the stream's wait starts 1 ns before backward ends (start and duration rounded apart):
    # it is the wait that shrinks with the collective, not backward that holds the time
    rows = list(comm_step([16 * MiB], [64000]))
    rows = [dict(r, ts_ns=999, dur_ns=r["dur_ns"] + 1) if r["name"] == "wait allreduce" else r
            for r in rows]
    m, p, _ = step_ns(frame(*rows), "hccl_env")
    assert (m, p) == pytest.approx((66000, 18000), abs=2)


def test_serial_starts_moves_only_a_tick_of_overlap_on_a_device_lane():
    ts = np.array([0, 99, 150, 0, 50])
    te = np.array([100, 200, 160, 100, 60])
    lane = np.array([0, 0, 0, 1, 1])
    # lane 0: 99 starts 1 ns before 100: moved to 100; 150 is inside [99, 200) by 50 ns: a
    # real overlap, kept; lane 1 (a host lane here): 50 nested in [0, 100), kept
    out = serial_starts(ts, te, lane, np.array([True, True, True, False, False]))
    assert out.tolist() == [0, 100, 150, 0, 50]


def test_link_time_reads_kineto_collective_names():
    # ``nccl:all_reduce`` is an allreduce: 2 ranks, 1 MiB on the 1 MiB / 1000 ns link, ring
    # factor 1: 1000 ns (the floor the rescheduling transform keeps)
    from hermes.whatif.comm import link_ns

    g = graphs(frame(*comm_step([MiB], [2000])))[0]
    g.info["name"] = g.info["name"].astype(str).str.replace("allreduce", "nccl:all_reduce")
    coll = (g.info["kind"] == "collective").to_numpy(bool)
    got = link_ns(g, {"device": LINK, "ranks": 2}, coll)
    assert got[coll].tolist() == pytest.approx([1000.0])
