"""Ranks of a trace in memory (``run._run_split``): a frame of one rank is analyzed as it is
(no per-rank copy), and the analysis leaves the trace's events as they were."""

from __future__ import annotations

import pandas as pd

from hermes.analyzers.engine import run
from hermes.diff.runs import import_in_memory
from hermes.pipeline import analyze_and_advise
from tests.conftest import DATA

SRC = DATA / "kineto" / "gpt_dataloader_starved.pt.trace.json.gz"


def _frame(ranks: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"rank": ranks, "ts_ns": range(len(ranks))})


def test_one_rank_is_the_frame_itself() -> None:
    ev = _frame([3, 3, 3])
    assert run.by_rank(ev, [3]) == {3: ev} and run.by_rank(ev, [3])[3] is ev


def test_several_ranks_or_another_rank_are_split() -> None:
    ev = _frame([0, 1, 0, 1])
    got = run.by_rank(ev, [0, 1])
    assert sorted(got) == [0, 1]
    assert got[1]["ts_ns"].tolist() == [1, 3] and got[1].index.tolist() == [1, 3]
    one = _frame([2, 2])
    assert list(run.by_rank(one, [5])) == [2]  # rank 5 absent: analyzed as empty
    assert run.by_rank(_frame([]), [0]) == {}


def test_numbered_means_a_range_index_from_zero() -> None:
    assert run.numbered(_frame([0, 0]))
    assert not run.numbered(_frame([0, 0, 0]).iloc[1:])  # RangeIndex(1, 3)
    assert not run.numbered(_frame([0, 1, 0]).iloc[[0, 2]])


def test_the_analysis_leaves_the_traces_events_as_they_were() -> None:
    """The one rank's analyzers read the trace's own frame: none may change it."""
    tr = import_in_memory(SRC)
    before, frame, cols = tr.events.copy(deep=True), tr.events, list(tr.events.columns)
    analysis, _ = analyze_and_advise(tr)
    assert analysis.findings
    assert tr.events is frame and list(tr.events.columns) == cols
    pd.testing.assert_frame_equal(tr.events, before, check_exact=True)
