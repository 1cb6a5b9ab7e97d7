"""Real PyTorch/Kineto traces of an H100 (../shared/traces/kineto-h100): verdicts, top findings."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hermes
from hermes.analyzers.engine.invariants import check_result

NAMES = ("gpt_dataloader_starved", "gpt_balanced", "two_stream_prefetch", "big_matmul")


@pytest.fixture(scope="module")
def analyses(tmp_path_factory):
    from tests.conftest import SHARED_TRACES

    src = SHARED_TRACES / "kineto-h100"
    if not src.is_dir():
        pytest.skip(f"shared traces not found at {src}")
    from hermes.collectors.importers import get

    imp = get("kineto")
    out = {}
    tmp = tmp_path_factory.mktemp("kineto")
    for name in NAMES:
        path = tmp / f"{name}.parquet"
        imp.run([src / f"{name}.pt.trace.json.gz"], path, {})
        out[name] = hermes.analyze(path)
    out["_truth"] = json.loads((src / "steps.json").read_text())["workloads"]
    return out


def shares(a, category):
    return [f.time_share for f in a.findings if f.category == category]


def test_dataloader_starved_is_io_bound_by_processing(analyses):
    a = analyses["gpt_dataloader_starved"]
    assert a.bound == "io"
    top = a.findings[0]
    assert top.id == "io.slow_data_processing"
    assert top.evidence["data_wait_ms"] > 0
    assert "DataLoader" in top.evidence["top_ops"][0]["name"]
    # _SingleProcessDataLoaderIter: the training process loads (num_workers=0), and the advice
    # starts from there
    assert (top.evidence["loader"], top.evidence["num_workers"]) == ("single-process", 0)
    rec = next(r.to_dict() for r in top.recommendations
               if r.to_dict()["rule"] == "io.processing_more_workers")
    assert "(now 0 worker(s): loading in the training process)" in rec["how"]


def test_balanced_is_host_bound_without_io(analyses):
    a = analyses["gpt_balanced"]
    assert a.bound == "host"
    assert max(shares(a, "io"), default=0.0) < 0.05


def test_two_stream_prefetch_is_device_bound(analyses):
    a = analyses["two_stream_prefetch"]
    assert a.bound == "device"
    assert max(shares(a, "io") + shares(a, "cpu"), default=0.0) < 0.05


def test_big_matmul_is_compute_bound(analyses):
    assert analyses["big_matmul"].findings[0].id == "computation.compute_bound"


@pytest.mark.parametrize("name", NAMES)
def test_median_step_matches_profiler_steps(analyses, name):
    truth = analyses["_truth"][name]
    # step_wall_s holds steps 0..7; the trace profiles ProfilerStep#3..6
    walls = [truth["step_wall_s"][s] for s in truth["profiled_steps"]]
    a = analyses[name]
    assert a.steps["count"] == len(walls)
    assert a.steps["median_ms"] == pytest.approx(1e3 * float(np.median(walls)), rel=0.01)
    for rr in a.per_rank.values():
        for res in rr.values():
            check_result(res)
