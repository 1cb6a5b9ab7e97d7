"""Verdict accounting (``Verdict.explained``): how much of the verdict's share of step time its
findings explain, and the remainder decomposed -- small hand-made runs with the answers
computed by hand, and the real 2-rank Gloo DDP traces with figures measured from their JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hermes
from hermes import devices
from hermes.analyzers.engine.run import analyze
from hermes.analyzers.engine.verdict import explain, remainder_inputs
from hermes.findings import Finding
from hermes.trace.meta import TraceMeta
from hermes.trace.reader import table_to_pandas
from hermes.trace.writer import to_table
from tests.tracegen import ev, events

US = 1000
H100 = TraceMeta(device=devices.get("h100").to_meta())
A910 = TraceMeta(device=devices.get("ascend910b").to_meta())


def run(rows, meta=H100):
    return analyze(hermes.Trace(table_to_pandas(to_table(events(*rows))), meta))


def coll(ts: int, dur: int, seq: int, rank: int, **args) -> dict:
    return ev("collective", "allreduce", ts, dur, rank=rank, lane="comm", lane_kind="link",
              coll_group="dp", coll_seq=seq, args=json.dumps(args) if args else None)


def parts(a) -> dict[str, float]:
    """The explained parts by name (the remainder's own parts flattened under it)."""
    out = {}
    for p in a.verdict.explained["parts"]:
        out[p["name"]] = p["pct"]
        out.update({f"unexplained.{s['name']}": s["pct"] for s in p.get("parts", [])})
    return out


def test_waiting_on_another_rank_is_explained_by_the_slow_rank() -> None:
    # two 1 ms steps; rank 0 computes [0, 100) us and arrives at 100, rank 1 computes [0, 600)
    # and arrives at 600; both leave at 1000. Communication-only: rank 0 900 us (500 waiting
    # for rank 1, 400 transfer), rank 1 400 (transfer) -> the verdict's share is the mean,
    # 65 %. Rank 1 is a slow node (500 us more compute: 0.5 of the step), which explains rank
    # 0's wait (folded into it): explained = 0.5 / 0.65 = 76.923 %. The rest, 0.15 of the
    # step, is transfer (0.4 a rank; the wait is covered): 23.077 %.
    rows = []
    for s in range(2):
        t = s * 1000 * US
        for r, k in ((0, 100), (1, 600)):
            rows += [ev("step", f"ProfilerStep#{s}", t, 1000 * US, rank=r, step=s),
                     ev("kernel", "k", t, k * US, rank=r, step=s),
                     coll(t + k * US, (1000 - k) * US, s, r)]
    a = run(rows)
    assert a.bound == "communication"
    assert a.verdict.communication == pytest.approx(0.65)
    assert [f.id for f in a.findings] == ["computation.slow_node"]
    assert a.verdict.explained_pct == pytest.approx(100 * 0.5 / 0.65, abs=1e-3)
    assert parts(a) == pytest.approx({"computation.slow_node": 76.923, "unexplained": 23.077,
                                      "unexplained.transfer": 23.077}, abs=1e-3)


def test_cpu_only_ranks_waiting_on_a_busier_one() -> None:
    # two CPU-only ranks (Gloo between CPUs: collectives on the host thread), two 1 ms steps:
    # rank 0 computes aten::mm 200 us, rank 1 600 us, then both all-reduce until 1000.
    # Communication: rank 0 800 us (400 waiting for rank 1, 400 transfer), rank 1 400
    # (transfer) -> the share is the mean, 60 %. The wait finding is rank 0's, 0.4 of its step
    # -> explained 0.4 / 0.6 = 66.667 %; the rest, 0.2 of the step, is transfer (33.333 %)
    rows = []
    for s in range(2):
        t = s * 1000 * US
        for r, work in ((0, 200), (1, 600)):
            rows += [ev("step", f"ProfilerStep#{s}", t, 1000 * US, rank=r, step=s),
                     ev("host_op", "aten::mm", t, work * US, rank=r, step=s),
                     ev("collective", "gloo:all_reduce", t + work * US, (1000 - work) * US,
                        rank=r, step=s, lane_kind="host", lane="thread 1",
                        coll_group="default", coll_seq=s)]
    a = run(rows, TraceMeta(source="kineto"))
    assert (a.run_kind, a.bound) == ("cpu_only", "communication")
    assert "(on the CPU)" in a.verdict.reason
    assert a.verdict.communication == pytest.approx(0.6)
    assert parts(a) == pytest.approx({"communication.synchronization_wait": 66.667,
                                      "unexplained": 33.333, "unexplained.transfer": 33.333},
                                     abs=1e-3)


def test_slow_transfer_is_the_remainder() -> None:
    # both ranks compute [0, 100) us and arrive together; the all-reduce then takes 900 us:
    # no wait, and no bytes recorded (no bandwidth finding) -> nothing explains the 90 %,
    # all of it transfer
    rows = []
    for r in (0, 1):
        rows += [ev("step", "ProfilerStep#0", 0, 1000 * US, rank=r, step=0),
                 ev("kernel", "k", 0, 100 * US, rank=r, step=0), coll(100 * US, 900 * US, 0, r)]
    a = run(rows)
    assert a.bound == "communication" and a.verdict.communication == pytest.approx(0.9)
    assert a.verdict.explained_pct == 0.0
    assert parts(a) == pytest.approx({"unexplained": 100.0, "unexplained.transfer": 100.0})


def test_idle_inside_collectives_from_recorded_wait_and_transit() -> None:
    # one Ascend rank whose importer recorded each collective's wait and transit
    # (communication.json): step 1 ms, kernel [0, 100) us, collective [100, 1000) with wait
    # 100 us and transit 300 us -> 500 us idle inside it. The wait is a finding (0.1 of the
    # step) -> explained 0.1 / 0.9 = 11.111 %; the remainder: idle inside 0.5 / 0.9 = 55.556 %,
    # transfer 0.3 / 0.9 = 33.333 %
    rows = [ev("step", "ProfilerStep#0", 0, 1000 * US, step=0),
            ev("kernel", "k", 0, 100 * US, step=0),
            coll(100 * US, 900 * US, 0, 0, wait_ns=100 * US, transit_ns=300 * US)]
    a = run(rows, A910)
    assert a.bound == "communication"
    assert [f.id for f in a.findings] == ["communication.synchronization_wait"]
    assert parts(a) == pytest.approx({
        "communication.synchronization_wait": 11.111, "unexplained": 88.889,
        "unexplained.idle_in_collective": 55.556, "unexplained.transfer": 33.333}, abs=1e-3)


def test_idle_inside_collectives_as_the_importer_recorded_it() -> None:
    # the same collective with the importer's own idle time (Ascend "Idle Time": 400 us): the
    # recorded figure is the idle part (400 / 900 = 44.444 %), the transfer the rest of the
    # non-waiting time (900 - 100 - 400 = 400 us: 44.444 %)
    rows = [ev("step", "ProfilerStep#0", 0, 1000 * US, step=0),
            ev("kernel", "k", 0, 100 * US, step=0),
            coll(100 * US, 900 * US, 0, 0, wait_ns=100 * US, transit_ns=300 * US,
                 idle_ns=400 * US)]
    a = run(rows, A910)
    assert parts(a) == pytest.approx({
        "communication.synchronization_wait": 11.111, "unexplained": 88.889,
        "unexplained.idle_in_collective": 44.444, "unexplained.transfer": 44.444}, abs=1e-3)


def test_explain_caps_overlapping_findings_at_the_share() -> None:
    # two findings of 0.5 and 0.3 of the step for a verdict whose share is 0.6: explained
    # 100 %, the parts scaled to sum to it (62.5 % and 37.5 %), no remainder
    fs = [Finding("io", "slow_data_reading", 0.5, "r"), Finding("io", "slow_data_fetching", 0.3,
                                                                "f"),
          Finding("cpu", "garbage_collection", 0.2, "gc")]
    ex = explain("io", 0.6, fs)
    assert ex["pct"] == 100.0
    assert [(p["name"], p["pct"]) for p in ex["parts"]] == [
        ("io.slow_data_reading", 62.5), ("io.slow_data_fetching", 37.5)]
    # a host verdict of share 0.8: the gc finding (0.2) explains 25 %; the remainder 0.6 takes
    # the cpu analyzer's parts less what the finding covers (gc 0.2 - 0.2 = 0): dispatch 0.1
    # (12.5 %) and unattributed 0.3, plus the 0.2 no part covers -> 0.5 (62.5 %)
    ex = explain("host", 0.8, fs, {"host": {"garbage_collection": 0.2, "operator_dispatch": 0.1,
                                            "unattributed": 0.3}})
    assert ex["pct"] == 25.0
    rem = ex["parts"][-1]
    assert (rem["name"], rem["pct"]) == ("unexplained", 75.0)
    assert [(p["name"], p["pct"]) for p in rem["parts"]] == [("unattributed", 62.5),
                                                             ("operator_dispatch", 12.5)]
    # nothing to explain: 0 %, no parts
    assert explain("device", 0.0, fs) == {"pct": 0.0, "share_pct": 0.0, "parts": []}


@pytest.fixture(scope="module")
def gloo(tmp_path_factory):
    from hermes.collectors import importers
    from tests.conftest import SHARED_TRACES

    d = SHARED_TRACES / "kineto-h100-dist"
    if not d.is_dir():
        pytest.skip(f"shared traces not found at {d}")
    out = {}
    for job in ("straggler", "balanced"):
        tmp = tmp_path_factory.mktemp(job)
        importers.get("kineto").run([d / f"ddp_gloo_{job}_rank{r}.pt.trace.json.gz"
                                     for r in (0, 1)], tmp / "run", {})
        out[job] = analyze(tmp / "run")
    return out


def _comm_inputs(a) -> dict[str, float]:
    """The communication remainder's parts (% of step time) of an analysis."""
    got = remainder_inputs(a.per_rank, a.cluster)["communication"]
    return {k: 100.0 * v for k, v in got.items()}


def test_real_gloo_straggler_is_explained(gloo) -> None:
    # measured from the JSON alone (user_annotation gloo:all_reduce ranges inside the
    # ProfilerStep ranges, matched k-th to k-th; GPU kernels/copies/memsets as computation):
    # communication-only 91.32 % (rank 0) and 56.89 % (rank 1), mean 74.10 % -- the verdict's
    # share. Rank 0 waits for rank 1 at most 69.10 % of its steps (last arrival minus its own),
    # i.e. at most 33.116 % of the step in the mean over ranks once split as each rank's
    # collective time splits: the waiting part is no larger, the transfer part no smaller
    a = gloo["straggler"]
    assert a.bound == "communication" and a.run_kind == "accelerator"
    assert a.verdict.communication == pytest.approx(0.7410, abs=5e-4)
    assert a.finding("communication.synchronization_wait") is not None
    mine = sum(f.time_share for f in a.findings if f.category in ("communication", "parallel"))
    assert a.verdict.explained_pct == pytest.approx(min(100.0, 100 * mine / 0.74104), abs=0.01)
    got = _comm_inputs(a)
    assert sum(got.values()) == pytest.approx(74.104, abs=0.01)
    assert 0.0 < got["waiting_for_peers"] <= 33.116 + 0.01
    assert got["transfer"] >= 74.104 - 33.116 - 0.01


def test_real_gloo_balanced_is_transfer(gloo) -> None:
    # the same JSON measure: 84.00 % communication-only, waits of at most 0.64 % and 1.08 % of
    # the steps: waiting at most 0.777 % of the step, transfer (through Gloo) the rest
    a = gloo["balanced"]
    assert a.bound == "communication"
    assert a.verdict.communication == pytest.approx(0.8400, abs=5e-4)
    got = _comm_inputs(a)
    assert sum(got.values()) == pytest.approx(83.998, abs=0.01)
    assert got["waiting_for_peers"] <= 0.777 + 0.01
    assert got["transfer"] >= 83.998 - 0.777 - 0.01
    assert a.finding("communication.synchronization_wait") is None


def test_json_and_reports_carry_it(gloo) -> None:
    from hermes.advisor import Advice
    from hermes.report import render

    a = gloo["straggler"]
    d = a.to_dict()
    assert d["run_kind"] == "accelerator"
    assert d["verdict"]["explained"]["pct"] == pytest.approx(a.verdict.explained_pct)
    shown = f"explained {a.verdict.explained_pct:.0f}%"
    for fmt in ("text", "md", "html"):
        assert shown in render(fmt, a, Advice())


def test_paths_are_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "analysis" / "index.md").read_text()
    assert "explained" in doc and "device_not_captured" in doc
