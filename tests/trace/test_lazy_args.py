"""Args on demand: ``load(path, lazy_args=True)`` leaves ``args`` in the file and
``hermes.trace.args.args_of`` reads the rows asked for -- the same values, dtype and index as
the column of an eagerly loaded trace, through filters, resets, rank loads and pickling."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hermes.trace import load
from hermes.trace.args import ROW, args_of, has_args
from hermes.trace.writer import TraceWriter
from tests.tracegen import ev, events, frame

#: ten events over two ranks, one without args; written as row groups of three rows
ARGS = [f'{{"i": {i}}}' if i != 4 else None for i in range(10)]


@pytest.fixture()
def path(tmp_path: Path) -> Path:
    rows = [ev("host_op", f"op{i}", 10 * i, 5, rank=i % 2, args=ARGS[i]) for i in range(10)]
    w = TraceWriter(tmp_path / "t.parquet", row_group_rows=3)
    w.write(events(*rows))
    return w.close()


def test_lazy_frame_has_rows_not_args(path: Path) -> None:
    lazy, eager = load(path, lazy_args=True), load(path)
    assert "args" not in lazy.events.columns and has_args(lazy.events)
    assert lazy.events[ROW].tolist() == list(range(10))
    pd.testing.assert_frame_equal(lazy.events.drop(columns=[ROW]),
                                  eager.events.drop(columns=["args"]))
    # the whole column, a mask and positions: what the eager column gives
    pd.testing.assert_series_equal(args_of(lazy.events), eager.events["args"])
    m = (lazy.events["rank"] == 1).to_numpy()
    pd.testing.assert_series_equal(args_of(lazy.events, m), eager.events["args"][m])
    got = args_of(lazy.events, [7, 2, 5, 4])  # out of order, across row groups, a null
    assert got.index.tolist() == [7, 2, 5, 4]
    assert got.tolist()[:3] == ['{"i": 7}', '{"i": 2}', '{"i": 5}'] and pd.isna(got.iloc[3])
    assert len(args_of(lazy.events, np.zeros(0, np.int64))) == 0


def test_rows_follow_filters_rank_loads_and_pickling(path: Path) -> None:
    lazy = load(path, lazy_args=True)
    odd = lazy.events[lazy.events["rank"] == 1].reset_index(drop=True)
    assert args_of(odd).tolist() == [ARGS[i] for i in (1, 3, 5, 7, 9)]
    one = load(path, ranks=[1], lazy_args=True).events  # rows 1, 3, ... of the file
    assert one[ROW].tolist() == [1, 3, 5, 7, 9]
    assert args_of(one, [1, 0]).tolist() == ['{"i": 3}', '{"i": 1}']
    again = pickle.loads(pickle.dumps(odd))  # (a worker's results travel pickled)
    assert args_of(again, [4]).tolist() == ['{"i": 9}']


def test_in_memory_frames_keep_their_column() -> None:
    f = frame(ev("kernel", "k", 0, 1, args='{"a": 1}'), ev("kernel", "k", 2, 1))
    got = args_of(f, [1, 0])
    assert pd.isna(got.iloc[0]) and got.iloc[1] == '{"a": 1}' and got.index.tolist() == [1, 0]
    bare = f.drop(columns=["args"])
    assert not has_args(bare) and args_of(bare, [0, 1]).isna().all()


def test_row_groups_are_decoded_once_within_the_budget(path: Path, monkeypatch) -> None:
    import pyarrow.parquet as pq

    import hermes.trace.args as args_mod

    lazy = load(path, lazy_args=True).events
    reads: list[int] = []
    real = pq.ParquetFile.read_row_group
    monkeypatch.setattr(pq.ParquetFile, "read_row_group",
                        lambda self, g, *a, **k: reads.append(g) or real(self, g, *a, **k))
    first = args_of(lazy, [7, 2, 5])  # row groups 2, 0, 1 (rows 6-8, 0-2, 3-5)
    assert sorted(reads) == [0, 1, 2]
    pd.testing.assert_series_equal(args_of(lazy, [7, 2, 5]), first)  # from the kept groups
    assert sorted(reads) == [0, 1, 2]
    # a budget that holds one group of three: the first read is kept, the others read each time
    one = real(pq.ParquetFile(path), 0, columns=["args"]).column(0).nbytes
    monkeypatch.setattr(args_mod, "CACHE_BYTES", one)
    fresh = load(path, lazy_args=True).events
    reads.clear()
    assert args_of(fresh, [0]).tolist() == ['{"i": 0}']
    assert args_of(fresh, [3]).tolist() == ['{"i": 3}']  # does not fit beside group 0
    assert args_of(fresh, [4, 5]).iloc[1] == '{"i": 5}'  # read again
    assert args_of(fresh, [1, 2]).tolist() == ['{"i": 1}', '{"i": 2}']  # kept
    assert reads == [0, 1, 1]


def test_two_threads_reading_at_once_get_the_rows_and_decode_each_group_once(
        path: Path, monkeypatch) -> None:
    """The critical path reads args on its own thread beside the other analyzers: both threads
    open the same file and read the same groups at once (a slow read widens the window)."""
    import threading
    import time

    import pyarrow.parquet as pq

    lazy = load(path, lazy_args=True).events
    eager = load(path).events["args"]
    reads: list[int] = []
    real = pq.ParquetFile.read_row_group

    def slow(self, g, *a, **k):  # type: ignore[no-untyped-def]
        reads.append(g)
        time.sleep(0.02)
        return real(self, g, *a, **k)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", slow)
    got: dict[int, pd.Series] = {}
    go = threading.Barrier(2)

    def read(i: int) -> None:
        go.wait()
        got[i] = args_of(lazy, list(range(10)))

    threads = [threading.Thread(target=read, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    for i in range(2):
        pd.testing.assert_series_equal(got[i], eager)
    assert sorted(reads) == [0, 1, 2, 3]
