"""What the driver keeps per rank: packed tables (the same DataFrames back, the per-task table
left with the worker), the same document as an in-memory analysis, step windows found once per
events frame, and the top kernels aggregated in chunks as in one pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.common import steps
from hermes.analyzers.engine import result as result_mod
from hermes.analyzers.engine import run as run_mod
from hermes.analyzers.engine.base import AnalyzerResult
from hermes.analyzers.engine.result import PackedTables, kernel_totals, pack
from hermes.analyzers.engine.run import analyze
from hermes.trace import load
from tests.conftest import emulated_run
from tests.tracegen import ev, frame


@pytest.fixture(scope="module")
def ranks4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emulated_run(tmp_path_factory.mktemp("driver") / "run", "deepfm", 4, 3)


def test_packed_tables_give_the_same_frames_back() -> None:
    df = pd.DataFrame({"name": pd.Categorical(["a", "b", "a"]), "dur_ns": [1, 2, 3],
                       "x": pd.array([1, None, 3], dtype="Int64"), "s": ["u", None, "w"]},
                      index=[5, 6, 7])
    p = PackedTables({"t": df, "empty": df.iloc[:0]})
    assert list(p) == ["t", "empty"] and len(p) == 2 and "t" in p and "nope" not in p
    pd.testing.assert_frame_equal(p["t"], df)
    pd.testing.assert_frame_equal(p["empty"], df.iloc[:0])
    assert p["t"] is not p["t"]  # a fresh frame each time: the packed bytes are the only copy
    assert 0 < p.nbytes


def test_pack_leaves_the_per_task_table_with_the_worker() -> None:
    t = pd.DataFrame({"a": [1]})
    res = pack({"computation": AnalyzerResult("computation", tables={"tasks": t, "kernels": t},
                                              metrics={"m": 1}),
                "cpu": AnalyzerResult("cpu", tables={"tasks": t})})
    assert list(res["computation"].tables) == ["kernels"]
    assert list(res["cpu"].tables) == ["tasks"]  # only computation's per-task table is left out
    assert res["computation"].metrics == {"m": 1}


def test_a_path_analysis_keeps_packed_results_and_the_same_document(
        ranks4: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from_path = analyze(ranks4)
    comp = from_path.results("computation", 1)
    assert isinstance(comp.tables, PackedTables) and "tasks" not in comp.tables
    with monkeypatch.context() as m:
        m.setattr(run_mod, "pack", lambda res: res)  # results kept as the analyzers made them
        unpacked = analyze(ranks4)
    assert "tasks" in unpacked.results("computation", 1).tables
    assert from_path.to_json() == unpacked.to_json()
    assert "tasks" in analyze(load(ranks4), ranks=[1]).results("computation", 1).tables
    # Analysis.tables: one table concatenated over the ranks with a rank column, on demand
    k = from_path.tables["computation.kernels"]
    assert sorted(k["rank"].unique()) == [0, 1, 2, 3]
    assert len(k) == sum(len(from_path.results("computation", r).tables["kernels"])
                         for r in range(4))
    assert "computation.tasks" not in from_path.tables


def test_a_packed_rank_drops_the_per_task_table_before_the_next_analyzers(
        ranks4: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run_rank(packed=True) packs a result once no analyzer still to run needs it: an
    analyzer after computation that does not need it sees it packed, without its per-task
    table; one that needs it sees the tables as computation made them."""
    from hermes.analyzers.engine.base import Analyzer, ordered

    seen: dict[str, tuple[bool, bool]] = {}

    def probe(name: str):  # type: ignore[no-untyped-def]
        def fn(ctx):  # type: ignore[no-untyped-def]
            t = ctx.results["computation"].tables
            seen[name] = (isinstance(t, PackedTables), "tasks" in t)
            return AnalyzerResult(name)
        return fn

    real = ordered("rank")
    needing = [*real, Analyzer("needs_comp", "rank", probe("needs_comp"), ("computation",)),
               Analyzer("after", "rank", probe("after"))]
    monkeypatch.setattr(run_mod, "ordered", lambda scope: needing)
    tr = load(ranks4, ranks=[1])
    res = run_mod.run_rank(1, tr.events, tr.meta, packed=True)
    assert seen["needs_comp"] == (False, True)  # still needed: as computation made it
    assert seen["after"] == (True, False)  # no longer needed: packed, per-task table gone
    assert all(isinstance(r.tables, PackedTables) for r in res.values())
    plain = run_mod.run_rank(1, tr.events, tr.meta)
    assert "tasks" in plain["computation"].tables and seen["after"] == (False, True)


def test_a_path_rank_lets_the_whole_frame_go_once_a_warm_up_is_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank read from a path: once drop_warmup has made its filtered copy, the loaded frame is
    referenced by nothing (not held beside the copy while the analyzers run)."""
    import gc
    import weakref

    from hermes.analyzers.engine.base import Analyzer, ordered
    from hermes.trace.meta import TraceMeta
    from hermes.trace.writer import TraceWriter

    rows = [ev("step", "ProfilerStep#1", 0, 1000), ev("host_op", "compile", 0, 900)]
    for i in range(3):  # step 1 is 100x the others: a warm-up, left out
        t = 1000 + 10 * i
        rows += [ev("step", f"ProfilerStep#{i + 2}", t, 10), ev("kernel", "k", t, 10, stream=7)]
    path = tmp_path / "warm.parquet"
    with TraceWriter(path, TraceMeta(ranks=(0,))) as w:
        w.write(frame(*rows).to_dict("list"))
    refs: list[weakref.ref] = []
    real_drop = run_mod.drop_warmup

    def drop(events: pd.DataFrame):  # type: ignore[no-untyped-def]
        refs.append(weakref.ref(events))
        return real_drop(events)

    alive: list[bool] = []

    def probe(ctx):  # type: ignore[no-untyped-def]
        gc.collect()
        alive.append(refs[0]() is not None)
        return AnalyzerResult("probe")

    real = ordered("rank")
    monkeypatch.setattr(run_mod, "drop_warmup", drop)
    monkeypatch.setattr(run_mod, "ordered", lambda scope: [*real, Analyzer("probe", "rank",
                                                                            probe)])
    _, res = run_mod.rank_job(str(path), 0)
    assert res["steps"].metrics["warmup"]["events_left_out"] == 2  # the warm-up was dropped
    assert alive == [False]


def test_top_kernels_in_chunks_equal_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    def kern(names: list[str], total: list[int], fam: list[str | None]) -> pd.DataFrame:
        return pd.DataFrame({"name": names, "count": [1] * len(names), "total_ns": total,
                             "max_ns": total, "family": fam,
                             "bound": ["memory_bound"] * len(names)})

    frames = [kern(["b", "a"], [5, 7], [None, "x"]), kern(["a", "c"], [1, 2], ["y", "z"]),
              kern(["c", "b"], [4, 9], ["w", "v"])]
    monkeypatch.setattr(result_mod, "KERNEL_CHUNK", 1)
    got = kernel_totals([*frames, None])
    assert got is not None
    # first-seen order b, a, c; sums 14, 8, 6; max 9, 7, 4; first non-missing family v, x, z
    assert list(got.index) == ["b", "a", "c"]
    assert got["total_ns"].tolist() == [14, 8, 6] and got["count"].tolist() == [2, 2, 2]
    assert got["max_ns"].tolist() == [9, 7, 4] and got["family"].tolist() == ["v", "x", "z"]
    monkeypatch.setattr(result_mod, "KERNEL_CHUNK", 64)
    pd.testing.assert_frame_equal(kernel_totals(frames), got)


def test_step_windows_merge_threads_and_are_found_once_per_frame() -> None:
    ev_ = frame(ev("step", "ProfilerStep#2", 1_000, 500, lane="thread 2"),
                ev("step", "ProfilerStep#1", 0, 900),
                ev("step", "ProfilerStep#2", 1_100, 600),
                ev("kernel", "k", 100, 50))
    w = steps.step_windows(ev_)
    # step 2 on two threads: earliest start 1000 to latest end 1700; sorted by start
    assert w.to_dict("list") == {"step": [1, 2], "start_ns": [0, 1_000],
                                 "end_ns": [900, 1_700], "dur_ns": [900, 700]}
    assert all(w[c].dtype == np.int64 for c in w.columns)
    w.loc[0, "dur_ns"] = -1  # a caller's change does not reach the next caller
    assert steps.step_windows(ev_)["dur_ns"].tolist() == [900, 700]
    other = ev_.iloc[:2].reset_index(drop=True)  # another frame: its own windows
    assert steps.step_windows(other)["step"].tolist() == [1, 2]
    assert steps.step_windows(other)["end_ns"].tolist() == [900, 1_500]


def test_a_big_rank_gives_freed_memory_back_after_each_analyzer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    run_mod.release_memory()  # the real one: no error here (glibc or not)
    calls: list[int] = []
    monkeypatch.setattr(run_mod, "release_memory", lambda: calls.append(1))
    df = frame(ev("step", "ProfilerStep#1", 0, 100, step=1), ev("kernel", "k", 0, 10))
    run_mod.run_rank(0, df, None)  # 2 events: below the threshold, no release
    assert calls == []
    monkeypatch.setattr(run_mod, "RELEASE_MIN_EVENTS", 2)
    run_mod.run_rank(0, df, None)
    # once for what the load freed, then once after each rank analyzer
    assert len(calls) == 1 + len(run_mod.ordered("rank"))
