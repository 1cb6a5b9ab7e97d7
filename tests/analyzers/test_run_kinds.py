"""Kinds of run (``analyzers/common/runkind.py``): a CPU-only run analyzed as one, a run whose
device was not captured said so, with nothing that needs device times; small hand-made traces
with the answers computed by hand, and HTA's real CPU-only rank."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import hermes
from hermes.advisor import advise
from hermes.analyzers.common import runkind
from hermes.analyzers.engine.run import analyze
from hermes.report import render
from hermes.trace.meta import TraceMeta
from hermes.trace.reader import table_to_pandas
from hermes.trace.writer import to_table
from tests.tracegen import ev, events

US = 1000
#: Words that belong to an accelerator: none may describe a CPU-only run.
ACCELERATOR_WORDS = re.compile(r"(?i)\b(device|gpu|cuda|npu|kernels?|graph replay|cuda graph|"
                               r"hip|ascend|cann)\b")


def frame(*rows):
    return table_to_pandas(to_table(events(*rows)))


def kineto_x(cat: str, name: str, ts: float, dur: float, **args) -> dict:
    """One complete ('X') Kineto event on process 1, thread 1 (times in us)."""
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}


# ---------------------------------------------------------------------------------- helper
@pytest.mark.parametrize(("rows", "kind"), [
    ((ev("host_op", "aten::add", 0, 10),), "cpu_only"),
    ((ev("host_op", "aten::add", 0, 10), ev("kernel", "k", 5, 10)), "accelerator"),
    ((ev("launch", "cudaLaunchKernel", 0, 5),), "device_not_captured"),
    # a device API call an importer left as 'runtime', and an Ascend aclnn operator
    ((ev("runtime", "cudaMemcpyAsync", 0, 5),), "device_not_captured"),
    ((ev("host_op", "aclnnMatmul", 0, 5),), "device_not_captured"),
    ((ev("host_op", "aclnnMatmulGetWorkspaceSize", 0, 5),), "cpu_only"),
    # Gloo over CPU tensors: a collective on a host lane is CPU work
    ((ev("collective", "gloo:all_reduce", 0, 5, lane_kind="host", lane="thread 1"),),
     "cpu_only"),
    ((ev("collective", "nccl:all_reduce", 0, 5, lane_kind="link", lane="comm"),),
     "accelerator"),
    ((), "cpu_only"),
])
def test_rank_kind(rows, kind) -> None:
    assert runkind.rank_kind(frame(*rows) if rows else frame(ev("step", "s", 0, 1))) == kind


def test_combine_takes_the_strongest_evidence() -> None:
    assert runkind.combine(["cpu_only", "device_not_captured"]) == "device_not_captured"
    assert runkind.combine(["cpu_only", "accelerator", "device_not_captured"]) == "accelerator"
    assert runkind.combine(["cpu_only", "cpu_only"]) == "cpu_only"
    assert runkind.combine([]) == "accelerator"


# ---------------------------------------------------------------------------------- CPU only
# Two 1 ms steps on one host thread, nothing else:
#   aten::conv2d [0, 400) us, aten::addmm [400, 600), aten::relu [600, 700), aten::add [700, 800)
#   [800, 1000) nothing recorded.
# Operators' self time = 800 us of 1000 per step -> one finding cpu.operator_dispatch (reason
# cpu_operators) 0.8; convolutions 400/800 = 0.5 of the operators' time, matmul 0.25,
# elementwise (relu, add) 0.25; one thread. Verdict host, its share = the whole step: explained
# 80 %, the rest (20 %) unattributed.
def _cpu_only_rows() -> list[dict]:
    rows = []
    for s in range(2):
        t = s * 1000 * US
        rows += [ev("step", f"ProfilerStep#{s}", t, 1000 * US, step=s),
                 ev("host_op", "aten::conv2d", t, 400 * US, step=s),
                 ev("host_op", "aten::addmm", t + 400 * US, 200 * US, step=s),
                 ev("host_op", "aten::relu", t + 600 * US, 100 * US, step=s),
                 ev("host_op", "aten::add", t + 700 * US, 100 * US, step=s)]
    return rows


@pytest.fixture(scope="module")
def cpu_only():
    tr = hermes.Trace(frame(*_cpu_only_rows()), TraceMeta(source="kineto"))
    a = analyze(tr)
    adv = advise(a, trace=tr)
    return a, adv


def test_cpu_only_run_is_analyzed_in_cpu_terms(cpu_only) -> None:
    a, adv = cpu_only
    d = adv.attach(a).to_dict()
    assert d["run_kind"] == "cpu_only" and d["bound"] == "host"
    (f,) = d["findings"]
    assert (f["id"], f["evidence"]["reason"]) == ("cpu.operator_dispatch", "cpu_operators")
    assert f["time_share"] == pytest.approx(0.8)
    assert f["evidence"]["cpu_conv_share"] == 0.5
    assert f["evidence"]["cpu_matmul_share"] == 0.25
    assert f["evidence"]["cpu_eltwise_share"] == 0.25
    assert f["evidence"]["cpu_op_threads"] == 1
    assert d["cpu"]["operators"][0] == {"name": "aten::conv2d", "calls": 2, "self_ms": 0.8,
                                        "share_pct": 40.0}
    assert d["cpu"]["parts_pct"] == {"operator_dispatch": 80.0, "nothing_recorded": 20.0}
    ex = d["verdict"]["explained"]
    assert ex["pct"] == pytest.approx(80.0) and ex["share_pct"] == pytest.approx(100.0)
    assert ex["parts"][-1] == {"name": "unexplained", "pct": 20.0, "step_pct": 20.0,
                               "parts": [{"name": "unattributed", "pct": 20.0,
                                          "step_pct": 20.0}]}


def test_cpu_only_advice_is_for_cpus_and_has_evidence(cpu_only) -> None:
    a, adv = cpu_only
    recs = {r.rule: r for r in adv.for_finding("cpu.operator_dispatch")}
    # intra-op threads: recover 0.3 of 0.8 -> 1 / (1 - 0.24) = 1.32; channels-last: 0.25 x 0.5
    # of 0.8 -> 1 / 0.9 = 1.11; torch.compile: 0.5 x 0.25 of 0.8 -> 1.11; matmuls are 0.25 of
    # the operators' time, under the bf16 rule's 0.3: no bf16 advice
    assert {k: r.estimated_speedup for k, r in recs.items()} == {
        "cpu.cpu_intra_op_threads": 1.32, "cpu.cpu_channels_last": 1.11, "cpu.cpu_compile": 1.11}
    assert all(r.estimate != "replay" for r in recs.values())


@pytest.mark.parametrize("fmt", ["text", "md", "json", "html"])
def test_cpu_only_has_no_accelerator_wording(cpu_only, fmt) -> None:
    a, adv = cpu_only
    d = adv.attach(a).to_dict()
    said = [d["verdict"]["reason"], *(f["summary"] for f in d["findings"]),
            *(r["how"] for f in d["findings"] for r in f["recommendations"])]
    assert not [s for s in said if ACCELERATOR_WORDS.search(s)]
    out = render(fmt, a, adv)
    assert "explained 80%" in out or fmt == "json"
    if fmt in ("text", "md"):
        assert "aten::conv2d" in out and "CPU-only" in out
        assert not ACCELERATOR_WORDS.search(out.split("Critical path")[0].replace(
            "Device: none", "").replace("device: none", "").replace("HTA", ""))
    if fmt == "html":  # the page's text, its script and style left out
        text = re.sub(r"<[^>]+>", " ", re.sub(r"(?s)<(script|style).*?</\1>", "", out))
        text = text.replace("device  none", "").replace("device (advice)  none", "")
        assert not ACCELERATOR_WORDS.search(text.split("Step time breakdown")[0]), text


def test_hta_cpu_only_rank(shared_traces: Path, tmp_path: Path) -> None:
    # HTA's CPU-only rank: 4 aten::empty and 10 gloo:all_reduce ranges on the host, no GPU lane
    from hermes.collectors import importers

    src = next((shared_traces / "hta" / "cpu_only").glob("*.json.gz"))
    importers.get("kineto").run([src], tmp_path / "t.parquet", {})
    a = analyze(tmp_path / "t.parquet")
    d = a.to_dict()
    assert d["run_kind"] == "cpu_only"
    assert "(on the CPU)" in d["verdict"]["reason"]
    said = [d["verdict"]["reason"], *(f["summary"] for f in d["findings"]),
            *(r["how"] for f in d["findings"] for r in f["recommendations"])]
    assert not [s for s in said if ACCELERATOR_WORDS.search(s) or "HCCS" in s]
    assert d["verdict"]["explained"]["share_pct"] == pytest.approx(85.088, abs=0.01)


# ------------------------------------------------------------------------ device not captured
# A PyTorch profile without ProfilerActivity.CUDA: two 1 ms steps, each an aten::linear
# [0, 700) us issuing 100 cudaLaunchKernel calls (5 us each), then a GC pause [700, 800); no
# kernel. The dispatch time (the launches and the operator: 700 us a step) needs the device's
# times -> withheld; the GC pause (100 us of 1000) stays: 0.1.
def _not_captured(path: Path) -> Path:
    evs = []
    for s in range(2):
        t0 = 1000.0 * s
        evs += [kineto_x("user_annotation", f"ProfilerStep#{s}", t0, 1000),
                kineto_x("cpu_op", "aten::linear", t0, 700, **{"External id": s + 1})]
        evs += [kineto_x("cuda_runtime", "cudaLaunchKernel", t0 + 5 + 6 * i, 5,
                   correlation=100 * s + i + 1) for i in range(100)]
        evs.append(kineto_x("python_function", "gc", t0 + 700, 100))
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": evs}))
    return path


@pytest.fixture(scope="module")
def not_captured(tmp_path_factory):
    from hermes.collectors import importers

    tmp = tmp_path_factory.mktemp("nc")
    src = _not_captured(tmp / "nc.pt.trace.json")
    importers.get("kineto").run([src], tmp / "t.parquet", {})
    a = analyze(tmp / "t.parquet")
    return a, advise(a, trace=tmp / "t.parquet")


def test_device_not_captured_says_so_and_withholds_device_findings(not_captured) -> None:
    a, adv = not_captured
    d = adv.attach(a).to_dict()
    assert d["run_kind"] == "device_not_captured"
    reason = d["verdict"]["reason"]
    assert "device was not captured" in reason
    assert "ProfilerActivity.CUDA" in reason and "profiler_level" in reason
    ids = [f["id"] for f in d["findings"]]
    assert "cpu.operator_dispatch" not in ids and "cpu.host_device_sync" not in ids
    withheld = a.per_rank[0]["cpu"].metrics["withheld"]
    assert [w["cause"] for w in withheld] == ["operator_dispatch"]
    # the verdict (host, the whole step): the GC pause explains 10 %; the rest is the withheld
    # dispatch time (70 %: host time whose cost to the step is unknown) and unrecorded time
    ex = d["verdict"]["explained"]
    assert ex["pct"] == pytest.approx(10.0)
    assert {p["name"]: p["pct"] for p in ex["parts"][-1]["parts"]} == pytest.approx(
        {"withheld_operator_dispatch": 70.0, "unattributed": 20.0})
    # no estimate from a replay: the step graph has no device times to replay
    assert all(r["estimate"] != "replay" for f in d["findings"] for r in f["recommendations"])


@pytest.mark.parametrize("fmt", ["text", "md", "html"])
def test_device_not_captured_in_every_format(not_captured, fmt) -> None:
    a, adv = not_captured
    out = render(fmt, a, adv)
    assert "not captured" in out and "ProfilerActivity.CUDA" in out
    assert "operator dispatch (withheld: no device times) 70.0%" in out


# ------------------------------------------------------------------- CPU only, data loading
# Two 1 ms steps: the training loop waits 600 us for a single-process DataLoader (the wait
# alone recorded: data processing), then aten::mm runs 300 us; 100 us unrecorded. io 0.6 >=
# cpu 0.3 -> io verdict over the whole step: explained 60 %, the rest the operators (host
# causes, 30 %) and unattributed time (10 %). The words and the advice are a CPU's.
def test_cpu_only_data_loading() -> None:
    rows = []
    for s in range(2):
        t = s * 1000 * US
        rows += [ev("step", f"ProfilerStep#{s}", t, 1000 * US, step=s),
                 ev("data_wait", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                    t, 600 * US, step=s),
                 ev("host_op", "aten::mm", t + 600 * US, 300 * US, step=s)]
    tr = hermes.Trace(frame(*rows), TraceMeta(source="kineto"))
    a = analyze(tr)
    d = advise(a, trace=tr).attach(a).to_dict()
    assert (d["run_kind"], d["bound"]) == ("cpu_only", "io")
    f = {x["id"]: x for x in d["findings"]}
    assert f["io.slow_data_processing"]["time_share"] == pytest.approx(0.6)
    assert f["io.slow_data_processing"]["summary"].startswith(
        "the training loop waits for data 60.0% of step time")
    assert f["cpu.operator_dispatch"]["time_share"] == pytest.approx(0.3)
    ex = d["verdict"]["explained"]
    assert ex["pct"] == pytest.approx(60.0)
    assert {p["name"]: p["pct"] for p in ex["parts"][-1]["parts"]} == pytest.approx(
        {"host_causes": 30.0, "unattributed": 10.0})
    hows = [r["how"] for r in f["io.slow_data_processing"]["recommendations"]]
    assert hows and all("pin_memory" not in h for h in hows)
    said = [d["verdict"]["reason"], *(x["summary"] for x in d["findings"]),
            *(r["how"] for x in d["findings"] for r in x["recommendations"])]
    assert not [s for s in said if ACCELERATOR_WORDS.search(s)]


# ------------------------------------------------------------- a real CPU-only training run
# tests/data/kineto/cpu_only_cnn.pt.trace.json.gz (SOURCES.md): PyTorch 2.13 on a CPU, a small
# CNN, 3 profiled steps (ProfilerStep# ranges of 195.734, 232.241 and 232.591 ms). The
# profiler's own key_averages() at capture time gave each operator's self CPU time: Hermes's
# operator table must be those figures.
TORCH_SELF_MS = {"aten::convolution_backward": (6, 377.530),
                 "aten::mkldnn_convolution": (6, 138.681),
                 "aten::threshold_backward": (6, 38.613),
                 "aten::_adaptive_avg_pool2d_backward": (3, 17.500),
                 "aten::clamp_min": (6, 13.696), "aten::_adaptive_avg_pool2d": (3, 10.344),
                 "aten::conv2d": (6, 8.125)}


def test_real_cpu_only_training_run(tmp_path: Path) -> None:
    from hermes.collectors import importers
    from tests.conftest import DATA

    importers.get("kineto").run([DATA / "kineto" / "cpu_only_cnn.pt.trace.json.gz"],
                                tmp_path / "t.parquet", {})
    a = analyze(tmp_path / "t.parquet")
    d = advise(a).attach(a).to_dict()
    assert d["run_kind"] == "cpu_only" and d["bound"] == "host"
    assert d["steps"]["median_ms"] == pytest.approx(232.241, abs=1e-3)
    ops = {o["name"]: (o["calls"], o["self_ms"]) for o in d["cpu"]["operators"]}
    for name, (calls, ms) in TORCH_SELF_MS.items():
        assert ops[name][0] == calls and ops[name][1] == pytest.approx(ms, abs=2e-3), name
    assert d["cpu"]["threads"] == 1
    f = next(x for x in d["findings"] if x["id"] == "cpu.operator_dispatch")
    assert f["evidence"]["reason"] == "cpu_operators"
    # convolutions (forward and backward) are most of the operators' self time: channels-last
    # advice, with oneDNN convolutions seen; intra-op threads (one thread shows operators)
    assert f["evidence"]["cpu_conv_share"] > 0.8 and f["evidence"]["cpu_onednn_ops"] == 6
    rules = [r["rule"] for r in f["recommendations"]]
    assert rules[:2] == ["cpu.cpu_intra_op_threads", "cpu.cpu_channels_last"]
    said = [d["verdict"]["reason"], *(x["summary"] for x in d["findings"]),
            *(r["how"] for x in d["findings"] for r in x["recommendations"])]
    assert not [s for s in said if ACCELERATOR_WORDS.search(s)]


def test_compiled_cpu_run_gets_no_compile_advice(tmp_path: Path) -> None:
    # tests/data/kineto/torch_compile_cpu.json.gz: a torch.compile'd MLP on the CPU; its steps
    # run "## Call CompiledFxGraph ... ##" regions: already compiled, so no torch.compile advice
    from hermes.collectors import importers
    from tests.conftest import DATA

    importers.get("kineto").run([DATA / "kineto" / "torch_compile_cpu.json.gz"],
                                tmp_path / "t.parquet", {})
    a = analyze(tmp_path / "t.parquet")
    assert a.run_kind == "cpu_only"
    f = a.finding("cpu.operator_dispatch")
    assert f is not None and f.evidence["cpu_compiled"] > 0
    assert "cpu.cpu_compile" not in [r.rule for r in advise(a).for_finding(f.id)]


def test_real_trace_without_device_activity(shared_traces: Path, tmp_path: Path) -> None:
    # HTA's CUPTI-profiler trace: 1,862 cuda_runtime calls (77 cudaLaunchKernel) with their
    # ac2g flows, 77 cuda_profiler_range events, and no kernel, memcpy or memset (counted in
    # the JSON): the device was not captured
    from hermes.collectors import importers

    src = next((shared_traces / "hta" / "cupti_profiler").glob("*.json.gz"))
    importers.get("kineto").run([src], tmp_path / "t.parquet", {})
    a = analyze(tmp_path / "t.parquet")
    adv = advise(a, trace=tmp_path / "t.parquet")
    d = adv.attach(a).to_dict()
    assert d["run_kind"] == "device_not_captured"
    assert "ProfilerActivity.CUDA" in d["verdict"]["reason"]
    ids = {f["id"] for f in d["findings"]}
    assert not ids & {"cpu.operator_dispatch", "cpu.host_device_sync", "cpu.resource_contention"}
    assert {w["cause"] for w in a.per_rank[0]["cpu"].metrics["withheld"]} >= {
        "operator_dispatch"}
    assert all(r["estimate"] != "replay" for f in d["findings"] for r in f["recommendations"])
