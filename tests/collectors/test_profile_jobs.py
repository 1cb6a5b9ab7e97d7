"""Real jobs under `hermes profile`: a run with three slow steps (coarse-to-fine: the first is
monitored only, the trigger captures the ones after it) and a CPU-only PyTorch job whose
DataLoader loads in the training process (num_workers=0)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hermes

SLOW = (25, 26, 27)
SPIKES = textwrap.dedent(f"""
    import time, hermes
    def work(ms):
        time.sleep(ms / 1000)
    for i in range(40):
        work(60 if i in {SLOW!r} else 20)
        hermes.step(samples=8)
""")


def _profile(tmp: Path, mode: str, script: str, out: str) -> Path:
    p = tmp / "job.py"
    p.write_text(script)
    r = subprocess.run([sys.executable, "-m", "hermes.cli", "profile", "--mode", mode, "--out",
                        str(tmp / out), "--", sys.executable, str(p)], capture_output=True,
                       text=True, cwd=tmp, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp / out


def test_three_slow_steps_are_a_fluctuation_finding_naming_them(tmp_path: Path) -> None:
    """Steps 25-27 take 3x the others: the monitor flags 25 (over before it is known), the
    trigger captures 26-28 in detail. The step_spike finding names all three, quotes the
    monitor's counters and the steps captured after it, and the function those steps show."""
    out = _profile(tmp_path, "auto", SPIKES, "t.parquet")
    trace = hermes.load(out)
    windows = [(r["from_step"], r["to_step"]) for r in trace.meta.collector["requests"]]
    assert (26, 28) in windows  # the trigger fired on step 25
    analysis = hermes.analyze(out)
    (f,) = [f for f in analysis.findings if f.evidence.get("reason") == "step_spike"]
    assert set(SLOW) <= set(f.steps)
    ev = f.evidence
    assert 25 in ev["spike_steps"] and ev["captured_after"]["25"][:2] == [26, 27]
    assert {26, 27} <= set(ev["captured_slow_steps"])
    i = ev["spike_steps"].index(25)
    assert 2.0 <= ev["slower_x"][i] <= 4.0  # 60 ms against ~20 ms
    assert "samples_per_s" in ev["monitor"]
    assert ev["captured_python"][0]["name"].endswith(": work")
    assert "work" in f.summary and "captured in detail after it" in f.summary
    assert [r.rule for r in f.recommendations] == ["computation.capture_spikes"]


LOADER = textwrap.dedent("""
    import time, torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 12 * 8
        def __getitem__(self, i):
            time.sleep(0.004)  # decoding / augmenting a sample in the training process
            return torch.randn(32), i % 4

    loader = DataLoader(Slow(), batch_size=8, num_workers=0)
    model = nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
""")
ACCELERATOR_WORDS = ("accelerator", "DALI", "DVPP", "GPU", "NPU", "CUDA", "torch.cuda",
                     "non_blocking", "device-side")


def test_cpu_only_loader_advice_quotes_num_workers_and_no_accelerator(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = _profile(tmp_path, "fine", LOADER, "t.parquet")
    meta = hermes.load(out).meta
    assert meta.extra["settings"]["num_workers"] == 0
    assert meta.extra["settings"]["device_type"] == "cpu"
    assert meta.extra["framework"]["dataloader"] == {"num_workers": 0, "pin_memory": False,
                                                     "persistent_workers": False}
    analysis = hermes.analyze(out)
    io = [f for f in analysis.findings if f.category == "io"]
    assert io and io[0].cause == "slow_data_processing"
    recs = [r for f in io for r in f.recommendations]
    assert recs and recs[0].rule == "io.processing_more_workers"
    assert "now 0 worker(s): loading in the training process" in recs[0].how
    text = json.dumps([r.to_dict() for r in recs])
    assert not [w for w in ACCELERATOR_WORDS if w in text], text
