"""The step-by-step Python API: host stages, device model, syncs on both clocks."""

from __future__ import annotations

import time

import pytest

from hermes.npu.real import Session


class Keep:
    def __init__(self) -> None:
        self.batches, self.steps = [], []

    def wants_detail(self, rank: int, step: int) -> bool:
        return True

    def on_events(self, batch):
        self.batches.append(batch)

    def on_step(self, info):
        self.steps.append(info)

    def close(self, meta_updates=None):
        pass


def test_virtual_session_sync_waits_for_modelled_device():
    keep = Keep()
    npu = Session("ascend910b", clock="virtual", collector=keep)
    with npu.step():
        end = npu.matmul("mm", 8192, 8192, 8192)
        assert end == pytest.approx(npu.dev_free)
        npu.item()
        assert npu.now() >= end                     # the host waited for the device
    dur = 2 * 8192**3 / 3.2e14 * 1e9                 # roofline: compute-bound on the Cube
    kinds = keep.batches[0]["kind"]
    k = kinds.index("kernel")
    assert keep.batches[0]["dur_ns"][k] == int(dur)
    assert keep.steps[0].device_busy_ns == int(dur)
    # second step: the same shape hits the tiling cache
    with npu.step():
        npu.matmul("mm", 8192, 8192, 8192)
    b = keep.batches[1]
    assert b["args"][b["kind"].index("tiling")] == '{"cache_hit":true}'


def test_real_session_blocks_until_device_time():
    npu = Session("ascend910b", clock="real")
    t = time.perf_counter()
    with npu.step():
        npu.matmul("mm", 8192, 8192, 8192)          # ~3.4 ms on the modelled device
    assert time.perf_counter() - t >= 2 * 8192**3 / 3.2e14
    assert npu.steps_ns[0] >= 2 * 8192**3 / 3.2e14 * 1e9
