"""What the Kineto importer makes of events: exact time, steps, correlation, collectives, ranks."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hermes
from hermes.collectors.importers import get
from hermes.collectors.importers.kineto import reader as kineto_reader
from hermes.collectors.importers.kineto.times import us_text_to_ns
from hermes.errors import ImportFormatError
from hermes.trace.validate import validate
from tests.conftest import DATA

KINETO = DATA / "kineto"
H100 = ["big_matmul", "gpt_balanced", "gpt_dataloader_starved", "two_stream_prefetch"]


def write_json(path: Path, events: list[dict], **header: object) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, **header, "traceEvents": events}))
    return path


def imported(srcs: list[Path], out: Path):
    get("kineto").run(srcs, out, {})
    assert validate(out).ok, validate(out).errors
    return hermes.load(out)


def test_epoch_scale_timestamps_are_exact(tmp_path: Path) -> None:
    # 1700000000123456.789 us has 19 significant digits: a double would lose the last ones
    text = ('{"schemaVersion": 1, "traceEvents": ['
            '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, '
            '"ts": 1700000000123456.789, "dur": 12.345},'
            '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 2, '
            '"ts": 1700000000123457, "dur": 0.001},'
            '{"ph": "i", "cat": "cpu_instant_event", "name": "c", "pid": 1, "tid": 2, '
            '"ts": 1699999999999999.999, "s": "t"}]}')
    src = tmp_path / "t.json"
    src.write_text(text)
    ev = imported([src], tmp_path / "o.parquet").events.sort_values("ts_ns")
    assert ev["ts_ns"].tolist() == [1699999999999999999, 1700000000123456789, 1700000000123457000]
    assert ev["dur_ns"].tolist() == [0, 12345, 1]
    # cpu_instant_event is a Kineto category: an instant marker (its '[memory]' events: counters)
    assert ev["kind"].astype(str).tolist() == ["marker", "host_op", "host_op"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.decimals(min_value=Decimal("-1e12"), max_value=Decimal("9e15"), places=3,
                            allow_nan=False, allow_infinity=False), min_size=1, max_size=20))
def test_microsecond_text_to_ns_matches_decimal(values: list[Decimal]) -> None:
    raws = [msgspec.Raw(str(v).encode()) for v in values]
    ns, present = us_text_to_ns(raws)
    assert present.all()
    assert ns.tolist() == [int(v * 1000) for v in values]


@pytest.mark.parametrize("name", H100)
def test_step_durations_match_profiler_step_annotations(name: str, tmp_path: Path) -> None:
    src = KINETO / f"{name}.pt.trace.json.gz"
    with gzip.open(src, "rt") as fh:
        raw = json.load(fh)["traceEvents"]
    want = {int(e["name"].split("#")[1]): float(e["dur"]) for e in raw
            if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    assert sorted(want) == [3, 4, 5, 6]
    ev = imported([src], tmp_path / "o.parquet").events
    steps = ev[(ev["kind"] == "step") & (ev["lane_kind"] == "host")]
    got = {int(s): int(d) for s, d in zip(steps["step"], steps["dur_ns"], strict=True)}
    assert sorted(got) == sorted(want)
    for n, dur_us in want.items():
        assert abs(got[n] - dur_us * 1000) <= 1000


def test_device_events_take_the_step_of_their_launch(tmp_path: Path) -> None:
    ev = imported([KINETO / "two_stream_prefetch.pt.trace.json.gz"], tmp_path / "o.parquet").events
    host = ev[(ev["lane_kind"] == "host") & ev["corr_id"].notna()].set_index("corr_id")["step"]
    dev = ev[ev["kind"].isin(["kernel", "memcpy_h2d", "memset"]) & ev["corr_id"].notna()]
    assert len(dev) > 50
    assert (dev["step"].to_numpy() == host.loc[dev["corr_id"]].to_numpy()).all()
    # host events inside ProfilerStep#4 carry step 4
    win = ev[(ev["kind"] == "step") & (ev["lane_kind"] == "host") & (ev["step"] == 4)].iloc[0]
    inside = ev[(ev["lane_kind"] == "host") & (ev["ts_ns"] >= win["ts_ns"])
                & (ev["ts_ns"] < win["ts_ns"] + win["dur_ns"])]
    assert len(inside) > 10 and (inside["step"] == 4).all()
    assert set(ev["lane"].astype(str)) >= {"thread 531 (python3)", "stream 7", "stream 14"}


def test_cuda_sync_records_get_a_lane_of_their_own(tmp_path: Path) -> None:
    # CUPTI sync records carry the host call's times: never on the kernels' 'stream N' lane
    src = KINETO / "cuda_event_sync.json.gz"
    with gzip.open(src) as fh:
        raw = json.load(fh)["traceEvents"]
    want = sorted(f"stream {e['tid']} sync" for e in raw if e.get("cat") == "cuda_sync")
    ev = imported([src], tmp_path / "o.parquet").events
    sync = ev[(ev["kind"] == "sync") & (ev["lane_kind"] == "device")]
    assert sorted(sync["lane"].astype(str)) == want and len(want) == 4
    kernels = ev[ev["kind"] == "kernel"]
    assert len(kernels) and not kernels["lane"].astype(str).str.endswith(" sync").any()
    assert set(sync["stream"].dropna().astype(int)) <= {e["args"]["stream"] for e in raw
                                                        if e.get("cat") == "cuda_sync"}


def test_dangling_device_correlation_is_nulled_but_kept_in_args(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 10, "dur": 5, "args": {"correlation": 7, "External id": 3}},
        {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 20, "dur": 5,
         "args": {"correlation": 7, "External id": 3, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 30, "dur": 5,
         "args": {"correlation": 99, "stream": 7}},
        {"ph": "s", "id": 7, "pid": 1, "tid": 1, "ts": 10, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g",
         "bp": "e"},
    ]
    ev = imported([write_json(tmp_path / "t.json", events)], tmp_path / "o.parquet").events
    k1, k2 = (ev[ev["name"] == n].iloc[0] for n in ("k1", "k2"))
    assert k1["corr_id"] == 7 and k1["external_id"] == 3 and k1["stream"] == 7
    assert k1["lane"] == "stream 7" and k1["unit"] == "sm"
    assert k2["corr_id"] is pd_na() and json.loads(k2["args"])["correlation"] == 99
    assert ev[ev["name"] == "cudaLaunchKernel"].iloc[0]["kind"] == "launch"
    assert len(ev) == 3  # flow events are not events


def pd_na():
    import pandas as pd

    return pd.NA


def test_collectives_carry_size_group_and_sequence(tmp_path: Path, shared_traces: Path) -> None:
    src = shared_traces / "hta" / "nccl_parser_config" / "nccl_data.json.gz"
    with gzip.open(src, "rt") as fh:
        raw = json.load(fh)["traceEvents"]
    kernels = sorted((e for e in raw if e.get("cat") == "kernel"
                      and e["name"].startswith("ncclKernel")), key=lambda e: e["ts"])
    sizes = {"Float": 4, "BFloat16": 2, "Half": 2, "Long": 8, "Int": 4}
    want = [e["args"]["In msg nelems"] * sizes[e["args"]["dtype"]] for e in kernels]
    ev = imported([src], tmp_path / "o.parquet").events
    coll = ev[ev["kind"] == "collective"].sort_values("ts_ns")
    assert coll["coll_bytes"].tolist() == want
    assert set(coll["coll_group"].astype(str)) == {"0"}
    assert (coll["unit"] == "link").all() and (coll["lane_kind"] == "device").all()
    seq = [e["args"].get("Seq") for e in kernels]
    expected_seq = seq if all(s is not None for s in seq) else list(range(len(kernels)))
    assert coll["coll_seq"].tolist() == expected_seq


def test_two_ranks_and_collective_index_without_metadata(tmp_path: Path) -> None:
    srcs = [KINETO / "sampled_rank-0.json.gz", KINETO / "sampled_rank-1.json.gz"]
    ev = imported(srcs, tmp_path / "o.parquet").events
    assert sorted(ev["rank"].unique()) == [0, 1]
    for r in (0, 1):
        c = ev[(ev["rank"] == r) & (ev["kind"] == "collective")].sort_values("ts_ns")
        assert len(c) > 0
        assert c["coll_seq"].tolist() == list(range(len(c)))  # no Seq arg: order in time
    dup = tmp_path / "dup.parquet"
    with pytest.raises(ImportFormatError, match="rank 0 appears twice"):
        get("kineto").run([srcs[0], srcs[0]], dup, {})
    assert not dup.exists() and not list(tmp_path.glob(".dup*"))


def test_rank_falls_back_to_file_order(tmp_path: Path) -> None:
    ev0 = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]
    a = write_json(tmp_path / "a.json", ev0)
    b = write_json(tmp_path / "b.json", ev0)
    ev = imported([a, b], tmp_path / "o.parquet").events
    assert sorted(ev["rank"].tolist()) == [0, 1]


def test_chunk_cuts_inside_strings_and_args_give_the_same_trace(tmp_path: Path,
                                                                monkeypatch) -> None:
    # names and args that contain the '}, {' chunk boundary pattern
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op}}, {{{i}", "pid": 1, "tid": 1,
               "ts": 100 + i, "dur": 1, "args": {"l": [{"a": i}, {"b": "}, {"}]}}
              for i in range(400)]
    src = write_json(tmp_path / "t.json", events, deviceProperties=[{"name": "x"}, {"n": 2}])
    whole = imported([src], tmp_path / "whole.parquet").events
    monkeypatch.setattr(kineto_reader, "CHUNK_BYTES", 300)
    small = imported([src], tmp_path / "small.parquet").events
    assert len(whole) == len(small) == 400
    assert whole["name"].astype(str).tolist() == small["name"].astype(str).tolist()
    assert whole["args"].tolist() == small["args"].tolist()
    assert json.loads(small["args"].iloc[5])["l"] == [{"a": 5}, {"b": "}, {"}]


def test_device_properties_become_the_device(tmp_path: Path) -> None:
    t = imported([KINETO / "big_matmul.pt.trace.json.gz"], tmp_path / "o.parquet")
    assert t.meta.source == "kineto"
    assert t.meta.device["kineto"]["name"] == "NVIDIA H100 80GB HBM3"
    assert t.meta.device["hbm_bw_Bps"] > 1e12  # merged with the H100 device profile
    assert t.meta.extra["kineto"]["0"]["baseTimeNanoseconds"] == 1790857026000000000
    shapes = t.events[t.events["name"] == "aten::mm"]["args"]
    assert len(shapes) > 0 and "Input Dims" in json.loads(shapes.iloc[0])


def test_counters_flops_and_unknown_categories(tmp_path: Path) -> None:
    events = [{"ph": "C", "name": "Memory", "pid": 1, "tid": 1, "ts": 5,
               "args": {"Total Allocated": 1024}},
              {"ph": "X", "cat": "brand_new_cat", "name": "z", "pid": 1, "tid": 1, "ts": 6,
               "dur": 2},
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 7,
               "dur": 2, "args": {"flops": 2e9, "Input Dims": [[4, 8], [8, 16]]}}]
    ev = imported([write_json(tmp_path / "t.json", events)], tmp_path / "o.parquet").events
    c = ev[ev["kind"] == "counter"].iloc[0]
    assert c["value"] == 1024.0 and c["dur_ns"] == 0 and c["lane_kind"] == "counter"
    z = ev[ev["name"] == "z"].iloc[0]
    assert z["kind"] == "other" and json.loads(z["args"])["source_category"] == "brand_new_cat"
    assert np.isnan(ev[ev["name"] == "z"]["value"].iloc[0])
    mm = ev[ev["name"] == "aten::mm"].iloc[0]
    assert mm["flops"] == 2e9 and json.loads(mm["args"])["Input Dims"] == [[4, 8], [8, 16]]


def test_negative_or_infinite_counts_are_not_known(tmp_path: Path) -> None:
    """A FLOP or byte count below zero, past float64 (1e400: JSON has no infinity) or, for
    bytes, past int64 counts nothing: the imported event's flops / bytes are null (the args
    keep what the file said), and the trace validates."""
    def op(name: str, **args: object) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 7,
                "dur": 2, "args": args}

    events = [op("neg", flops=-3, bytes=-4), op("big", flops=-1e300, bytes=1e300),
              op("ok", flops=2e9, bytes=4096), op("zero", flops=0, bytes=0),
              op("inf", flops=7.5, bytes=8.5, correlation=9.5)]
    src = write_json(tmp_path / "t.json", events)
    src.write_text(src.read_text().replace("7.5", "1e400").replace("8.5", "-1e999")
                   .replace("9.5", "1" + "0" * 400))
    ev = imported([src], tmp_path / "o.parquet").events.set_index("name")
    gone = ["neg", "big", "inf"]
    assert ev["flops"].isna()[gone].all() and ev["bytes"].isna()[gone].all()
    assert ev.loc["inf", "args"].startswith('{"flops": 1e400, "bytes": -1e999, "correlation": 1000')
    assert (ev.loc["ok", "flops"], ev.loc["ok", "bytes"]) == (2e9, 4096)
    assert (ev.loc["zero", "flops"], ev.loc["zero", "bytes"]) == (0, 0)
    assert json.loads(ev.loc["neg", "args"]) == {"flops": -3, "bytes": -4}


def test_detect_reads_only_the_start(tmp_path: Path) -> None:
    from hermes.collectors.importers.kineto import detect

    assert detect(KINETO / "big_matmul.pt.trace.json.gz")
    plain = write_json(tmp_path / "t.json", [])
    assert detect(plain)
    other = tmp_path / "o.json"
    other.write_text('{"rows": [1, 2]}')
    assert not detect(other) and not detect(tmp_path) and not detect(tmp_path / "none.json")
    renamed = tmp_path / "t.txt"
    renamed.write_bytes(plain.read_bytes())
    assert not detect(renamed)
    # an empty traceEvents array is a valid (empty) trace
    ev = imported([plain], tmp_path / "e.parquet").events
    assert len(ev) == 0
