"""The critical path analyzer on a thread of its own beside the others (``run.BESIDE``): the
same results in the same order as one after the other, its error raised in the caller, the
run's ``Keep`` filled from the thread, and only where it should run so."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from hermes.analyzers.engine import run
from hermes.analyzers.engine.base import ANALYZERS, Keep
from hermes.diff.runs import import_in_memory
from tests.conftest import DATA

SRC = DATA / "kineto" / "gpt_dataloader_starved.pt.trace.json.gz"


def _same(a: dict, b: dict) -> None:
    assert list(a) == list(b)  # the order a serial run gives (reports follow it)
    for name in a:
        x, y = a[name], b[name]
        assert list(x.tables) == list(y.tables) and x.metrics == y.metrics, name
        assert [f.to_dict() for f in x.findings] == [f.to_dict() for f in y.findings], name
        for t in x.tables:
            pd.testing.assert_frame_equal(x.tables[t], y.tables[t], check_exact=True)


def _swap(monkeypatch: pytest.MonkeyPatch, name: str, **changes: object) -> None:
    """Analyzer ``name`` registered with ``changes`` for the test only."""
    items = dict(ANALYZERS._items)
    items[name] = dataclasses.replace(ANALYZERS.get(name), **changes)
    monkeypatch.setattr(ANALYZERS, "_items", items)


def test_beside_gives_what_one_after_the_other_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    tr = import_in_memory(SRC)
    started = []
    orig = run.Beside.__init__

    def spy(self, name, fn):  # type: ignore[no-untyped-def]
        started.append(name)
        orig(self, name, fn)

    monkeypatch.setattr(run.Beside, "__init__", spy)
    monkeypatch.setattr(run, "usable_cpus", lambda: 2)
    k_both, k_serial = Keep(), Keep()
    both = run.run_rank(0, tr.events, tr.meta, keep=k_both)
    assert started == [run.BESIDE]
    monkeypatch.setattr(run, "usable_cpus", lambda: 1)  # one CPU: in order, no thread
    serial = run.run_rank(0, tr.events, tr.meta, keep=k_serial)
    assert started == [run.BESIDE]
    _same(both, serial)
    assert run.BESIDE in both and len(both[run.BESIDE].tables)
    # what the thread's critical path kept for the advice is what the serial one kept
    assert len(k_both.values()) == len(k_serial.values()) > 0


def test_an_error_beside_is_raised_in_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    tr = import_in_memory(SRC)
    run.load_analyzers()

    def broken(ctx):  # type: ignore[no-untyped-def]
        raise ValueError("graph broke")

    monkeypatch.setattr(run, "usable_cpus", lambda: 2)
    _swap(monkeypatch, run.BESIDE, fn=broken)
    with pytest.raises(ValueError, match="graph broke"):
        run.run_rank(0, tr.events, tr.meta)


def test_no_thread_where_it_should_not(monkeypatch: pytest.MonkeyPatch) -> None:
    tr = import_in_memory(SRC)
    run.load_analyzers()
    monkeypatch.setattr(run, "usable_cpus", lambda: 2)
    monkeypatch.setattr(run, "Beside", lambda *a: pytest.fail("a thread was started"))
    run.run_rank(0, tr.events, tr.meta, packed=True)  # a worker's rank: the cores are theirs
    monkeypatch.setattr(run, "RELEASE_MIN_EVENTS", 10)  # a big rank: memory one at a time
    run.run_rank(0, tr.events, tr.meta)
    # an analyzer that needs its result: in order
    monkeypatch.setattr(run, "RELEASE_MIN_EVENTS", 10**9)
    _swap(monkeypatch, "memory", needs=(run.BESIDE,))
    run.run_rank(0, tr.events, tr.meta)
