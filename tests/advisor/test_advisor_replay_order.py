"""The advisor ranks recommendations by their predicted gain, replayed where a transform
exists: a rule whose formula promises much but whose optimization the step cannot use must not
outrank the one that helps (tiny trace, figures worked out by hand)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hermes.advisor.replayed import with_replay
from hermes.findings import Finding, Recommendation
from hermes.trace.meta import TraceMeta
from tests.tracegen import ev, frame

# the loop waits [0, 60) for a batch one loader worker makes in [0, 58); compute [60, 100);
# no kernel at all (nothing to fuse)
DATA = frame(ev("step", "ProfilerStep#1", 0, 100),
             ev("data_wait", "next(batch)", 0, 60),
             ev("data_process", "decode", 0, 58, lane="worker 0", lane_kind="loader"),
             ev("host_op", "fwd", 60, 40))
META = TraceMeta(source="emulator", extra={"settings": {"num_workers": 1}})


def rec(rule: str, est: float, opt: str | None) -> Recommendation:
    return Recommendation(rule, rule, "how", est, opt)


def advise(recs: dict[str, list[Recommendation]]) -> dict[str, list[Recommendation]]:
    findings = [Finding("computation", "memory_bound", 0.7, "s"),
                Finding("io", "slow_data_processing", 0.6, "s")]
    return with_replay(recs, DATA, SimpleNamespace(meta=META, findings=findings), 10.0)


def test_an_unrelated_formula_rule_does_not_win_once_replayed():
    out = advise({"computation.memory_bound": [rec("computation.memory_fusion", 3.0, "fusion")],
                  "io.slow_data_processing": [rec("io.processing_more_workers", 1.2,
                                                  "num_workers=4")]})
    fusion, = out["computation.memory_bound"]
    workers, = out["io.slow_data_processing"]
    # nothing to fuse: the replayed step is the measured one
    assert (fusion.estimate, fusion.estimated_speedup) == ("replay", 1.0)
    # 4 workers: wait = max(0, (60 + 40) / 4 - 40) = 0, step 40: 2.5x (the finding's own
    # bound, 1 / (1 - 0.6), is 2.5 too)
    assert (workers.estimate, workers.estimated_speedup) == ("replay", pytest.approx(2.5))
    top = max((r for rs in out.values() for r in rs), key=lambda r: r.estimated_speedup)
    assert top.rule == "io.processing_more_workers"


def test_recommendations_of_a_finding_re_ranked_by_the_replayed_gain():
    # 2 workers: wait = max(0, 100 / 2 - 40) = 10, step 50: 2.0x, below the formula rule's 2.2
    out = advise({"io.slow_data_processing": [rec("io.processing_more_workers", 2.4,
                                                  "num_workers=2"),
                                              rec("io.processing_on_device", 2.2, None)]})
    got = [(r.rule, r.estimate, r.estimated_speedup) for r in out["io.slow_data_processing"]]
    assert got == [("io.processing_on_device", "formula", 2.2),
                   ("io.processing_more_workers", "replay", pytest.approx(2.0))]


def test_a_transform_the_trace_cannot_feed_keeps_the_formula_and_says_why():
    out = advise({"io.slow_data_reading": [rec("io.read_local_storage", 1.4, "local_storage")]})
    r, = out["io.slow_data_reading"]
    assert (r.estimate, r.estimated_speedup) == ("formula", 1.4)
    assert r.how.endswith("(Estimate from the rule's formula: the trace records no storage "
                          "reads.)")


def test_replayed_gain_beyond_the_finding_share_is_capped_at_it_and_kept_beside():
    from tests.whatif.test_whatif_transforms import DEVICE, FUSE
    from tests.whatif.test_whatif_transforms import frame as wframe

    # fusion replays the step 200 -> 160 ns (tests/whatif): 1.25x; the analysis gave the
    # finding 5 % of the step: removing all of it gives 1 / 0.95 = 1.0526x, written 1.05x (2
    # decimals, rounded down); the replayed 1.25x is kept beside it and said in `how`
    meta = TraceMeta(source="emulator", device=DEVICE)
    out = with_replay({"computation.memory_bound": [rec("computation.memory_fusion", 1.05,
                                                        "fusion")]}, wframe(*FUSE),
                      SimpleNamespace(meta=meta, findings=[
                          Finding("computation", "memory_bound", 0.05, "s")]), 10.0)
    r, = out["computation.memory_bound"]
    assert (r.estimate, r.estimated_speedup, r.replayed_speedup) == ("replay", 1.05, 1.25)
    assert r.how.endswith("(Replayed: 1.25x; capped at 1.05x, all of this finding's 5.0 % of "
                          "the step: the rest is time other causes cost.)")
    d = r.to_dict()
    assert (d["estimated_speedup"], d["replayed_speedup"]) == (1.05, 1.25)


def test_a_replayed_gain_within_the_share_has_no_replayed_figure_beside_it():
    # 4 workers: 2.5x, the finding's own bound (1 / (1 - 0.6) = 2.5): not above it
    out = advise({"io.slow_data_processing": [rec("io.processing_more_workers", 1.2,
                                                  "num_workers=4")]})
    r, = out["io.slow_data_processing"]
    assert (r.estimated_speedup, r.replayed_speedup) == (pytest.approx(2.5), None)
    assert "replayed_speedup" not in r.to_dict() and r.how == "how"


def test_recommendations_capped_alike_are_ranked_by_their_replay():
    # finding share 0.3: at most 1 / 0.7 = 1.4286x, written 1.42x. Two workers replay 2.0x,
    # four 2.5x (above): both capped at 1.42x, the larger replay first whatever the table order
    findings = [Finding("io", "slow_data_processing", 0.3, "s")]
    out = with_replay({"io.slow_data_processing": [
        rec("io.processing_more_workers", 1.2, "num_workers=2"),
        rec("io.processing_more_workers", 1.1, "num_workers=4")]}, DATA,
        SimpleNamespace(meta=META, findings=findings), 10.0)
    got = [(r.emulator_opt, r.estimated_speedup, r.replayed_speedup)
           for r in out["io.slow_data_processing"]]
    assert got == [("num_workers=4", 1.42, 2.5), ("num_workers=2", 1.42, 2.0)]


def test_replay_bound_limits_the_run_s_saving_to_the_claimed_share():
    from hermes.advisor.replayed import replay_bound

    # saving within the share: as replayed
    assert replay_bound(4.0, 0.5, 0.5) == 4.0
    # every step saves alike (median 1 - 1/4 = 0.75 = the run's 0.75): scaled to 0.5 of the
    # step, 1 / (1 - 0.5) = 2.0, the finding's own bound
    assert replay_bound(4.0, 0.75, 0.5) == 2.0
    # the median step saves 0.75, the run 0.6: x 0.5 / 0.6 -> 0.625, 1 / 0.375 = 2.666 -> 2.66
    assert replay_bound(4.0, 0.6, 0.5) == 2.66
    # the median step saves less than the run (0.5 vs 0.75): scaled 1 / (1 - 0.5 x 0.5 / 0.75)
    # = 1.5 is below what removing all of the share from it gives, 2.0: that stands
    assert replay_bound(2.0, 0.75, 0.5) == 2.0


def test_a_loader_change_claims_every_loader_finding():
    # 4 workers replay 2.5x (above); the step's 60 % wait the analysis split into reading 0.2
    # and processing 0.3 (0.5 together): more workers remove both; the run (one step) saves
    # 0.6 > 0.5: scaled to 0.5, 1 / 0.5 = 2.0x -- not the processing finding's own 1 / 0.7
    findings = [Finding("io", "slow_data_processing", 0.3, "s"),
                Finding("io", "slow_data_reading", 0.2, "s"),
                Finding("computation", "memory_bound", 0.4, "s")]
    out = with_replay({"io.slow_data_processing": [
        rec("io.processing_more_workers", 1.1, "num_workers=4")]}, DATA,
        SimpleNamespace(meta=META, findings=findings), 10.0)
    r, = out["io.slow_data_processing"]
    assert (r.estimated_speedup, r.replayed_speedup) == (2.0, 2.5)
    assert r.claims == {"findings": {"io.slow_data_processing": 0.3, "io.slow_data_reading": 0.2},
                        "saved_share": 0.5}
    assert r.how.endswith("(Replayed: 2.50x; capped at 2.00x, all of these findings' 50.0 % "
                          "(io.slow_data_processing 30.0 %, io.slow_data_reading 20.0 %) of the "
                          "step: the rest is time other causes cost.)")
    assert r.to_dict()["claims"] == {"findings": {"io.slow_data_processing": 0.3,
                                                  "io.slow_data_reading": 0.2},
                                     "saved_share": 0.5}
