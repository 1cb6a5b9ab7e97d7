"""The emulated H100 against figures measured on a real H100.

Run: python benchmarks/emulator_calibration.py [--smoke]   (--smoke: the same run, seconds)
Reads ../shared/traces/h100_calibration.json (PyTorch 2.11 / CUDA 13 on one H100 80GB HBM3)
and runs the same micro-benchmarks through the emulator's Python API (virtual clock):
8192^3 bf16 matmul throughput, elementwise bandwidth, host cost of a tiny eager op, the
launch-bound rate of back-to-back tiny kernels, the .item() round trip and H2D copies.
Prints emulated vs measured and their ratio (1.00 = the model reproduces the hardware).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hermes.devices import get as get_device
from hermes.npu.data import DataPipeline
from hermes.npu.real import Session
from hermes.npu.settings import Settings
from hermes.npu.workloads import Workload

CALIB = Path(__file__).resolve().parents[2] / "shared" / "traces" / "h100_calibration.json"


def emulated() -> dict[str, float]:
    npu = Session("h100", clock="virtual")
    out: dict[str, float] = {}
    with npu.step():
        npu.matmul("mm", 8192, 8192, 8192)
        out["matmul_bf16_TFLOPs"] = 2 * 8192**3 / (npu.busy / 1e9) / 1e12
    n = 1 << 26                                   # sin over 64 Mi elements (read + write)
    with npu.step():
        npu.op("sin", "vector", float(n), 4.0 * n, (n,))
        out["elementwise_sin_GBps_read_plus_write"] = 4.0 * n / (npu.busy / 1e9) / 1e9
    with npu.step():
        t = npu.now()
        for _ in range(1000):
            npu.eltwise("add", 1)
        host = (npu.now() - t) / 1000 / 1e3
    out["host_dispatch_us_per_tiny_add"] = host
    out["launch_bound_us_per_tiny_kernel_back_to_back"] = host
    with npu.step():
        t = npu.now()
        npu.item()
        out["sync_roundtrip_us_item"] = (npu.now() - t) / 1e3
    w = Workload("copy", "256 MiB", lambda *a: None, 1, None, 0.0, float(256 << 20), 0.0)  # type: ignore[arg-type]
    prof = get_device("h100")
    for pin, key in ((True, "h2d_pinned_GBps"), (False, "h2d_pageable_GBps")):
        d = DataPipeline(prof, w, Settings(pin_memory=pin))
        out[key] = (256 << 20) / (d.fetch_dur / 1e9) / 1e9
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true",
                    help="the same run (it takes about a second): for the test suite")
    ap.parse_args()
    if not CALIB.exists():
        sys.exit(f"calibration file not found: {CALIB}")
    measured = json.loads(CALIB.read_text())
    print(f"{'figure':<46} {'emulated':>10} {'measured':>10} {'ratio':>7}")
    for key, value in emulated().items():
        m = float(measured[key])
        print(f"{key:<46} {value:>10.2f} {m:>10.2f} {value / m:>7.2f}")
