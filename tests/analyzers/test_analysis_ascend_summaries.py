"""Ascend summaries without ``trace_view.json`` as evidence of the step breakdown.

A rank whose events lack a part its ``step_trace_time.csv`` reports takes its breakdown from the
summary (``from_summary``); a rank whose kernel table and collectives record every part is
analysed from them. Hand-made files with figures computed by hand, then the real msprof-analyze
fixtures in ``../shared/traces/ascend`` against figures computed here from the CSV / JSON with
the standard library and pandas.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import hermes
from hermes.advisor import advise
from hermes.analyzers.engine.run import analyze
from hermes.check.selfcheck import self_check
from hermes.collectors.importers import get
from hermes.errors import ImportFormatError
from hermes.report import render
from hermes.trace.validate import validate
from tests.conftest import SHARED_TRACES

ASCEND = SHARED_TRACES / "ascend"

PARTS = ("computation_only_pct", "overlapped_pct", "communication_only_pct", "host_bound_pct",
         "free_pct")
STEP_HEADER = ("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,"
               "Stage,Bubble,Communication(Not Overlapped and Exclude Receive)")
T0_US = 1_700_000_000_000_000  # an epoch-µs start, like the profiler's
KD_HEADER = "Step Id,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us)"


def _run(tmp: Path, *srcs: Path, name: str = "t.parquet") -> Any:
    out = tmp / name
    get("ascend").run(list(srcs), out, {})
    tr = hermes.load(out)
    a = analyze(tr)
    return a


def _rows(a: Any) -> dict[int, dict[str, Any]]:
    return {int(r["rank"]): r for r in a.to_dict()["breakdown"]["per_rank"]}


def _collective(start_us: float, elapse: float, transit: float, wait: float, sync: float,
                idle: float, hccs_mb: float, hccs_ms: float) -> dict[str, Any]:
    """One communication.json record (times in ms, sizes in MB, as the profiler writes)."""
    bw = hccs_mb / 1e3 / (hccs_ms / 1e3) if hccs_ms else 0
    return {"Communication Time Info": {
        "Start Timestamp(us)": start_us, "Elapse Time(ms)": elapse, "Transit Time(ms)": transit,
        "Wait Time(ms)": wait, "Synchronization Time(ms)": sync, "Idle Time(ms)": idle,
        "Wait Time Ratio": round(wait / (wait + transit), 4),
        "Synchronization Time Ratio": round(sync / (sync + transit), 4)},
        "Communication Bandwidth Info": {
            "HCCS": {"Transit Size(MB)": hccs_mb, "Transit Time(ms)": hccs_ms,
                     "Bandwidth(GB/s)": bw, "Large Packet Ratio": 0.0, "Size Distribution": {}},
            "RDMA": {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0,
                     "Large Packet Ratio": 0, "Size Distribution": {}}}}


def _profile(root: Path, rank: int, steps: list[str], comm: dict[str, Any] | None = None,
             kernels: list[str] | None = None, header: str = STEP_HEADER) -> Path:
    """An ``*_ascend_pt`` directory of one rank without trace_view.json."""
    pt = root / f"node_{rank}_ascend_pt"
    out = pt / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (pt / f"profiler_info_{rank}.json").write_text("{}")
    (out / "step_trace_time.csv").write_text("\n".join([header, *steps]) + "\n")
    if comm is not None:
        (out / "communication.json").write_text(json.dumps(comm))
    if kernels is not None:
        (out / "kernel_details.csv").write_text("\n".join([KD_HEADER, *kernels]) + "\n")
    return pt


# --- hand-made: a step trace alone ----------------------------------------------------------
# step 1: Computing 60 ms (10 ms of it overlapped), not-overlapped communication 25 ms, free 15
# ms, bubble 5 ms -> 100 ms; step 2: computing 30, communication 50 (none overlapped), free 20.
STEPS = ["1,60000,25000,10000,35000,15000,100000,5000,20000",
         "2,30000,50000,0,50000,20000,100000,0,50000"]
# by hand, over the 200 ms of both steps: computation only (50 + 30) / 200 = 40 %, overlapped
# 10 / 200 = 5 %, communication only (25 + 50) / 200 = 37.5 %, free (15 + 20) / 200 = 17.5 %
HAND = {"computation_only_pct": 40.0, "overlapped_pct": 5.0, "communication_only_pct": 37.5,
        "host_bound_pct": 0.0, "free_pct": 17.5}
# one allreduce in step 1 of rank 0: 10 ms = transit 2 + wait 6 (sync 4 of it) + idle 2; 20 MB
# over HCCS in 2 ms (10 GB/s)
COMM = {"step1": {"collective": {"hcom_allReduce__1_0@77": _collective(
    T0_US + 20_000, 10.0, 2.0, 6.0, 4.0, 2.0, 20.0, 2.0)}}}


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("hand")
    pt = _profile(root, 0, STEPS, comm=COMM)
    alone = root / "alone"
    alone.mkdir()
    (alone / "step_trace_time.csv").write_text((pt / "ASCEND_PROFILER_OUTPUT" /
                                                "step_trace_time.csv").read_text())
    return _run(root, alone, name="alone.parquet"), _run(root, pt, name="with_comm.parquet")


def test_step_trace_alone_gives_its_breakdown(hand: Any) -> None:
    a, _ = hand
    row = _rows(a)[0]
    assert row["from_summary"] is True
    assert {k: row[k] for k in PARTS} == pytest.approx(HAND, abs=1e-9)
    assert sum(row[k] for k in PARTS) == pytest.approx(100.0)
    m = a.per_rank[0]["overlap"].metrics
    assert m["bubble_pct"] == row["bubble_pct"] == pytest.approx(2.5)  # 5 ms receive / 200 ms
    assert m["host_bound_known"] is False and m["step_source"] == "step_summary"
    # HTA's figures from the summary: idle = free, compute = Computing (90 / 200), overlap of
    # communication with computation = 10 ms of its 85 ms
    assert row["idle_pct"] == pytest.approx(17.5)
    assert row["compute_pct"] == pytest.approx(45.0)
    assert row["comm_comp_overlap_pct"] == pytest.approx(100 * 10 / 85)
    assert a.run_kind == "accelerator"
    assert "no device work" not in a.verdict.reason


def test_summary_rank_is_marked_in_text(hand: Any) -> None:
    a, _ = hand
    text = render("text", a, advise(a))
    assert "from the step summary only" in text and "rank(s) 0" in text
    assert "free                   17.5%" in text
    md = render("md", a, advise(a))
    assert "From the step summary only" in md and "| 0 | 40.0 | 5.0 | 37.5 | 0.0 | 17.5 |" in md


def test_communication_json_feeds_the_collectives(hand: Any) -> None:
    _, a = hand
    row = _rows(a)[0]
    # the collective alone is no device timeline: the breakdown stays the summary's
    assert row["from_summary"] is True
    assert {k: row[k] for k in PARTS} == pytest.approx(HAND, abs=1e-9)
    t = a.per_rank[0]["communication"].tables["collectives"]
    assert len(t) == 1
    c = t.iloc[0]
    assert (c["dur_ns"], c["transit_ns"], c["wait_ns"], c["sync_ns"], c["idle_ns"]) == \
        (10_000_000, 2_000_000, 6_000_000, 4_000_000, 2_000_000)
    m = a.per_rank[0]["communication"].metrics
    assert (m["wait_ns"], m["sync_ns"], m["idle_ns"]) == (6_000_000, 4_000_000, 2_000_000)
    assert m["by_transport"]["HCCS"] == {"bytes": 20e6, "transit_ns": 2e6, "GBps": 10.0}
    # the collective lies in the summary's first step (placed at the rank's first event)
    f = next(f for f in a.findings if f.id == "communication.synchronization_wait")
    assert f.time_share == pytest.approx(6 / 200)
    assert (f.evidence["sync_ns"], f.evidence["idle_ns"]) == (4_000_000, 2_000_000)


def test_self_check_passes_on_summaries(hand: Any) -> None:
    for a in hand:
        doc = a.to_dict()
        assert self_check(doc, only=["breakdown_sum", "no_device_work",
                                     "share_within_category"]) == []


# --- hand-made: two ranks, rank 1 without its kernel table ----------------------------------
# Rank 0 records its device: kernels [0, 20) and [25, 55) ms (C = 50 ms), an allreduce [50, 65)
# ms (M = 15 ms, 5 of them under the second kernel) in a 100 ms step: computation only 45 %,
# overlapped 5 %, communication only 10 %, free 40 %. Its step trace says 52 / 10 / 5 / 38 --
# a different figure, so the test tells which one is used: the events, which record every part.
# Rank 1 has no kernel table: its breakdown is its summary's, computing 30, communication 20,
# free 50.
KERNELS_0 = [f"1,2,MatMul_1,MatMulV2,AI_CORE,{T0_US}.000,20000.000",
             f"1,2,Add_1,Add,AI_VECTOR_CORE,{T0_US + 25_000}.000,30000.000"]
STEPS_0 = ["1,52000,10000,5000,15000,38000,100000,0,10000"]
STEPS_1 = ["1,30000,20000,0,20000,50000,100000,0,20000"]
COMM_0 = {"step1": {"collective": {"hcom_allReduce__1_0@77": _collective(
    T0_US + 50_000, 15.0, 3.0, 10.0, 8.0, 2.0, 30.0, 3.0)}}}
COMM_1 = {"step1": {"collective": {"hcom_allReduce__1_0@77": _collective(
    T0_US + 40_000, 20.0, 3.0, 0.0, 0.0, 17.0, 30.0, 3.0)}}}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("two")
    _profile(root / "job", 0, STEPS_0, comm=COMM_0, kernels=KERNELS_0)
    _profile(root / "job", 1, STEPS_1, comm=COMM_1)
    return _run(root, root / "job")


def test_rank_with_kernels_uses_them_the_other_its_summary(two_ranks: Any) -> None:
    rows = _rows(two_ranks)
    assert rows[0]["from_summary"] is False
    assert {k: rows[0][k] for k in PARTS} == pytest.approx(
        {"computation_only_pct": 45.0, "overlapped_pct": 5.0, "communication_only_pct": 10.0,
         "host_bound_pct": 0.0, "free_pct": 40.0}, abs=1e-9)
    # its step trace's figures stay beside them, to compare: 47 / 5 / 10 / 38
    assert two_ranks.per_rank[0]["overlap"].metrics["summary_pct"] == pytest.approx(
        {"computation_only_pct": 47.0, "overlapped_pct": 5.0, "communication_only_pct": 10.0,
         "host_bound_pct": 0.0, "free_pct": 38.0})
    assert rows[1]["from_summary"] is True
    assert {k: rows[1][k] for k in PARTS} == pytest.approx(
        {"computation_only_pct": 30.0, "overlapped_pct": 0.0, "communication_only_pct": 20.0,
         "host_bound_pct": 0.0, "free_pct": 50.0}, abs=1e-9)


def test_rank_with_kernels_keeps_kernel_figures(two_ranks: Any) -> None:
    comp = two_ranks.per_rank
    # rank 0's computation figures come from its kernels (50 ms of the 100 ms step)
    assert comp[0]["computation"].metrics["compute_ns"] == 50_000_000
    assert comp[1]["computation"].metrics["compute_ns"] == 0
    text = render("text", two_ranks, advise(two_ranks))
    assert "from the step summary only" in text and "rank(s) 1" in text
    # across ranks, rank 1's compute time is its summary's 30 ms, not the 0 of no kernels:
    # rank 0 computes 20 ms longer, (50 - 30) / 100 ms of the median step
    ranks = two_ranks.cluster["cluster"].tables["ranks"].set_index("rank")
    assert ranks["compute_median_ms"].to_dict() == pytest.approx({0: 50.0, 1: 30.0})
    slow = next(f for f in two_ranks.findings if f.id == "computation.slow_node")
    assert slow.ranks == (0,) and slow.time_share == pytest.approx(0.2)
    assert [o["name"] for o in slow.evidence["top_ops"]] == ["Add_1", "MatMul_1"]


def test_steps_are_placed_at_their_own_kernels(tmp_path: Path) -> None:
    # two profiled steps 300 ms apart (steps between them not profiled); the kernel table names
    # each task's step and has its HCCL tasks, so the rank is analysed from its events. Step 1:
    # kernel [0, 50) ms, HCCL [60, 70); step 2: kernel [300, 340), HCCL [340, 360), its
    # Preparing 5 ms: its window starts at 295 ms. Per step by hand: 50 + 10 + 40 free, then
    # 40 + 20 + 40 free: 45 % computation only, 15 % communication only, 40 % free of 200 ms.
    # (Laid end to end, step 2 would be [100, 200) ms and hold nothing.)
    ms = 1000
    kd = [f"1,2,MatMul_1,MatMulV2,AI_CORE,{T0_US}.000,{50 * ms}.000",
          f"1,N/A,hcom_allReduce__1_0,hcom_allReduce_,HCCL,{T0_US + 60 * ms}.000,{10 * ms}.000",
          f"2,2,MatMul_2,MatMulV2,AI_CORE,{T0_US + 300 * ms}.000,{40 * ms}.000",
          f"2,N/A,hcom_allReduce__1_1,hcom_allReduce_,HCCL,{T0_US + 340 * ms}.000,{20 * ms}.000"]
    pt = _profile(tmp_path, 0, ["1,50000,10000,0,10000,40000,100000,0,10000,0",
                                "2,40000,20000,0,20000,40000,100000,0,20000,5000"],
                  kernels=kd, header=STEP_HEADER + ",Preparing")
    a = _run(tmp_path, pt)
    row = _rows(a)[0]
    assert row["from_summary"] is False
    assert {k: row[k] for k in PARTS} == pytest.approx(
        {"computation_only_pct": 45.0, "overlapped_pct": 0.0, "communication_only_pct": 15.0,
         "host_bound_pct": 0.0, "free_pct": 40.0}, abs=1e-9)
    ps = a.per_rank[0]["overlap"].tables["per_step"]
    t0 = T0_US * 1000
    assert (ps["start_ns"] - t0).tolist() == [0, 295_000_000]


# --- aggregates without times ---------------------------------------------------------------
def test_op_statistic_and_matrix_are_kept_not_events(tmp_path: Path) -> None:
    pt = _profile(tmp_path, 0, STEPS)
    out = pt / "ASCEND_PROFILER_OUTPUT"
    (out / "op_statistic.csv").write_text(
        "OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
        "MatMulV2,AI_CORE,10,1000.5,90,100.05,120,66.7\n"
        "Add,AI_VECTOR_CORE,20,500.25,20,25.0125,30,33.3\n")
    link = {"Transport Type": "HCCS", "Transit Size(MB)": 8.0, "Transit Time(ms)": 0.5,
            "Bandwidth(GB/s)": 16.0, "Op Name": "hcom_allReduce__1_0"}
    (out / "communication_matrix.json").write_text(json.dumps({"step1": {"collective": {
        "hcom_allReduce__1_0@77": {"0-1": link, "1-0": link},
        "hcom_allReduce__1_1@77": {"0-1": {**link, "Transit Time(ms)": 1.5}},
        "Total Op Info": {"0-1": link}}}}))
    res = get("ascend").run([pt], tmp_path / "t.parquet", {})
    assert res.by_kind == {"step": 2}
    summary = hermes.load(res.out).meta.import_summary
    ops = summary["op_statistic"]["0"]
    assert ops[1] == {"op_type": "Add", "core_type": "AI_VECTOR_CORE", "count": 20,
                      "total_ns": 500250, "min_ns": 20000, "avg_ns": 25013, "max_ns": 30000,
                      "ratio_pct": 33.3}
    links = {(r["src"], r["dst"]): r for r in summary["communication_matrix"]["0"]}
    # 0-1 over both ops (Total Op Info skipped): 16 MB in 2 ms = 8 GB/s
    assert links[(0, 1)] == {"src": 0, "dst": 1, "transport": "HCCS", "bytes": 16_000_000,
                             "transit_ns": 2_000_000, "GBps": 8.0, "ops": 2}
    assert summary["communication_matrix"]["1"][0]["bytes"] == 8_000_000


def test_aggregates_alone_are_refused(tmp_path: Path) -> None:
    p = tmp_path / "op_statistic.csv"
    p.write_text("OP Type,Core Type,Count,Total Time(us)\nAdd,AI_CORE,1,2\n")
    with pytest.raises(ImportFormatError, match="totals without times"):
        get("ascend").run([p], tmp_path / "t.parquet", {})


# --- the real fixtures ----------------------------------------------------------------------
def _csv_figures(path: Path) -> dict[int, dict[str, float]]:
    """Each rank row's parts in percent, computed here from the CSV."""
    out = {}
    for r in csv.DictReader(path.open(newline="")):
        if r["Type"] != "rank":
            continue
        comp, cno = float(r["Computing"]), float(r["Communication(Not Overlapped)"])
        ov, free = float(r["Overlapped"]), float(r["Free"])
        step = comp + cno + free
        out[int(r["Index"])] = {"computation_only_pct": 100 * (comp - ov) / step,
                                "overlapped_pct": 100 * ov / step,
                                "communication_only_pct": 100 * cno / step,
                                "host_bound_pct": 0.0, "free_pct": 100 * free / step,
                                "step_ms": step / 1e3}
    return out


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not ASCEND.is_dir():
        pytest.skip(f"shared traces not found at {ASCEND}")
    data = ASCEND
    root = tmp_path_factory.mktemp("real")
    combos = {"steps": ["cluster_step_trace_time.csv"],
              "steps_comm": ["cluster_step_trace_time.csv", "cluster_communication.json"],
              "older": ["kernel_details_older_cann.csv"],
              "older_steps": ["kernel_details_older_cann.csv", "cluster_step_trace_time.csv"],
              "newer_steps": ["kernel_details_newer_cann.csv", "cluster_step_trace_time.csv"]}
    return {k: _run(root, *(data / f for f in v), name=f"{k}.parquet")
            for k, v in combos.items()}


@pytest.mark.parametrize("combo", ["steps", "steps_comm", "newer_steps"])
def test_real_step_trace_breakdown_equals_the_csv(real: dict[str, Any], shared_traces: Path,
                                                  combo: str) -> None:
    want = _csv_figures(shared_traces / "ascend" / "cluster_step_trace_time.csv")
    a = real[combo]
    rows = _rows(a)
    assert sorted(rows) == sorted(want) == list(range(8))
    for r, w in want.items():
        assert rows[r]["from_summary"] is True, r
        assert {k: rows[r][k] for k in PARTS} == pytest.approx(
            {k: w[k] for k in PARTS}, abs=1e-6), r
    # rank 0: computing 80.3 ms, communication (not overlapped) 683.7 ms, free 990.6 ms: a
    # 1754.646 ms step (the file's Stage says 1754.64575: its own float sum)
    assert want[0]["step_ms"] == pytest.approx(1754.646081, abs=1e-6)
    assert rows[0]["communication_only_pct"] == pytest.approx(100 * 683731.2897 / 1754646.081)
    # a step's time is its slowest rank's
    assert a.to_dict()["steps"]["median_ms"] == pytest.approx(
        max(w["step_ms"] for w in want.values()), abs=1e-6)
    assert a.run_kind == "accelerator" and "no device work" not in a.verdict.reason


def test_real_cluster_communication_times_and_links(real: dict[str, Any],
                                                    shared_traces: Path) -> None:
    raw = json.loads((shared_traces / "ascend" / "cluster_communication.json").read_text())
    recs = [(int(r), rec) for group in raw.values() for step in group.values()
            for op in step.values() for r, rec in op.items()]
    a = real["steps_comm"]
    for rank in (0, 1):
        mine = [rec for r, rec in recs if r == rank]
        m = a.per_rank[rank]["communication"].metrics
        for key, field in (("wait_ns", "Wait Time(ms)"), ("sync_ns", "Synchronization Time(ms)"),
                           ("idle_ns", "Idle Time(ms)")):
            want = sum(rec["Communication Time Info"][field] for rec in mine) * 1e6
            assert m[key] == pytest.approx(want, abs=2), (rank, key)
        for link in ("HCCS", "PCIE", "SDMA"):
            size = sum(rec["Communication Bandwidth Info"][link]["Transit Size(MB)"]
                       for rec in mine) * 1e6
            ms = sum(rec["Communication Bandwidth Info"][link]["Transit Time(ms)"]
                     for rec in mine)
            got = m["by_transport"][link]
            assert got["bytes"] == pytest.approx(size, abs=2)
            assert got["GBps"] == pytest.approx(size / (ms * 1e6), rel=1e-3), (rank, link)


def _union_ns(s: np.ndarray, e: np.ndarray) -> int:
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    total, cur_s, cur_e = 0, None, None
    for a, b in zip(s, e, strict=True):  # a few hundred rows: plain union, independent of Hermes
        if cur_e is None or a > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    return int(total + (0 if cur_e is None else cur_e - cur_s))


def test_real_kernel_table_alone_is_its_kernels(real: dict[str, Any],
                                               shared_traces: Path) -> None:
    d = pd.read_csv(shared_traces / "ascend" / "kernel_details_older_cann.csv", dtype=str)
    s = (d["Start Time(us)"].str.strip().astype(float) * 1e3).round().astype("int64").to_numpy()
    e = s + (d["Duration(us)"].astype(float) * 1e3).round().astype("int64").to_numpy()
    comm = (d["Accelerator Core"] == "HCCL").to_numpy()
    span = int(e.max() - s.min())
    busy_c = _union_ns(s[~comm], e[~comm])
    busy_m = _union_ns(s[comm], e[comm])
    both = _union_ns(s, e)
    row = _rows(real["older"])[0]
    assert row["from_summary"] is False
    assert row["computation_only_pct"] + row["overlapped_pct"] == \
        pytest.approx(100 * busy_c / span, abs=0.01)
    assert row["communication_only_pct"] + row["overlapped_pct"] == \
        pytest.approx(100 * busy_m / span, abs=0.01)
    assert row["free_pct"] == pytest.approx(100 * (span - both) / span, abs=0.01)


def test_real_kernel_table_of_one_rank_beside_the_others_summaries(
        real: dict[str, Any], shared_traces: Path) -> None:
    want = _csv_figures(shared_traces / "ascend" / "cluster_step_trace_time.csv")
    rows = _rows(real["older_steps"])
    # rank 0's kernel table records computation and HCCL: it is analysed from its events
    assert rows[0]["from_summary"] is False
    assert sum(rows[0][k] for k in PARTS) == pytest.approx(100.0)
    for r in range(1, 8):
        assert rows[r]["from_summary"] is True
        assert {k: rows[r][k] for k in PARTS} == pytest.approx({k: want[r][k] for k in PARTS},
                                                               abs=1e-6)


def test_summary_step_starts_exactly_at_the_rank_timeline(tmp_path: Path) -> None:
    if not ASCEND.is_dir():
        pytest.skip(f"shared traces not found at {ASCEND}")
    # rank 0 has a trace_view timeline, ranks 1-7 nothing to anchor on: rank 0's summary step
    # starts at its timeline's first event to the ns (no float rounding of epoch stamps), and
    # so do the others' (the same job's step, not at 0 decades away)
    res = get("ascend").run([ASCEND / "trace_view.json", ASCEND / "cluster_step_trace_time.csv"],
                            tmp_path / "t.parquet", {})
    ev = hermes.load(res.out).events
    steps = ev[(ev["kind"] == "step") & (ev["lane"] == "step trace")]
    first = int(ev.loc[(ev["rank"] == 0) & (ev["lane"] != "step trace"), "ts_ns"].min())
    assert int(steps.loc[steps["rank"] == 0, "ts_ns"].iloc[0]) == first
    assert sorted(steps.loc[steps["rank"] > 0, "ts_ns"].astype(int)) == [first] * 7
    assert validate(res.out).errors == []


@pytest.mark.parametrize("name, text, message", [
    ("communication_matrix.json", '{"step": {"collective": {"op@1": {"0to1": '
     '{"Transport Type": "HCCS", "Transit Size(MB)": 1, "Transit Time(ms)": 1}}}}}',
     "link key '0to1' is not 'src-dst'"),
    ("communication_matrix.json", '{"step": {"collective": {"op@1": {"0-1": '
     '{"Transport Type": "HCCS", "Transit Size(MB)": "x", "Transit Time(ms)": 1}}}}}',
     "is not a number"),
    ("op_statistic.csv", "OP Type,Core Type,Count,Total Time(us)\nAdd,AI_CORE,many,2\n",
     "column 'Count' has 'many'"),
])
def test_bad_aggregates_are_one_line_exit_2(tmp_path: Path, name: str, text: str,
                                            message: str) -> None:
    from tests.conftest import run_cli

    src = tmp_path / "src"
    src.mkdir()
    (src / name).write_text(text)
    (src / "step_trace_time.csv").write_text("\n".join([STEP_HEADER, *STEPS]) + "\n")
    code, _, err = run_cli("import", str(src), "--out", str(tmp_path / "t.parquet"))
    assert code == 2 and message in err and name in err
    assert len(err.strip().splitlines()) == 1
