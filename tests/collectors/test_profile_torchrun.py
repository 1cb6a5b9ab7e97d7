"""A real 2-rank DDP job over Gloo under `hermes profile -- torchrun ...` (PyTorch CPU build).

Rank 1 spends a known amount of pure-Python time per step in ``slow_python`` (50 ms, which the
job measures itself and writes beside the trace): every worker writes its own rank file into
the one --out directory, the framework's facts land in the metadata, and fine mode's stack
sampler records that Python time under the function's name, within 20 % of what the job
measured (or within the sampler's own resolution, which the trace records, on a busy machine).
One job serves every test here (a torchrun start costs ~10 s of imports alone).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hermes  # noqa: E402
from hermes.trace.validate import validate  # noqa: E402

STEPS = 8
SLOW_MS = 50
JOB = textwrap.dedent(f"""
    import json, os, sys, time
    import torch, torch.distributed as dist
    from torch import nn
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def slow_python(ms):
        end = time.perf_counter() + ms / 1000
        x = 0
        while time.perf_counter() < end:
            x += 1
        return x

    spent = []
    for step in range({STEPS}):
        x = torch.randn(16, 32)
        if rank == 1:
            t0 = time.perf_counter_ns()
            slow_python({SLOW_MS})
            spent.append(time.perf_counter_ns() - t0)
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with open(sys.argv[1] + f".rank{{rank}}.json", "w") as fh:
        json.dump(spent, fh)
    dist.destroy_process_group()
""")


def _tolerance(frames, measured_ms_per_call: float) -> float:
    """How far the sampled time may be from the measured one: 20 %, or the sampler's own
    resolution where that is coarser. A sampled frame's ends are known to one sample gap each,
    and the gap is the interval only on an idle machine: a busy one (a 2-core CI runner, the
    other test worker beside the two ranks) starves the sampler thread of the GIL, and the
    trace says so (each frame's duration over its ``samples``)."""
    args = [json.loads(a) for a in frames.args]
    gap_ms = float(np.median([d / max(a["samples"], 1) for d, a in
                              zip(frames.dur_ns.to_numpy(), args, strict=True)])) / 1e6
    return max(0.2, 2 * gap_ms / measured_ms_per_call)


def _torchrun() -> list[str]:
    exe = Path(sys.executable).with_name("torchrun")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "torch.distributed.run"]


def _run_job(tmp: Path) -> dict[str, object]:
    script = tmp / "ddp_job.py"
    script.write_text(JOB)
    out = tmp / "job"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "hermes.cli", "profile", "--mode", "fine",
                        "--out", str(out), "--", *_torchrun(), "--nproc-per-node", "2",
                        "--monitor-interval", "0.05", str(script), str(tmp / "spent")],
                       capture_output=True, text=True, env=env, cwd=tmp, timeout=240)
    spent = json.loads((tmp / "spent.rank1.json").read_text()) if r.returncode == 0 else []
    return {"r": r, "out": out, "spent_ns": spent}


def _diagnosis(job: dict) -> str:
    """What each rank's file holds of the sampler (for a failure's message): its python
    events, those of slow_python, the sampler's own counters, and the job's stderr."""
    lines = []
    for f in sorted(Path(job["out"]).glob("rank-*.parquet")):
        t = hermes.load(f)
        py = t.events[t.events.kind == "python"]
        slow = py.name.astype(str).str.endswith(": slow_python")
        lines.append(f"{f.name}: {len(py)} python events, {int(slow.sum())} of slow_python, "
                     f"steps {sorted(set(py.step.astype(int)))}, "
                     f"sampler {t.meta.collector.get('python_sampler')}")
    return "\n".join(lines) + "\n" + job["r"].stderr[-2000:]


def _sampled(job: dict) -> bool:
    if job["r"].returncode != 0:
        return True  # the tests report the failed job itself
    ev = hermes.load(job["out"]).events
    return bool(((ev.kind == "python") & ev.name.astype(str).str.endswith(": slow_python")
                 & (ev["rank"] == 1)).any())


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The job, run once; run a second time only when rank 1's sampler recorded nothing of
    slow_python (seen once, on a loaded 2-core CI runner, and not reproduced since): the first
    run's per-rank diagnosis goes into a warning, and a second such run fails the tests with
    both diagnoses."""
    first = _run_job(tmp_path_factory.mktemp("torchrun"))
    if _sampled(first):
        return {**first, "diagnosis": ""}
    import warnings

    warnings.warn("rank 1's stack sampler recorded no slow_python; the job is run again:\n"
                  + _diagnosis(first), stacklevel=1)
    second = _run_job(tmp_path_factory.mktemp("torchrun"))
    return {**second, "diagnosis": "first run:\n" + _diagnosis(first) + "\nsecond run:\n"
            + _diagnosis(second)}


def test_every_worker_writes_its_rank_into_the_one_directory(job: dict) -> None:
    r, out = job["r"], job["out"]
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(f.name for f in out.glob("*.parquet")) == ["rank-00000.parquet",
                                                            "rank-00001.parquet"]
    assert validate(out).ok
    trace = hermes.load(out)
    assert trace.meta.ranks == (0, 1)
    steps = trace.events[trace.events.kind == "step"]
    assert steps.groupby("rank").size().tolist() == [STEPS, STEPS]  # one per optimizer step
    assert r.stderr.count("hermes: rank 0's trace written to") == 1  # said once, by rank 0


def test_the_framework_facts_are_in_the_metadata(job: dict) -> None:
    assert job["r"].returncode == 0, job["r"].stderr[-3000:]
    meta = hermes.load(job["out"]).meta
    fw, settings = meta.extra["framework"], meta.extra["settings"]
    assert fw["torch_version"] == torch.__version__
    assert fw["device_type"] == "cpu" and fw["device_name"] is None
    assert fw["ddp"]["bucket_cap_mb"] == 25.0  # DDP's default
    assert fw["compile"] is False and fw["autocast"] is None
    assert settings == {"framework": "pytorch", "device_type": "cpu", "world_size": 2,
                        "backend": "gloo", "compile": False}
    assert meta.extra["launcher"] == "torchrun"


def test_fine_mode_names_the_python_function_that_costs_rank_1(job: dict) -> None:
    assert job["r"].returncode == 0, job["r"].stderr[-3000:]
    ev = hermes.load(job["out"]).events
    py = ev[(ev.kind == "python") & ev.name.astype(str).str.endswith(": slow_python")]
    # rank 0 never calls it
    assert set(py["rank"].astype(int)) == {1}, job["diagnosis"] or _diagnosis(job)
    args = [json.loads(a) for a in py.args]
    assert {a["source"] for a in args} == {"hermes.sampler"}
    assert {os.path.basename(a["file"]) for a in args} == {"ddp_job.py"}
    # steps 1..STEPS-1 (step 0 is the job's set-up): the trace's time in slow_python against
    # the job's own measurement of it
    steady = py[(py.step >= 1) & (py.step < STEPS)]
    recorded = steady.groupby("step").dur_ns.sum()
    measured = job["spent_ns"][1:STEPS]
    assert len(recorded) == len(measured) == STEPS - 1
    ratio = recorded.sum() / sum(measured)
    tol = _tolerance(steady, sum(measured) / len(measured) / 1e6)
    assert 1 - tol <= ratio <= 1 + tol, (ratio, tol)


def test_the_launchers_exit_code_passes_through(tmp_path: Path) -> None:
    """``python -m torch.distributed.run`` whose worker fails: the launcher's exit code (1,
    torchrun's for a failed worker) is hermes profile's, and the worker's steps are kept."""
    script = tmp_path / "fail.py"
    script.write_text("import sys, hermes\nfor _ in range(3):\n    hermes.step()\nsys.exit(3)\n")
    out = tmp_path / "job"
    r = subprocess.run([sys.executable, "-m", "hermes.cli", "profile", "--mode", "monitor",
                        "--out", str(out), "--", sys.executable, "-m", "torch.distributed.run",
                        "--nproc-per-node", "1", "--monitor-interval", "0.05", str(script)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 1, r.stderr[-2000:]
    assert "exitcode  : 3" in r.stderr  # torchrun's own report of the worker
    trace = hermes.load(out)
    assert (trace.events.kind == "step").sum() == 3


def test_the_analysis_names_rank_1_and_the_function_that_costs_it(job: dict) -> None:
    """The late rank of the collectives is rank 1, and its Python time between operators is
    named ``slow_python`` at the rate the job measured (within 20 %, or the sampler's
    resolution)."""
    assert job["r"].returncode == 0, job["r"].stderr[-3000:]
    analysis = hermes.analyze(job["out"])
    late = [f for f in analysis.findings if f.id == "communication.synchronization_wait"]
    assert late and late[0].evidence["late_ranks"] == [1]
    py = [f for f in analysis.findings if f.evidence.get("reason") == "python"]
    assert len(py) == 1, [f.id for f in analysis.findings]
    assert "per_rank_share" in py[0].evidence, job["diagnosis"] or _diagnosis(job)
    ev = py[0].evidence
    shares = {int(r): s for r, s in ev["per_rank_share"].items()}
    assert max(shares, key=shares.get) == 1
    top = ev["functions"][0]
    assert top["name"].endswith(": slow_python") and top["line"] is not None
    assert "slow_python" in py[0].summary
    measured_ms = sum(job["spent_ns"][1:STEPS]) / (STEPS - 1) / 1e6
    ev = hermes.load(job["out"]).events
    frames = ev[(ev.kind == "python") & ev.name.astype(str).str.endswith(": slow_python")]
    tol = _tolerance(frames[(frames.step >= 1) & (frames.step < STEPS)], measured_ms)
    assert 1 - tol <= top["ms_per_step"] / measured_ms <= 1 + tol, (top, measured_ms, tol)
    rules = [r.rule for r in py[0].recommendations]
    assert rules and rules[0] == "cpu.python_out_of_the_step"
