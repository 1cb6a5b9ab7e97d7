"""What-if transforms for device, communication and storage changes: tiny step graphs whose
replayed step times are worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from hermes.trace.meta import TraceMeta
from hermes.whatif import graphs, predict
from tests.tracegen import ev
from tests.tracegen import frame as tg_frame


def frame(*rows: dict) -> pd.DataFrame:
    df = tg_frame(*rows)
    for c in ("flops", "coll_bytes"):
        if c not in df.columns:
            df[c] = None
    return df


def step_ns(df: pd.DataFrame, spec: str, meta: TraceMeta | None = None
            ) -> tuple[float, float, list[str], dict[str, str]]:
    p = predict(graphs(df), [spec], meta)
    return p.replay_ms * 1e6, p.predicted_ms * 1e6, p.unknown, p.reasons


# host launches three kernels, then waits for the stream; the optimizer step ends the step
# time   0  5  10 15                       190 192    200
# host   c1 c2 c3 sync [15 ............... 192) opt [192, 200)
# stream       gemm [10, 110) relu [110, 150) layernorm [150, 190)
FUSE = (ev("step", "ProfilerStep#1", 0, 200),
        ev("launch", "cudaLaunchKernel", 0, 5, corr_id=1),
        ev("launch", "cudaLaunchKernel", 5, 5, corr_id=2),
        ev("launch", "cudaLaunchKernel", 10, 5, corr_id=3),
        ev("kernel", "gemm", 10, 100, corr_id=1, stream=7, flops=1e6, bytes=1000),
        ev("kernel", "relu", 110, 40, corr_id=2, stream=7, flops=20, bytes=4000),
        ev("kernel", "layernorm", 150, 40, corr_id=3, stream=7, flops=0, bytes=4000),
        ev("sync", "cudaStreamSynchronize", 15, 177),
        ev("host_op", "opt", 192, 8))
#: 1 FLOP/ns on the Vector unit (no unit recorded: the profile's fastest dtype)
DEVICE = {"dtype_flops": {"fp32": 1e9}, "hbm_bw_Bps": 1e12}


def test_fusion_folds_elementwise_and_moves_norm_bytes_once():
    # relu folds into gemm: its compute is left, 20 FLOP / 1 FLOP/ns = 20 ns; layernorm needs
    # its whole input: at most 2 x gemm's 1000 B of its 4000 B are moved, 40 x 0.5 = 20 ns.
    # The stream: gemm [10, 110), relu [110, 130), layernorm [130, 150); the sync returns 2 ns
    # later (152), opt [152, 160): 160
    m, p, unknown, _ = step_ns(frame(*FUSE), "fusion", TraceMeta(device=DEVICE))
    assert not unknown
    assert (m, p) == pytest.approx((200, 160))


def test_fusion_without_a_producer_changes_nothing():
    # the first kernel of a stream has nothing to fuse into
    rows = [r for r in FUSE if r["name"] != "gemm"]
    rows = [dict(r, ts_ns=r["ts_ns"] - 100) if r["kind"] == "kernel" else r for r in rows]
    rows = [dict(r, ts_ns=r["ts_ns"], dur_ns=77) if r["kind"] == "sync" else r for r in rows]
    rows = [dict(r, ts_ns=92) if r["name"] == "opt" else r for r in rows]
    rows[0] = dict(rows[0], dur_ns=100)
    # relu [10, 50) is first: kept; layernorm [50, 90) follows relu, a memory-bound kernel,
    # so it has no producer either
    m, p, _, _ = step_ns(frame(*rows), "fusion", TraceMeta(device=DEVICE))
    assert (m, p) == pytest.approx((100, 100))


# one stream computes [0, 100), waits for four gradient allreduces on the comm link, then
# runs the optimizer kernel; two accumulation micro-steps each reduced the same two buckets
COMM = (ev("step", "ProfilerStep#1", 0, 200),
        ev("kernel", "backward", 0, 100, stream=7),
        *(ev("collective", "allreduce", 100 + 20 * i, 20, lane="comm", stream=9,
             coll_bytes=b) for i, b in enumerate((10, 20, 10, 20))),
        ev("sync", "wait allreduce", 100, 80, lane_kind="device"),
        ev("kernel", "adam", 180, 10, stream=7))
LINK = {"intra_node_bw_Bps": 1e9, "intra_node_latency_s": 0.0}


def test_reschedule_keeps_one_sync_per_step():
    # the sizes (10, 20) repeat twice: the first repetition goes; the kept ones ran alone
    # (no kernel alongside): they keep their 20 ns. The stream's wait loses what the
    # collectives it overlaps lost, 40 of 80 ns; adam [140, 150); the tail after the stream's
    # last event (10 ns): 160
    meta = TraceMeta(device=LINK, ranks=(0, 1))
    m, p, _, _ = step_ns(frame(*COMM), "reschedule_comm", meta)
    assert (m, p) == pytest.approx((200, 160))
    # equal sizes could as well be equal buckets of one sync: nothing goes
    same = [dict(r, coll_bytes=10) if r["kind"] == "collective" else r for r in COMM]
    m, p, _, _ = step_ns(frame(*same), "reschedule_comm", meta)
    assert (m, p) == pytest.approx((200, 200))


# a bucket reduced during backward [50, 150) crawls (contention); the last one, issued when
# backward's work is done, runs alone [150, 160) at 10 B / 10 ns; the stream waits for both
CONTENDED = (ev("step", "ProfilerStep#1", 0, 180),
             ev("kernel", "backward", 0, 100, stream=7),
             ev("collective", "allreduce", 50, 100, lane="comm", stream=9, coll_bytes=10),
             ev("collective", "allreduce", 150, 10, lane="comm", stream=9, coll_bytes=10),
             ev("sync", "wait allreduce", 100, 60, lane_kind="device"),
             ev("kernel", "adam", 160, 10, stream=7))


def test_reschedule_runs_a_contended_collective_at_the_best_rate_of_its_size():
    # the contended bucket takes 10 B at the 1 B/ns the lone one got: 10 ns [50, 60); the
    # lone one, queued behind it, follows [60, 70); the wait [100, 160) overlapped half of the
    # first one, which lost 90 ns: 45 of its 60 ns go: [100, 115); adam [115, 125); + 10: 135
    m, p, _, _ = step_ns(frame(*CONTENDED), "reschedule_comm", TraceMeta(ranks=(0, 1)))
    assert (m, p) == pytest.approx((180, 135))


def test_reschedule_never_beats_the_link_nor_slows_a_collective():
    # the profile's link: a 2-rank ring allreduce of 10 B at 0.5 B/ns takes 2 (n-1)/n x 10 /
    # 0.5 = 20 ns: the contended one takes 20, not 10 [50, 70); the lone one took 10, less
    # than the link time: never slower than it ran, it keeps 10 [70, 80); the wait overlapped
    # half of the 80 ns the first one lost: 40 of its 60 go -> [100, 120); adam [120, 130);
    # + 10: 140
    meta = TraceMeta(device=dict(LINK, intra_node_bw_Bps=5e8), ranks=(0, 1))
    m, p, _, _ = step_ns(frame(*CONTENDED), "reschedule_comm", meta)
    assert (m, p) == pytest.approx((180, 140))
    # one collective alone: nothing to compare it with, it keeps its time
    rows = [r for r in CONTENDED if not (r["kind"] == "collective" and r["ts_ns"] == 50)]
    m, p, _, _ = step_ns(frame(*rows), "reschedule_comm", TraceMeta(ranks=(0, 1)))
    assert (m, p) == pytest.approx((180, 180))


# the loop waits for a batch [0, 60) that a loader worker reads in [0, 58); compute [60, 100)
READ = (ev("step", "ProfilerStep#1", 0, 100),
        ev("data_wait", "next(batch)", 0, 60),
        ev("data_read", "read batch", 0, 58, lane="worker 0", lane_kind="loader"),
        ev("host_op", "fwd", 60, 40))


def test_local_storage_needs_read_bytes_and_a_local_bandwidth():
    for meta in (TraceMeta(), TraceMeta(device={"local_storage_Bps": 1e9})):
        m, p, unknown, why = step_ns(frame(*READ), "local_storage", meta)
        assert unknown == ["local_storage"] and (m, p) == pytest.approx((100, 100))
        assert why == {"local_storage": "the trace records no bytes per storage read"}
    rows = [dict(r, bytes=29) if r["kind"] == "data_read" else r for r in READ]
    _, _, _, why = step_ns(frame(*rows), "io.read_local_storage", TraceMeta())
    assert why == {"io.read_local_storage": "the trace records no local storage bandwidth"}


def test_local_storage_reads_at_the_local_bandwidth():
    # 29 B at 1 B/ns: the read takes 29 ns (was 58): the loader goes k = 2x faster; a batch
    # costs it P = 60 + 40 per step: wait = max(0, 100 / 2 - 40) = 10, step 50
    rows = [dict(r, bytes=29) if r["kind"] == "data_read" else r for r in READ]
    m, p, unknown, _ = step_ns(frame(*rows), "local_storage",
                               TraceMeta(device={"local_storage_Bps": 1e9}))
    assert not unknown
    assert (m, p) == pytest.approx((100, 50))


def test_uncompressed_removes_recorded_decompression():
    _, p, unknown, why = step_ns(frame(*READ), "uncompressed")
    assert unknown == ["uncompressed"] and p == pytest.approx(100)
    assert "no decompression" in why["uncompressed"]
    # read [0, 30), decompress [30, 58): the loader's work 58 -> 30, k = 58 / 30;
    # wait = 100 / k - 40 = 11.72... (weights are whole ns: 12), step 40 + 12
    rows = (*READ[:2], ev("data_read", "read batch", 0, 30, lane="worker 0",
                          lane_kind="loader"),
            ev("data_process", "decompress zip member", 30, 28, lane="worker 0",
               lane_kind="loader"), READ[3])
    m, p, unknown, _ = step_ns(frame(*rows), "uncompressed")
    assert not unknown
    assert (m, p) == pytest.approx((100, 52))


# the loop waits [0, 60) for a batch copied from pageable memory [0, 60); compute [60, 100)
COPY = (ev("step", "ProfilerStep#1", 0, 100),
        ev("data_wait", "next(batch)", 0, 60),
        ev("memcpy_h2d", "H2D batch", 0, 60, lane="copy 0", bytes=30,
           args='{"pinned": false}'),
        ev("host_op", "fwd", 60, 40))


def test_pin_memory_copies_at_the_pinned_bandwidth():
    # 30 B at 1 B/ns pinned: the copy takes 30 ns (was 60); the wait it overlapped loses the
    # 30 ns: [0, 30), fwd [30, 70)
    m, p, unknown, _ = step_ns(frame(*COPY), "pin_memory",
                               TraceMeta(device={"h2d_pinned_Bps": 1e9}))
    assert not unknown
    assert (m, p) == pytest.approx((100, 70))


def test_pin_memory_needs_pageable_copies_and_a_pinned_bandwidth():
    _, p, unknown, why = step_ns(frame(*COPY), "io.fetch_pin_memory", TraceMeta())
    assert unknown == ["io.fetch_pin_memory"] and p == pytest.approx(100)
    assert why["io.fetch_pin_memory"] == \
        "the device profile gives no pinned host-to-device bandwidth"
    pinned = [dict(r, args='{"pinned": true}') if r["kind"] == "memcpy_h2d" else r
              for r in COPY]
    _, _, _, why = step_ns(frame(*pinned), "pin_memory", TraceMeta(device={"h2d_pinned_Bps": 1}))
    assert why == {"pin_memory": "the trace records no host-to-device copies from pageable "
                                 "memory"}
