"""Ascend importer on tiny hand-made inputs: merging kernel_details into trace_view, directory
layouts (rank, device), unknown categories kept, and malformed input rejected with the line or
byte offset and no output left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import hermes
from hermes.collectors.importers import detect, get
from hermes.collectors.importers.ascend.common import us_to_ns
from hermes.errors import ImportFormatError
from hermes.trace.validate import validate

PY, CANN, HW, OV, ODD = 10, 20, 30, 40, 50


def _meta(pid: int, name: str, tid: int | None = None, tname: str | None = None) -> list[dict]:
    out = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}]
    if tid is not None:
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                    "args": {"name": tname}})
    return out


def _trace() -> list[dict]:
    """One step: op aten::mm (host) -> aclnnMm launch (CANN) -> MatMul_1 on stream 2;
    an overlap-analysis span; a process Hermes does not know; an unknown task type."""
    return [
        *_meta(PY, "Python"), *_meta(CANN, "CANN"), *_meta(HW, "Ascend Hardware", 2, "Stream 2"),
        *_meta(OV, "Overlap Analysis", 0, "Computing"), *_meta(ODD, "Mystery Unit"),
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#7", "pid": PY, "tid": 1,
         "ts": "100.000", "dur": 50.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": PY, "tid": 1,
         "ts": "101.000", "dur": 10.0},
        {"ph": "X", "name": "AscendCL@aclnnMm", "pid": CANN, "tid": 1, "ts": "102.5005",
         "dur": 3.0, "args": {"level": "acl"}},
        {"ph": "X", "name": "AscendCL@aclrtSynchronizeDevice", "pid": CANN, "tid": 1,
         "ts": "120", "dur": 20.0},
        {"ph": "X", "name": "MatMul_1", "pid": HW, "tid": 2, "ts": "110.250", "dur": 5.5,
         "args": {"Task Type": "AI_CORE", "Stream Id": 2}},
        {"ph": "X", "name": "Weird_1", "pid": HW, "tid": 2, "ts": "116", "dur": 1,
         "args": {"Task Type": "WEIRD_TASK", "Stream Id": 2}},
        {"ph": "X", "name": "Computing", "pid": OV, "tid": 0, "ts": "110.250", "dur": 5.5},
        {"ph": "X", "cat": "mystery", "name": "thing", "pid": ODD, "tid": 9, "ts": "130",
         "dur": 1},
        {"ph": "s", "cat": "HostToDevice", "id": "77", "name": "HostToDevice77", "pid": CANN,
         "tid": 1, "ts": "103"},
        {"ph": "f", "cat": "HostToDevice", "id": "77", "name": "HostToDevice77", "pid": HW,
         "tid": 2, "ts": "110.250", "bp": "e"},
        {"ph": "s", "cat": "async_npu", "id": 5, "name": "torch_to_npu", "pid": PY, "tid": 1,
         "ts": "101.000"},
        {"ph": "f", "cat": "async_npu", "id": 5, "name": "torch_to_npu", "pid": HW, "tid": 2,
         "ts": "110.250", "bp": "e"},
    ]


KD_HEADER = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),"
             "Duration(us),Wait Time(us),Block Dim,Input Shapes,aic_mac_ratio,aiv_vec_ratio\n")
# 0.6 µs after the trace_view task: the same task. The Cube pipe is idle -> vector-only.
KD_ROW = '7,1,11,2,MatMul_1,MatMul,AI_CORE,110.8502,5.5,0,8,"""4,8;8,4""",0,0.5\n'
KD_EXTRA = '7,1,12,2,Add_2,Add,AI_VECTOR_CORE,200,1.25,0,4,"""4,4""",0,0.3\n'


def _write(d: Path, trace: list[dict] | None = None, kd: str | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    if trace is not None:
        (d / "trace_view.json").write_text(json.dumps(trace))
    if kd is not None:
        (d / "kernel_details.csv").write_text(kd)
    return d


def _load(out: Path) -> pd.DataFrame:
    assert validate(out).errors == []
    ev = hermes.load(out).events
    for c in ("kind", "lane", "lane_kind", "name", "unit"):
        ev[c] = ev[c].astype(object)
    return ev


def test_us_to_ns_is_exact_and_rounds_half_up() -> None:
    ns, bad = us_to_ns(["1704161511420306.491", "0.0005", "12.77012757357446", 1.5, "-2.25",
                        "1e-05", "x", "7."])
    assert ns[:6].tolist() == [1704161511420306491, 1, 12770, 1500, -2250, 0]
    assert ns[7] == 7000
    assert bad.tolist() == [False] * 6 + [True, False]


def test_kernel_details_enriches_trace_view_and_links(tmp_path: Path) -> None:
    src = _write(tmp_path / "in", _trace(), KD_HEADER + KD_ROW + KD_EXTRA)
    res = get("ascend").run([src], tmp_path / "t.parquet", {})
    ev = _load(res.out)
    mm = ev[ev["name"] == "MatMul_1"]
    assert len(mm) == 1                           # enriched, not duplicated
    row = mm.iloc[0]
    assert row["ts_ns"] == 110250 and row["dur_ns"] == 5500
    assert row["unit"] == "vector"                # AI_CORE with aic_mac_ratio 0
    args = json.loads(row["args"])
    assert args["block_dim"] == 8 and args["input_shapes"] == "4,8;8,4"
    assert args["Task Type"] == "AI_CORE" and row["step"] == 7
    launch = ev[ev["name"] == "AscendCL@aclnnMm"].iloc[0]
    assert launch["kind"] == "launch" and launch["ts_ns"] == 102501
    assert row["corr_id"] == launch["corr_id"]
    op = ev[ev["name"] == "aten::mm"].iloc[0]
    assert op["external_id"] == row["external_id"] == launch["external_id"]
    add = ev[ev["name"] == "Add_2"].iloc[0]       # no timeline match: its own kernel event
    assert add["kind"] == "kernel" and add["lane"] == "stream 2" and add["unit"] == "vector"
    assert ev.loc[ev["name"] == "AscendCL@aclrtSynchronizeDevice", "kind"].iat[0] == "sync"
    step = ev[ev["kind"] == "step"].iloc[0]
    assert step["step"] == 7 and step["lane_kind"] == "host"
    ov = ev[ev["lane"] == "overlap analysis"].iloc[0]
    assert ov["kind"] == "marker" and json.loads(ov["args"])["category"] == "Computing"


def test_unknown_categories_are_kept_and_counted(tmp_path: Path) -> None:
    src = _write(tmp_path / "in", _trace())
    res = get("ascend").run([src / "trace_view.json"], tmp_path / "t.parquet", {})
    ev = _load(res.out)
    other = ev[ev["kind"] == "other"].set_index("name")
    assert sorted(other.index) == ["Weird_1", "thing"]
    assert json.loads(other.loc["thing", "args"])["source_category"] == \
        "trace_view/Mystery Unit/mystery"
    assert json.loads(other.loc["Weird_1", "args"])["source_category"] == \
        "trace_view/Ascend Hardware/WEIRD_TASK"
    assert res.unknown_kept == {"trace_view/Mystery Unit/mystery": 1,
                                "trace_view/Ascend Hardware/WEIRD_TASK": 1}
    assert res.by_kind["other"] == 2
    meta = hermes.load(res.out).meta
    assert meta.import_summary["unknown_kept_as_other"] == res.unknown_kept


def test_ascend_pt_directory_gives_rank_and_device(tmp_path: Path) -> None:
    pt = tmp_path / "node1_1234_20250101_ascend_pt"
    out_dir = _write(pt / "ASCEND_PROFILER_OUTPUT", _trace())
    (pt / "profiler_info_3.json").write_text(json.dumps(
        {"config": {}, "start_info": {}, "device": "Ascend910B3"}))
    (out_dir / "step_trace_time.csv").write_text(
        "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,"
        "Bubble,Communication(Not Overlapped and Exclude Receive),Preparing\n"
        "7,30,5,1,6,15,50,0,5,2\n8,20,0,0,0,10,30,0,0,1\n")
    for p in (pt, out_dir, tmp_path):
        assert detect(p) is get("ascend")
    res = get("ascend").run([pt], tmp_path / "out", {})   # a directory: per-rank files
    assert res.ranks == (3,)
    assert (tmp_path / "out" / "rank-00003.parquet").is_file()
    tr = hermes.load(tmp_path / "out")
    assert tr.meta.device["name"] == "ascend910b"
    ev = tr.events
    steps = ev[ev["kind"].astype(str) == "step"].sort_values("step")
    # step 7 is in the timeline: enriched with the breakdown; step 8 is not: added.
    assert steps["step"].tolist() == [7, 8]
    s7 = json.loads(steps["args"].iat[0])
    assert s7["computing_ns"] == 30000 and s7["free_ns"] == 15000
    assert steps["ts_ns"].iat[0] == 100000 and steps["dur_ns"].iat[0] == 50000
    assert steps["dur_ns"].iat[1] == 30000 and json.loads(steps["args"].iat[1])["ts_synthetic"]


def test_device_option_and_unknown_device_warning(tmp_path: Path) -> None:
    src = _write(tmp_path / "in", _trace())
    res = get("ascend").run([src], tmp_path / "a.parquet", {"device": "ascend910a"})
    assert hermes.load(res.out).meta.device["name"] == "ascend910a" and not res.warnings
    res = get("ascend").run([src], tmp_path / "b.parquet", {})
    assert hermes.load(res.out).meta.device == {} and "device" in res.warnings[0]


def _fails(tmp_path: Path, src: Path, *needles: str) -> None:
    out = tmp_path / "out.parquet"
    before = set(tmp_path.iterdir())
    with pytest.raises(ImportFormatError) as info:
        get("ascend").run([src], out, {})
    msg = str(info.value)
    for n in needles:
        assert n in msg, msg
    assert str(src) in msg
    assert set(tmp_path.iterdir()) == before     # no partial output, no temp file


def test_malformed_csv_row_names_its_line(tmp_path: Path) -> None:
    d = _write(tmp_path / "a", kd=KD_HEADER + KD_EXTRA + KD_ROW.replace(",0,0.5", ",0,0.5,9"))
    _fails(tmp_path, d / "kernel_details.csv", "line 3", "15 fields", "14")
    d = _write(tmp_path / "b", kd=KD_HEADER + KD_EXTRA + KD_EXTRA.replace(",200,", ",2x0,"))
    _fails(tmp_path, d / "kernel_details.csv", "line 3", "Start Time(us)", "'2x0'")


def test_bad_csv_header_is_rejected(tmp_path: Path) -> None:
    d = _write(tmp_path / "a", kd="Foo,Bar\n1,2\n")
    _fails(tmp_path, d / "kernel_details.csv", "line 1", "'Name'")


def test_truncated_json_names_the_offset(tmp_path: Path) -> None:
    text = json.dumps(_trace())
    d = tmp_path / "a"
    d.mkdir()
    (d / "trace_view.json").write_text(text[:700])
    _fails(tmp_path, d / "trace_view.json", "byte offset 700", "truncated")
    (d / "trace_view.json").write_text(text.replace('"110.250"', '"soon"', 1))
    bad = next(i for i, e in enumerate(_trace()) if e.get("ts") == "110.250")
    _fails(tmp_path, d / "trace_view.json", f"event #{bad}", "'soon'")
    comm = tmp_path / "c"
    comm.mkdir()
    (comm / "communication.json").write_text('{"step1": {"collective": {"op@g": '
                                             '{"Communication Time Info": {}}}}}')
    _fails(tmp_path, comm / "communication.json", "Start Timestamp(us)", "'step1'")


def test_unknown_source_is_a_usage_error(tmp_path: Path) -> None:
    from hermes.errors import UsageError

    (tmp_path / "notes.txt").write_text("x")
    assert detect(tmp_path / "notes.txt") is None or detect(tmp_path / "notes.txt").name != "ascend"
    with pytest.raises(UsageError):
        get("ascend").run([tmp_path / "notes.txt"], tmp_path / "o.parquet", {})


def _comm_record(start_us: float, elapse_ms: float, hccs_mb: float, rdma_mb: float) -> dict:
    return {"Communication Time Info": {"Start Timestamp(us)": start_us,
                                        "Elapse Time(ms)": elapse_ms, "Transit Time(ms)": 0.5,
                                        "Wait Time(ms)": 0.125, "Synchronization Time(ms)": 0.1},
            "Communication Bandwidth Info": {
                "HCCS": {"Transit Size(MB)": hccs_mb, "Bandwidth(GB/s)": 20.0,
                         "Size Distribution": {"0.5": [2, 0.25]}},
                "PCIE": {"Transit Size(MB)": 0.25, "Bandwidth(GB/s)": 5.0},
                "RDMA": {"Transit Size(MB)": rdma_mb, "Bandwidth(GB/s)": 10.0}}}


def test_per_rank_communication_json(tmp_path: Path) -> None:
    data = {"step4": {
        "collective": {"hcom_allReduce__7_0@grp": _comm_record(1000.5, 2.0, 1.5, 2.0),
                       "hcom_allReduce__7_1@grp": _comm_record(900.0, 1.0, 1.0, 0.0),
                       "Total Op Info": _comm_record(900.0, 3.0, 2.5, 2.0)},
        "p2p": {"hcom_send__3_0@pp": _comm_record(1500.0, 0.5, 0.0, 4.0)}}}
    f = tmp_path / "communication.json"
    f.write_text(json.dumps(data))
    res = get("ascend").run([f], tmp_path / "t.parquet", {"rank": 5})
    ev = _load(res.out).sort_values("ts_ns")
    assert ev["name"].tolist() == ["hcom_allReduce__7_1", "hcom_allReduce__7_0",
                                   "hcom_send__3_0"]       # Total Op Info skipped
    assert set(ev["rank"]) == {5} and set(ev["step"]) == {4}
    assert ev["coll_group"].astype(str).tolist() == ["grp", "grp", "pp"]
    assert ev["coll_seq"].tolist() == [0, 1, 0]
    # no SDMA entry: HCCS + PCIE (+ RDMA), MB = 10^6 B
    assert ev["coll_bytes"].tolist() == [1_250_000, 3_750_000, 4_250_000]
    first = ev.iloc[1]
    assert first["ts_ns"] == 1_000_500 and first["dur_ns"] == 2_000_000
    args = json.loads(first["args"])
    assert args["comm_type"] == "collective" and args["wait_ns"] == 125_000
    assert args["size_distribution"]["HCCS"] == {"500000": [2, 250_000]}
    assert hermes.load(res.out).meta.import_summary["skipped"] == {"total_op_info": 1}
    data["step4"]["p2p"]["hcom_send__3_0@pp"]["Communication Bandwidth Info"]["HCCS"][
        "Size Distribution"] = {"big": [1, 2]}
    f.write_text(json.dumps(data))
    with pytest.raises(ImportFormatError, match="hcom_send__3_0@pp"):
        get("ascend").run([f], tmp_path / "u.parquet", {})
    assert not (tmp_path / "u.parquet").exists()


def test_hccl_timeline_enriched_by_communication_json(tmp_path: Path) -> None:
    hccl = 60
    trace = [
        *_meta(hccl, "HCCL"),
        {"ph": "M", "name": "thread_name", "pid": hccl, "tid": 1,
         "args": {"name": "Group hccl_world_group Communication"}},
        {"ph": "M", "name": "thread_name", "pid": hccl, "tid": 2, "args": {"name": "Plane 0"}},
        {"ph": "X", "name": "hcom_allReduce__7_0", "pid": hccl, "tid": 1, "ts": "1000.5",
         "dur": 2000.0},
        {"ph": "X", "name": "Notify_Wait", "pid": hccl, "tid": 2, "ts": "1001", "dur": 5.0},
        {"ph": "X", "name": "Memcpy", "pid": hccl, "tid": 2, "ts": "1010", "dur": 50.0,
         "args": {"size(Byte)": 4096}},
    ]
    d = _write(tmp_path / "in", trace)
    # 0.4 µs later than the timeline's start: the same collective.
    (d / "communication.json").write_text(json.dumps(
        {"step1": {"collective": {"hcom_allReduce__7_0@grp": _comm_record(1000.9, 2.0, 1.5,
                                                                           2.0)}}}))
    res = get("ascend").run([d], tmp_path / "t.parquet", {})
    ev = _load(res.out).set_index("name")
    assert len(ev) == 3                                   # merged, not duplicated
    coll = ev.loc["hcom_allReduce__7_0"]
    assert coll["kind"] == "collective" and coll["lane_kind"] == "link"
    assert coll["lane"] == "Group hccl_world_group Communication"
    assert coll["ts_ns"] == 1_000_500                     # the timeline's own time wins
    assert coll["coll_group"] == "grp" and coll["coll_bytes"] == 3_750_000
    assert json.loads(coll["args"])["wait_ns"] == 125_000 and coll["step"] == 1
    assert ev.loc["Notify_Wait", "kind"] == "sync" and ev.loc["Memcpy", "kind"] == "memcpy_d2d"
    assert ev.loc["Memcpy", "bytes"] == 4096 and ev.loc["Memcpy", "unit"] == "link"


def test_profile_directories_without_rank_are_flagged(tmp_path: Path) -> None:
    for name in ("a_ascend_pt", "b_ascend_pt"):
        _write(tmp_path / "job" / name / "ASCEND_PROFILER_OUTPUT", kd=KD_HEADER + KD_EXTRA)
    res = get("ascend").run([tmp_path / "job"], tmp_path / "t.parquet", {"device": "ascend910b"})
    assert res.ranks == (0,) and len(res.warnings) == 1 and "rank(s) [0]" in res.warnings[0]
    (tmp_path / "job" / "b_ascend_pt" / "profiler_info_1.json").write_text("{}")
    res = get("ascend").run([tmp_path / "job"], tmp_path / "u.parquet", {"device": "ascend910b"})
    assert res.ranks == (0, 1) and res.warnings == ()
    empty = tmp_path / "raw_ascend_pt"
    empty.mkdir()
    from hermes.errors import UsageError

    with pytest.raises(UsageError, match="ASCEND_PROFILER_OUTPUT"):
        get("ascend").run([empty], tmp_path / "v.parquet", {})
