"""Chrome/Perfetto export: tiny hand-made traces with expected events, an independent
per-event reference exporter, exact time text, flows, streaming over row groups."""

from __future__ import annotations

import gzip
import json
import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes.trace import TraceMeta, chrome, chrome_text, open_writer, write_trace
from tests.conftest import run_cli
from tests.tracegen import ev, events


def load_json(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return json.loads(raw)


def check_structure(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """What chrome://tracing and Perfetto need: every X has pid/tid/ts/dur/name, every flow
    start has an end with its id, every (pid, tid) used is named, every pid has a name."""
    evs = doc["traceEvents"]
    assert isinstance(evs, list)
    named_threads = {(e["pid"], e["tid"]) for e in evs
                     if e["ph"] == "M" and e["name"] == "thread_name"}
    named_procs = {e["pid"] for e in evs if e["ph"] == "M" and e["name"] == "process_name"}
    for e in evs:
        if e["ph"] == "X":
            assert {"pid", "tid", "ts", "dur", "name", "cat"} <= set(e), e
            assert e["dur"] >= 0
        if e["ph"] in ("X", "i", "C", "s", "f"):
            assert (e["pid"], e["tid"]) in named_threads, e
            assert e["pid"] in named_procs
    starts = [e["id"] for e in evs if e["ph"] == "s"]
    ends = {e["id"] for e in evs if e["ph"] == "f"}
    assert len(starts) == len(set(starts))
    assert set(starts) == ends
    return evs


def export(tmp_path: Path, cols: dict[str, list[Any]], meta: TraceMeta | None = None,
           name: str = "out.json") -> tuple[list[dict[str, Any]], str]:
    src = tmp_path / "t.parquet"
    write_trace(src, cols, meta or TraceMeta(source="synthetic"))
    out = tmp_path / name
    chrome.export_chrome(src, out)
    text = (gzip.decompress(out.read_bytes()) if name.endswith(".gz") else out.read_bytes())
    return check_structure(load_json(out)), text.decode()


def of(evs: list[dict[str, Any]], ph: str) -> list[dict[str, Any]]:
    return [e for e in evs if e["ph"] == ph]


def test_tiny_trace_diff(tmp_path: Path) -> None:
    cols = events(
        ev("host_op", "aten::mm", 1000, 5000, step=3),
        ev("launch", "cudaLaunchKernel", 1_234_567, 2001, corr_id=7),
        ev("kernel", 'gemm "x"', 1_240_000, 3000, corr_id=7, stream=7, flops=1e9, unit="sm",
           args='{"grid": [1, 2]}'),
        ev("marker", "here", 1_300_000, 0),
        ev("kernel", "empty", 1_300_000, 0, lane="stream 13"),
        ev("counter", "mem", 1_300_000, 0, lane="hbm", lane_kind="counter", value=5.5),
    )
    evs, text = export(tmp_path, cols)
    assert [(e["name"], e["ts"], e["dur"], e["tid"], e["args"]) for e in of(evs, "X")] == [
        ("aten::mm", 1.0, 5.0, 1, {"step": 3}),
        ("cudaLaunchKernel", 1234.567, 2.001, 1, {"corr_id": 7}),
        ('gemm "x"', 1240.0, 3.0, 2, {"corr_id": 7, "stream": 7, "unit": "sm", "flops": 1e9,
                                      "grid": [1, 2]}),
        ("empty", 1300.0, 0.0, 3, {}),  # zero-duration task stays a complete event
    ]
    # exact decimal text, not float repr
    assert '"ts":1234.567,"dur":2.001' in text and '"ts":1.000,"dur":5.000' in text
    [inst] = of(evs, "i")
    assert (inst["name"], inst["s"], inst["ts"], inst["tid"]) == ("here", "t", 1300.0, 1)
    [ctr] = of(evs, "C")
    assert (ctr["name"], ctr["args"], ctr["tid"]) == ("mem", {"value": 5.5}, 4)
    meta = {(e["name"], e["tid"]): e["args"] for e in of(evs, "M")}
    # host thread, then streams in numeric order (7 before 13), counters last
    assert meta[("thread_name", 1)] == {"name": "thread 1"}
    assert meta[("thread_name", 2)] == {"name": "stream 7"}
    assert meta[("thread_name", 3)] == {"name": "stream 13"}
    assert meta[("thread_name", 4)] == {"name": "hbm"}
    assert [meta[("thread_sort_index", t)]["sort_index"] for t in (1, 2, 3, 4)] == [1, 2, 3, 4]
    assert meta[("process_name", 0)] == {"name": "rank 0"}
    assert meta[("process_sort_index", 0)] == {"sort_index": 0}
    [s] = of(evs, "s")
    [f] = of(evs, "f")
    assert (s["cat"], s["tid"], s["ts"]) == ("ac2g", 1, 1234.567)
    assert (f["bp"], f["tid"], f["ts"], f["id"]) == ("e", 2, 1240.0, s["id"])


def test_flows_prefer_launch_and_bind_every_device_event(tmp_path: Path) -> None:
    cols = events(
        ev("runtime", "cudaGraphLaunch_prep", 100, 10, corr_id=1),
        ev("launch", "cudaGraphLaunch", 200, 10, corr_id=1),
        ev("kernel", "k1", 300, 10, corr_id=1),
        ev("kernel", "k2", 400, 10, corr_id=1),
        ev("kernel", "orphan", 500, 10, corr_id=2),  # no host event: no arrow
        ev("launch", "l", 200, 10, corr_id=1, rank=1),  # same corr_id on another rank
        ev("memcpy_h2d", "copy", 300, 10, corr_id=1, rank=1, lane="copy 0", lane_kind="copy"),
    )
    evs, _ = export(tmp_path, cols)
    starts, ends = of(evs, "s"), of(evs, "f")
    assert sorted((e["pid"], e["ts"]) for e in starts) == [(0, 0.2), (1, 0.2)]
    assert sorted((e["pid"], e["ts"]) for e in ends) == [(0, 0.3), (0, 0.4), (1, 0.3)]
    ids = {e["pid"]: e["id"] for e in starts}
    assert ids[0] != ids[1]
    assert all(e["id"] == ids[e["pid"]] for e in ends)


def test_clock_offsets_and_exact_large_times(tmp_path: Path) -> None:
    big = 1_700_000_000_123_456_789  # beyond float64's 2**53: a float would drift
    cols = events(ev("host_op", "a", big, 1, rank=0), ev("host_op", "b", big, 999_999_999,
                                                           rank=1))
    meta = TraceMeta(source="synthetic", clock_offsets_ns={1: -2_000})
    _, text = export(tmp_path, cols, meta)
    assert '"pid":0,"tid":1,"ts":1700000000123456.789,"dur":0.001' in text
    assert '"pid":1,"tid":1,"ts":1700000000123454.789,"dur":999999.999' in text


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_us_text_is_exact(ns: int) -> None:
    [text] = chrome_text.us_text(np.array([ns], dtype=np.int64)).to_pylist()
    assert re.fullmatch(r"-?\d+\.\d{3}", text)
    assert Decimal(text) * 1000 == ns


def test_args_that_are_not_json_objects_are_kept(tmp_path: Path) -> None:
    """The writer wraps what is not an object as {"value": ...} (docs/trace-format.md); an
    object that is not valid JSON reaches the export, which keeps it as text."""
    cols = events(ev("host_op", "a", 0, 1, args="not json"),
                  ev("host_op", "b", 0, 1, args='{"bad": }'),
                  ev("host_op", "c", 0, 1, args='{"ok": "\\u00e9\\n"}'),
                  ev("host_op", "d", 0, 1, args="{}"),
                  ev("host_op", "e", 0, 1, args="[1]"))
    evs, _ = export(tmp_path, cols)
    assert [e["args"] for e in of(evs, "X")] == [
        {"value": "not json"}, {"args_text": '{"bad": }'}, {"ok": "é\n"}, {},
        {"value": [1]}]


def test_non_finite_values_become_null_and_valueless_counters_are_dropped(
        tmp_path: Path) -> None:
    cols = events(ev("kernel", "k", 0, 1, flops=float("nan")),
                  ev("counter", "c", 0, 0, lane="c", lane_kind="counter", value=float("inf")),
                  ev("counter", "c", 5, 0, lane="c", lane_kind="counter", value=None),
                  ev("counter", "c", 9, 0, lane="c", lane_kind="counter", value=2.0))
    evs, _ = export(tmp_path, cols)
    assert of(evs, "X")[0]["args"] == {}
    assert [e["args"] for e in of(evs, "C")] == [{}, {"value": 2}]


def reference(cols: dict[str, list[Any]], offsets: dict[int, int]) -> list[tuple[Any, ...]]:
    """Independent per-event oracle: (ph, pid, lane, name, ts, dur) as exact Decimals."""
    out = []
    for i in range(len(cols["name"])):
        r, kind = cols["rank"][i], cols["kind"][i]
        if kind == "counter" and cols["value"][i] is None:
            continue
        ts = Decimal(cols["ts_ns"][i] + offsets.get(r, 0)) / 1000
        dur = Decimal(cols["dur_ns"][i]) / 1000
        ph = "C" if kind == "counter" else "i" if kind == "marker" and dur == 0 else "X"
        out.append((ph, r, cols["lane"][i], cols["name"][i], ts, dur if ph == "X" else None))
    return sorted(out, key=repr)


def random_trace(seed: int, n: int) -> dict[str, list[Any]]:
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        rank = rnd.choice([0, 1, 3])
        kind = rnd.choice(["host_op", "launch", "kernel", "marker", "counter", "memcpy_h2d"])
        lane_kind = {"kernel": "device", "memcpy_h2d": "copy", "counter": "counter"}.get(
            kind, "host")
        lane = {"device": f"stream {rnd.choice([7, 13, 20])}", "copy": "copy 1",
                "counter": "queue"}.get(lane_kind, f"thread {rnd.choice([1, 2])}")
        rows.append(ev(kind, f"op{rnd.randrange(50)}", rnd.randrange(-10**6, 10**15),
                       0 if kind in ("marker", "counter") and rnd.random() < .7 else
                       rnd.randrange(10**7), rank=rank, lane=lane, lane_kind=lane_kind,
                       corr_id=(i // 2 if kind in ("launch", "kernel", "memcpy_h2d") else None),
                       value=(rnd.random() if kind == "counter" and rnd.random() < .8
                              else None)))
    return events(*rows)


@pytest.mark.parametrize("layout", ["file", "ranked"])
def test_streamed_export_matches_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           layout: str) -> None:
    monkeypatch.setattr(chrome, "BATCH_ROWS", 37)  # many batches per row group
    cols = random_trace(seed=11, n=1500)
    offsets = {1: 5_000, 3: -123}
    src = tmp_path / ("t.parquet" if layout == "file" else "tdir")
    with open_writer(src, TraceMeta(source="synthetic", clock_offsets_ns=offsets),
                     row_group_rows=200) as w:
        w.write(cols)
    out = tmp_path / "o.json.gz"
    stats = chrome.export_chrome(src, out)
    evs = check_structure(load_json(out))
    raw = gzip.decompress(out.read_bytes()).decode()
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
              if e["ph"] == "M" and e["name"] == "thread_name"}
    # Exact decimals from the raw text, in file order (json.loads would go through floats).
    times = re.findall(r'"ph":"([XiC])".*?"pid":(\d+),"tid":(\d+),"ts":(-?[\d.]+)'
                       r'(?:,"dur":([\d.]+))?', raw)
    names = [e["name"] for e in evs if e["ph"] in "XiC"]
    got = sorted(((ph, int(p), tracks[(int(p), int(t))], nm, Decimal(ts),
                   Decimal(d) if d else None)
                  for (ph, p, t, ts, d), nm in zip(times, names, strict=True)), key=repr)
    assert len(got) > 1000 and got == reference(cols, offsets)
    assert stats.events == len(got)
    # flows: one start per (rank, corr_id) that has both a host launch and a device task
    pairs = {}
    for r, k, c in zip(cols["rank"], cols["kind"], cols["corr_id"], strict=True):
        if c is not None:
            pairs.setdefault((r, c), set()).add(k == "launch")
    assert stats.flows == sum(1 for v in pairs.values() if v == {True, False}) > 10
    assert len(of(evs, "s")) == stats.flows


def test_cli_export_formats_and_gzip(tmp_path: Path) -> None:
    src = tmp_path / "t.parquet"
    write_trace(src, events(ev("host_op", "a", 0, 1000)), TraceMeta(source="synthetic"))
    code, out, err = run_cli("export", str(src), "--format", "chrome", "--out",
                             str(tmp_path / "a.json.gz"))
    assert code == 0, err
    assert "1 events" in out
    code, _, err = run_cli("export", str(src), "--format", "perfetto", "--out",
                           str(tmp_path / "b.json.gz"))
    assert code == 0, err
    assert (tmp_path / "a.json.gz").read_bytes() == (tmp_path / "b.json.gz").read_bytes()
    assert (tmp_path / "a.json.gz").read_bytes()[:2] == b"\x1f\x8b"
    code, _, err = run_cli("export", str(src), "--format", "svg", "--out",
                           str(tmp_path / "c.json"))
    assert code == 2
    assert "svg" in err and "chrome, perfetto" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c.json").exists()


def test_empty_trace_exports_valid_json(tmp_path: Path) -> None:
    evs, _ = export(tmp_path, events(ev("host_op", "a", 0, 1))
                    | {"rank": [], "lane": [], "lane_kind": [], "kind": [], "name": [],
                       "ts_ns": [], "dur_ns": []})
    assert evs == []
