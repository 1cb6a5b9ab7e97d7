"""What the emulator records for the what-if of local storage and memory-bound fusion: each
storage read's bytes apart from the extraction of archive members, the node's local storage
bandwidth, each Vector task's type and input / output shapes, stream tasks that never overlap,
pinning once a batch is processed. Expected values come from the workload's definition and
the settings the trace records, not from the emulator's code paths."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import hermes
from hermes.collectors.fine import FineCollector
from hermes.npu.emulate import emulate, plan
from hermes.npu.workloads import get as get_workload

#: per-sample archive extraction and local NVMe bandwidth of the emulated node (npu/data.py)
DECODE_S, LOCAL_BPS = 4.0e-4, 5.0e9


def run(tmp_path: Path, workload: str, causes: list[str], steps: int = 4):
    out = tmp_path / "run.parquet"
    emulate(plan(workload, inject_specs=causes), FineCollector(out), steps)
    return hermes.load(out)


def test_reads_record_their_bytes_apart_from_the_extraction(tmp_path: Path) -> None:
    t = run(tmp_path, "bert-large", ["io.slow_data_reading"])
    w, s = get_workload("bert-large"), t.meta.extra["settings"]
    assert s["compressed"] and s["remote_storage"] and s["storage_Bps"] > 0
    ev = t.events
    reads = ev[(ev["kind"] == "data_read") & (ev["name"] == "read batch")]
    dec = ev[(ev["kind"] == "data_read") & (ev["name"] == "decompress batch")]
    assert len(reads) == len(dec) == 4
    nbytes = w.samples_per_step * w.sample_storage_B
    assert (reads["bytes"] == nbytes).all()
    # the transfer at the recorded bandwidth, then the extraction of every sample's member
    assert reads["dur_ns"].to_numpy() == pytest.approx(nbytes / s["storage_Bps"] * 1e9, abs=1)
    assert dec["dur_ns"].to_numpy() == pytest.approx(w.samples_per_step * DECODE_S * 1e9,
                                                     abs=1)
    ends = (reads["ts_ns"] + reads["dur_ns"]).to_numpy()
    assert np.abs(ends - dec["ts_ns"].to_numpy()).max() <= 1
    assert t.meta.device["local_storage_Bps"] == LOCAL_BPS


def test_uncompressed_local_reads_have_no_extraction(tmp_path: Path) -> None:
    ev = run(tmp_path, "bert-large", [], steps=2).events
    assert not (ev["name"] == "decompress batch").any()
    reads = ev[ev["kind"] == "data_read"]
    w = get_workload("bert-large")
    assert reads["dur_ns"].to_numpy() == pytest.approx(
        w.samples_per_step * w.sample_storage_B / LOCAL_BPS * 1e9, abs=1)


def test_vector_tasks_record_their_type_and_shapes(tmp_path: Path) -> None:
    t = run(tmp_path, "bert-large", ["computation.memory_bound"], steps=2)
    scale = t.meta.extra["settings"]["memory_scale"]
    assert scale > 1
    k = t.events[(t.events["kind"] == "kernel") & (t.events["unit"] == "vector")
                 & t.events["args"].notna()]
    assert len(k)
    ln = k[k["name"] == "layer0.ln1"].iloc[0]
    args = json.loads(ln["args"])
    assert args["Type"] == "LayerNorm"
    # bert-large: a layer norm over tokens x hidden (batch 32 x seq 512 x 1024), bf16
    w = get_workload("bert-large")
    elems = w.samples_per_step * 512 * 1024
    assert args["Input Shapes"] == args["Output Shapes"] == str(elems)
    # the traffic recorded is the unfused one: memory_scale x what its tensors hold
    assert ln["bytes"] == pytest.approx(scale * 2 * elems * 2, rel=1e-6)
    add = json.loads(k[k["name"] == "layer0.residual1"].iloc[0]["args"])
    assert add["Type"] == "Add" and add["Input Shapes"] == f"{elems};{elems}"


def test_tasks_on_a_stream_never_overlap(tmp_path: Path) -> None:
    ev = run(tmp_path, "resnet50", ["computation.memory_bound"], steps=2).events
    k = ev[ev["lane"] == "stream 0"].sort_values("ts_ns", kind="stable")
    end = (k["ts_ns"] + k["dur_ns"]).to_numpy()
    assert (k["ts_ns"].to_numpy()[1:] >= end[:-1]).all()


def test_pinning_starts_once_the_batch_is_processed(tmp_path: Path) -> None:
    ev = run(tmp_path, "resnet50", [], steps=4).events
    proc = ev[ev["kind"] == "data_process"].set_index("step")
    pin = ev[ev["kind"] == "data_fetch"].set_index("step")
    copy = ev[ev["kind"] == "memcpy_h2d"].set_index("step")
    done = (proc["ts_ns"] + proc["dur_ns"]).reindex(pin.index)
    pin_end = pin["ts_ns"] + pin["dur_ns"]
    start = copy["ts_ns"].reindex(pin.index)
    # right after its batch's processing where that leaves it time before the copy, else
    # (the copy follows the processing at once) ending at the copy's start
    room = done + pin["dur_ns"] <= start
    assert room.any() and (~room).any()
    assert ((pin["ts_ns"] - done)[room].abs() <= 1).all()
    assert ((pin_end - start)[~room].abs() <= 1).all()
