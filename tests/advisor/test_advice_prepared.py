"""The advice's replay prepared ahead (``replayed.prepare``, made by the pipeline beside the
analysis): the same recommendations as computed in place, taken only where it fits."""

from __future__ import annotations

import pytest

from hermes import pipeline
from hermes.advisor import advise, replayed
from hermes.analyzers import run
from hermes.analyzers.executor import make_executor
from hermes.diff.runs import import_in_memory
from tests.conftest import DATA

SRC = DATA / "kineto" / "gpt_dataloader_starved.pt.trace.json.gz"


def _recs(advice) -> dict:  # type: ignore[no-untyped-def]
    return {k: [r.to_dict() for r in v] for k, v in advice.recommendations.items()}


def _count_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    built: list[int] = []
    orig = replayed.graphs

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        built.append(1)
        return orig(*a, **k)

    monkeypatch.setattr(replayed, "graphs", spy)
    return built


def test_prepared_gives_the_advice_computed_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    tr = import_in_memory(SRC)
    monkeypatch.setattr(run, "_cpus", lambda: 1)  # no side thread: nothing prepared
    analysis = run.analyze(tr)
    plain = advise(analysis, trace=tr)
    assert any(r.estimate == "replay" for v in plain.recommendations.values() for r in v)
    built = _count_builds(monkeypatch)
    prep = replayed.prepare(tr)
    assert prep is not None and prep.ranks == [0] and len(built) == 1
    assert _recs(advise(analysis, trace=tr, prepared=prep)) == _recs(plain)
    assert len(built) == 1  # taken: no graph built again
    # other events (a copy): not taken, built afresh, the same advice
    other = type(tr)(events=tr.events.copy(), meta=tr.meta)
    assert _recs(advise(analysis, trace=other, prepared=prep)) == _recs(plain)
    assert len(built) == 2


def test_the_pipeline_prepares_beside_the_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    tr = import_in_memory(SRC)
    monkeypatch.setattr(run, "_cpus", lambda: 1)
    serial = pipeline.analyze_and_advise(tr, executor=make_executor(None, 0))[1]
    monkeypatch.setattr(run, "_cpus", lambda: 2)
    built = _count_builds(monkeypatch)
    both = pipeline.analyze_and_advise(tr, executor=make_executor(None, 0))[1]
    assert _recs(both) == _recs(serial) and len(built) == 1  # built once, ahead
    # a preparation that fails leaves the advice to compute it (and meet any error itself)
    monkeypatch.setattr(replayed, "prepare", lambda t: 1 / 0)
    failed = pipeline.analyze_and_advise(tr, executor=make_executor(None, 0))[1]
    assert _recs(failed) == _recs(serial) and len(built) == 2


def test_nothing_prepared_for_a_path_or_many_ranks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert replayed.prepare(tmp_path / "t.parquet") is None
    assert replayed.prepare(str(tmp_path / "t.parquet")) is None
    tr = import_in_memory(SRC)
    ev = tr.events.copy()
    ev["rank"] = ev.index % (replayed.MAX_RANKS + 1)  # more ranks than are replayed
    assert replayed.prepare(type(tr)(events=ev, meta=tr.meta)) is None
