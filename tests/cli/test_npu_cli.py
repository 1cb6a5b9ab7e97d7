"""``hermes emulate``: listing, traces with ground truth, errors that list the valid names."""

from __future__ import annotations

import json

import hermes
from hermes.npu.inject import CAUSES as INJECTABLE
from hermes.npu.opts import OPTS
from hermes.npu.workloads import names
from tests.conftest import run_cli


def test_list_names_everything():
    code, out, _ = run_cli("emulate", "--list")
    assert code == 0
    for n in names() + list(INJECTABLE) + ["ascend910b", "h100"]:
        assert n in out
    for o in OPTS:
        assert o in out


def test_emulate_writes_trace_with_ground_truth(tmp_path):
    out = tmp_path / "run.parquet"
    code, stdout, err = run_cli("emulate", "resnet50", "--out", str(out), "--steps", "3",
                                "--inject", "io.slow_data_processing=2", "--opt", "pin_memory",
                                "--seed", "3")
    assert code == 0, err
    assert str(out) in stdout
    t = hermes.load(out)
    assert t.meta.source == "emulator"
    assert t.meta.device["name"] == "ascend910b"
    assert t.meta.extra["injected"] == [{"id": "io.slow_data_processing", "strength": 2.0}]
    assert t.meta.extra["opts"] == {"pin_memory": True}
    assert t.meta.extra["seed"] == 3 and t.meta.extra["workload"] == "resnet50"
    assert t.meta.collector["mode"] == "fine"
    assert sorted(t.events["step"].unique()) == [0, 1, 2]
    kinds = set(t.events["kind"].astype(str))
    assert {"infer_shape", "tiling", "alloc", "launch", "kernel", "step", "data_read",
            "data_process", "data_fetch", "memcpy_h2d", "counter", "sync"} <= kinds
    ev = t.events
    launches = ev[ev["kind"] == "launch"]
    kernels = ev[ev["kind"] == "kernel"]
    assert set(kernels["corr_id"].dropna()) <= set(launches["corr_id"].dropna())
    counters = set(ev.loc[ev["kind"] == "counter", "name"].astype(str))
    assert {"data_queue", "host_queue", "device_queue", "host_cpu_pct"} <= counters


def test_emulate_directory_per_rank(tmp_path):
    out = tmp_path / "run"
    code, _, err = run_cli("emulate", "vgg16", "--out", str(out), "--steps", "2", "--ranks", "2")
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["rank-00000.parquet", "rank-00001.parquet"]
    ev = hermes.load(out).events
    coll = ev[ev["kind"] == "collective"]
    # the same collective (group, seq) appears once on each member rank
    assert (coll.groupby(["coll_group", "coll_seq"], observed=True).size() == 2).all()


def test_real_clock_runs_one_rank(tmp_path):
    out = tmp_path / "real.parquet"
    code, _, err = run_cli("emulate", "deepfm", "--out", str(out), "--steps", "2",
                           "--clock", "real")
    assert code == 0, err
    ev = hermes.load(out).events
    assert (ev["kind"] == "step").sum() == 2 and (ev["kind"] == "kernel").sum() > 50


def _err(*args: str) -> str:
    code, _, err = run_cli(*args)
    assert code == 2, err
    assert err.count("\n") <= 1 and "Traceback" not in err
    return err


def test_bad_names_exit_2_listing_valid_ones(tmp_path):
    out = str(tmp_path / "x.parquet")
    assert "resnet50" in _err("emulate", "resnet5", "--out", out)
    assert "ascend910b" in _err("emulate", "resnet50", "--out", out, "--device", "tpu")
    assert "io.slow_data_reading" in _err("emulate", "resnet50", "--out", out,
                                          "--inject", "io.slow")
    assert "tiling_cache" in _err("emulate", "resnet50", "--out", out, "--opt", "turbo")
    assert "virtual" in _err("emulate", "resnet50", "--out", out, "--clock", "wall")


def test_contradictory_options_are_clear_errors(tmp_path):
    out = str(tmp_path / "x.parquet")
    assert "static" in _err("emulate", "resnet50", "--out", out, "--inject",
                            "cpu.operator_compilation", "--opt", "sink")
    assert "exclude" in _err("emulate", "resnet50", "--out", out, "--opt", "sink",
                             "--opt", "pipeline")
    assert "ranks" in _err("emulate", "vgg16", "--out", out, "--inject",
                           "computation.slow_node")
    assert "covers 4 ranks" in _err("emulate", "gpt3-13b", "--out", out, "--ranks", "8",
                                    "--opt", "parallel=dp2,tp2")
    assert "twice" in _err("emulate", "resnet50", "--out", out, "--opt", "num_workers=2",
                           "--opt", "num_workers=4")
    assert "one rank" in _err("emulate", "vgg16", "--out", out, "--ranks", "2",
                              "--clock", "real")
    assert "strength" in _err("emulate", "resnet50", "--out", out, "--inject",
                              "io.slow_data_reading=-1")


def test_demo_writes_trace_and_says_where(tmp_path):
    out = tmp_path / "demo"
    code, stdout, err = run_cli("demo", "--out", str(out), "--steps", "6")
    assert code == 0, err
    trace = out / "trace.parquet"
    assert trace.exists() and str(trace) in stdout
    t = hermes.load(trace)
    assert t.meta.extra["injected_ids"] == ["io.slow_data_processing"]
    # the next step it prints applies the top finding's best recommendation
    top = json.loads((out / "analysis.json").read_text())["findings"][0]
    assert top["id"] == "io.slow_data_processing"
    fix = next(r["emulator_opt"] for r in top["recommendations"] if r["emulator_opt"])
    assert fix.startswith("num_workers=") and int(fix.split("=")[1]) > 1
    assert stdout.rstrip().splitlines()[-1].endswith(f"--opt {fix}")


def test_max_runtime_core_number_env_turns_on_the_host_pipeline(tmp_path, monkeypatch):
    from hermes.npu.emulate import plan

    monkeypatch.setenv("MAX_RUNTIME_CORE_NUMBER", "3")
    assert plan("resnet50").settings.pipeline
    monkeypatch.setenv("MAX_RUNTIME_CORE_NUMBER", "1")
    assert not plan("resnet50").settings.pipeline
