"""What-if replay: tiny step graphs whose replay and transforms are worked out by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hermes.trace.meta import TraceMeta
from hermes.trace.writer import write_trace
from hermes.whatif import graphs, predict
from hermes.whatif import replay as rp
from hermes.whatif.transforms import TRANSFORMS
from tests.conftest import run_cli
from tests.tracegen import ev, events


def frame(*rows: dict) -> pd.DataFrame:
    df = pd.DataFrame(events(*rows))
    for c in ("corr_id", "stream"):
        df[c] = pd.array(df[c] if c in df.columns else [None] * len(df), dtype="Int64")
    return df


def ms(x: float) -> float:
    return x / 1e6


# time   0    10          110 112   132 137 140   160
# host   c1[0,5)  sync [10 ....... 112) opt [112,132) c2 [132,137)
# stream      k1 [10 ............110)                     k2 [140,160)
SYNC = (ev("step", "ProfilerStep#1", 0, 160),
        ev("launch", "cudaLaunchKernel", 0, 5, corr_id=1),
        ev("kernel", "k1", 10, 100, corr_id=1, stream=7),
        ev("sync", "cudaStreamSynchronize", 10, 102),
        ev("host_op", "opt", 112, 20),
        ev("launch", "cudaLaunchKernel", 132, 5, corr_id=2),
        ev("kernel", "k2", 140, 20, corr_id=2, stream=7))


def one(df: pd.DataFrame, *specs: str) -> tuple[float, float, float]:
    p = predict(graphs(df), list(specs))
    return p.measured_ms * 1e6, p.replay_ms * 1e6, p.predicted_ms * 1e6


def test_unchanged_replay_is_the_measured_step():
    m, r, p = one(frame(*SYNC))
    assert m == r == p == pytest.approx(160)


def test_sync_removed_host_runs_ahead_by_the_queued_work():
    # no sync: opt runs at [10, 30), c2 at [30, 35); k2 queues behind k1 (its launch at 30 + 8
    # ns delay is before k1 ends), so the device runs k1 then k2 back to back: 10 + 100 + 20 =
    # 130; the host's unrecorded tail (23 ns after c2) ends at 58, before the device
    m, _, p = one(frame(*SYNC), "remove_syncs")
    assert (m, p) == pytest.approx((160, 130))
    # the gain is exactly what the host did after the sync before k2 could start (opt 20 +
    # the rest of c2's launch 8 + the 2 ns sync return): now overlapped with k1's queued work
    assert m - p == pytest.approx(20 + 8 + 2)


# loop waits for a batch [0, 60) that a loader worker produces in [0, 58); compute [60, 100)
DATA = (ev("step", "ProfilerStep#1", 0, 100),
        ev("data_wait", "next(batch)", 0, 60),
        ev("data_process", "decode", 0, 58, lane="worker 0", lane_kind="loader"),
        ev("host_op", "fwd", 60, 40))


@pytest.mark.parametrize(("workers", "step"), [(2, 50), (4, 40), (100, 40)])
def test_data_wait_hidden_up_to_the_compute_time(workers, step):
    # a batch costs the loader P = 60 + 40 = 100 ns per step; k workers: wait = max(0, P/k - 40)
    df = frame(*DATA)
    meta = TraceMeta(extra={"settings": {"num_workers": 1}})
    p = predict(graphs(df), [f"num_workers={workers}"], meta)
    assert p.replay_ms * 1e6 == pytest.approx(100)
    assert p.predicted_ms * 1e6 == pytest.approx(step)


def test_gc_removed():
    df = frame(ev("step", "ProfilerStep#1", 0, 100), ev("host_op", "a", 0, 20),
               ev("gc", "gc", 20, 30), ev("host_op", "b", 50, 50))
    assert one(df, "gc_freeze")[2] == pytest.approx(70)


def test_straggler_removed_gives_the_second_slowest_rank():
    rows = []
    for rank, dur in ((0, 100), (1, 80), (2, 70)):
        rows += [ev("step", "ProfilerStep#1", 0, dur, rank=rank),
                 ev("host_op", "work", 0, dur, rank=rank)]
    p = predict(graphs(frame(*rows)), ["isolate_slow_node"])
    assert p.measured_ms * 1e6 == pytest.approx(100)
    assert p.predicted_ms * 1e6 == pytest.approx(80)
    assert p.per_rank[2]["predicted_ms"] * 1e6 == pytest.approx(70)


def test_dispatch_scaled():
    # host-bound: launches of 10 ns feed 5 ns kernels starting 2 ns after their launch's
    # start (each on an idle stream); halved dispatch: launch i at 5 i, kernel i at 5 i + 2,
    # the last [17, 22) after the host's end at 20: the step is 22 instead of 40
    rows = [ev("step", "ProfilerStep#1", 0, 40)]
    for i in range(4):
        rows += [ev("launch", "cudaLaunchKernel", 10 * i, 10, corr_id=i + 1),
                 ev("kernel", f"k{i}", 10 * i + 2, 5, corr_id=i + 1, stream=7)]
    assert one(frame(*rows), "cpu.dispatch_fusion") == pytest.approx((40, 40, 22))


def test_unchanged_replay_of_several_steps_and_threads():
    rows = []
    for s in range(3):
        t0 = 200 * s
        rows += [ev("step", f"ProfilerStep#{s}", t0, 200),
                 ev("host_op", "fwd", t0, 50),
                 ev("launch", "cudaLaunchKernel", t0 + 50, 5, corr_id=s + 1),
                 ev("kernel", "gemm", t0 + 60, 100 + 10 * s, corr_id=s + 1, stream=7),
                 ev("sync", "cudaDeviceSynchronize", t0 + 55, 120 + 10 * s),
                 ev("host_op", "log", t0 + 20, 30, lane="thread 2")]
    sg = rp.build(frame(*rows))
    assert rp.replay(sg).tolist() == rp.measured(sg).tolist() == [200, 200, 200]


def test_whatif_command_json(tmp_path):
    path = tmp_path / "t.parquet"
    write_trace(path, frame(*SYNC), TraceMeta())
    code, out, err = run_cli("whatif", str(path), "--apply", "remove_syncs", "--apply",
                             "gc_freeze", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert {"measured_ms", "predicted_ms", "per_rank", "applied"} <= set(d)
    assert d["applied"] == ["remove_syncs", "gc_freeze"]
    assert d["predicted_ms"] == pytest.approx(ms(130))
    code, out, _ = run_cli("whatif", str(path))
    assert code == 0 and "replay as is" in out


def test_steps_in_sequence_a_loader_that_falls_behind():
    # step 0 [0, 100): fwd 50, GC 50; step 1 [100, 200): waits [100, 110) for the batch a
    # loader worker decodes in [60, 110), then fwd 90. GC removed: step 0 ends at 50, step 1
    # starts there but its batch is still ready only at 110: it waits 60 and takes 150
    df = frame(ev("step", "ProfilerStep#0", 0, 100), ev("step", "ProfilerStep#1", 100, 100),
               ev("host_op", "fwd", 0, 50), ev("gc", "gc", 50, 50),
               ev("data_wait", "next(batch)", 100, 10),
               ev("data_process", "decode", 60, 50, lane="worker 0", lane_kind="loader"),
               ev("host_op", "fwd", 110, 90))
    sg = rp.build(df)
    assert rp.replay(sg).tolist() == [100, 100]
    ch = rp.Change.none(sg)
    TRANSFORMS["gc"].apply(sg, ch, {})
    assert rp.replay(sg, ch).tolist() == [50, 150]


def test_unchanged_replay_computed_once_per_set_of_graphs(monkeypatch):
    import hermes.whatif.prediction as wi

    calls = []
    real = rp.replay
    monkeypatch.setattr(wi.rp, "replay",
                        lambda sg, ch=None, w=None: calls.append(ch) or real(sg, ch, w))
    gs = graphs(frame(*SYNC))
    first = predict(gs, ["remove_syncs"])
    assert calls[0] is None and len(calls) == 2  # the unchanged replay, then the change
    second = predict(gs, ["remove_syncs"])
    assert len(calls) == 3 and calls[2] is not None  # only the change replayed again
    assert second.to_dict() == first.to_dict()
    # worked out by hand above: 160 measured and replayed, 130 without the sync
    assert (first.replay_ms * 1e6, first.predicted_ms * 1e6) == pytest.approx((160, 130))
    # other graphs (a new set) replay unchanged again
    predict(graphs(frame(*SYNC)), ["remove_syncs"])
    assert calls[3] is None and len(calls) == 5


@pytest.mark.parametrize("name", ["kineto-h100/two_stream_prefetch.pt.trace.json.gz",
                                  "kineto-h100/gpt_dataloader_starved.pt.trace.json.gz",
                                  "hta/critical_path/alexnet/"
                                  "benchmark_result_2869224_1695835535_trace.json.gz"])
def test_replay_of_the_lane_ends_alone_is_the_full_replay(shared_traces, name):
    # ``replay`` solves for the lane ends and step starts only; the same step times as
    # every node's replay, unchanged and under random shrinking changes
    import numpy as np

    from hermes.diff.runs import import_in_memory

    path = shared_traces / name
    if not path.is_file():
        pytest.skip(f"{name} not found")
    rng = np.random.default_rng(5)
    for sg in graphs(import_in_memory(path).events).values():
        assert len(sg.windows) and sg.ends.size
        full = rp.step_times(sg, rp.replay_nodes(sg))
        np.testing.assert_array_equal(rp.replay(sg), full)
        for _ in range(3):
            ch = rp.Change.none(sg)
            ch.scale[:] = np.where(rng.random(ch.scale.size) < 0.3, rng.random(ch.scale.size), 1)
            ch.gap = float(rng.choice([1.0, 0.5]))
            got = rp.replay(sg, ch)
            np.testing.assert_array_equal(got, rp.step_times(sg, rp.replay_nodes(sg, ch)))
            assert (got <= full).all() and (got < full).any()


def test_weights_of_a_scaling_change_are_the_general_formulas(shared_traces):
    # a change that only scales events takes the measured weights and recomputes the scaled
    # events' segments: the same as the formula over every node (with a gap factor, a
    # ``full`` event or waits, the formula itself)
    import numpy as np

    from hermes.diff.runs import import_in_memory

    path = shared_traces / "kineto-h100/two_stream_prefetch.pt.trace.json.gz"
    if not path.is_file():
        pytest.skip("trace not found")
    rng = np.random.default_rng(9)
    for sg in graphs(import_in_memory(path).events).values():
        seg = sg.g.seg_event
        ev = np.maximum(seg, 0)
        for _ in range(3):
            ch = rp.Change.none(sg)
            ch.scale[:] = np.where(rng.random(ch.scale.size) < 0.4, rng.random(ch.scale.size), 1)
            want = np.minimum(np.where(seg >= 0, np.rint(sg.w * ch.scale[ev]), sg.w)
                              .astype(np.int64), sg.span)
            got = rp.weights(sg, ch)
            np.testing.assert_array_equal(got, want)
            assert (got < np.minimum(sg.w, sg.span)).any()
        np.testing.assert_array_equal(rp.weights(sg), np.minimum(sg.w, sg.span))


def test_each_nodes_step_is_its_events_step(shared_traces):
    # ``_steps`` reads each node's step from the step-major node layout (a run of twice a
    # step's events): the same as its event's window, node by node, on a hand-made trace with
    # an event cut at a step border and nested events, and on real traces
    import numpy as np

    from hermes.diff.runs import import_in_memory

    rows = []
    for s in range(3):
        t0 = 200 * s
        rows += [ev("step", f"ProfilerStep#{s}", t0, 200),
                 ev("host_op", "fwd", t0, 50), ev("host_op", "inner", t0 + 10, 20),
                 ev("launch", "cudaLaunchKernel", t0 + 50, 5, corr_id=s + 1),
                 ev("kernel", "gemm", t0 + 60, 100, corr_id=s + 1, stream=7)]
    rows += [ev("kernel", "across", 180, 60, stream=8)]  # cut at the step border
    gs = [rp.build(frame(*rows))]
    for name in ("kineto-h100/two_stream_prefetch.pt.trace.json.gz",
                 "kineto-h100/gpt_dataloader_starved.pt.trace.json.gz"):
        if (shared_traces / name).is_file():
            gs += list(graphs(import_in_memory(shared_traces / name).events).values())
    for sg in gs:
        nw = len(sg.windows)
        want = np.concatenate([sg.info["win"].to_numpy(np.int64)[sg.node_ev], np.arange(nw)])
        part, cut = rp.step_spans(sg)
        np.testing.assert_array_equal(part, want)
        np.testing.assert_array_equal(cut, sg.g.n + np.arange(nw))
    assert len(gs[0].windows) == 3 and (gs[0].info["name"] == "across").sum() == 2


def test_collectives_computed_where_read():
    # a step graph's collectives are found on first use (``cluster`` of several ranks): a
    # one-rank prediction never reads them; read, they are graphparts.collectives' table
    from hermes.whatif.graphparts import collectives

    rows = [ev("step", "ProfilerStep#0", 0, 100), ev("host_op", "fwd", 0, 20),
            ev("launch", "cudaLaunchKernel", 20, 5, corr_id=1),
            ev("collective", "ncclDevKernel_AllReduce", 30, 40, corr_id=1, stream=7,
               coll_group="0", coll_seq=3)]
    df = frame(*rows)
    gs = graphs(df)
    predict(gs, ["cpu.dispatch_fusion"])
    assert gs[0]._coll is None and gs[0]._coll_of is not None
    sg = rp.build(df)
    got = sg.coll
    want = collectives(df, sg.info, sg.windows)
    pd.testing.assert_frame_equal(got, want)
    assert got["seq"].tolist() == [3] and sg._coll_of is None
