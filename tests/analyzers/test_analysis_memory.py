"""The memory analyzer on hand-made counter samples: the device with the highest allocated peak,
its peaks, and the timeline with each total carried forward."""

from __future__ import annotations

import pandas as pd
import pytest

from hermes.analyzers.engine.base import RankContext
from hermes.analyzers.memory import memory
from tests.tracegen import ev, frame


def _rows() -> list[dict]:
    def c(lane: str, ts: int, value: float) -> dict:
        return ev("counter", lane, ts, 0, lane=lane, lane_kind="counter", value=value)

    return [
        ev("kernel", "k", 0, 100),
        c("memory cuda:0 allocated", 10, 100.0), c("memory cuda:0 reserved", 10, 512.0),
        c("memory cuda:0 allocated", 30, 300.0), c("memory cuda:0 allocated", 40, 200.0),
        c("memory cuda:0 reserved", 50, 1024.0),
        c("memory cuda:1 allocated", 20, 250.0),  # a smaller peak: not the one reported
        c("memory cpu allocated", 5, 9000.0),  # host samples: only when no device has any
        c("counter data_queue", 15, 7.0),  # another counter: not memory
    ]


@pytest.mark.parametrize("lane_type", ["category", "object"])
def test_peaks_and_timeline_of_the_busiest_device(lane_type: str) -> None:
    df = frame(*_rows())
    df["lane"] = df["lane"].astype(lane_type)
    df["kind"] = df["kind"].astype("category")
    r = memory(RankContext(0, df, None))
    assert r.metrics == {"device": "cuda:0", "peak_allocated_bytes": 300,
                         "peak_reserved_bytes": 1024, "samples": 5}
    t = r.tables["timeline"]
    assert t["ts_ns"].tolist() == [10, 30, 40, 50]
    assert t["allocated_bytes"].tolist() == [100.0, 300.0, 200.0, 200.0]
    assert t["reserved_bytes"].tolist() == [512.0, 512.0, 512.0, 1024.0]


def test_host_samples_when_no_device_has_any() -> None:
    rows = [r for r in _rows() if "cuda" not in str(r["lane"])]
    df = frame(*rows)
    df["lane"] = df["lane"].astype("category")
    r = memory(RankContext(0, df, None))
    assert r.metrics["device"] == "cpu" and r.metrics["peak_allocated_bytes"] == 9000
    assert r.metrics["peak_reserved_bytes"] is None
