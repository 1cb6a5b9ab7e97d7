"""The fine-grained collector: events in, a valid trace with the right metadata out."""

from __future__ import annotations

import hermes
from hermes.collectors.fine import FineCollector
from hermes.hooks import Collector, StepInfo
from hermes.trace.meta import TraceMeta
from tests.tracegen import ev, events


def _batch(rank: int) -> dict:
    return events(ev("step", "step 0", 0, 100, rank=rank, step=0),
                  ev("kernel", "MatMul", 10, 50, rank=rank, step=0, lane="stream 0",
                     stream=0, unit="cube", flops=1e6, corr_id=1))


def test_fine_collector_writes_file_with_meta(tmp_path):
    out = tmp_path / "t.parquet"
    c = FineCollector(out, TraceMeta(source="emulator", extra={"workload": "x"}), steps=[0])
    assert isinstance(c, Collector)
    assert c.wants_detail(0, 0) and not c.wants_detail(0, 1)
    c.on_events(_batch(0))
    c.on_step(StepInfo(rank=0, step=0, start_ns=0, end_ns=100))
    c.close({"extra": {"seed": 3}, "device": {"name": "ascend910b"}, "other": 1})
    t = hermes.load(out)
    assert len(t.events) == 2
    assert t.meta.source == "emulator"
    assert t.meta.extra == {"workload": "x", "seed": 3, "other": 1}
    assert t.meta.collector == {"mode": "fine", "detailed_steps": [0]}
    assert t.meta.device["name"] == "ascend910b"


def test_fine_collector_directory_per_rank(tmp_path):
    out = tmp_path / "run"
    with FineCollector(out) as c:
        c.on_events(_batch(0))
        c.on_events(_batch(1))
    assert sorted(p.name for p in out.iterdir()) == ["rank-00000.parquet", "rank-00001.parquet"]
    assert sorted(hermes.load(out).events["rank"].unique()) == [0, 1]


def test_fine_collector_abort_leaves_nothing(tmp_path):
    out = tmp_path / "t.parquet"
    c = FineCollector(out)
    c.on_events(_batch(0))
    c.abort()
    assert not out.exists() and list(tmp_path.iterdir()) == []
