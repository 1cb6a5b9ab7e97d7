"""hermes.trace.columns: the compiled passes give what the Python expressions they replace give,
values of every kind included, and raise what those raise."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from operator import attrgetter

import msgspec
import numpy as np
import pytest

from hermes.trace import columns

native = pytest.mark.skipif(not columns.NATIVE, reason="hermes.trace._columns not compiled")


class Ev(msgspec.Struct, gc=False):
    ph: str = ""
    ts: float = math.nan
    tid: int | str | None = 0
    args: msgspec.Raw = msgspec.Raw(b"{}")


class Sub(Ev, gc=False):  # a subtype: its own slots for the fields it redeclares
    ts: float = 1.5


class Slots:
    __slots__ = ("ph", "ts")

    def __init__(self, ph: object, ts: object) -> None:
        self.ph, self.ts = ph, ts


class Plain:
    def __init__(self, ph: object, ts: object) -> None:
        self.ph, self.ts = ph, ts


class Computed:
    @property
    def ts(self) -> float:
        return 2.25


class Reading:
    """getattr with a side effect: counts the reads."""

    reads = 0

    def __getattr__(self, name: str) -> float:
        Reading.reads += 1
        return 3.0


def _py_objects(items, name):
    return list(map(attrgetter(name), items))


def _py_floats(items, name):
    return np.fromiter(map(attrgetter(name), items), np.float64, len(items))


def _py_ints(items, name=None):
    values = items if name is None else map(attrgetter(name), items)
    return np.fromiter(values, np.int64, len(items))


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
        return
    assert len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _mixed() -> list:
    return [Ev("X", 1.0, 7), Sub("B", 2.5, "x"), Slots("E", 3.0), Plain("i", -0.0),
            Ev("X", math.inf, None), Computed(), Reading(), Ev("C", math.nan, 2 ** 62)]


@pytest.mark.parametrize("name", ["ph", "ts", "tid"])
def test_objects_is_map_attrgetter(name):
    items = [e for e in _mixed() if hasattr(e, name)]
    _same(columns.objects(items, name), _py_objects(items, name))


def test_objects_raises_what_attrgetter_raises():
    items = [Ev(), Plain("X", 1.0)]
    with pytest.raises(AttributeError, match="tid"):
        _py_objects(items, "tid")
    with pytest.raises(AttributeError, match="tid"):
        columns.objects(items, "tid")


def test_floats_of_every_kind_of_value():
    items = [e for e in _mixed() if hasattr(e, "ts")]
    _same(columns.floats(items, "ts"), _py_floats(items, "ts"))
    # ints, bools and numeric text: numpy converts them; the C pass leaves them to numpy
    odd = [Plain("X", 1), Plain("X", True), Plain("X", 2 ** 80), Plain("X", "4.5"),
           Plain("X", None)]
    for e in odd:
        _same(columns.floats([Ev(ts=1.0), e], "ts"), _py_floats([Ev(ts=1.0), e], "ts"))
    with pytest.raises((TypeError, ValueError)):
        _py_floats([Plain("X", object())], "ts")
    with pytest.raises((TypeError, ValueError)):
        columns.floats([Ev(ts=1.0), Plain("X", object())], "ts")


def test_ints_of_every_kind_of_value():
    ok = [Ev(tid=7), Ev(tid=-(2 ** 63)), Ev(tid=2 ** 63 - 1), Ev(tid=0)]
    _same(columns.ints(ok, "tid"), _py_ints(ok, "tid"))
    _same(columns.ints([7, -1, 2 ** 40]), _py_ints([7, -1, 2 ** 40]))
    for odd in (True, 7.0, np.int64(5)):
        _same(columns.ints([1, odd]), _py_ints([1, odd]))
    for bad, exc in ((2 ** 63, OverflowError), (-(2 ** 63) - 1, OverflowError),
                     ("x", ValueError), (None, TypeError)):
        with pytest.raises(exc):
            _py_ints([1, bad])
        with pytest.raises(exc):
            columns.ints([1, bad])
        with pytest.raises(exc):
            columns.ints([Ev(tid=1), Ev(tid=bad)], "tid")


def test_lengths_of_bytes_and_raw():
    items = [b"", b"abc", msgspec.Raw(b'{"a": 1}'), bytearray(b"xy"), memoryview(b"1234")]
    _same(columns.lengths(items), np.fromiter(map(len, items), np.int64, len(items)))
    _same(columns.lengths(["text", b"ab"]), np.array([4, 2], np.int64))  # str: len() itself
    with pytest.raises(TypeError):
        columns.lengths([b"a", 5])


def test_codes_share_a_code_as_dict_keys_do():
    nan = float("nan")
    values = ["b", "a", "b", None, 1, 1.0, True, nan, float("nan"), nan, "a", (1, 2), (1, 2)]
    got_codes, got_keys = columns.codes(values)
    # the Python expression: the first value met of each class of equal keys
    keys: dict = {}
    want = np.array([keys.setdefault(v, len(keys)) for v in values], np.int32)
    assert got_codes.dtype == np.int32 and np.array_equal(got_codes, want)
    assert len(got_keys) == len(keys) and all(a is b for a, b in zip(got_keys, keys,
                                                                          strict=True))
    assert got_keys[2] is None and got_keys[3] == 1 and type(got_keys[3]) is int
    with pytest.raises(TypeError, match="unhashable"):
        columns.codes(["a", ["not", "hashable"]])


@pytest.mark.parametrize("name", ["ph", "ts", "tid"])
def test_codes_of_a_field_are_the_codes_of_its_list(name):
    items = [e for e in _mixed() if hasattr(e, name)] * 3
    got_codes, got_keys = columns.codes(items, name)
    want_codes, want_keys = columns.codes(_py_objects(items, name))
    assert got_codes.dtype == np.int32 and np.array_equal(got_codes, want_codes)
    assert len(got_keys) == len(want_keys) and all(
        a is b or (a != a and b != b) for a, b in zip(got_keys, want_keys, strict=True))
    with pytest.raises(AttributeError, match="ph"):
        columns.codes([Ev(), Computed()], "ph")


def test_codes_of_one_value_and_of_none():
    assert columns.codes([])[1] == [] and len(columns.codes([])[0]) == 0
    c, k = columns.codes(["X"] * 5)
    assert k == ["X"] and c.tolist() == [0] * 5


def test_take_is_indexing():
    items = list("abcdef")
    rows = np.array([5, 0, 0, -1, 3])
    assert columns.take(items, rows) == ["f", "a", "a", "f", "d"]
    assert columns.take(items, rows.astype(np.int32)) == ["f", "a", "a", "f", "d"]
    assert columns.take(items, np.zeros(0, np.int64)) == []
    with pytest.raises(IndexError):
        columns.take(items, np.array([6]))
    with pytest.raises(IndexError):
        columns.take(items, np.array([-7]))


def test_list_subclasses_that_change_iteration_take_the_python_path():
    class Reversed(list):
        def __iter__(self):
            return reversed(self)

        def __getitem__(self, i):
            return super().__getitem__(-1 - i)

    items = Reversed([Ev(ts=1.0), Ev(ts=2.0)])
    _same(columns.floats(items, "ts"), _py_floats(items, "ts"))
    assert columns.floats(items, "ts").tolist() == [2.0, 1.0]
    assert columns.take(items, np.array([0])) == [items[0]]


@native
def test_compiled_passes_are_in_use_and_faster_paths_agree_on_a_real_chunk():
    """A chunk of a real trace decoded as the importer decodes it: every field read by the
    compiled passes equals the Python expression's."""
    from hermes.collectors.importers.kineto.events import EVENTS

    text = (b'[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1.5,"dur":2,'
            b'"args":{"correlation":3}},{"ph":"M","name":"thread_name","pid":1,"tid":"t",'
            b'"args":{"name":"main"}},{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,'
            b'"tid":9,"ts":1700000000000000.5,"dur":1.25}]')
    evs = EVENTS.decode(text)
    for name in ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args"):
        _same(columns.objects(evs, name), _py_objects(evs, name))
    raws = columns.objects(evs, "args")
    _same(columns.lengths(raws), np.fromiter(map(len, raws), np.int64, len(raws)))
    assert columns.NATIVE


def test_switched_off_by_the_environment():
    code = "from hermes.trace import columns; print(columns.NATIVE)"
    env = dict(os.environ, HERMES_NO_EXTENSION="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_python_path_gives_the_same(monkeypatch):
    """Every function with the compiled module switched off gives what it gives with it."""
    items = [e for e in _mixed() if hasattr(e, "ph")]
    with_c = (columns.objects(items, "ts"), columns.floats(items, "ts"),
              columns.codes(columns.objects(items, "ph")), columns.take(items, np.array([2, 0])))
    monkeypatch.setattr(columns, "_c", None)
    without = (columns.objects(items, "ts"), columns.floats(items, "ts"),
               columns.codes(columns.objects(items, "ph")),
               columns.take(items, np.array([2, 0])))
    _same(with_c[0], without[0])
    _same(with_c[1], without[1])
    assert np.array_equal(with_c[2][0], without[2][0]) and with_c[2][1] == without[2][1]
    _same(with_c[3], without[3])



def test_nullable_ints_with_nulls_convert_as_pandas_would_over_several_chunks() -> None:
    """table_to_pandas builds Int64/Int32 columns holding nulls itself: the same values, nulls,
    dtypes and column order as pyarrow's own conversion, for a column of several chunks."""
    import pandas as pd
    import pyarrow as pa

    from hermes.trace.reader import table_to_pandas

    a = pa.chunked_array([pa.array([1, None, 3], pa.int64()), pa.array([None, 5], pa.int64())])
    b = pa.chunked_array([pa.array([7, 8, None], pa.int32()), pa.array([9, None], pa.int32())])
    full = pa.chunked_array([pa.array([1, 2, 3, 4, 5], pa.int64())])
    t = pa.table({"ts_ns": full, "corr_id": a, "stream": b, "x": pa.array([0.5] * 5)})
    got = table_to_pandas(t)
    assert list(got.columns) == ["ts_ns", "corr_id", "stream", "x"]
    assert str(got["corr_id"].dtype) == "Int64" and str(got["stream"].dtype) == "Int32"
    assert got["corr_id"].isna().tolist() == [False, True, False, True, False]
    assert got["corr_id"].dropna().tolist() == [1, 3, 5]
    assert got["stream"].isna().tolist() == [False, False, True, False, True]
    assert got["stream"].dropna().tolist() == [7, 8, 9]
    assert got["ts_ns"].dtype.kind == "i"  # a required int: numpy
    ref = t.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype(),
                                    pa.int32(): pd.Int32Dtype()}.get)
    ref["ts_ns"] = ref["ts_ns"].array.to_numpy()
    pd.testing.assert_frame_equal(got, ref)
