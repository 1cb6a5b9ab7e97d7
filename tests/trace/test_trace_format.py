from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hermes
from hermes.errors import OutputError, TraceFormatError
from hermes.trace import RankedTraceWriter, TraceMeta, TraceWriter, write_trace
from hermes.trace.schema import COLUMN_NAMES
from hermes.trace.validate import validate
from tests.tracegen import ev, events


def small() -> dict:
    return events(
        ev("step", "ProfilerStep#1", 0, 1000, step=1),
        ev("launch", "cudaLaunchKernel", 100, 50, corr_id=7, step=1),
        ev("kernel", "gemm", 200, 300, corr_id=7, stream=7, unit="sm", flops=1e6, bytes=4096,
           step=1, args=json.dumps({"grid": [1, 2, 3]})),
        ev("counter", "queue_depth", 500, 0, lane="queue", lane_kind="counter", value=3.0),
    )


def test_round_trip_single_file(tmp_path):
    path = tmp_path / "run.parquet"
    write_trace(path, small(), TraceMeta(source="synthetic", device={"name": "x"}))
    t = hermes.load(path)
    assert list(t.events.columns) == list(COLUMN_NAMES)
    assert t.events["ts_ns"].tolist() == [0, 100, 200, 500]
    assert t.events["dur_ns"].tolist() == [1000, 50, 300, 0]
    assert t.events["kind"].astype(str).tolist() == ["step", "launch", "kernel", "counter"]
    assert t.events["corr_id"].tolist()[1:3] == [7, 7]
    assert t.events["corr_id"].isna().tolist() == [True, False, False, True]
    assert t.events["flops"].iloc[2] == 1e6
    assert json.loads(t.events["args"].iloc[2]) == {"grid": [1, 2, 3]}
    assert t.meta.source == "synthetic" and t.meta.device == {"name": "x"}
    assert t.meta.ranks == (0,)
    assert t.events["ts_ns"].dtype == np.int64


def test_projection_and_rank_filter_on_directory(tmp_path):
    rows = [ev("kernel", f"k{r}", 10 * r, 5, rank=r) for r in range(4)]
    out = tmp_path / "trace"
    with RankedTraceWriter(out, TraceMeta(source="synthetic")) as w:
        w.write(events(*rows))
    assert sorted(p.name for p in out.iterdir()) == [f"rank-0000{r}.parquet" for r in range(4)]
    t = hermes.load(out, columns=["rank", "name", "ts_ns"], ranks=[1, 3])
    assert list(t.events.columns) == ["rank", "name", "ts_ns"]
    assert t.events["rank"].tolist() == [1, 3]
    assert t.events["name"].astype(str).tolist() == ["k1", "k3"]
    assert t.meta.ranks == (1, 3)


def test_streaming_writer_flushes_row_groups(tmp_path):
    path = tmp_path / "big.parquet"
    with TraceWriter(path, TraceMeta(source="synthetic"), row_group_rows=1000) as w:
        for i in range(5):
            n = 700
            w.write({"rank": np.zeros(n, np.int32), "lane": ["stream 1"] * n,
                     "lane_kind": ["device"] * n, "kind": ["kernel"] * n,
                     "name": ["k"] * n, "ts_ns": np.arange(n) + i * n,
                     "dur_ns": np.ones(n, np.int64)})
            # nothing is visible under the final name before close
            assert not path.exists()
    pf = pq.ParquetFile(path)
    assert pf.metadata.num_rows == 3500
    assert pf.metadata.num_row_groups >= 3
    assert hermes.load(path).events["ts_ns"].tolist() == list(range(3500))


def test_failed_write_leaves_previous_file_intact(tmp_path):
    path = tmp_path / "run.parquet"
    write_trace(path, small(), TraceMeta(source="first"))
    before = path.read_bytes()
    with pytest.raises(RuntimeError):
        with TraceWriter(path, TraceMeta(source="second")) as w:
            w.write(small())
            raise RuntimeError("boom")
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.parquet"]


def test_missing_output_directory_is_clear_error(tmp_path):
    with pytest.raises(OutputError, match="does not exist"):
        TraceWriter(tmp_path / "nope" / "run.parquet")


def test_older_version_without_new_columns_loads(tmp_path):
    # An older writer that lacked the optional coll_* and value columns.
    table = pa.table({"rank": pa.array([0], pa.int32()), "lane": ["thread 1"],
                      "lane_kind": ["host"], "kind": ["host_op"], "name": ["aten::add"],
                      "ts_ns": pa.array([5], pa.int64()), "dur_ns": pa.array([3], pa.int64())},
                     metadata={"hermes.schema_version": "1"})
    pq.write_table(table, tmp_path / "old.parquet")
    t = hermes.load(tmp_path / "old.parquet")
    assert list(t.events.columns) == list(COLUMN_NAMES)
    assert t.events["coll_seq"].isna().all()
    assert validate(tmp_path / "old.parquet").ok


def test_newer_version_is_refused(tmp_path):
    path = tmp_path / "new.parquet"
    write_trace(path, small(), TraceMeta(source="x", schema_version=99))
    with pytest.raises(TraceFormatError, match="newer"):
        hermes.load(path)


def test_parquet_of_another_schema_is_refused(tmp_path):
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "other.parquet")
    with pytest.raises(TraceFormatError, match="Hermes metadata"):
        hermes.load(tmp_path / "other.parquet")


def test_validate_finds_negative_durations_and_dangling_correlations(tmp_path):
    path = tmp_path / "bad.parquet"
    write_trace(path, events(
        ev("launch", "cudaLaunchKernel", 0, 10, corr_id=1),
        ev("kernel", "ok", 20, 10, corr_id=1),
        ev("kernel", "orphan", 40, 10, corr_id=99),
        ev("host_op", "neg", 50, -5),
    ), TraceMeta(source="synthetic"))
    report = validate(path)
    assert not report.ok
    text = " ".join(report.errors)
    assert "negative dur_ns" in text and "'neg'" in text
    assert "corr_id 99" in text
    assert report.summary["kinds"] == {"host_op": 1, "kernel": 2, "launch": 1}


def test_validate_finds_negative_or_infinite_counts(tmp_path):
    path = tmp_path / "bad.parquet"
    write_trace(path, events(
        ev("kernel", "ok", 0, 10, flops=1e9, bytes=64),
        ev("kernel", "unknown", 10, 10),
        ev("kernel", "inf", 20, 10, flops=float("inf")),
        ev("kernel", "neg", 30, 10, flops=-1.0, bytes=-8),
        ev("kernel", "neg2", 40, 10, flops=-2.0),
    ), TraceMeta(source="synthetic"))
    errors = validate(path).errors
    assert len(errors) == 2, errors
    flops, nbytes = errors
    assert "3 event(s) with a negative or infinite flops, first at row 2 ('inf', flops=inf)" \
        in flops
    assert "1 event(s) with a negative or infinite bytes, first at row 3 ('neg', bytes=-8.0)" \
        in nbytes


def test_summary_counts(tmp_path):
    path = tmp_path / "run.parquet"
    write_trace(path, small(), TraceMeta(source="synthetic"))
    s = validate(path).summary
    assert s["events"] == 4 and s["ranks"] == [0]
    assert s["span_ns"] == 1000
    assert s["steps"] == {"count": 1, "median_ms": 0.001, "min_ms": 0.001, "max_ms": 0.001}


def test_validate_lists_an_unreadable_file_of_a_directory_and_checks_the_others(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for r in range(3):
        write_trace(d / f"rank-{r:05d}.parquet",
                    events(ev("kernel", "k", 0, 10, rank=r), ev("kernel", "k", 20, 10, rank=r)),
                    TraceMeta(source="synthetic", ranks=(r,)))
    bad = d / "rank-00001.parquet"
    bad.write_bytes(bad.read_bytes()[:200])  # a rank that died writing it: no footer
    report = validate(d)
    assert not report.ok
    (err,) = report.errors
    assert err.startswith(f"{bad}: not a readable Parquet file")
    assert report.summary["files"] == 2 and report.summary["ranks"] == [0, 2]
    for r in (0, 2):
        (d / f"rank-{r:05d}.parquet").unlink()
    with pytest.raises(TraceFormatError, match="not a readable Parquet file"):
        validate(d)
