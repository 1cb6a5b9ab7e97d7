"""The Kineto importer's shortcuts give what the general path gives.

Times read as doubles where that is provably exact (else as text), phases outside the fixed
list, thread names whose first event is empty, and chunks whose events all look alike.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import msgspec
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import hermes
from hermes.collectors.importers import get
from hermes.collectors.importers.kineto import reader as kineto_reader
from hermes.collectors.importers.kineto import times as kineto_times
from hermes.collectors.importers.kineto.times import float_us_to_ns, us_text_to_ns

_ANY_PLACES = st.integers(0, 6).flatmap(lambda places: st.lists(
    st.decimals(min_value=Decimal("-1e13"), max_value=Decimal("9e15"), places=places,
                allow_nan=False, allow_infinity=False), min_size=1, max_size=20))


@settings(max_examples=300, deadline=None)
@given(_ANY_PLACES)
def test_double_times_are_used_only_when_exact(values: list[Decimal]) -> None:
    texts = [str(v).encode() for v in values]
    want, _ = kineto_times.us_text_to_ns_numpy([msgspec.Raw(t) for t in texts], len(texts))
    got = float_us_to_ns(np.array([float(t) for t in texts]))
    if got is not None:  # when the doubles are trusted, they give the text's answer
        assert got[0].tolist() == want.tolist() and got[1].all()


@given(st.lists(st.decimals(min_value=Decimal("-4e12"), max_value=Decimal("4e12"), places=3,
                            allow_nan=False, allow_infinity=False), min_size=1, max_size=20))
def test_three_decimals_below_2_42_us_are_always_exact(values: list[Decimal]) -> None:
    got = float_us_to_ns(np.array([float(v) for v in values]))
    assert got is not None and got[0].tolist() == [int(v * 1000) for v in values]


def test_double_time_edges() -> None:
    # half a nanosecond and a fourth decimal cannot be told from the double: text decides
    assert float_us_to_ns(np.array([0.0005])) is None
    assert float_us_to_ns(np.array([1.2345])) is None
    assert float_us_to_ns(np.array([1.7e15])) is None  # epoch scale
    ns, present = float_us_to_ns(np.array([3605057436108.407, np.nan, -2.5]))
    assert ns.tolist() == [3605057436108407, 0, -2500] and present.tolist() == [1, 0, 1]
    assert us_text_to_ns([msgspec.Raw(b"3605057436108.407")])[0].tolist() == [ns[0]]


def _events(n: int, base: str, name: str = "op") -> list[dict]:
    return [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 2,
             "ts": float(Decimal(base) + i), "dur": 1.25} for i in range(n)]


def test_file_switches_to_text_times_mid_way(tmp_path: Path, monkeypatch: object) -> None:
    # small times first (doubles), then epoch-scale ones: that chunk and the rest as text
    monkeypatch.setattr(kineto_reader, "CHUNK_BYTES", 2048)  # type: ignore[attr-defined]
    events = _events(60, "10.125")
    events += [{"ph": "X", "cat": "cpu_op", "name": "late", "pid": 1, "tid": 2,
                "ts": 1700000000123456.789, "dur": 0.001}]
    events += _events(60, "20.5")
    # then a duration a double cannot settle (half a nanosecond): text for both from there
    events += [{"ph": "X", "cat": "cpu_op", "name": "half", "pid": 1, "tid": 2, "ts": 90.0,
                "dur": 1.2345}]
    events += _events(60, "100.75")
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events})
                   .replace("1700000000123456.8", "1700000000123456.789"))
    assert b"1700000000123456.789" in src.read_bytes() and b"1.2345" in src.read_bytes()
    get("kineto").run([src], tmp_path / "o.parquet", {})
    ev = hermes.load(tmp_path / "o.parquet").events
    late = ev[ev["name"] == "late"].iloc[0]
    assert late["ts_ns"] == 1700000000123456789 and late["dur_ns"] == 1
    half = ev[ev["name"] == "half"].iloc[0]
    assert half["ts_ns"] == 90000 and half["dur_ns"] == 1235  # a fourth decimal rounds up
    ops = ev[ev["name"] == "op"].sort_values("ts_ns")
    assert ops["ts_ns"].tolist()[:2] == [10125, 11125]
    assert ops["ts_ns"].tolist()[-1] == 159750 and set(ops["dur_ns"]) == {1250}
    assert len(ops) == 180


def test_unknown_phase_is_kept_as_other(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 1, "dur": 2},
              {"ph": "Z", "name": "zed", "pid": 1, "tid": 2, "ts": 3, "args": {"k": 1}}]
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    result = get("kineto").run([src], tmp_path / "o.parquet", {})
    assert result.unknown_kept == {"(ph Z)": 1}
    ev = hermes.load(tmp_path / "o.parquet").events.set_index("name")
    assert ev.loc["zed", "kind"] == "other" and ev.loc["zed", "ts_ns"] == 3000
    assert json.loads(ev.loc["zed", "args"]) == {"source_category": "(ph Z)", "k": 1}


def test_thread_name_first_non_empty_one_wins(tmp_path: Path) -> None:
    def meta(tid: object, name: str) -> dict:
        return {"ph": "M", "name": "thread_name", "pid": 1, "tid": tid, "args": {"name": name}}

    events = [meta(2, ""), meta(3, "worker"), meta("2", " main "), meta(2, "later"),
              meta(3, "renamed"),
              {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 1, "dur": 1},
              {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 3, "ts": 1, "dur": 1}]
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    get("kineto").run([src], tmp_path / "o.parquet", {})
    ev = hermes.load(tmp_path / "o.parquet").events.set_index("name")
    assert ev.loc["a", "lane"] == "thread 2 (main)"
    assert ev.loc["b", "lane"] == "thread 3 (worker)"


def test_unknown_category_mid_file(tmp_path: Path, monkeypatch: object) -> None:
    # known categories decode as shared strings until a chunk holds another one
    monkeypatch.setattr(kineto_reader, "CHUNK_BYTES", 2048)  # type: ignore[attr-defined]
    events = _events(50, "1") + [{"ph": "X", "cat": "my_cat", "name": "mine", "pid": 1,
                                  "tid": 2, "ts": 70, "dur": 3}] + _events(50, "100")
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    result = get("kineto").run([src], tmp_path / "o.parquet", {})
    assert result.by_source_category == {"cpu_op": 100, "my_cat": 1}
    assert result.unknown_kept == {"my_cat": 1} and result.by_kind == {"host_op": 100,
                                                                        "other": 1}
    ev = hermes.load(tmp_path / "o.parquet").events.set_index("name")
    assert json.loads(ev.loc["mine", "args"]) == {"source_category": "my_cat"}
    assert ev.loc["mine", "ts_ns"] == 70000 and ev.loc["mine", "dur_ns"] == 3000


def test_args_field_no_event_has_is_its_default_and_escaped_keys_still_count(
        tmp_path: Path) -> None:
    """A chunk whose args text lacks a field's key gets the field's default without a pass
    over the events; a key written with \\u escapes, or only nested deeper, is still read as
    the general path reads it."""
    from hermes.collectors.importers.kineto.mapping import decode_args

    args = decode_args([msgspec.Raw(b'{"correlation": 4}'), msgspec.Raw(b"{}")])
    assert args.lacks("flops") and args.lacks("external_id") and not args.lacks("correlation")
    nested = decode_args([msgspec.Raw(b'{"x": {"flops": 3}}')])
    assert not nested.lacks("flops") and np.isnan(nested[0].flops)
    escaped = decode_args([msgspec.Raw(b'{"Ext\\u0065rnal id": 9}')])
    assert not escaped.lacks("external_id") and escaped[0].external_id == 9

    def op(name: str, args: str) -> str:
        return (f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 2, '
                f'"ts": 1, "dur": 1, "args": {args}}}')

    text = ('{"traceEvents": [' + ", ".join([
        op("plain", '{"flops": 5, "External id": 3}'), op("none", "{}"),
        op("escaped", '{"fl\\u006fps": 7, "External\\u0020id": 8}')]) + "]}")
    src = tmp_path / "t.json"
    src.write_text(text)
    get("kineto").run([src], tmp_path / "o.parquet", {})
    ev = hermes.load(tmp_path / "o.parquet").events.set_index("name")
    assert ev.loc["plain", "flops"] == 5 and ev.loc["plain", "external_id"] == 3
    assert ev.loc["escaped", "flops"] == 7 and ev.loc["escaped", "external_id"] == 8
    assert np.isnan(ev.loc["none", "flops"]) and ev["external_id"].isna()["none"]
    # a chunk without any of these keys: defaults, as a pass over the events gives them
    src.write_text('{"traceEvents": [' + op("bare", '{"k": 1}') + "]}")
    get("kineto").run([src], tmp_path / "p.parquet", {})
    bare = hermes.load(tmp_path / "p.parquet").events.iloc[0]
    assert np.isnan(bare["flops"]) and bare[["external_id", "bytes", "corr_id"]].isna().all()


def test_args_decoded_from_their_joined_text_as_from_an_array(tmp_path: Path) -> None:
    """Args decoded straight from the args column's data (values end to end) equal the array
    decode; values that run together (two numbers) or are not objects take the array path,
    and a file of such args imports with them kept as written."""
    from hermes.collectors.importers.kineto.mapping import NO_INT, decode_args

    def both(texts: list[bytes]) -> tuple[list, list]:
        raws = [msgspec.Raw(t) for t in texts]
        got, want = decode_args(raws, b"".join(texts)), decode_args(raws)
        # compared as JSON: NaN (an absent float) is never equal to itself as a field
        assert msgspec.json.encode(got) == msgspec.json.encode(want)
        return list(got), list(want)

    got, _ = both([b'{"correlation": 4, "stream": 7}', b"{}", b'{\n "External id": 9}'])
    assert got[0].correlation == 4 and got[0].stream == 7 and got[2].external_id == 9
    got, _ = both([b"1", b"2"])  # run together: '12', one value and no object
    assert len(got) == 2
    got, _ = both([b'{"correlation": 1}', b'"text"', b"[3]"])  # tolerant path
    assert got[0].correlation == 1 and got[1].correlation == got[2].correlation == NO_INT

    def op(name: str, args: str) -> str:
        return (f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 2, '
                f'"ts": 1, "dur": 1, "args": {args}}}')

    src = tmp_path / "t.json"
    src.write_text('{"traceEvents": [' + ", ".join([
        op("a", "1"), op("b", "2"), op("c", '{"correlation": 5}')]) + "]}")
    get("kineto").run([src], tmp_path / "o.parquet", {})
    ev = hermes.load(tmp_path / "o.parquet").events.set_index("name")
    # args that are not objects are stored wrapped (docs/trace-format.md, issue 38)
    assert ev["args"].tolist() == ['{"value": 1}', '{"value": 2}', '{"correlation": 5}']
    assert ev.loc["c", "corr_id"] == 5 and ev[["corr_id"]].isna()["corr_id"].tolist() == \
        [True, True, False]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), max_size=40),
       st.integers(-2 ** 63, 2 ** 63 - 200_000), st.sampled_from([1, 7, 1000, 2 ** 40]))
def test_factorize_is_np_unique(big: list[int], base: int, step: int) -> None:
    """Lane parts are coded through a presence table when their values span a small range
    (thread ids), by a sort otherwise: either way what np.unique gives."""
    from hermes.collectors.importers.kineto.lanes import factorize

    near = [base + (i % 5) * step for i in range(len(big) + 3) if base + (i % 5) * step < 2 ** 63]
    for values in (np.array(big, np.int64), np.array(near, np.int64),
                   np.array(big + near, np.int64)):
        uniq, inverse = factorize(values)
        want_u, want_i = np.unique(values, return_inverse=True)
        assert uniq.dtype == np.int64
        assert uniq.tolist() == want_u.tolist() and inverse.tolist() == want_i.ravel().tolist()


def test_args_of_a_few_events_are_what_decoding_every_event_gives() -> None:
    """Only the hot args fields are decoded for every event; the others, for the events that
    read them, come out as decoding every event's args gives them: also where another event's
    field of an unexpected type makes that read all of them tolerantly (a Seq written as text
    is then a number, a numeric group name text)."""
    from hermes.collectors.importers.kineto.mapping import decode_args, decode_hot_args

    texts = [b'{"correlation": 1, "Seq": "7", "dtype": "Float", "In msg nelems": 4}',
             b'{"correlation": 2, "dtype": 5, "stream": 3}', b'{"Seq": 3, "flops": 2}',
             b'{"Process Group Name": 0, "direction": "HOST_TO_DEVICE", "size": 64}']
    for chosen in ([0, 1, 2, 3], [0, 2, 3], [2, 3], [1, 2]):
        raws = [msgspec.Raw(texts[i]) for i in chosen]
        joined = b"".join(raws)
        hot = decode_hot_args(raws, joined)
        every = decode_args(raws, joined)
        for rows in ([0], [len(raws) - 1], list(range(len(raws))), []):
            got = hot.some(np.array(rows, np.int64))
            assert [msgspec.json.encode(a) for a in got] == \
                [msgspec.json.encode(every[i]) for i in rows], (chosen, rows)
        for f in ("correlation", "stream", "flops"):
            assert [getattr(a, f) for a in hot] == [getattr(a, f) for a in every] or \
                f == "flops"  # NaN != NaN
    tolerant = decode_args([msgspec.Raw(t) for t in texts])
    assert tolerant[0].seq == 7  # the case the hot path must not get wrong
