"""The Python stack sampler (collectors/pysample.py) in an in-process fine session: the time
of a pure-Python function is recorded under its name, and a sampler that fails says so in the
trace's metadata and in one warning instead of leaving the job's Python time silently
unnamed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import hermes
from hermes.collectors import pysample

BUSY_MS = 60


def _busy(ms: float) -> int:
    end = time.perf_counter() + ms / 1000
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def _run(out: Path) -> hermes.Trace:
    with hermes.profile(out=out, mode="fine"):
        for _ in range(4):
            _busy(BUSY_MS)
            hermes.step()
    return hermes.load(out)


def test_a_busy_function_is_recorded_under_its_name(tmp_path: Path) -> None:
    trace = _run(tmp_path / "t.parquet")
    ev = trace.events
    busy = ev[(ev.kind == "python") & ev.name.astype(str).str.endswith(": _busy")]
    assert sorted(set(busy.step.astype(int))) == [0, 1, 2, 3]
    per_step = busy.groupby("step").dur_ns.sum() / 1e6
    assert ((per_step > 0.6 * BUSY_MS) & (per_step < 1.4 * BUSY_MS)).all(), per_step
    sampler = trace.meta.collector["python_sampler"]
    assert sampler["samples"] > 0 and "error" not in sampler


def test_a_failing_sampler_is_reported_not_silent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    def broken(self: pysample.StackSampler, *args: object) -> None:
        raise RuntimeError("frame walk failed")

    monkeypatch.setattr(pysample.StackSampler, "_diff", broken)
    trace = _run(tmp_path / "t.parquet")
    sampler = trace.meta.collector["python_sampler"]
    assert sampler["error"] == "RuntimeError: frame walk failed"
    err = capsys.readouterr().err
    assert err.count("the Python stack sampler stopped") == 1
    assert "RuntimeError: frame walk failed" in err
    # the steps themselves are all kept
    assert (trace.events.kind == "step").sum() == 4
