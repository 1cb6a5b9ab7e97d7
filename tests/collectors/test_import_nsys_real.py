"""The two real Nsight Systems 2026.2 exports of ../shared/traces/nsys import without --from,
and what the trace holds equals what docs/nsys_counts.py (the standard library's sqlite3, no
Hermes code) measures straight from the SQLite: kernel, memcpy, memset, NVTX and runtime
counts, copy bytes per direction, and every kernel name's count and total time."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hermes.collectors import importers
from tests.conftest import REPO, SHARED_TRACES, run_cli

FILES = ("h100_2gpu_1s.sqlite", "mfu_2gpu_before.sqlite")
#: copyKind -> the trace's kind (CUPTI: 1 HtoD, 2 DtoH, 8 DtoD)
COPY_KINDS = {"1": "memcpy_h2d", "2": "memcpy_d2h", "8": "memcpy_d2d"}


def _measure(path: Path) -> dict:
    spec = importlib.util.spec_from_file_location("nsys_counts", REPO / "docs/nsys_counts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.measure(str(path))


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    if not (SHARED_TRACES / "nsys").is_dir():
        pytest.skip(f"shared traces not found at {SHARED_TRACES}")
    out = {}
    for name in FILES:
        src = SHARED_TRACES / "nsys" / name
        dst = tmp_path_factory.mktemp("nsys") / "t.parquet"
        code, _, err = run_cli("import", str(src), "--out", str(dst), "--device", "h100")
        assert code == 0, err
        out[name] = (dst, _measure(src))
    return out


@pytest.mark.parametrize("name", FILES)
def test_detected_by_content(name: str, shared_traces: Path) -> None:
    imp = importers.detect(shared_traces / "nsys" / name)
    assert imp is not None and imp.name == "nsys"


@pytest.mark.parametrize("name", FILES)
def test_counts_and_kernel_totals_equal_sqlite(name: str, imported: dict) -> None:
    import pyarrow.parquet as pq

    path, want = imported[name]
    ev = pq.read_table(path).to_pandas()
    ev["kind"] = ev["kind"].astype(str)
    ev["name"] = ev["name"].astype(str)
    device_task = ev["kind"].isin(["kernel", "collective"])
    assert int(device_task.sum()) == want["kernels"]
    assert int(ev.loc[device_task, "dur_ns"].sum()) == want["kernel_ns"]
    assert int(ev["kind"].str.startswith("memcpy").sum()) == want["memcpys"]
    for copy_kind, nbytes in want["memcpy_bytes"].items():
        got = ev.loc[ev["kind"] == COPY_KINDS[copy_kind], "bytes"].sum()
        assert int(got) == nbytes, copy_kind
    assert int((ev["kind"] == "memset").sum()) == want["memsets"]
    assert int(ev["kind"].isin(["host_op", "marker", "step"]).sum()) == want["nvtx"]
    host_calls = ev["kind"].isin(["launch", "runtime", "alloc"]) | (
        (ev["kind"] == "sync") & (ev["lane_kind"].astype(str) == "host"))
    assert int(host_calls.sum()) == want["runtime"]
    per = ev[device_task].groupby("name")["dur_ns"].agg(["count", "sum"])
    got = {n: [int(r["count"]), int(r["sum"])] for n, r in per.iterrows()}
    assert got == want["per_kernel"]


def test_two_processes_are_two_ranks_and_nccl_kernels_collectives(imported: dict) -> None:
    import pyarrow.parquet as pq

    path, _ = imported["mfu_2gpu_before.sqlite"]
    ev = pq.read_table(path).to_pandas()
    assert sorted(ev["rank"].unique().tolist()) == [0, 1]
    coll = ev[ev["kind"].astype(str) == "collective"]
    assert len(coll) == 66 and coll["name"].astype(str).str.startswith("ncclDevKernel").all()
    # NCCL's sequence numbers: 0..32 on each of the two ranks
    for _, g in coll.groupby("rank"):
        assert sorted(g["coll_seq"].astype(int).tolist()) == list(range(33))


def test_commands_exit_zero_with_the_h100(imported: dict, tmp_path: Path) -> None:
    import json

    one, two = (imported[name][0] for name in FILES)
    for path in (one, two):
        code, out, err = run_cli("analyze", str(path), "--format", "json")
        assert code == 0, err
        assert json.loads(out)["source"] == "nsys"
    code, _, err = run_cli("report", str(two), "--out", str(tmp_path / "r.html"))
    assert code == 0, err
    assert "NVIDIA H100" in (tmp_path / "r.html").read_text()
    code, _, err = run_cli("diff", str(one), str(two))
    assert code == 0, err
    code, _, err = run_cli("check", str(two), "--baseline", str(two))
    assert code == 0, err
