"""The replay takes the graph of every step the critical path built of the same events, handed
over explicitly in the analysis run's store (``Keep``: ``RankContext.keep`` -> ``Analysis.keep``
-> ``hermes.whatif.graphs(keep=)``, ``stepgraph.kept_steps``): only for the same events
(``stepgraph.same_events``), and the same graph and steps as its own build; nothing passes
between runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.common.steps import step_windows
from hermes.analyzers.critical_path import stepgraph
from hermes.analyzers.critical_path.analysis import analyze
from hermes.analyzers.engine.base import Keep, RankContext
from hermes.trace.meta import TraceMeta
from hermes.whatif import predict
from hermes.whatif import replay as rp
from tests.tracegen import ev, events


def _frame(**change) -> pd.DataFrame:
    rows = []
    for s in range(3):
        t0 = 100 * s
        rows += [ev("step", f"ProfilerStep#{s}", t0, 100), ev("host_op", "aten::mm", t0, 30),
                 ev("launch", "cudaLaunchKernel", t0 + 10, 5, corr_id=s + 1),
                 ev("sync", "cudaStreamSynchronize", t0 + 40, 45),
                 ev("host_op", "opt", t0 + 85, 10),
                 ev("kernel", "gemm", t0 + 20, 60 - s, corr_id=s + 1, stream=7)]
    df = pd.DataFrame(events(*rows))
    for c in ("corr_id", "stream"):
        df[c] = pd.array(df[c], dtype="Int64")
    for c in ("lane", "lane_kind", "kind", "name"):
        df[c] = df[c].astype("category")
    df["args"] = pd.array([f'{{"a": {i}}}' for i in range(len(df))], dtype="str")
    df["flops"] = 1.0
    for c, v in change.items():
        df[c] = v
    return df


def _analyzed(df: pd.DataFrame) -> Keep:
    keep = Keep()
    analyze(RankContext(rank=0, events=df, meta=TraceMeta(), keep=keep))
    return keep


def _fresh(df: pd.DataFrame) -> rp.StepGraph:
    return rp.build(df)  # (no store: built)


def _same(a: rp.StepGraph, b: rp.StepGraph) -> None:
    for f in a.g.__dict__:
        np.testing.assert_array_equal(getattr(a.g, f), getattr(b.g, f))
    pd.testing.assert_frame_equal(a.info, b.info)
    pd.testing.assert_frame_equal(a.windows, b.windows)
    assert rp.replay(a).tolist() == rp.replay(b).tolist()


def test_the_replay_takes_the_critical_paths_graph_of_the_same_events(monkeypatch):
    df = _frame()
    keep = _analyzed(df)
    (kept,) = keep.values()
    assert kept.whole is not None  # a graph of every step of its events
    with monkeypatch.context() as m:  # (equal events, another frame): nothing computed again
        m.setattr(stepgraph, "Events", None)
        m.setattr(rp, "step_windows", None)
        sg = rp.build(df.copy(deep=True), keep=keep)
        with pytest.raises(TypeError):  # without the store: built (and so computed) again
            rp.build(df.copy(deep=True))
    assert sg.g.t is kept.graph.t
    pd.testing.assert_frame_equal(sg.windows, step_windows(df).reset_index(drop=True))
    _same(sg, _fresh(df))
    assert predict({0: sg}, ["cpu.dispatch_fusion"]).to_dict() == \
        predict({0: _fresh(df)}, ["cpu.dispatch_fusion"]).to_dict()


@pytest.mark.parametrize("change", [
    {"lane": "reordered"},  # the same lanes, categories in another order: other lane codes
    {"args": "one"},  # one event's args
    {"dur_ns": "one"},
    {"step": "column"},  # a column the events' steps read, present in one frame only
])
def test_not_taken_for_other_events(change):
    df = _frame()
    (key, val), = change.items()
    other = df.copy(deep=True)
    if key == "lane":
        other["lane"] = other["lane"].cat.reorder_categories(
            list(other["lane"].cat.categories)[::-1])
    elif key == "args":
        other["args"] = pd.array(['{"a": 99}', *other["args"].iloc[1:]], dtype="str")
    elif key == "dur_ns":
        other.loc[4, "dur_ns"] = 11
    elif "step" in other.columns:
        other = other.drop(columns="step")
    else:
        other["step"] = pd.array([None] * len(other), dtype="Int64")
    assert not stepgraph.same_events(df, other)
    keep = _analyzed(df)
    assert stepgraph.kept_steps(other, keep) is None and stepgraph.kept_steps(df, keep) is not None
    # (built as usual: a graph made of exactly the same arrays may still be taken, by them)
    _same(rp.build(other, keep=keep), _fresh(other))


def test_same_events_reads_only_what_a_graph_is_made_of():
    df = _frame()
    other = _frame(flops=2.0)  # (not a column of the graph: the facts are the replay's own)
    assert stepgraph.same_events(df, other) and stepgraph.same_events(df, df)
    assert not stepgraph.same_events(df, df.iloc[1:])
    assert not stepgraph.same_events(df, df.drop(columns="args"))
    assert not stepgraph.same_events(df, df.set_axis(np.arange(len(df)) + 1))


def test_analyze_and_advise_hands_the_graphs_over_and_keeps_nothing_after(monkeypatch):
    """End to end: the advisor's replay of a trace takes the graphs the run's critical path built
    (one build per graph, not two), through ``Analysis.keep``; the store is let go after the
    advice, and a second run builds its own (no state between runs)."""
    from pathlib import Path

    from hermes.advisor import replayed
    from hermes.analyzers.critical_path import edges as cpedges
    from hermes.diff.runs import import_in_memory
    from hermes.pipeline import analyze_and_advise

    tr = import_in_memory(Path("tests/data/kineto/big_matmul.pt.trace.json.gz"))
    built, handed = [], []
    real_edges, real_graphs = cpedges.cross_edges, replayed.graphs  # (one call per graph built)
    monkeypatch.setattr(cpedges, "cross_edges", lambda *a: built.append(1) or real_edges(*a))

    def graphs(*a, **k):
        handed.append(len(k["keep"].values()))
        return real_graphs(*a, **k)

    monkeypatch.setattr(replayed, "graphs", graphs)
    analysis, advice = analyze_and_advise(tr)
    assert any(r.estimate == "replay" for rs in advice.recommendations.values() for r in rs)
    assert handed == [1] and built == [1]  # the critical path's graph, taken by the replay
    assert len(analysis.keep) == 0  # let go after the advice
    analyze_and_advise(tr)
    assert built == [1, 1]  # the next run built its own
