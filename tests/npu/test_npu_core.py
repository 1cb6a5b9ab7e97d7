"""Emulator core: cost model, in-order streams, tiling cache, collectives, determinism."""

from __future__ import annotations

import numpy as np
import pytest

import hermes
from hermes.collectors.fine import FineCollector
from hermes.devices import get as get_device
from hermes.npu import Runtime, Settings
from hermes.npu.comm import links, transmit_ns
from hermes.npu.device import UnitPeaks, in_order, task_durations
from hermes.npu.graph import FWD, GraphBuilder
from hermes.npu.host import HostModel
from hermes.npu.workloads import Workload

P = get_device("ascend910b")


def test_in_order_queue_by_hand():
    starts = in_order(np.array([0.0, 5.0, 100.0]), np.array([10.0, 10.0, 10.0]), 0.0)
    assert starts.tolist() == [0.0, 10.0, 100.0]
    # free only from 50: everything shifts; vectorized over two ranks
    starts = in_order(np.array([[0.0, 5.0], [0.0, 70.0]]), np.array([10.0, 10.0]),
                      np.array([50.0, 0.0]))
    assert starts.tolist() == [[50.0, 60.0], [0.0, 70.0]]


def _matmul(k: int):
    g = GraphBuilder()
    g.linear("mm", 1024, k, 1024, FWD)
    return g.build()


def test_matmul_duration_is_roofline_by_hand():
    g = _matmul(1024)
    dur = task_durations(g, UnitPeaks.of(P), flops=g.flops, nbytes=g.bytes, unit=g.unit,
                         aligned=False)
    flops = 2 * 1024**3
    assert g.flops[0] == flops
    assert dur[0] == pytest.approx(flops / 3.2e14 * 1e9)      # compute-bound: 6.71 us
    g = _matmul(1000)                                          # inner axis not /256
    dur = task_durations(g, UnitPeaks.of(P), flops=g.flops, nbytes=g.bytes, unit=g.unit,
                         aligned=False)
    assert dur[0] == pytest.approx(2 * 1024 * 1000 * 1024 / 3.2e14 * 1e9 / 0.6)
    small = GraphBuilder()
    small.eltwise("add", "Add", 1e6, FWD, tensors=3)           # 6 MB moved: memory-bound
    sg = small.build()
    d = task_durations(sg, UnitPeaks.of(P), flops=sg.flops, nbytes=sg.bytes, unit=sg.unit,
                       aligned=True)
    assert d[0] == pytest.approx(6e6 / 1.6e12 * 1e9)


def test_tiling_cache_hits_by_signature_and_shape():
    host = HostModel(P, Settings())
    sig, obj, small = np.array([1, 2, 1]), np.array([1, 1, 1]), np.zeros(3, bool)
    c = host.step_costs(sig, 0, obj, small)
    assert c.tiling_hit.tolist() == [False, False, True]
    assert c.tiling[2] < 0.1 * c.tiling[0]
    assert host.step_costs(sig, 0, obj, small).tiling_hit.all()
    assert not host.step_costs(sig, 5, obj, small).tiling_hit[:2].any()   # new shape
    off = HostModel(P, Settings(tiling_cache=False))
    off.step_costs(sig, 0, obj, small)
    assert not off.step_costs(sig, 0, obj, small).tiling_hit.any()


def _tp_workload(nbytes: float) -> Workload:
    def build(tp: int, pp: int, stage: int):
        g = GraphBuilder()
        g.linear("mm", 1024, 1024, 1024, FWD)
        g.comm("ar", "allreduce", "tp", nbytes, FWD)
        return g.build()
    return Workload("tiny", "one matmul + allreduce", build, 1, None, 0.0, 0.0, 0.0, max_tp=2)


def test_collective_waits_for_last_arrival_then_transmits(tmp_path):
    nbytes = 4 * 2**20
    late = 1e-3
    s = Settings(late_rank=1, late_s=late, layout=(1, 2, 1))
    out = tmp_path / "t.parquet"
    rt = Runtime(P, ranks=2, settings=s, collector=FineCollector(out))
    rt.close(rt.run(_tp_workload(nbytes), 1))
    ev = hermes.load(out).events
    coll = ev[ev["kind"] == "collective"].set_index("rank")
    intra, _ = links(P)
    # by hand: ring allreduce over 2 ranks = 2 alpha + bytes / (bw * b / (b + half))
    bw = 5.6e10 * (nbytes / 2**24) ** 0.75    # below the 16 MiB saturation size
    xmit = 2 * 4e-6 + nbytes / bw
    assert transmit_ns("allreduce", nbytes, 2, intra, Settings()) == pytest.approx(xmit * 1e9)
    ends = coll["ts_ns"] + coll["dur_ns"]
    assert abs(ends[0] - ends[1]) <= 1
    # rank 1 arrives 1 ms late; rank 0 waits that long before the transmission starts
    wait0 = coll.loc[0, "dur_ns"] - xmit * 1e9
    assert wait0 == pytest.approx(late * 1e9, abs=2)
    assert coll.loc[1, "dur_ns"] == pytest.approx(xmit * 1e9, abs=2)
    assert set(coll["coll_group"]) == {"tp0.0"} and set(coll["coll_seq"]) == {0}


def test_same_seed_gives_byte_identical_traces(tmp_path):
    files = []
    for i in range(2):
        out = tmp_path / f"run{i}.parquet"
        s = Settings(dynamic_shapes=True, shape_variants=3, rdma_retrans_prob=0.0)
        rt = Runtime("ascend910b", ranks=2, settings=s, collector=FineCollector(out), seed=7)
        rt.close(rt.run("bert-large", 3))
        files.append(out.read_bytes())
    assert files[0] == files[1]
