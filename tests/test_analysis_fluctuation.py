"""Fluctuation analyzer: step-time spikes and the cause that co-occurs with them."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.analyzers.base import RankContext
from hermes.analyzers.fluctuation import fluctuation, robust_z
from hermes.analyzers.invariants import check_result
from hermes.trace.meta import TraceMeta
from tests.test_analysis_io import frame
from tests.tracegen import ev


def run(*rows):
    return check_result(fluctuation(RankContext(rank=0, events=frame(*rows), meta=TraceMeta())))


def steps(durs, extra=()):
    rows, t = [], 0
    for i, d in enumerate(durs):
        rows += [ev("step", f"ProfilerStep#{i}", t, d), ev("kernel", "k", t, 500, stream=7)]
        t += d
    return rows + list(extra)


def test_robust_z():
    z, med, mad = robust_z(np.array([10.0, 11, 9, 10, 30]))
    assert (med, mad) == (10.0, 1.0)
    assert z[-1] == pytest.approx(0.6745 * 20)


def test_gc_spike_is_attributed_to_gc():
    # seven steps of 1000 ns, step 3 lasts 1500: a GC pause of 450 ns in it (starts at 3300)
    durs = [1000, 1000, 1000, 1500, 1000, 1000, 1000]
    res = run(*steps(durs, [ev("gc", "gc", 3300, 450)]))
    assert res.metrics["spikes"] == 1
    (f,) = res.findings
    # excess 500, GC excess 450 >= 0.5 x 500 -> 450 ns of 7500 attributed
    assert (f.id, f.steps) == ("cpu.garbage_collection", (3,))
    assert f.time_share == pytest.approx(450 / 7500)
    assert res.tables["per_step"]["attributed_to"].tolist()[3] == "gc"


def test_unexplained_spike_gives_no_finding():
    res = run(*steps([1000, 1000, 1000, 1500, 1000, 1000, 1000]))
    assert res.metrics["spikes"] == 1 and res.findings == []


def test_steady_run_and_too_few_steps():
    res = run(*steps([1000, 1010, 990, 1000, 1005, 995]))
    assert res.metrics["spikes"] == 0 and res.metrics["cv"] < 0.01
    # four steps: no reliable median, no spikes whatever the variation
    res = run(*steps([1000, 3000, 1000, 1000], [ev("gc", "gc", 1100, 1500)]))
    assert res.metrics["spikes"] == 0 and res.findings == []


def test_data_wait_spike_goes_to_io():
    durs = [1000] * 6 + [2000]
    res = run(*steps(durs, [ev("data_wait", "next", 6000, 1000)]))
    (f,) = res.findings
    assert f.id == "io.slow_data_processing" and f.time_share == pytest.approx(1000 / 8000)


@pytest.mark.parametrize("rows", [(), (ev("kernel", "k", 0, 10, stream=7),)])
def test_empty_and_one_event(rows):
    assert run(*rows).findings == []
