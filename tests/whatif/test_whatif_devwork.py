"""What-if for memory-bound fusion and local storage (issue 14): tiny step graphs whose replayed
step times are worked out by hand from what the trace records (shapes, bytes, bandwidths)."""

from __future__ import annotations

import pandas as pd
import pytest

from hermes.trace.meta import TraceMeta
from hermes.whatif import graphs, predict
from tests.tracegen import ev
from tests.tracegen import frame as tg_frame


def frame(*rows: dict) -> pd.DataFrame:
    df = tg_frame(*rows)
    for c in ("flops", "coll_bytes", "args"):
        if c not in df.columns:
            df[c] = None
    return df


def step_ns(rows: tuple[dict, ...], spec: str, meta: TraceMeta | None = None
            ) -> tuple[float, float, list[str], dict[str, str]]:
    p = predict(graphs(frame(*rows)), [spec], meta)
    return p.replay_ms * 1e6, p.predicted_ms * 1e6, p.unknown, p.reasons


def shapes(ins: str, out: str, typ: str = "") -> str:
    """Args of a task as Ascend kernel_details records them (FLOAT16: 2 B an element)."""
    n = ins.count(";") + 1
    t = f'"Type":"{typ}",' if typ else ""
    return (f'{{{t}"Input Shapes":"{ins}","Input Data Types":"{";".join(["FLOAT16"] * n)}",'
            f'"Output Shapes":"{out}","Output Data Types":"FLOAT16"}}')


#: 1 FLOP/ns (no unit recorded: the profile's fastest dtype), 1000 B/ns of HBM
DEVICE = {"dtype_flops": {"fp32": 1e9}, "hbm_bw_Bps": 1e12}
# host: five launches [0, 25), then waits for the stream [25, 272); the optimizer host op
# [272, 280) ends the step. The stream runs a producer and four memory-bound kernels
# back to back: gemm [10, 110), relu [110, 150), an Add by its recorded type [150, 190), a
# layer norm [190, 230), the optimizer step [230, 270); each moved 10x its tensors' bytes
FUSE = (ev("step", "ProfilerStep#1", 0, 280),
        *(ev("launch", "cudaLaunchKernel", 5 * i, 5, corr_id=i + 1) for i in range(5)),
        ev("kernel", "gemm", 10, 100, corr_id=1, stream=7, flops=1e6, bytes=1000),
        ev("kernel", "relu", 110, 40, corr_id=2, stream=7, flops=20, bytes=4000),
        ev("kernel", "k_2", 150, 40, corr_id=3, stream=7, flops=10, bytes=4000,
           args=shapes("100;100", "100", "Add")),
        ev("kernel", "layernorm", 190, 40, corr_id=4, stream=7, flops=0, bytes=4000,
           args=shapes("100", "100")),
        ev("kernel", "adam", 230, 40, corr_id=5, stream=7, flops=0, bytes=8000,
           args=shapes("100;100;100", "100")),
        ev("sync", "cudaStreamSynchronize", 25, 247),
        ev("host_op", "opt", 272, 8))


def test_fusion_folds_elementwise_kernels_and_moves_the_rest_of_their_bytes_once():
    # relu (elementwise by name) and k_2 (by its recorded type, Add) fold into gemm: what is
    # left is their compute, 20 and 10 FLOP at 1 FLOP/ns. layernorm stays, moving its tensors
    # once: 100 + 100 elements x 2 B = 400 B of its 4000 B: 40 x 0.1 = 4 ns. adam reads the
    # parameters, not gemm's output: it does not fold, it moves 4 x 100 x 2 = 800 B of its
    # 8000 B: 4 ns. Stream: gemm [10, 110), relu [110, 130), k_2 [130, 140), layernorm
    # [140, 144), adam [144, 148); the sync returns 2 ns later (150), opt [150, 158)
    m, p, unknown, _ = step_ns(FUSE, "fusion", TraceMeta(device=DEVICE))
    assert not unknown
    assert (m, p) == pytest.approx((280, 158))


def test_fusion_without_shapes_or_type_bounds_a_norm_by_its_producer():
    # nothing recorded but names and bytes: k_2 is of no known family (nor on the Vector
    # unit), so it is the producer layernorm and adam follow; at most 2 x its 4000 B stay:
    # all of theirs. Only relu folds (40 -> 20 ns): stream gemm [10, 110), relu [110, 130),
    # k_2 [130, 170), layernorm [170, 210), adam [210, 250); sync 252, opt [252, 260)
    rows = tuple(dict(r, args=None) for r in FUSE)
    m, p, _, _ = step_ns(rows, "fusion", TraceMeta(device=DEVICE))
    assert (m, p) == pytest.approx((280, 260))
    # k_2 on the Vector unit is memory-bound: gemm is layernorm's producer, 2 x 1000 B of its
    # 4000 stay (20 ns); k_2 itself, of no family, stays too, 2000 of 4000 B (20 ns); adam
    # 2000 of 8000 B (10 ns): gemm [10, 110), relu 20, k_2 20, layernorm 20, adam 10: 180,
    # sync 182, opt 190
    rows = tuple(dict(r, unit="vector") if r["name"] == "k_2" else r for r in rows)
    m, p, _, _ = step_ns(rows, "fusion", TraceMeta(device=DEVICE))
    assert (m, p) == pytest.approx((280, 190))


# the loop waits [0, 60) for a batch a loader worker reads [0, 40) (1000 B from remote
# storage) and extracts from its archive [40, 58); compute [60, 100)
READ = (ev("step", "ProfilerStep#1", 0, 100),
        ev("data_wait", "next(batch)", 0, 60),
        ev("data_read", "read batch", 0, 40, lane="worker 0", lane_kind="loader",
           bytes=1000),
        ev("data_read", "decompress batch", 40, 18, lane="worker 0", lane_kind="loader"),
        ev("host_op", "fwd", 60, 40))


def test_local_storage_reads_n_bytes_at_the_local_bandwidth_and_keeps_the_extraction():
    # 1000 B at 100 B/ns: the read takes 10 ns (was 40); the extraction keeps its 18 ns. The
    # storage stage 58 -> 28 ns: the loader goes k = 58 / 28 faster; a batch costs it
    # P = 60 + 40 per step: wait = 100 / k - 40 = 8.28 ns, step 48.28 (whole ns: 48)
    m, p, unknown, why = step_ns(READ, "local_storage",
                                 TraceMeta(device={"local_storage_Bps": 1e11}))
    assert not unknown and not why
    assert m == pytest.approx(100)
    assert p == pytest.approx(48)


def test_local_storage_bandwidth_may_come_from_the_recorded_settings():
    meta = TraceMeta(extra={"settings": {"local_storage_Bps": 1e11}})
    _, p, unknown, _ = step_ns(READ, "io.read_local_storage", meta)
    assert not unknown and p == pytest.approx(48)


def test_a_read_without_bytes_keeps_the_formula_and_says_why():
    rows = tuple(dict(r, bytes=None) if r["name"] == "read batch" else r for r in READ)
    m, p, unknown, why = step_ns(rows, "local_storage",
                                 TraceMeta(device={"local_storage_Bps": 1e11}))
    assert unknown == ["local_storage"] and (m, p) == pytest.approx((100, 100))
    assert why == {"local_storage": "the trace records no bytes per storage read"}


def test_uncompressed_removes_the_extraction_and_keeps_the_read():
    # the extraction goes: the storage stage 58 -> 40 ns, k = 58 / 40; wait = 100 / k - 40 =
    # 28.97 ns, step 68.97 (whole ns: 69)
    m, p, unknown, _ = step_ns(READ, "uncompressed")
    assert not unknown
    assert (m, p) == pytest.approx((100, 69))


def test_fusion_reads_arrow_args_as_it_reads_object_args():
    # the args as a loaded trace holds them (Arrow strings): the same replay, with the keys
    # (k_2's Type, the shapes) and without any (then no args are taken at all)
    def arrow(rows: tuple[dict, ...]) -> pd.DataFrame:
        df = frame(*rows)
        df["args"] = df["args"].astype("string[pyarrow]")
        return df

    meta = TraceMeta(device=DEVICE)
    p = predict(graphs(arrow(FUSE)), ["fusion"], meta)
    assert (p.replay_ms * 1e6, p.predicted_ms * 1e6) == pytest.approx((280, 158))
    bare = tuple(dict(r, args='{"correlation": 1}') for r in FUSE)
    p = predict(graphs(arrow(bare)), ["fusion"], meta)
    assert (p.replay_ms * 1e6, p.predicted_ms * 1e6) == pytest.approx((280, 260))


def test_args_mention_looks_only_inside_the_values_of_the_array():
    import pyarrow as pa

    from hermes.whatif.facts import mentions

    arr = pa.array(['{"Type": "Add"}', None, '{"a": 1}', '{"Input Shapes": "1"}', '{"b": 2}'])
    assert mentions(arr, ("Type",))
    assert mentions(arr, ("Nope", "Input Shapes"))
    assert not mentions(arr, ("Nope",))
    assert not mentions(arr, ("Sub",))
    # a slice sees its own values only (the data buffer still holds the others)
    assert not mentions(arr.slice(1, 2), ("Type", "Input Shapes"))
    assert not mentions(arr.slice(4), ("Type", "Input Shapes"))
    assert mentions(arr.slice(3, 1), ("Input Shapes",))
    assert mentions(pa.chunked_array([arr.slice(4), arr.slice(0, 1)]), ("Type",))
    assert mentions(pa.array([1, 2]), ("Type",))  # not text: not known, read them
    assert not mentions(pa.array([None, None], pa.string()), ("Type",))
    assert mentions(arr.cast(pa.large_string()).slice(0, 1), ("Type",))


def test_kinds_are_the_kind_column_as_text_missing_as_nan() -> None:
    # the transforms select events by kind text: a categorical column's codes give the same
    # object array as astype(str) (a missing kind NaN, never the text "nan"), a plain one too
    import numpy as np

    from hermes.whatif.facts import kinds

    class G:
        info: pd.DataFrame

    for col in (pd.Categorical(["gc", None, "sync", "gc"], categories=["sync", "gc", "x"]),
                pd.Series(["gc", None, "sync", "gc"], dtype=object)):
        g = G()
        g.info = pd.DataFrame({"kind": col})
        got = kinds(g)
        assert got.dtype == object
        assert got[0] == "gc" and got[2] == "sync" and got[3] == "gc"
        assert isinstance(got[1], float) and np.isnan(got[1])
        assert list((got == "gc").nonzero()[0]) == [0, 3]


def test_args_mention_is_searched_once_per_graph_and_events(monkeypatch) -> None:
    # every fusion transform of a set asks whether any event's args hold the Ascend keys: the
    # answer is kept on the graph for the events it was found in, searched again for others
    from hermes.whatif import facts

    calls = []
    real = facts.mentions
    monkeypatch.setattr(facts, "mentions", lambda arr, keys: calls.append(keys) or real(arr, keys))
    rows = (ev("kernel", "k", 0, 100, args='{"Input Shapes": "1,2"}'), ev("step", "ProfilerStep#0", 0, 200))
    (sg,) = graphs(frame(*rows)).values()
    keys = ("Input Shapes",)
    assert facts.args_mention(sg, keys) and facts.args_mention(sg, keys)
    assert len(calls) == 1
    assert not facts.args_mention(sg, ("Output Shapes",)) and len(calls) == 2
    sg.args = sg.args.assign(args='{"x": 1}')  # other events: searched again
    assert not facts.args_mention(sg, keys) and len(calls) == 3
