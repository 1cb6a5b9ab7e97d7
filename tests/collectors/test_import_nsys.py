"""The Nsight Systems importer on synthetic exports in the real schema, every value known by
construction (hermes.collectors.importers.nsys.synthetic's layout)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hermes.collectors import importers
from hermes.collectors.importers.nsys import synthetic as syn
from hermes.collectors.importers.nsys.context import step_number
from tests.conftest import run_cli

KERNELS, STEPS, NCCL_EVERY, MEMCPY_EVERY = 20, 2, 5, 10


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return syn.write(tmp_path_factory.mktemp("nsys") / "two.sqlite", KERNELS, processes=2,
                     steps=STEPS, nccl_every=NCCL_EVERY, memcpy_every=MEMCPY_EVERY)


def _import(src: Path, out: Path, *extra: str) -> tuple[dict, object]:
    code, text, err = run_cli("import", str(src), "--out", str(out), "--json", *extra)
    assert code == 0, err
    return json.loads(text), pq.read_table(out).to_pandas()


@pytest.fixture(scope="module")
def imported(export: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, object]:
    return _import(export, tmp_path_factory.mktemp("out") / "t.parquet")


def test_detected_by_content_not_name(export: Path, tmp_path: Path) -> None:
    renamed = tmp_path / "capture.db"
    renamed.write_bytes(export.read_bytes())
    assert importers.detect(renamed).name == "nsys"
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (a INTEGER)").connection.commit()
    assert importers.detect(other) is None
    code, _, err = run_cli("import", str(other), "--out", str(tmp_path / "x.parquet"))
    assert code == 2 and "not a profiler trace" in err and "Nsight" in err


def test_counts_per_kind_and_rank(imported: tuple[dict, object]) -> None:
    summary, ev = imported
    per_rank = KERNELS // NCCL_EVERY
    assert summary["ranks"] == [0, 1]
    assert summary["by_kind"] == {
        "kernel": 2 * (KERNELS - per_rank), "collective": 2 * per_rank,
        "launch": 2 * KERNELS, "host_op": 2 * KERNELS, "step": 2 * STEPS,
        "memcpy_h2d": 2 * (KERNELS // MEMCPY_EVERY)}
    assert summary["events"] == len(ev)


def test_kernels_times_correlation_steps_args(imported: tuple[dict, object]) -> None:
    _, ev = imported
    k = ev[(ev["kind"].astype(str) == "kernel") & (ev["rank"] == 1)].sort_values("ts_ns")
    first = k.iloc[0]
    assert first["ts_ns"] == syn.T0 and first["dur_ns"] == syn.KERNEL_NS
    assert first["corr_id"] == 1 and first["stream"] == 7 and first["unit"] == "sm"
    assert str(first["lane"]) == "stream 7" and str(first["name"]) == "GEMM"
    assert json.loads(first["args"]) == {"grid": [128, 1, 1], "block": [256, 1, 1],
                                         "registers per thread": 32,
                                         "static shared memory": 0,
                                         "dynamic shared memory": 1024, "device": 1}
    # kernel i belongs to step i // (KERNELS / STEPS), through its launch
    i = ((k["ts_ns"] - syn.T0) // syn.PERIOD).astype(int)
    assert (k["step"].astype(int) == i // (KERNELS // STEPS)).all()
    launch = ev[(ev["kind"].astype(str) == "launch") & (ev["rank"] == 1)]
    assert set(launch["name"].astype(str)) == {"cudaLaunchKernel"}
    assert str(launch["lane"].iloc[0]) == "thread 2 (python3)"
    joined = k.merge(launch, on="corr_id", suffixes=("", "_l"))
    assert len(joined) == len(k)
    assert ((joined["ts_ns"] - joined["ts_ns_l"]) == syn.LAUNCH_LEAD).all()


def test_nccl_kernels_are_collectives_in_sequence(imported: tuple[dict, object]) -> None:
    _, ev = imported
    coll = ev[ev["kind"].astype(str) == "collective"]
    assert set(coll["name"].astype(str)) == {syn.NCCL_NAME}
    assert set(coll["coll_group"].astype(str)) == {"nccl"} and set(coll["unit"]) == {"link"}
    for _, g in coll.groupby("rank"):
        assert g.sort_values("ts_ns")["coll_seq"].astype(int).tolist() == [0, 1, 2, 3]


def test_nvtx_steps_and_emit_nvtx_operators(imported: tuple[dict, object]) -> None:
    _, ev = imported
    steps = ev[(ev["kind"].astype(str) == "step") & (ev["rank"] == 0)].sort_values("ts_ns")
    assert steps["name"].astype(str).tolist() == ["ProfilerStep#0", "ProfilerStep#1"]
    assert steps["step"].astype(int).tolist() == [0, 1]
    ops = ev[(ev["kind"].astype(str) == "host_op") & (ev["rank"] == 0)].sort_values("ts_ns")
    assert set(ops["name"].astype(str)) == {"aten::mm"}
    assert ops["external_id"].astype(int).tolist() == list(range(KERNELS))


def test_device_named_from_target_info(imported: tuple[dict, object], tmp_path: Path,
                                       export: Path) -> None:
    summary, _ = imported
    out = tmp_path / "t.parquet"
    run_cli("import", str(export), "--out", str(out))
    device = json.loads(pq.read_metadata(out).metadata[b"hermes.device"])
    assert device["name"] == syn.GPU_NAME and device["display_name"].startswith("NVIDIA H100")
    assert device["count"] == 2 and device["nsys"]["smCount"] == 132


def test_older_device_table_and_no_device_table(tmp_path: Path) -> None:
    src = syn.write(tmp_path / "old.sqlite", 4, gpu_table=False)
    summary, _ = _import(src, tmp_path / "a.parquet")
    assert any("--device" in w for w in summary["warnings"])
    con = sqlite3.connect(src)
    con.execute("CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER, "
                "name TEXT, numMultiprocessors INTEGER)")
    con.execute("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (0, 0, 'NVIDIA H100 PCIe', 114)")
    con.commit()
    con.close()
    out = tmp_path / "b.parquet"
    summary, _ = _import(src, out)
    device = json.loads(pq.read_metadata(out).metadata[b"hermes.device"])
    assert device["name"] == "NVIDIA H100 PCIe" and device["nsys"]["numMultiprocessors"] == 114
    assert not any("--device" in w for w in summary["warnings"])


def test_dangling_correlation_kept_in_args(tmp_path: Path) -> None:
    src = syn.write(tmp_path / "d.sqlite", 4, nccl_every=0, memcpy_every=0)
    con = sqlite3.connect(src)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = 2")
    con.commit()
    con.close()
    _, ev = _import(src, tmp_path / "d.parquet")
    k = ev[ev["kind"].astype(str) == "kernel"].sort_values("ts_ns")
    assert k["corr_id"].isna().tolist() == [False, True, False, False]
    assert json.loads(k.iloc[1]["args"])["correlation"] == 2
    assert "correlation" not in json.loads(k.iloc[0]["args"])


def test_missing_columns_and_unknown_tables_are_named(tmp_path: Path) -> None:
    src = syn.write(tmp_path / "v.sqlite", 4, nccl_every=0, memcpy_every=0)
    con = sqlite3.connect(src)
    con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN gridZ")
    con.execute("ALTER TABLE NVTX_EVENTS DROP COLUMN globalTid")
    con.execute("CREATE TABLE FUTURE_ACTIVITY (start INTEGER, end INTEGER)")
    con.execute("INSERT INTO FUTURE_ACTIVITY VALUES (1, 2)")
    con.commit()
    con.close()
    summary, ev = _import(src, tmp_path / "v.parquet")
    assert "NVTX_EVENTS has no globalTid column: not imported" in " ".join(summary["warnings"])
    k = ev[ev["kind"].astype(str) == "kernel"]
    assert len(k) == 4 and "grid" not in json.loads(k.iloc[0]["args"])
    meta = json.loads(pq.read_metadata(tmp_path / "v.parquet").metadata[b"hermes.import"])
    # the NVTX table is not read without its thread column: 4 operator and 4 step ranges
    assert meta["files"][0]["unread_tables"] == {"FUTURE_ACTIVITY": 1, "NVTX_EVENTS": 8}
    assert any("not imported: FUTURE_ACTIVITY (1 row(s))" in w for w in summary["warnings"])


def test_report_without_nsys_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"\x00not sqlite")
    monkeypatch.setenv("PATH", str(tmp_path))
    code, _, err = run_cli("import", str(rep), "--out", str(tmp_path / "x.parquet"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "nsys export --type sqlite --output" in err and "run.nsys-rep" in err


def test_damaged_export_is_one_line(export: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(export.read_bytes()[:8192])
    code, _, err = run_cli("import", str(bad), "--out", str(tmp_path / "x.parquet"),
                           "--from", "nsys")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_in_memory_import_equals_the_file(export: Path, tmp_path: Path) -> None:
    from hermes.trace import load

    imp = importers.get("nsys")
    res = imp.run([export], tmp_path / "m.parquet", {"in_memory": True})
    out = tmp_path / "f.parquet"
    imp.run([export], out, {})
    a = res.trace.events.sort_values(["rank", "ts_ns", "kind"]).reset_index(drop=True)
    b = load(out).events.sort_values(["rank", "ts_ns", "kind"]).reset_index(drop=True)
    assert a.astype(str).equals(b.astype(str))


@pytest.mark.parametrize("text,step", [("ProfilerStep#7", 7), ("step 3", 3), ("Step#12", 12),
                                       ("train_step_4", 4), ("iteration 9", 9),
                                       ("forward", None), ("stepper 2", None)])
def test_step_markers(text: str, step: int | None) -> None:
    assert step_number(text) == step


def test_os_runtime_marks_and_start_end_ranges(tmp_path: Path) -> None:
    src = syn.write(tmp_path / "o.sqlite", 2, steps=1, nccl_every=0, memcpy_every=0)
    gtid = (1 << 24) | 1
    con = sqlite3.connect(src)
    con.execute("CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER NOT NULL, "
                "eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, "
                "nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, "
                "nestingLevel INTEGER, callchainId INTEGER)")
    con.execute("INSERT INTO StringIds VALUES (50, 'pthread_cond_wait')")
    con.execute("INSERT INTO OSRT_API VALUES (100, 600, 27, ?, NULL, 50, 0, 0, NULL)", (gtid,))
    con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) "
                "VALUES (700, NULL, 34, 'checkpoint', ?), (800, 900, 60, 'fwd', ?)",
                (gtid, gtid))
    con.commit()
    con.close()
    _, ev = _import(src, tmp_path / "o.parquet")
    os_call = ev[ev["name"].astype(str) == "pthread_cond_wait"].iloc[0]
    assert os_call["kind"] == "runtime" and os_call["dur_ns"] == 500
    assert json.loads(os_call["args"]) == {"source_category": "os_runtime", "return": 0,
                                           "nesting": 0}
    mark = ev[ev["name"].astype(str) == "checkpoint"].iloc[0]
    assert mark["kind"] == "marker" and mark["dur_ns"] == 0 and mark["ts_ns"] == 700
    rng = ev[ev["name"].astype(str) == "fwd"].iloc[0]
    assert rng["kind"] == "marker" and rng["dur_ns"] == 100


def test_several_files_are_consecutive_ranks_and_rank_option(tmp_path: Path) -> None:
    a = syn.write(tmp_path / "a.sqlite", 3, processes=2, steps=1, memcpy_every=0)
    b = syn.write(tmp_path / "b.sqlite", 3, processes=1, steps=1, memcpy_every=0)
    summary, ev = _import(a, tmp_path / "ab.parquet")
    assert summary["ranks"] == [0, 1]
    code, out, err = run_cli("import", str(a), str(b), "--out", str(tmp_path / "x.parquet"),
                             "--json")
    assert code == 0, err
    assert json.loads(out)["ranks"] == [0, 1, 2]
    summary, ev = _import(b, tmp_path / "r.parquet", "--rank", "5")
    assert summary["ranks"] == [5] and set(ev["rank"]) == {5}


def test_every_command_works_on_an_nsys_import(export: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    _import(export, out)
    for args in (["analyze", str(out), "--format", "json"],
                 ["report", str(out), "--out", str(tmp_path / "r.html")],
                 ["diff", str(out), str(export)],
                 ["check", str(export), "--baseline", str(out)],
                 ["whatif", str(out)],
                 ["export", str(out), "--format", "chrome", "--out", str(tmp_path / "c.json")]):
        code, _, err = run_cli(*args)
        assert code == 0, (args[0], err)
    assert json.loads(run_cli("analyze", str(export), "--format", "json")[1])["steps"][
        "count"] == STEPS


def test_graph_launches_traced_whole(tmp_path: Path) -> None:
    src = syn.write(tmp_path / "g.sqlite", 2, steps=1, nccl_every=0, memcpy_every=0)
    con = sqlite3.connect(src)
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, "
                "end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
                "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, "
                "globalPid INTEGER, graphId INTEGER, graphExecId INTEGER)")
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES "
                "(5000, 9000, 0, 1, NULL, 9, NULL, ?, 3, 1)", (1 << 24,))
    con.commit()
    con.close()
    _, ev = _import(src, tmp_path / "g.parquet")
    g = ev[ev["name"].astype(str) == "CUDA graph 3"].iloc[0]
    assert (g["kind"], str(g["lane"]), g["ts_ns"], g["dur_ns"]) == ("kernel", "stream 9",
                                                                     5000, 4000)


def test_gpu_numbers_identify_an_unnamed_profile(tmp_path: Path) -> None:
    """A GPU name no profile knows: its SM count, memory and compute capability, written as
    Kineto's deviceProperties, let the analysis identify it."""
    src = syn.write(tmp_path / "n.sqlite", 4, steps=1, nccl_every=0, memcpy_every=0)
    con = sqlite3.connect(src)
    con.execute("UPDATE TARGET_INFO_GPU SET name = 'Graphics Device 2330'")
    con.commit()
    con.close()
    out = tmp_path / "n.parquet"
    summary, _ = _import(src, out)
    assert any("matches no shipped device profile" in w for w in summary["warnings"])
    device = json.loads(pq.read_metadata(out).metadata[b"hermes.device"])
    assert device["deviceProperties"] == [{
        "name": "Graphics Device 2330", "numSms": 132, "totalGlobalMem": 85520809984,
        "computeMajor": 9, "computeMinor": 0, "clockRate": 1980000000}]
    code, text, err = run_cli("analyze", str(out), "--format", "json")
    assert code == 0, err
    assert json.loads(text)["device"]["profile"] == "h100"


def test_one_process_driving_two_gpus_is_one_rank(tmp_path: Path) -> None:
    src = syn.write(tmp_path / "p.sqlite", 4, steps=1, nccl_every=0, memcpy_every=0)
    con = sqlite3.connect(src)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 1 WHERE correlationId > 2")
    con.commit()
    con.close()
    summary, ev = _import(src, tmp_path / "p.parquet")
    assert summary["ranks"] == [0]
    k = ev[ev["kind"].astype(str) == "kernel"].sort_values("ts_ns")
    assert k["lane"].astype(str).tolist() == ["gpu 0 stream 7"] * 2 + ["gpu 1 stream 7"] * 2


def test_launches_and_kernels_carry_their_operators_id(imported: tuple[dict, object]) -> None:
    """Kernel i's launch lies inside the emit_nvtx range 'aten::mm, ..., op_id = i' (nested
    inside ProfilerStep#s): both carry external_id i, the Kineto link."""
    _, ev = imported
    for kind in ("launch", "kernel", "collective"):
        rows = ev[ev["kind"].astype(str) == kind]
        assert (rows["external_id"].astype(int) == rows["corr_id"].astype(int) - 1).all(), kind
    steps = ev[ev["kind"].astype(str) == "step"]
    assert steps["external_id"].isna().all()


def test_innermost_operator_of_nested_ranges() -> None:
    import numpy as np

    from hermes.collectors.importers.nsys.operators import OpIndex

    idx = OpIndex()
    # thread 1: op 1 [0, 100] holds op 2 [10, 50], which holds op 3 [20, 30]; op 4 [60, 90]
    idx.add(np.array([1, 1, 1, 1, 2]), np.array([0, 10, 20, 60, 0]),
            np.array([100, 50, 30, 90, 5]), np.array([1, 2, 3, 4, 9]))
    idx.seal()
    got = idx.at(np.array([1, 1, 1, 1, 1, 1, 2, 2, 3]),
                 np.array([5, 15, 25, 55, 70, 101, 3, 6, 3]))
    assert got.tolist() == [1, 2, 3, 1, 4, -1, 9, -1, -1]


def test_small_chunks_give_the_same_trace(export: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 7 rows: the step ranges (written after every operator range) come in a
    later chunk than the first, whose text columns are all empty; the trace is the same."""
    from hermes.collectors.importers.nsys import sql
    from hermes.trace import load

    imp = importers.get("nsys")
    imp.run([export], tmp_path / "a.parquet", {})
    monkeypatch.setattr(sql, "CHUNK_ROWS", 7)
    imp.run([export], tmp_path / "b.parquet", {})
    a, b = (load(tmp_path / f"{x}.parquet").events.sort_values(["rank", "ts_ns", "kind", "name"])
            .reset_index(drop=True).astype(str) for x in "ab")
    assert a.equals(b) and (a["kind"] == "step").sum() == 2 * STEPS


def test_a_folder_with_a_report_and_its_export_is_one_capture(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    syn.write(folder / "run.sqlite", 3, processes=2, steps=1, memcpy_every=0)
    (folder / "run.nsys-rep").write_bytes(b"\x00report")
    code, out, err = run_cli("import", str(folder), "--out", str(tmp_path / "t.parquet"),
                             "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["ranks"] == [0, 1]
    assert any("its SQLite export is imported instead" in w for w in summary["warnings"])


def test_the_benchmarks_read_only_floor_reads_the_rows_the_import_maps(
        export: Path, imported: tuple[dict, object]) -> None:
    # benchmarks/nsys_import.py's baseline: the same queries, rows read and dropped; every
    # row of this export is a device process's, so each row read is an event imported
    from hermes.collectors.importers.nsys import importer

    summary, _ = imported
    assert importer.read_rows(export) == summary["events"] == \
        sum(summary["by_source_category"].values())
