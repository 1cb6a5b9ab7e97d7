"""Kineto traces of one process driving several GPUs: device lanes name their device.

CUDA writes a device event's ``pid`` as the device index and its ``tid`` as the stream, so two
GPUs' stream 7 would share the lane 'stream 7'. With more than one device in a file the lane
is 'gpu <device> stream <id>'; single-device traces keep 'stream <id>'.
"""

from __future__ import annotations

import json
from pathlib import Path

import hermes
from hermes.collectors.importers import get
from hermes.trace.validate import validate


def _op(corr: int, ts: float, device: int, stream: int, name: str) -> list[dict]:
    """A host launch on thread 10 and its kernel on (device, stream)."""
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 10,
         "ts": ts, "dur": 2.0, "args": {"correlation": corr, "device": device}},
        {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream,
         "ts": ts + 5.0, "dur": 10.0,
         "args": {"correlation": corr, "device": device, "stream": stream}},
    ]


def _trace(path: Path, placements: list[tuple[int, int]]) -> Path:
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1,
               "tid": 10, "ts": 0.0, "dur": 1000.0, "args": {}}]
    for i, (device, stream) in enumerate(placements):
        events += _op(100 + i, 10.0 + 20 * i, device, stream, f"k{i}")
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _lanes(src: Path, out: Path) -> dict[str, list[str]]:
    """Device lane -> kernel names on it, in time order."""
    get("kineto").run([src], out, {})
    assert validate(out).ok, validate(out).errors
    ev = hermes.load(out).events
    dev = ev[ev["lane_kind"] == "device"].sort_values("ts_ns")
    return {str(lane): g["name"].astype(str).tolist()
            for lane, g in dev.groupby(dev["lane"].astype(str), sort=True)}


def test_two_gpus_same_stream_id_get_two_lanes(tmp_path: Path) -> None:
    # device 0 and device 1 both run stream 7; device 1 also stream 9
    src = _trace(tmp_path / "multi.json", [(0, 7), (1, 7), (0, 7), (1, 9), (1, 7)])
    assert _lanes(src, tmp_path / "o.parquet") == {
        "gpu 0 stream 7": ["k0", "k2"],
        "gpu 1 stream 7": ["k1", "k4"],
        "gpu 1 stream 9": ["k3"],
    }
    ev = hermes.load(tmp_path / "o.parquet").events
    kernels = ev[ev["kind"] == "kernel"].sort_values("ts_ns")
    # the stream column stays the stream id; the launch's correlation and step carry over
    assert kernels["stream"].tolist() == [7, 7, 7, 9, 7]
    assert kernels["corr_id"].tolist() == [100, 101, 102, 103, 104]
    assert kernels["step"].tolist() == [3] * 5


def test_single_gpu_keeps_plain_stream_names(tmp_path: Path) -> None:
    src = _trace(tmp_path / "one.json", [(0, 7), (0, 9), (0, 7)])
    assert _lanes(src, tmp_path / "o.parquet") == {"stream 7": ["k0", "k2"], "stream 9": ["k1"]}


def test_device_named_even_when_second_gpu_appears_late(tmp_path: Path,
                                                        monkeypatch: object) -> None:
    # the second device shows up only in a later chunk: lanes of earlier chunks are renamed too
    from hermes.collectors.importers.kineto import reader as kineto_reader

    placements = [(0, 7)] * 300 + [(1, 7)]
    src = _trace(tmp_path / "late.json", placements)
    monkeypatch.setattr(kineto_reader, "CHUNK_BYTES", 4096)  # type: ignore[attr-defined]
    lanes = _lanes(src, tmp_path / "o.parquet")
    assert sorted(lanes) == ["gpu 0 stream 7", "gpu 1 stream 7"]
    assert len(lanes["gpu 0 stream 7"]) == 300 and lanes["gpu 1 stream 7"] == ["k300"]


def test_device_option_fills_unknown_device_properties(tmp_path: Path) -> None:
    # a device Hermes has no profile for (MTIA, say): --device supplies the figures, the
    # trace's own name and properties stay
    src = tmp_path / "mtia.json"
    src.write_text(json.dumps({"schemaVersion": 1,
                               "deviceProperties": [{"id": 0, "name": "MTIA 9"}],
                               "traceEvents": json.loads(_trace(tmp_path / "t.json", [(0, 7)])
                                                         .read_text())["traceEvents"]}))
    get("kineto").run([src], tmp_path / "a.parquet", {})
    plain = hermes.load(tmp_path / "a.parquet").meta.device
    assert plain["name"] == "MTIA 9" and "peak_flops" not in plain
    get("kineto").run([src], tmp_path / "b.parquet", {"device": "h100"})
    dev = hermes.load(tmp_path / "b.parquet").meta.device
    assert dev["name"] == "MTIA 9" and dev["kineto"] == {"id": 0, "name": "MTIA 9"}
    assert dev["peak_flops"] == get_profile("h100")["peak_flops"]


def get_profile(name: str) -> dict:
    from hermes import devices

    return devices.get(name).to_meta()
