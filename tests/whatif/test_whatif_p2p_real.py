"""The job replay joined at point-to-point transfers, on real 2-rank Gloo pipelines captured
the same session (tests/data/kineto/gloo_p2p_fix, SOURCES.md): the straggler removed is
predicted against the run whose straggler was removed."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from hermes.commands.whatif import load_any
from hermes.whatif import cluster, graphs, predict

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto" / "gloo_p2p_fix"


def _slowest_rank_median_ms(run: str) -> float:
    """The median ProfilerStep of the slowest rank (the one with the larger median), from the
    JSON alone."""
    med = []
    for r in (0, 1):
        with gzip.open(DATA / run / f"rank{r}.pt.trace.json.gz", "rt") as fh:
            evs = json.load(fh)["traceEvents"]
        med.append(statistics.median(e["dur"] / 1e3 for e in evs if e.get("ph") == "X"
                                     and str(e.get("name", "")).startswith("ProfilerStep#")))
    return max(med)


@pytest.fixture(scope="module")
def slow():
    return load_any(DATA / "slow")


def test_the_ranks_are_joined_at_their_transfers(slow) -> None:
    gs = graphs(slow.events)
    cl = cluster.match(gs)
    # 8 messages each way and 4 all-reduces: 20 rendezvous
    assert cl is not None and cl.matched == 20
    p = predict(gs, [], slow.meta)
    assert p.replay_ms == pytest.approx(p.measured_ms, rel=0.01)
    assert p.measured_ms == pytest.approx(_slowest_rank_median_ms("slow"), rel=0.01)


def test_the_straggler_removed_is_the_run_without_it(slow) -> None:
    # the slow run: rank 1 sleeps 20 ms a step to rank 0's 10 (34.3 ms steps); the fixed run,
    # captured right after it, sleeps 10 ms on both (23.7 ms). Joined only at the all-reduces
    # the replay predicted no gain (1.00x: every wait for rank 1's send stayed rank 0's work)
    p = predict(graphs(slow.events), ["communication.fix_straggler"], slow.meta)
    fixed = _slowest_rank_median_ms("fixed")
    assert p.predicted_ms == pytest.approx(fixed, rel=0.05)
    assert p.speedup == pytest.approx(_slowest_rank_median_ms("slow") / fixed, rel=0.05)
