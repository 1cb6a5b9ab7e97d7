"""hermes.profile's user errors, and what a session writes about itself."""

from __future__ import annotations

import pytest

import hermes
from hermes import devices
from hermes.collectors import api
from hermes.errors import OutputError, UsageError


def test_bad_arguments_are_user_errors(tmp_path) -> None:
    with pytest.raises(UsageError, match="unknown mode 'sometimes'"):
        hermes.profile(out=tmp_path / "a", mode="sometimes")
    with pytest.raises(UsageError, match="needs a directory"):
        hermes.profile(out=tmp_path / "a.parquet", world_size=2, rank=1)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OutputError, match="cannot create output directory"):
        hermes.profile(out=blocker / "trace", mode="monitor")
    with pytest.raises(UsageError, match="not an integer"):
        import os

        os.environ["RANK"] = "zero"
        try:
            hermes.profile(out=tmp_path / "b")
        finally:
            del os.environ["RANK"]


def test_one_session_at_a_time_and_metadata(tmp_path) -> None:
    with hermes.profile(out=tmp_path / "run", mode="monitor", device="h100",
                        handle_signals=False) as s:
        with pytest.raises(UsageError, match="already active"):
            hermes.profile(out=tmp_path / "other")
        for _ in range(3):
            hermes.step(samples=8, flops=1e12)
    trace = hermes.load(tmp_path / "run")
    assert s.path == tmp_path / "run"
    assert trace.meta.source == "profile"
    assert trace.meta.device["name"].lower().startswith("h100")
    col = trace.meta.collector
    assert col["mode"] == "monitor" and col["steps"] == 3 and col["detailed_steps"] == []
    assert 0 <= col["overhead_pct"] < 100 and col["wall_ns"] > 0
    ev = trace.events
    mfu = ev[(ev.kind == "counter") & (ev.name == "mfu_pct")]
    tflops = ev[(ev.kind == "counter") & (ev.name == "tflops")].value.to_numpy()
    # MFU = achieved FLOP/s over the profile's peak (the largest unit peak), in percent
    peak = max(devices.get("h100").peak_flops.values())
    assert mfu.value.to_numpy() == pytest.approx(100 * tflops * 1e12 / peak)
    assert api.current() is None  # closed: hooks record nothing now


def test_the_hook_time_outside_detail_windows_is_counted_apart(tmp_path) -> None:
    """collector.plain_ns / plain_steps: the session's hook time on the steps not captured
    in detail (auto's cost outside its windows); the boundary that starts a window and the
    window's steps are left out, every step of a monitor session is in."""
    for mode in ("monitor", "auto"):
        with hermes.profile(out=tmp_path / f"{mode}.parquet", mode=mode, handle_signals=False,
                            trigger_signal=None, sample_interval=None) as rec:
            for i in range(10):
                if i == 3 and rec.trigger is not None:
                    rec.trigger.request(3)  # steps 4, 5 and 6 in detail
                hermes.step()
        c = hermes.load(tmp_path / f"{mode}.parquet", columns=["rank"]).meta.collector
        assert c["steps"] == 10
        assert c["plain_steps"] == (10 if mode == "monitor" else 10 - 3 - 1), mode
        assert 0 < c["plain_ns"] <= c["collector_ns"]
