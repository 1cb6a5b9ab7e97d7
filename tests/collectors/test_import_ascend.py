"""Ascend importer on the real msprof-analyze fixtures (tests/data/ascend): every file imports
alone and together, validates, and its per-kind counts equal counts computed here from the raw
JSON/CSV with the standard library."""

from __future__ import annotations

import csv
import json
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pandas as pd
import pytest

import hermes
from hermes.collectors.importers import detect, get
from hermes.trace.validate import validate
from tests.conftest import DATA as TEST_DATA

DATA = TEST_DATA / "ascend"
FILES = ("trace_view.json", "kernel_details_older_cann.csv", "kernel_details_newer_cann.csv",
         "cluster_communication.json", "cluster_step_trace_time.csv")


def _ns(us: str | float, scale: int = 1000) -> int:
    d = Decimal(repr(us) if isinstance(us, float) else str(us).strip()) * scale
    return int(d.to_integral_value(rounding=ROUND_HALF_UP))


def _import(tmp_path: Path, *names: str, out_name: str = "t.parquet"
            ) -> tuple[pd.DataFrame, object]:
    out = tmp_path / out_name
    srcs = [DATA / n for n in names] if names else [DATA]
    res = get("ascend").run(srcs, out, {})
    errors = validate(out).errors
    if not names:  # the fixtures come from different runs: one on the epoch, one from zero,
        # which validate rightly reports as a span of decades
        errors = [e for e in errors if "days; no training run" not in e]
    assert errors == []
    tr = hermes.load(out)
    ev = tr.events
    for c in ("kind", "lane", "lane_kind", "name", "unit"):
        ev[c] = ev[c].astype(object)
    assert res.events == len(ev)
    return ev, res


@pytest.fixture(scope="module")
def raw_trace() -> list[dict]:
    return json.loads((DATA / "trace_view.json").read_text())


@pytest.mark.parametrize("name", FILES)
def test_each_file_is_detected_and_imports_alone(tmp_path: Path, name: str) -> None:
    assert detect(DATA / name) is get("ascend")
    ev, res = _import(tmp_path, name)
    assert len(ev) > 0 and res.unknown_kept == {}


def test_trace_view_counts_match_raw_json(tmp_path: Path, raw_trace: list[dict]) -> None:
    ev, res = _import(tmp_path, "trace_view.json")
    procs = {e["pid"]: e["args"]["name"] for e in raw_trace
             if e["ph"] == "M" and e["name"] == "process_name"}
    x = [e for e in raw_trace if e["ph"] == "X"]
    by_proc = Counter(procs[e["pid"]] for e in x)
    assert len(ev) == len(x)
    steps = sum(1 for e in x if e["name"].startswith("ProfilerStep#"))
    cpu_ops = sum(1 for e in x if e.get("cat") == "cpu_op")
    queue = sum(1 for e in x if e.get("cat") in ("enqueue", "dequeue"))
    kinds = Counter(ev["kind"])
    assert kinds["step"] == steps == 1
    assert kinds["host_op"] == cpu_ops - steps
    assert (ev["lane"] == "overlap analysis").sum() == by_proc["Overlap Analysis"]
    assert kinds["marker"] == by_proc["Overlap Analysis"]
    cats = Counter(json.loads(a)["category"] for a in ev.loc[ev["kind"] == "marker", "args"])
    assert cats == Counter(e["name"] for e in x if procs[e["pid"]] == "Overlap Analysis")
    dev = ev[ev["lane"].str.startswith("stream ")]
    assert len(dev) == by_proc["Ascend Hardware"] == kinds["kernel"]
    assert set(dev["lane_kind"]) == {"device"} and set(dev["stream"]) == {3}
    ai_cpu = sum(1 for e in x if e.get("args", {}).get("Task Type") == "AI_CPU")
    assert (dev["unit"] == "ai_cpu").sum() == ai_cpu == 2
    cann = {"launch", "runtime", "sync", "tiling", "compile", "alloc"}
    assert sum(kinds[k] for k in cann) == by_proc["CANN"] + queue
    sync_names = ev.loc[ev["kind"] == "sync", "name"]
    assert sync_names.str.contains("Synchronize|aclrtMemcpy").all()
    assert res.by_source_category["trace_view/CANN"] == by_proc["CANN"]


def test_trace_view_times_are_exact_ns(tmp_path: Path, raw_trace: list[dict]) -> None:
    ev, _ = _import(tmp_path, "trace_view.json")
    first = raw_trace[0]
    row = ev[(ev["name"] == first["name"]) & (ev["ts_ns"] == _ns(first["ts"]))]
    assert len(row) == 1 and row["dur_ns"].iat[0] == _ns(first["dur"])
    assert row["ts_ns"].iat[0] == 1704161511420306491


def _enclosing_cann(raw: list[dict], flow: dict) -> dict:
    t = Decimal(flow["ts"])
    cands = [e for e in raw if e["ph"] == "X" and e["pid"] == flow["pid"]
             and e["tid"] == flow["tid"] and Decimal(e["ts"]) <= t
             <= Decimal(e["ts"]) + Decimal(str(e["dur"]))]
    assert cands, flow
    return max(cands, key=lambda e: Decimal(e["ts"]))


def test_corr_ids_point_at_host_launches(tmp_path: Path, raw_trace: list[dict]) -> None:
    ev, _ = _import(tmp_path, "trace_view.json")
    starts = {str(e["id"]): e for e in raw_trace if e["ph"] == "s" and e["cat"] == "HostToDevice"}
    ends = [e for e in raw_trace if e["ph"] == "f" and e["cat"] == "HostToDevice"]
    key = ev.set_index(["lane", "ts_ns"])
    checked = 0
    for f in ends[:60]:  # brute force is quadratic; 60 pairs cover many launches
        launch = _enclosing_cann(raw_trace, starts[str(f["id"])])
        task = key.loc[(f"stream {f['tid']}", _ns(f["ts"]))]
        host = ev[(ev["lane"] == f"thread {launch['tid']}") & (ev["ts_ns"] == _ns(launch["ts"]))
                  & (ev["name"] == launch["name"])]
        assert len(host) == 1 and host["kind"].iat[0] == "launch"
        assert int(task["corr_id"]) == int(host["corr_id"].iat[0])
        checked += 1
    assert checked == 60
    with_corr = ev[ev["corr_id"].notna()]
    launches = with_corr[with_corr["lane_kind"] == "host"]
    assert set(launches["kind"]) == {"launch"}
    tasks = with_corr[with_corr["lane_kind"] == "device"]
    assert len(tasks) == len(ends)
    assert set(tasks["corr_id"]) <= set(launches["corr_id"])
    # async_npu: the operator and its device tasks share external_id
    ops = ev[(ev["kind"] == "host_op") & ev["external_id"].notna()]
    assert set(tasks["external_id"].dropna()) <= set(ops["external_id"])


@pytest.mark.parametrize("name", ["kernel_details_older_cann.csv",
                                  "kernel_details_newer_cann.csv"])
def test_kernel_details_counts_and_units(tmp_path: Path, name: str) -> None:
    rows = list(csv.DictReader((DATA / name).open(newline="")))
    ev, _ = _import(tmp_path, name)
    assert len(ev) == len(rows)
    core = Counter(r["Accelerator Core"] for r in rows)
    units = Counter(ev["unit"].fillna("none"))
    assert units["vector"] == core["AI_VECTOR_CORE"]
    assert units["mix"] == core["MIX_AIC"] + core["MIX_AIV"]
    assert units["ai_cpu"] == core["AI_CPU"]
    assert units["cube"] == core["AI_CORE"]  # every AI_CORE row here has Cube MAC work
    assert (ev["kind"] == "collective").sum() == core["HCCL"]
    assert set(ev.loc[ev["kind"] == "collective", "lane"]) <= {"hccl"}
    r0 = rows[0]
    first = ev[(ev["name"] == r0["Name"]) & (ev["ts_ns"] == _ns(r0["Start Time(us)"]))]
    assert len(first) == 1
    assert first["dur_ns"].iat[0] == _ns(r0["Duration(us)"])
    args = json.loads(first["args"].iat[0])
    assert args["block_dim"] == int(r0["Block Dim"])
    assert args["input_shapes"] == r0["Input Shapes"].strip('"')
    assert first["step"].iat[0] == int(r0["Step Id"])


def test_units_of_hand_checked_rows(tmp_path: Path) -> None:
    old, _ = _import(tmp_path, "kernel_details_older_cann.csv")
    unit = dict(zip(old["name"], old["unit"], strict=True))
    assert unit["ZerosLike46"] == "vector"      # AI_VECTOR_CORE
    assert unit["MatMul91"] == "cube"           # AI_CORE, aic_mac_fp16_ratio 0.893
    assert unit["trans_Cast_5"] == "ai_cpu"     # AI_CPU
    new, _ = _import(tmp_path, "kernel_details_newer_cann.csv")
    mm = new[new["name"] == "aclnnMatmul_MatMulCommon_MatMulV2"]
    assert set(mm["unit"]) == {"cube"}
    assert json.loads(mm["args"].iat[0])["aic_mac_ratio"] == 0.824
    fa = new[new["name"].str.startswith("aclnnFlashAttentionScore_")]
    assert set(fa["unit"]) == {"mix"}           # MIX_AIC


def test_cluster_communication(tmp_path: Path) -> None:
    raw = json.loads((DATA / "cluster_communication.json").read_text())
    recs = [(op, r, info) for g in raw.values() for s in g.values()
            for op, ranks in s.items() for r, info in ranks.items()]
    ev, _ = _import(tmp_path, "cluster_communication.json")
    assert len(ev) == len(recs) == (ev["kind"] == "collective").sum()
    assert sorted(set(ev["rank"])) == [0, 1]
    row = ev[(ev["rank"] == 0) & (ev["name"] == "hcom_broadcast__501_0")].iloc[0]
    assert row["ts_ns"] == 1695054582608213000
    assert row["dur_ns"] == 121736944            # 121.73694384375 ms
    assert row["coll_bytes"] == 85312           # SDMA 0.085312 MB
    assert row["coll_group"] == "6297232067196334501"
    args = json.loads(row["args"])
    assert args["wait_ns"] == 115960642 and args["sync_ns"] == 102699834
    assert args["transit_ns"] == 8060
    assert args["bandwidth_GBps"]["HCCS"] == 2.7012
    assert args["size_distribution"]["HCCS"]["3072"] == [18, 20250]
    assert args["rank_set"] == "(0, 1)"
    seq = ev[ev["rank"] == 1].sort_values("ts_ns")["coll_seq"].tolist()
    assert seq == [0, 1]


def test_cluster_step_trace_time(tmp_path: Path) -> None:
    rows = list(csv.DictReader((DATA / "cluster_step_trace_time.csv").open(newline="")))
    ranks = [r for r in rows if r["Type"] == "rank"]
    ev, res = _import(tmp_path, "cluster_step_trace_time.csv")
    assert len(ev) == len(ranks) == (ev["kind"] == "step").sum()
    assert sorted(ev["rank"]) == [int(r["Index"]) for r in ranks]
    r3 = next(r for r in ranks if r["Index"] == "3")
    e3 = ev[ev["rank"] == 3].iloc[0]
    args = json.loads(e3["args"])
    assert args["computing_ns"] == _ns(r3["Computing"]) == 80077270
    assert args["free_ns"] == _ns(r3["Free"])
    assert e3["dur_ns"] == sum(_ns(r3[c]) for c in
                               ("Computing", "Communication(Not Overlapped)", "Free"))
    assert args["ts_synthetic"] is True
    meta = hermes.load(res.out).meta
    assert meta.import_summary["cluster_stage_rows"][0]["type"] == "stage"


def test_directory_imports_everything_together(tmp_path: Path) -> None:
    assert detect(DATA) is get("ascend")
    ev, res = _import(tmp_path)
    parts = 0
    for name in FILES:
        sub, _ = _import(tmp_path, name, out_name=f"{name}.parquet")
        parts += len(sub)
    # The fixtures come from different runs, so nothing merges: the sum of the parts.
    assert len(ev) == parts
    assert res.ranks == tuple(range(8))
    assert hermes.load(res.out).meta.source == "ascend"
