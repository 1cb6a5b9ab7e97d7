"""Hand-made Kineto traces of every generation and runtime; the numbers are worked out by hand.

Old capitalised categories, a late ``traceEvents`` after a big metadata object, Gloo
ProcessGroup ranges, record_param_comms message sizes, a cudaGraphLaunch with its replayed
kernels, ``[memory]`` events, hip* runtime calls, a GPU-only trace, the comm-pattern table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import hermes
from hermes.collectors.importers import detect, get
from hermes.errors import UsageError
from hermes.trace import comm_patterns
from tests.conftest import run_cli


def _write(path: Path, events: list[dict[str, Any]], **top: Any) -> Path:
    path.write_text(json.dumps({**top, "traceEvents": events}))
    return path


def _import(tmp_path: Path, events: list[dict[str, Any]], options: dict | None = None,
            **top: Any) -> pd.DataFrame:
    src = _write(tmp_path / "t.json", events, **top)
    assert detect(src) is get("kineto")
    get("kineto").run([src], tmp_path / "t.parquet", options or {})
    ev = hermes.load(tmp_path / "t.parquet").events
    return ev.assign(kind=ev["kind"].astype(str), lane=ev["lane"].astype(str),
                     name=ev["name"].astype(str))


def X(cat: str, name: str, ts: float, dur: float, tid: object = 1, pid: int = 1,
      **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
            "dur": dur, "args": args}


def test_old_capitalised_categories(tmp_path: Path) -> None:
    # PyTorch 1.8-style: Operator (ProfilerStep#N too), Runtime, Kernel, Memcpy, Memset, Python;
    # device tids written as 'stream 7', External id spelt 'external id'
    ev = _import(tmp_path, [
        X("Operator", "ProfilerStep#1", 0, 100, tid="123"),
        X("Operator", "aten::mm", 10, 20, tid="123", **{"external id": 4}),
        X("Runtime", "cudaLaunchKernel", 12, 5, tid="123", correlation=7),
        X("Kernel", "volta_sgemm", 20, 30, tid="stream 7", pid=0, stream=7, correlation=7),
        X("Memcpy", "Memcpy HtoD (Pageable -> Device)", 60, 4, tid="stream 7", pid=0,
          stream=7, correlation=8),
        X("Runtime", "cudaMemcpyAsync", 55, 3, tid="123", correlation=8),
        X("Memset", "Memset (Device)", 70, 2, tid="stream 7", pid=0, stream=7, correlation=9),
        X("Runtime", "cudaMemsetAsync", 66, 1, tid="123", correlation=9),
        X("Python", "train.py(10): step", 5, 90, tid="123"),
    ])
    kinds = ev.groupby("kind").size().to_dict()
    assert kinds == {"step": 1, "host_op": 1, "launch": 3, "kernel": 1, "memcpy_h2d": 1,
                     "memset": 1, "python": 1}
    k = ev[ev["kind"] == "kernel"].iloc[0]
    assert k["lane"] == "stream 7" and k["stream"] == 7 and k["step"] == 1
    assert ev.loc[ev["name"] == "aten::mm", "external_id"].iloc[0] == 4


def test_category_spelling_is_case_insensitive(tmp_path: Path) -> None:
    ev = _import(tmp_path, [X("gpu_user_Annotation", "fwd", 0, 10, tid=7, pid=0),
                            X("CPU_OP", "aten::add", 0, 5)])
    assert sorted(ev["kind"]) == ["host_op", "marker"]
    assert ev.loc[ev["kind"] == "marker", "lane_kind"].astype(str).iloc[0] == "device"


def test_late_trace_events_after_big_metadata(tmp_path: Path) -> None:
    meta = {"metadata": {"notes": ["x" * 100] * 1000, "profiler": {"record_shapes": True}},
            "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
            "distributedInfo": {"rank": 3}}
    src = _write(tmp_path / "late.json", [X("cpu_op", "aten::add", 0, 5)], **meta)
    assert len(src.read_bytes().split(b'"traceEvents"')[0]) > 100_000
    code, out, err = run_cli("import", str(src), "--out", str(tmp_path / "late.parquet"))
    assert code == 0, err
    assert hermes.load(tmp_path / "late.parquet").events["rank"].tolist() == [3]


def test_non_kineto_pytorch_files_are_named(tmp_path: Path) -> None:
    et = tmp_path / "et.json"
    et.write_text('{"schema": "1.0.1", "pid": 1, "time": "2023", "start_ts": 1,\n'
                  ' "nodes": [{"name": "[pytorch|profiler|execution_trace|thread]"}]}')
    mem = tmp_path / "memory_timeline.raw"
    mem.write_text("[[-1, 1, 512, 7], [10, 2, 512, 7]]")
    for path, what in ((et, "Execution Trace"), (mem, "memory-timeline")):
        code, _, err = run_cli("import", str(path), "--out", str(tmp_path / "x.parquet"))
        assert code == 2 and what in err, err


def test_gloo_process_group_range_is_a_host_collective(tmp_path: Path) -> None:
    # record_param_comms: 1024 Float elements = 4096 B, group '0', seq 5; the gloo range that
    # follows on the same thread carries no args of its own
    ev = _import(tmp_path, [
        X("cpu_op", "c10d::allreduce_", 100, 50, tid=1),
        X("cpu_op", "record_param_comms", 101, 1, tid=1, **{
            "External id": 9, "Collective name": "allreduce", "In msg nelems": 1024,
            "Out msg nelems": 1024, "dtype": "Float", "Group size": 2,
            "Process Group Name": "0", "Process Group Description": "default_pg",
            "Seq": 5}),
        X("user_annotation", "gloo:all_reduce", 105, 40, tid=1),
        X("user_annotation", "gloo:broadcast", 200, 10, tid=1),
    ])
    coll = ev[ev["kind"] == "collective"].sort_values("ts_ns")
    assert coll["name"].tolist() == ["gloo:all_reduce", "gloo:broadcast"]
    first = coll.iloc[0]
    assert str(first["lane_kind"]) == "host" and first["lane"] == "thread 1"
    assert first["coll_bytes"] == 4096 and first["coll_seq"] == 5
    assert str(first["coll_group"]) == "0"
    # the broadcast matches the same (latest) record_param_comms op on its thread
    assert ev.loc[ev["name"] == "record_param_comms", "kind"].iloc[0] == "host_op"


def test_nccl_kernel_gets_message_size_from_record_param_comms(tmp_path: Path) -> None:
    ev = _import(tmp_path, [
        X("cpu_op", "record_param_comms", 0, 1, **{
            "External id": 3, "In msg nelems": 1000, "dtype": "BFloat16",
            "Process Group Name": "1", "Seq": 2}),
        X("cuda_runtime", "cudaLaunchKernel", 1, 2, correlation=11, **{"External id": 3}),
        X("kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
          5, 20, tid=20, pid=0, correlation=11, **{"External id": 3}),
    ])
    k = ev[ev["kind"] == "collective"].iloc[0]
    assert k["coll_bytes"] == 2000 and k["coll_seq"] == 2 and str(k["coll_group"]) == "1"
    assert k["corr_id"] == 11 and str(k["unit"]) == "link"


def test_cuda_graph_launch_owns_its_replayed_kernels(tmp_path: Path) -> None:
    # one cudaGraphLaunch (corr 50) replays three kernels: all share its correlation id
    ev = _import(tmp_path, [
        X("user_annotation", "ProfilerStep#2", 0, 100),
        X("cpu_op", "vllm::decode", 1, 30),
        X("cuda_runtime", "cudaGraphLaunch", 2, 8, correlation=50),
        *[X("kernel", f"k{i}", 20 + 10 * i, 8, tid=7, pid=0, correlation=50)
          for i in range(3)],
    ])
    launch = ev[ev["name"] == "cudaGraphLaunch"].iloc[0]
    assert launch["kind"] == "launch"
    kernels = ev[ev["kind"] == "kernel"]
    assert len(kernels) == 3 and (kernels["corr_id"] == 50).all() and (kernels["step"] == 2).all()


def test_memory_events_become_counters_and_peaks(tmp_path: Path) -> None:
    def mem(ts: float, alloc: int, resv: int, dev: int = 0, dtype: int = 1) -> dict:
        return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
                "tid": 1, "ts": ts, "args": {"Total Allocated": alloc, "Total Reserved": resv,
                                             "Bytes": 1, "Device Id": dev,
                                             "Device Type": dtype}}
    events = [X("user_annotation", "ProfilerStep#1", 0, 100),
              mem(10, 1000, 2048), mem(20, 5000, 8192), mem(30, 3000, 8192),
              mem(40, 100, 100, dev=-1, dtype=0)]  # a host allocation: not the device peak
    ev = _import(tmp_path, events)
    counters = ev[ev["kind"] == "counter"]
    assert len(counters) == 8
    assert sorted(counters["lane"].unique()) == ["memory cpu allocated", "memory cpu reserved",
                                                 "memory cuda:0 allocated",
                                                 "memory cuda:0 reserved"]
    alloc = counters[counters["lane"] == "memory cuda:0 allocated"].sort_values("ts_ns")
    assert alloc["value"].tolist() == [1000, 5000, 3000]
    assert (counters["dur_ns"] == 0).all()
    assert all(json.loads(a)["unit"] == "B" for a in counters["args"])

    trace = hermes.load(tmp_path / "t.parquet")
    from hermes.analyzers.engine.base import RankContext
    from hermes.analyzers.memory import memory

    res = memory(RankContext(0, trace.events, trace.meta))
    assert res.metrics["peak_allocated_bytes"] == 5000
    assert res.metrics["peak_reserved_bytes"] == 8192
    assert res.metrics["device"] == "cuda:0"
    assert res.tables["timeline"]["allocated_bytes"].tolist() == [1000, 5000, 3000]
    assert res.tables["timeline"]["reserved_bytes"].tolist() == [2048, 8192, 8192]
    empty = memory(RankContext(0, trace.events[trace.events["kind"] != "counter"], trace.meta))
    assert empty.metrics == {} and "timeline" not in empty.tables


def test_hip_runtime_calls_mean_what_their_cuda_twins_mean(tmp_path: Path) -> None:
    names = {"hipLaunchKernel": "launch", "hipExtLaunchKernel": "launch",
             "hipModuleLaunchKernel": "launch", "hipMalloc": "alloc", "hipFree": "alloc",
             "hipMallocAsync": "alloc", "hipMemcpyAsync": "launch", "hipMemsetAsync": "launch",
             "hipMemcpy": "sync", "hipDeviceSynchronize": "sync",
             "hipStreamSynchronize": "sync", "hipEventSynchronize": "sync"}
    ev = _import(tmp_path, [X("cuda_runtime", n, 10 * i, 5) for i, n in enumerate(names)])
    assert dict(zip(ev["name"], ev["kind"], strict=True)) == names


def test_gpu_only_trace_imports_and_analyzes(tmp_path: Path) -> None:
    ev = _import(tmp_path, [X("kernel", f"Cijk_gemm_{i}", 100 * i, 80, tid=0, pid=2)
                            for i in range(5)] + [X("gpu_memcpy", "CopyDeviceToHost", 600, 10,
                                                    tid=0, pid=2)])
    assert ev.groupby("kind").size().to_dict() == {"kernel": 5, "memcpy_d2h": 1}
    code, _, err = run_cli("analyze", str(tmp_path / "t.parquet"), "--format", "json")
    assert code == 0, err


def test_comm_patterns_table_and_user_extension(tmp_path: Path) -> None:
    table = comm_patterns.default()
    assert table.is_comm("ncclKernel_AllReduce_RING_LL_Sum_float")
    assert table.is_comm("void deep_ep::intranode::dispatch<8, 768>(int4*)")
    assert table.library("mscclpp::allreduce6") == "mscclpp"
    assert not table.is_comm("void at::native::vectorized_elementwise_kernel<4>")
    extra = tmp_path / "mine.toml"
    extra.write_text('[[library]]\nname = "mylib"\npatterns = ["^my_a2a_"]\n')
    events = [X("kernel", "my_a2a_kernel", 0, 10, tid=7, pid=0)]
    ev = _import(tmp_path, events, {"comm_patterns": comm_patterns.load(extra)})
    assert ev["kind"].tolist() == ["collective"]
    src = tmp_path / "t.json"
    code, _, err = run_cli("import", str(src), "--out", str(tmp_path / "c.parquet"),
                           "--comm-patterns", str(extra))
    assert code == 0, err
    assert hermes.load(tmp_path / "c.parquet").events["kind"].astype(str).tolist() == \
        ["collective"]
    bad = tmp_path / "bad.toml"
    for text in ("[[library]\n", '[[library]]\nname = "x"\npatterns = ["("]\n', "x = 1\n"):
        bad.write_text(text)
        with pytest.raises(UsageError):
            comm_patterns.load(bad)
        code, _, err = run_cli("import", str(src), "--out", str(tmp_path / "d.parquet"),
                               "--comm-patterns", str(bad))
        assert code == 2 and "bad.toml" in err
