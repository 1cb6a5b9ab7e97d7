"""hermes.analyze / hermes analyze: the JSON contract, per-rank loading, merging, the CLI."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import hermes
from hermes.analyzers.engine import fold, run
from hermes.analyzers.engine.base import ANALYZERS, AnalyzerResult, RankContext, ordered
from hermes.analyzers.engine.invariants import InvariantError, check_result, problems
from hermes.analyzers.engine.verdict import verdict
from hermes.findings import Finding
from hermes.trace.meta import TraceMeta
from hermes.trace.writer import write_trace
from tests.conftest import run_cli
from tests.tracegen import ev, events, frame


def rank_rows(rank: int, wait: int) -> list[dict]:
    """Four steps of 1000 ns: a data wait of ``wait`` ns, a launch, a kernel filling the rest."""
    rows = []
    for i in range(4):
        t = i * 1000
        rows += [ev("step", f"ProfilerStep#{i}", t, 1000, rank=rank),
                 ev("data_wait", "next", t, wait, rank=rank),
                 ev("launch", "cudaLaunchKernel", t + wait, 10, rank=rank, corr_id=i),
                 ev("kernel", "gemm", t + wait + 10, 990 - wait, rank=rank, corr_id=i, stream=7)]
    return rows


@pytest.fixture
def two_ranks(tmp_path):
    rows = rank_rows(0, 500) + rank_rows(1, 600)
    f = tmp_path / "run.parquet"
    write_trace(f, events(*rows), TraceMeta(source="synthetic", ranks=(0, 1)))
    d = tmp_path / "run"
    write_trace(d, events(*rows), TraceMeta(source="synthetic"))
    return f, d


def test_contract_keys_and_numbers(two_ranks):
    f, _ = two_ranks
    a = hermes.analyze(f)
    d = json.loads(a.to_json())
    assert d["schema"] == "hermes.analysis/1"
    assert d["ranks"] == [0, 1]
    assert d["steps"] == {"count": 4, "median_ms": 0.001, "p90_ms": 0.001}
    assert d["bound"] == "io"  # device idle 55.5 % on average; data waits 60 % (rank 1) > cpu
    (row0, row1) = d["breakdown"]["per_rank"]
    for key in ("computation_only_pct", "communication_only_pct", "overlapped_pct",
                "host_bound_pct", "free_pct", "idle_pct", "compute_pct", "non_compute_pct",
                "comm_comp_overlap_pct"):
        assert key in row0
    assert row1["computation_only_pct"] == pytest.approx(39.0)
    assert set(d["critical_path"]) >= {"components_pct", "top_ops"}
    shares = [x["time_share"] for x in d["findings"]]
    assert shares == sorted(shares, reverse=True)
    top = d["findings"][0]
    assert set(top) == {"id", "category", "cause", "severity", "time_share", "summary",
                        "evidence", "ranks", "steps", "recommendations"}
    # merged across ranks: the max share (rank 1: 600 of 1000 ns) and both ranks
    assert top["id"] == "io.slow_data_processing" and top["time_share"] == pytest.approx(0.6)
    assert top["ranks"] == [0, 1]
    assert top["evidence"]["per_rank_share"] == {"0": 0.5, "1": 0.6}


def test_directory_file_and_trace_agree(two_ranks):
    f, d = two_ranks
    a, b = hermes.analyze(f), hermes.analyze(d)
    c = hermes.analyze(hermes.load(f))
    assert a.to_dict() == b.to_dict() == c.to_dict()
    t = a.tables["overlap.per_step"]
    assert list(t.columns[:1]) == ["rank"] and sorted(t["rank"].unique()) == [0, 1]
    assert len(a.tables["steps.windows"]) == 8


def test_rank_selection_and_workers(two_ranks):
    _, d = two_ranks
    one = hermes.analyze(d, ranks=[1])
    assert one.ranks == [1] and one.findings[0].time_share == pytest.approx(0.6)
    pooled = hermes.analyze(d, workers=2)
    assert pooled.to_dict() == hermes.analyze(d).to_dict()
    with pytest.raises(hermes.HermesError, match="rank"):
        hermes.analyze(d, ranks=[7])


def test_every_analyzer_keeps_invariants_on_the_fixture(two_ranks):
    a = hermes.analyze(two_ranks[0])
    for rr in a.per_rank.values():
        for res in rr.values():
            check_result(res)
    for res in a.cluster.values():
        check_result(res)


@pytest.mark.parametrize("rows", [(), (ev("kernel", "k", 0, 10, stream=7),),
                                  (ev("host_op", "aten::add", 0, 10),)])
def test_every_analyzer_on_empty_and_one_event(rows):
    run.load_analyzers()
    df = frame(*rows)
    results = run.run_rank(0, df, TraceMeta())
    assert {a.name for a in ordered("rank")} <= set(results)
    for res in results.values():
        check_result(res)
    a = hermes.analyze(hermes.Trace(df, TraceMeta()))
    assert a.bound in ("host", "device", "io", "communication")
    json.loads(a.to_json())


def test_merge_one_finding_per_id_takes_max():
    # one finding per id whatever the reason (sub-causes live in the evidence): max share, its
    # evidence, the union of ranks
    f = [Finding("computation", "underutilization", 0.2, "a", {"reason": "ai_cpu"}, (0,)),
         Finding("computation", "underutilization", 0.3, "b", {"reason": "alignment"}, (2,)),
         Finding("computation", "underutilization", 0.5, "c", {"reason": "ai_cpu"}, (1,))]
    out = fold.merge_findings([f])
    assert [(x.evidence["reason"], x.time_share, x.ranks) for x in out] == \
        [("ai_cpu", 0.5, (0, 1, 2))]
    assert out[0].evidence["per_rank_share"] == {"0": 0.2, "1": 0.5, "2": 0.3}


def test_slow_node_folds_its_frequency_drop_and_the_waits_for_it():
    slow = Finding("computation", "slow_node", 0.6, "s", {}, (1,))
    under = Finding("computation", "underutilization", 0.65, "u",
                    {"reason": "frequency_drop",
                     "causes": {"frequency_drop": {"share": 0.6},
                                "ai_cpu": {"share": 0.05}}}, (1,))
    under0 = Finding("computation", "underutilization", 0.05, "u0",
                     {"reason": "ai_cpu", "causes": {"ai_cpu": {"share": 0.05}}}, (0,))
    wait = Finding("communication", "synchronization_wait", 0.7, "w", {}, (1,))
    other_wait = Finding("communication", "synchronization_wait", 0.2, "w2", {}, (3,))
    folded = fold.fold_symptoms([[under0], [under], [slow, wait]])
    out = {f.id: f for f in fold.merge_findings(folded)}
    u = out["computation.underutilization"]
    assert u.time_share == pytest.approx(0.05) and u.ranks == (0, 1)
    assert "frequency_drop" not in u.evidence["causes"] or u.evidence["reason"] == "ai_cpu"
    w = out["communication.synchronization_wait"]
    assert w.time_share == pytest.approx(0.7 - 0.6)           # what the slow node leaves
    assert w.evidence["explained_by"] == {"computation.slow_node": 0.6}
    # a wait for a rank that is not slow is not explained by the slow node
    kept = fold.fold_symptoms([[slow, other_wait]])[0]
    assert [f.time_share for f in kept] == [0.6, 0.2]


def test_verdict_rule():
    part = {"computation_only_pct": 20, "overlapped_pct": 0, "communication_only_pct": 10,
            "host_bound_pct": 50, "free_pct": 20}
    io = Finding("io", "slow_data_reading", 0.3, "x")
    cpu = Finding("cpu", "operator_dispatch", 0.2, "y")
    assert verdict([part], [io, cpu]).bound == "io"
    assert verdict([part], [cpu]).bound == "host"
    assert verdict([part], [Finding("io", "slow_data_reading", 0.04, "x")]).bound == "host"
    assert verdict([dict(part, computation_only_pct=50, host_bound_pct=20)], [io]).bound == "device"
    assert verdict([dict(part, communication_only_pct=60, host_bound_pct=0, free_pct=20)],
                   []).bound == "communication"
    # host-bound, and most of the idle time has nothing recorded on the host either: the
    # reason says so (free 20% < host-bound 50% here: it does not)
    assert "nothing is recorded" not in verdict([part], [cpu]).reason
    v = verdict([dict(part, host_bound_pct=10, free_pct=60)], [cpu])
    assert v.bound == "host" and "60.0% of step time is unattributed" in v.reason
    assert "with_stack=True" in v.reason and "hermes profile" in v.reason  # how to capture it
    # no device work at all: say so rather than "the device is idle 100%"
    v = verdict([{"computation_only_pct": 0, "overlapped_pct": 0, "communication_only_pct": 0,
                  "host_bound_pct": 70, "free_pct": 30}], [cpu])
    assert v.bound == "host" and v.reason.startswith("no device work is recorded")
    io_bound = verdict([{"computation_only_pct": 0, "overlapped_pct": 0,
                         "communication_only_pct": 0, "host_bound_pct": 70, "free_pct": 30}],
                       [Finding("io", "slow_data_processing", 0.5, "x")])
    assert io_bound.bound == "io" and io_bound.reason.startswith("no device work is recorded")


def test_invariant_checker_catches_broken_results():
    bad = AnalyzerResult("x", tables={"per_step": pd.DataFrame({"dur_ns": [10, -1]})},
                         metrics={"computation_only_pct": 50.0, "communication_only_pct": 0.0,
                                  "overlapped_pct": 0.0, "host_bound_pct": 0.0, "free_pct": 40.0,
                                  "share": 1.5})
    msgs = problems(bad)
    assert any("negative" in m for m in msgs) and any("sum to" in m for m in msgs)
    assert any("share=1.5" in m for m in msgs)
    with pytest.raises(InvariantError):
        check_result(bad)
    cp = AnalyzerResult("cp", tables={"per_step": pd.DataFrame({"dur_ns": [10], "path_ns": [11]})})
    assert any("critical path" in m for m in problems(cp))


def test_cli_formats_and_out(two_ranks, tmp_path):
    f, _ = two_ranks
    code, out, err = run_cli("analyze", str(f))
    assert code == 0 and "IO-bound" in out and "io.slow_data_processing" in out
    code, out, _ = run_cli("analyze", str(f), "--format", "md", "--rank", "0")
    assert code == 0 and out.startswith("# Hermes analysis")
    assert "| `io.slow_data_processing`" in out
    target = tmp_path / "a.json"
    code, out, _ = run_cli("analyze", str(f), "--format", "json", "--out", str(target))
    assert code == 0 and out == ""
    assert json.loads(target.read_text())["bound"] == "io"
    assert not list(tmp_path.glob(".a.json.*"))  # no temp file left behind


def test_cli_errors(tmp_path, two_ranks):
    code, _, err = run_cli("analyze", str(tmp_path / "missing.parquet"))
    assert code == 2 and "no such file" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli("analyze", str(two_ranks[0]), "--format", "pdf")
    assert code == 2 and "valid: text, md, json, html" in err
    code, _, err = run_cli("analyze", str(two_ranks[0]), "--out", str(tmp_path / "no" / "a.txt"))
    assert code == 2 and "does not exist" in err


def test_registry_has_b_analyzers():
    run.load_analyzers()
    assert {"io", "cpu", "fluctuation"} <= set(ANALYZERS)
    assert RankContext  # the contract type used by every analyzer


def test_warm_up_first_step_is_left_out_and_reported():
    # step 1 lasts 1000 ns, steps 2-4 10 ns each: 100x the median -> left out (kept on request);
    # its host op ends before step 2 (dropped), the kernels of steps 2-4 stay
    from hermes.advisor import advise
    from hermes.report.text import render_text

    rows = [ev("step", "ProfilerStep#1", 0, 1000), ev("host_op", "compile", 0, 900)]
    for i in range(3):
        t = 1000 + 10 * i
        rows += [ev("step", f"ProfilerStep#{i + 2}", t, 10), ev("kernel", "k", t, 10, stream=7)]
    df = pd.DataFrame(events(*rows))
    df["corr_id"] = pd.array([None] * len(df), dtype="Int64")
    df["stream"] = pd.array(df["stream"], dtype="Int64")
    trace = hermes.Trace(df, TraceMeta())
    a = run.analyze(trace)
    assert a.warmup == [{"rank": 0, "step": 1, "dur_ms": 0.001, "median_ms": 0.0,
                         "factor": 100.0, "events_left_out": 2}]
    assert a.steps["count"] == 3 and a.bound == "device"
    assert a.to_dict()["warmup"][0]["step"] == 1
    assert "Warm-up left out: rank 0 step 1" in render_text(a, advise(a))
    kept = run.analyze(trace, keep_warmup=True)
    assert kept.warmup == [] and kept.steps["count"] == 4 and kept.bound == "host"


def test_device_bound_without_roofline_data_says_so_instead_of_guessing():
    """A device busy 90 % of a 1 ms step in kernels with no FLOPs, no bytes and names no
    family knows (as MTIA's pe_exe / merge): the verdict is device, no computation finding is
    invented, and the reason names the kernels and how to measure their bound. A GEMM by name
    is placed by its family instead (compute-bound by default) and gets a finding."""
    rows = [ev("step", "ProfilerStep#1", 0, 1_000_000),
            ev("kernel", "pe_exe", 50_000, 600_000, stream=7),
            ev("kernel", "merge", 650_000, 300_000, stream=7)]
    a = hermes.analyze(hermes.Trace(frame(*rows), TraceMeta()))
    assert a.bound == "device"
    assert not [f for f in a.findings if f.category == "computation"]
    assert "100% of device time is in kernels whose bound is not known" in a.verdict.reason
    assert "pe_exe, merge" in a.verdict.reason and "with_flops=True" in a.verdict.reason
    rows[1] = ev("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32", 50_000, 600_000, stream=7)
    b = hermes.analyze(hermes.Trace(frame(*rows), TraceMeta()))
    assert b.bound == "device"
    assert any(f.category == "computation" for f in b.findings)
    assert "bound is not known" not in b.verdict.reason


def test_gloo_collectives_on_the_host_are_communication_not_dispatch():
    """One rank of a CPU-only Gloo job: a 1 ms step, aten::add [0, 100), gloo:all_reduce
    [100, 900) on the same host thread (a host-lane collective). Communication-only 80 %, the
    verdict says communication and that one rank cannot tell waiting from transmission; no
    dispatch finding claims the all-reduce; the critical path runs through communication."""
    rows = [ev("step", "ProfilerStep#1", 0, 1000),
            ev("host_op", "aten::add", 0, 100),
            ev("collective", "gloo:all_reduce", 100, 800, lane_kind="host", lane="thread 1")]
    a = hermes.analyze(hermes.Trace(frame(*rows), TraceMeta()))
    row = a.breakdown_rows[0]
    assert row["communication_only_pct"] == pytest.approx(80.0)
    assert row["host_bound_pct"] == pytest.approx(10.0)
    assert a.bound == "communication"
    assert "other ranks' traces" in a.verdict.reason
    assert a.finding("cpu.operator_dispatch") is None or \
        a.finding("cpu.operator_dispatch").time_share <= 0.1 + 1e-9
    # the path is aten::add then the all-reduce: 800 of its 900 ns are communication
    assert a.critical_path["components_pct"]["communication"] == pytest.approx(100 * 800 / 900)
