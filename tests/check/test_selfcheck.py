"""The self-check of an analysis document (``hermes.check.selfcheck``) and ``hermes validate
--analysis``: each check on a small hand-made document with the figures worked out beside it, a
consistent document passing every check, and an emulated run's analysis (with its advice)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from hermes.check.selfcheck import CHECKS, category_share, self_check, speedup_bound
from hermes.errors import HermesError
from tests.conftest import run_cli


def _row(rank: int, comp: float, comm: float, over: float, host: float, free: float) -> dict:
    return {"rank": rank, "computation_only_pct": comp, "communication_only_pct": comm,
            "overlapped_pct": over, "host_bound_pct": host, "free_pct": free}


def _finding(cid: str, share: float, speedups: tuple[float, ...] = (), **evidence) -> dict:
    cat, cause = cid.split(".")
    ev = {"top_ops": [{"name": "aten::mm", "ms": 1.0}], **evidence}
    return {"id": cid, "category": cat, "cause": cause, "time_share": share, "evidence": ev,
            "ranks": [0], "recommendations": [
                {"rule": f"r{i}", "estimated_speedup": s, "estimate": "formula"}
                for i, s in enumerate(speedups)]}


def _doc() -> dict:
    """Two ranks. Rank 0: device computes 30 + 10 = 40 %, communicates 20 + 10 = 30 %, idles
    25 + 15 = 40 %; rank 1: computes 50 %, communicates 10 %, idles 40 %. The findings fit:
    dispatch 0.35 <= 0.40 idle, speed-up 1.5 <= 1 / (1 - 0.35) = 1.538; sync wait 0.25 <= 0.30."""
    return {
        "schema": "hermes.analysis/1", "ranks": [0, 1], "bound": "host",
        "verdict": {"bound": "host", "reason": "the device is idle 40.0% of step time",
                    "run_kind": "accelerator",
                    "explained": {"pct": 87.5, "share_pct": 40.0, "parts": [
                        {"name": "cpu.operator_dispatch", "pct": 87.5, "step_pct": 35.0},
                        {"name": "unexplained", "pct": 12.5, "step_pct": 5.0,
                         "parts": [{"name": "unattributed", "pct": 12.5}]}]}},
        "run_kind": "accelerator",
        "breakdown": {"per_rank": [_row(0, 30.0, 20.0, 10.0, 25.0, 15.0),
                                   _row(1, 50.0, 10.0, 0.0, 30.0, 10.0)]},
        "computation": {"top_kernels": [{"name": "gemm", "count": 12}]},
        "findings": [_finding("cpu.operator_dispatch", 0.35, (1.5, 1.538)),
                     _finding("communication.synchronization_wait", 0.25, (1.2,),
                              per_rank_share={"0": 0.25, "1": 0.05})],
    }


def _checks(doc: dict, **kw) -> list[str]:
    return [v.check for v in self_check(doc, **kw)]


def test_a_consistent_document_passes_every_check() -> None:
    assert self_check(_doc(), require_explained=True) == []


def test_breakdown_parts_must_sum_to_100() -> None:
    doc = _doc()
    doc["breakdown"]["per_rank"][1]["free_pct"] = 12.5  # 50 + 10 + 0 + 30 + 12.5 = 102.5
    (v,) = self_check(doc)
    assert (v.check, v.where) == ("breakdown_sum", "breakdown.per_rank[1] (rank 1)")
    assert "102.5000 %" in v.what
    del doc["breakdown"]["per_rank"][0]["host_bound_pct"]
    assert [x.what for x in self_check(doc)][0] == "parts missing or not numbers: host_bound_pct"


def test_no_device_work_beside_kernel_rows() -> None:
    doc = _doc()
    doc["verdict"]["reason"] = "no device work is recorded (a CPU-only run ...)"
    (v,) = self_check(doc)
    assert v.check == "no_device_work"
    assert "1 kernel rows in computation.top_kernels (12 calls)" in v.what
    assert "computation 50.00 %, communication 20.00 %" in v.what  # largest rank each
    # the same words with no kernel and no device time are true
    doc["computation"]["top_kernels"] = []
    doc["breakdown"]["per_rank"] = [_row(0, 0.0, 0.0, 0.0, 90.0, 10.0)]
    doc["findings"] = []
    assert self_check(doc) == []
    # a CPU-only run has no kernels
    doc["run_kind"] = doc["verdict"]["run_kind"] = "cpu_only"
    doc["computation"]["top_kernels"] = [{"name": "gemm", "count": 3}]
    assert [(v.check, v.where) for v in self_check(doc)] == [
        ("no_device_work", "verdict.reason"), ("no_device_work", "run_kind")]


@pytest.mark.parametrize(("cid", "evidence", "parts", "rank0"), [
    ("computation.compute_bound", {}, "computation_only + overlapped", 0.40),
    ("communication.small_packet", {}, "communication_only + overlapped", 0.30),
    ("parallel.poor_parallelism", {}, "communication_only", 0.20),
    ("cpu.operator_dispatch", {}, "host_bound + free", 0.40),
    ("io.slow_data_processing", {}, "host_bound + free", 0.40),
    ("io.slow_data_fetching", {}, "host_bound + free + computation_only", 0.70),
    ("computation.slow_node", {"reason": "step_spike"}, "the whole step (an unexplained spike)",
     1.0),
])
def test_category_share_of_each_category(cid, evidence, parts, rank0) -> None:
    f = _finding(cid, 0.1, **evidence)
    share, what = category_share(f, _row(0, 30.0, 20.0, 10.0, 25.0, 15.0))
    assert share == pytest.approx(rank0) and what == parts


def test_finding_above_its_category_share() -> None:
    doc = _doc()
    # largest computation share: rank 1's 50 %; 0.5 + SHARE_TOL passes, 0.51 does not
    doc["findings"].append(_finding("computation.memory_bound", 0.5001))
    assert self_check(doc) == []
    doc["findings"][-1]["time_share"] = 0.51
    (v,) = self_check(doc)
    assert v.check == "share_within_category" and v.where == "findings[2] computation.memory_bound"
    assert v.what == ("time_share 0.5100 above its category's share 0.5000 (computation_only + "
                      "overlapped) on every rank (largest: rank 1)")


def test_per_rank_share_is_checked_against_its_rank() -> None:
    doc = _doc()
    # rank 1 communicates 10 %: a wait of 12 % of its step there is more than it communicates
    doc["findings"][1]["evidence"]["per_rank_share"] = {"0": 0.25, "1": 0.12}
    (v,) = self_check(doc)
    assert v.check == "share_within_category"
    assert v.what.startswith("rank 1's share 0.1200 above its category's share 0.1000")


def test_speedup_above_what_the_share_allows() -> None:
    assert speedup_bound(0.35) == pytest.approx(1 / 0.65)
    assert speedup_bound(1.0) == float("inf")
    doc = _doc()
    doc["findings"][0]["recommendations"][1]["estimated_speedup"] = 1.54  # 1.538 + 0.005 = 1.543
    assert self_check(doc) == []
    doc["findings"][0]["recommendations"][1].update(estimated_speedup=2.0, estimate="replay")
    (v,) = self_check(doc)
    assert v.check == "speedup_within_share" and v.where.endswith("rule r1")
    assert v.what == "estimated_speedup 2.0000x (replay) above 1 / (1 - 0.3500) = 1.5385x"


def test_a_speedup_above_its_share_holds_with_the_findings_it_claims() -> None:
    # dispatch 0.35 and sync wait 0.25: a change removing both saves at most 0.60 of the run's
    # step time; 2.0x (1.5385x alone) stands when it says so and the shares match the document
    doc = _doc()
    r = doc["findings"][0]["recommendations"][1]
    r.update(estimated_speedup=2.0, estimate="replay", claims={"findings": {
        "cpu.operator_dispatch": 0.35, "communication.synchronization_wait": 0.25},
        "saved_share": 0.55})
    assert self_check(doc) == []
    r["claims"]["saved_share"] = 0.61  # more than the findings it names cost
    (v,) = self_check(doc)
    assert v.what.endswith("(claims saved_share 0.61 above its findings' 0.6000)")
    r["claims"] = {"findings": {"communication.synchronization_wait": 0.25}, "saved_share": 0.2}
    (v,) = self_check(doc)
    assert v.what.endswith("(claims ['communication.synchronization_wait'] leave out its own "
                           "finding cpu.operator_dispatch)")
    r["claims"] = {"findings": {"cpu.operator_dispatch": 0.5}, "saved_share": 0.4}
    (v,) = self_check(doc)
    assert v.what.endswith("(claims cpu.operator_dispatch at 0.5, the document's share is 0.35)")


def test_every_finding_names_events_or_says_why() -> None:
    doc = _doc()
    doc["findings"][1]["evidence"]["top_ops"] = []
    (v,) = self_check(doc)
    assert v.check == "names_events"
    assert v.where == "findings[1] communication.synchronization_wait"
    assert "top_ops empty" in v.what
    doc["findings"][1]["evidence"]["operators"] = ["hcom_allReduce_"]
    assert self_check(doc) == []
    doc["findings"][1]["evidence"].pop("operators")
    doc["findings"][1]["evidence"]["no_events_reason"] = "matched by sequence number only"
    assert self_check(doc) == []


def test_explained_share_reported_and_consistent() -> None:
    doc = _doc()
    old = copy.deepcopy(doc)
    del doc["verdict"]["explained"], doc["verdict"]["run_kind"], doc["run_kind"]
    assert self_check(doc) == []  # a document of before issue 32
    assert _checks(doc, require_explained=True) == ["explained", "explained"]
    doc = copy.deepcopy(old)
    doc["verdict"]["explained"]["pct"] = 120.0
    assert [v.what for v in self_check(doc)] == ["120.0 is not a percentage in 0..100"]
    doc = copy.deepcopy(old)
    doc["verdict"]["explained"]["parts"][1]["pct"] = 20.0  # 87.5 + 20 != 100
    assert [v.what for v in self_check(doc)][:2] == [
        "sum to 107.500 % of the verdict's share, not 100",
        "explained 87.500 % and unexplained 20.000 % do not add up to 100"]
    # explained below 80 %: the remainder must be decomposed; time nothing records is a part
    # of a host verdict's idle share, not of a communication verdict's share
    doc = copy.deepcopy(old)
    exp = doc["verdict"]["explained"]
    exp["pct"], exp["parts"][0]["pct"] = 50.0, 50.0
    exp["parts"][1].update(pct=50.0, parts=[])
    assert [v.what for v in self_check(doc)] == [
        "explained 50.0 % (< 80 %) and the remainder (50.0 %) is not decomposed"]
    exp["parts"][1]["parts"] = [{"name": "unattributed", "pct": 50.0}]
    assert self_check(doc) == []
    doc["verdict"]["bound"] = doc["bound"] = "communication"
    exp["parts"][0]["name"] = "communication.small_packet"
    assert [v.what for v in self_check(doc)] == [
        "explained 50.0 % (< 80 %) and the remainder (50.0 %) is not decomposed (all "
        "unattributed)"]
    exp["parts"][1]["parts"] = [{"name": "waiting_for_peers", "pct": 30.0},
                                {"name": "unattributed", "pct": 20.0}]
    assert self_check(doc) == []
    doc["run_kind"] = "gpu"
    assert [v.what for v in self_check(doc)] == [
        "top level says 'gpu', verdict.run_kind 'accelerator'",
        "'gpu' is not one of accelerator, cpu_only, device_not_captured"]


def test_only_some_checks_and_an_unknown_name() -> None:
    doc = _doc()
    doc["findings"][1]["evidence"]["top_ops"] = []
    assert self_check(doc, only=["breakdown_sum"]) == []
    with pytest.raises(HermesError, match="unknown self-check nope"):
        self_check(doc, only=["nope"])
    assert list(CHECKS) == ["breakdown_sum", "no_device_work", "share_within_category",
                            "speedup_within_share", "names_events", "explained"]


# -- hermes validate --analysis ------------------------------------------------------------------

def test_validate_analysis_exit_codes_and_json(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(_doc()))
    doc = _doc()
    doc["findings"][0]["time_share"] = 0.45  # above rank 0's and rank 1's idle 40 %
    bad.write_text(json.dumps(doc))
    code, out, err = run_cli("validate", "--analysis", str(good))
    assert (code, err) == (0, "") and "consistent" in out
    code, out, _ = run_cli("validate", "--analysis", str(bad))
    assert code == 1
    assert "share_within_category: findings[0] cpu.operator_dispatch: time_share 0.4500" in out
    assert out.rstrip().endswith("INCONSISTENT: 1 violation(s)")
    code, out, _ = run_cli("validate", "--analysis", str(bad), "--format", "json")
    got = json.loads(out)
    assert code == 1 and got["ok"] is False
    assert got["violations"] == [{
        "check": "share_within_category", "where": "findings[0] cpu.operator_dispatch",
        "what": "time_share 0.4500 above its category's share 0.4000 (host_bound + free) on "
                "every rank (largest: rank 0)"}]


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    ("{not json", "not JSON (Expecting property name enclosed in double quotes at line 1"),
    ("[1, 2]", "not a Hermes analysis: the JSON is a list, not an object"),
    ('{"schema": "hermes.trace/1"}', "schema is 'hermes.trace/1', not 'hermes.analysis/1'"),
    ('{"schema": "hermes.analysis/1", "ranks": []}',
     "key(s) missing: bound, breakdown, findings"),
    ('{"schema": "hermes.analysis/1", "ranks": [], "bound": "host", "breakdown": {}, '
     '"findings": {}}', "findings is a dict, not a list"),
])
def test_validate_analysis_bad_input_is_one_line_exit_2(tmp_path: Path, content, message) -> None:
    f = tmp_path / "a.json"
    if content is not None:
        f.write_text(content)
    code, out, err = run_cli("validate", "--analysis", str(f))
    assert code == 2 and out == ""
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_validate_needs_a_path_or_an_analysis(tmp_path: Path) -> None:
    code, _, err = run_cli("validate")
    assert code == 2 and "missing PATH" in err
    code, _, err = run_cli("validate", "x.parquet", "--analysis", "a.json")
    assert code == 2 and "not both" in err
    code, out, _ = run_cli("validate", "--help")
    assert code == 0 and "hermes validate --analysis analysis.json" in out


# -- after a real analysis -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def emulated(tmp_path_factory) -> dict:
    """An emulated 2-rank run with a late rank (communication.synchronization_wait): analysis
    and advice, as ``hermes analyze --format json`` writes them."""
    import hermes
    from hermes.commands.emulate import trace_collector
    from hermes.npu.emulate import emulate, plan

    p = plan("bert-large", ranks=2, inject_specs=["communication.synchronization_wait"], seed=0)
    path = tmp_path_factory.mktemp("selfcheck") / "run.parquet"
    emulate(p, trace_collector(p, path), steps=4)
    return hermes.analyze(path).to_dict()


def test_an_emulated_analysis_passes(emulated) -> None:
    assert emulated["findings"][0]["id"] == "communication.synchronization_wait"
    assert any(f["recommendations"] for f in emulated["findings"])
    assert [str(v) for v in self_check(emulated, require_explained=True)] == []


def test_validate_analysis_of_an_analyze_output(emulated, tmp_path: Path) -> None:
    f = tmp_path / "a.json"
    f.write_text(json.dumps(emulated))
    code, out, _ = run_cli("validate", "--analysis", str(f))
    assert code == 0, out
