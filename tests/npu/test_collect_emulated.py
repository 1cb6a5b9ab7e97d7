"""Coarse-to-fine on the emulated NPU: `hermes profile` around examples/train_emulated.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import hermes
from hermes.trace.validate import validate
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "train_emulated.py"


def _profile(out: Path, mode: str, *script_args: str, window: int = 3) -> str:
    cmd = [sys.executable, "-m", "hermes.cli", "profile", "--mode", mode, "--window",
           str(window), "--out", str(out), "--", sys.executable, str(EXAMPLE), *script_args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_auto_mode_captures_exactly_the_window_after_an_injected_slow_step(tmp_path: Path) -> None:
    # Virtual clock: step times are modelled, so only the injected straggler is slow.
    out = tmp_path / "auto"
    stdout = _profile(out, "auto", "--steps", "24", "--slow-step", "9", "--clock", "virtual",
                      "--width", "2048", "--layers", "4", window=4)
    assert stdout.count("done") == 24
    assert validate(out).ok
    trace = hermes.load(out)
    ev = trace.events
    detailed = [10, 11, 12, 13]
    for kind in ("kernel", "launch", "tiling", "infer_shape", "sync"):
        assert sorted(ev[ev.kind == kind].step.unique().astype(int)) == detailed, kind
    assert trace.meta.collector["detailed_steps"] == detailed
    assert [s["step"] for s in trace.meta.collector["slow_steps"]] == [9]
    steps = ev[ev.kind == "step"]
    assert sorted(steps.step.astype(int)) == list(range(24))  # one step row per step
    assert steps.set_index("step").dur_ns.idxmax() == 9
    # the monitor's figures come from the runtime: device busy share and MFU inputs
    busy = ev[(ev.kind == "counter") & (ev.name == "device_busy_pct")]
    assert len(busy) == 24 and busy.value.between(0, 100).all()


def test_real_clock_fine_mode_lines_python_regions_up_with_runtime_steps(tmp_path: Path) -> None:
    out = tmp_path / "fine"
    _profile(out, "fine", "--steps", "4", "--width", "1024", "--layers", "2")
    ev = hermes.load(out).events
    steps = ev[ev.kind == "step"].set_index("step")
    fwd = ev[(ev.kind == "marker") & (ev.name == "forward")]
    assert sorted(fwd.step.astype(int)) == [0, 1, 2, 3]
    for _, r in fwd.iterrows():  # each region lies inside its step (one clock for both)
        st = steps.loc[int(r.step)]
        assert st.ts_ns <= r.ts_ns and r.ts_ns + r.dur_ns <= st.ts_ns + st.dur_ns
    kernels = ev[ev.kind == "kernel"]
    launches = ev[ev.kind == "launch"]
    assert len(kernels) == len(launches) > 0
    assert set(kernels.corr_id) == set(launches.corr_id)
