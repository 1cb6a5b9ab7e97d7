"""MemoryWriter gives exactly the Trace that TraceWriter + load give of the written file:
values, dtypes and the order of categorical categories (which the Parquet round trip decides:
per row group the first batch's dictionary whole, then the other batches' values in order of
first appearance)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from hermes.trace import load
from hermes.trace.memory import MemoryWriter
from hermes.trace.meta import TraceMeta
from hermes.trace.writer import TraceWriter


def _dict(codes: list[int | None], values: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(values))


def _batch(n: int, t0: int, names: pa.DictionaryArray, units: pa.DictionaryArray
           ) -> dict[str, object]:
    return {"rank": [0] * n, "lane": ["thread 1"] * n, "lane_kind": ["host"] * n,
            "kind": ["host_op"] * n, "name": names, "unit": units,
            "ts_ns": list(range(t0, t0 + n)), "dur_ns": [1] * n,
            "corr_id": [None] + [7] * (n - 1), "args": ['{"x": 1}'] * n}


#: four batches whose dictionaries differ and hold unused values ("z", "y", "x", "cube")
BATCHES = [
    _batch(1, 0, _dict([1], ["a", "b", "z"]), _dict([None], ["sm", "copy"])),
    _batch(2, 10, _dict([0, 1], ["c", "a", "y"]), _dict([0, None], ["link", "cube"])),
    _batch(3, 20, _dict([1, 1, 0], ["d", "e", "x"]), _dict([None, 0, None], ["host"])),
    _batch(2, 30, _dict([0, 0], ["f"]), _dict([None, None], ["vector"])),
]


def _write(w: TraceWriter | MemoryWriter) -> object:
    for b in BATCHES:
        w.write(b)
    return w.close(TraceMeta(source="test", extra={"k": [1, 2]}))


def test_memory_writer_is_the_written_and_loaded_trace(tmp_path: Path) -> None:
    # row groups of 4 rows: the first flush (6 rows) is split 4 + 2, the last batch is a group
    path = _write(TraceWriter(tmp_path / "t.parquet", TraceMeta(source="test"),
                              row_group_rows=4))
    ref = load(path)
    mem = MemoryWriter(TraceMeta(source="test"), row_group_rows=4)
    got = _write(mem)
    assert got is mem.trace
    # by hand: group 1 = batches 1, 2 and the first row of 3: [a, b, z] whole, then c and e
    # (y unused); group 2 = the other rows of batch 3: its dictionary whole, [d, e, x];
    # group 3 = batch 4's [f]
    assert list(got.events["name"].cat.categories) == ["a", "b", "z", "c", "e", "d", "x", "f"]
    assert list(got.events["name"].astype(str)) == ["b", "c", "a", "e", "e", "d", "f", "f"]
    # with nulls: group 1 = [sm, copy] whole + link (cube unused); [host]; [vector]
    assert list(got.events["unit"].cat.categories) == ["sm", "copy", "link", "host", "vector"]
    assert got.events["unit"].isna().tolist() == [True, False, True, True, False, True,
                                                  True, True]
    assert list(got.events.columns) == list(ref.events.columns)
    for c in ref.events.columns:
        assert got.events[c].dtype == ref.events[c].dtype, c
    pd.testing.assert_frame_equal(got.events, ref.events)
    for c in ("name", "unit", "kind", "lane", "coll_group"):
        assert list(got.events[c].cat.categories) == list(ref.events[c].cat.categories), c
    assert got.meta == ref.meta and got.meta.ranks == (0,)


def test_memory_writer_of_nothing_is_the_empty_trace(tmp_path: Path) -> None:
    path = TraceWriter(tmp_path / "e.parquet", TraceMeta(source="test")).close()
    got = MemoryWriter(TraceMeta(source="test")).close()
    pd.testing.assert_frame_equal(got.events, load(path).events)
    assert got.meta == load(path).meta
