"""Point-to-point transfers of a real 2-rank Gloo job (tests/data/kineto/gloo_p2p, see its
SOURCES.md entry) matched by their pair of ranks: the waits Hermes reports per direction equal
the ones computed here straight from the Kineto JSON (json + gzip only)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import hermes

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto" / "gloo_p2p"


def _ranges(rank: int) -> list[tuple[str, int, int, int]]:
    """(direction, peer, start ns, end ns) of each gloo:send / gloo:recv of the rank, in time
    order, its peer from the enclosing c10d op's third Concrete Input."""
    with gzip.open(DATA / f"rank{rank}.pt.trace.json.gz", "rt") as fh:
        evs = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    ns = [(e["name"], e["tid"], round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000),
           e.get("args", {})) for e in evs]
    parents = [(tid, s, t, int(a["Concrete Inputs"][2])) for n, tid, s, t, a in ns
               if n in ("c10d::send", "c10d::recv_")]
    out = []
    for n, tid, s, t, _ in sorted((x for x in ns if x[0] in ("gloo:send", "gloo:recv")),
                                  key=lambda x: x[2]):
        peer = [p for ptid, ps, pt, p in parents if ptid == tid and ps <= s <= pt][-1]
        out.append((n.split(":")[1], peer, s, t))
    return out


def _expected_waits() -> dict[str, int]:
    """Summed wait per direction: the k-th message from a to b pairs a's k-th send to b with
    b's k-th receive from a; a side waits from its start until the other's, if it was still
    running then."""
    r = {k: _ranges(k) for k in (0, 1)}
    out = {}
    for a, b in ((0, 1), (1, 0)):
        sends = [x for x in r[a] if x[0] == "send" and x[1] == b]
        recvs = [x for x in r[b] if x[0] == "recv" and x[1] == a]
        assert len(sends) == len(recvs) == 8
        total = 0
        for s, v in zip(sends, recvs, strict=True):
            last = max(s[2], v[2])
            total += sum(last - x[2] for x in (s, v) if x[3] > last)
        out[f"p2p {a}->{b}"] = total
    return out


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    from hermes.collectors import importers
    from hermes.pipeline import analyze

    files = sorted(DATA.glob("rank*.pt.trace.json.gz"))
    out = tmp_path_factory.mktemp("p2p") / "run"
    importers.detect(files[0]).run(files, out, {})  # (one import of both ranks)
    return analyze(out)


def test_each_direction_is_matched_and_its_waits_are_the_traces(analysis) -> None:
    cc = analysis.cluster["communication_cluster"]
    by = {x["group"]: x for x in cc.metrics["by_op"]}
    want = _expected_waits()
    for g, w in want.items():
        assert by[g]["count"] == 8 and by[g]["op"] == "gloo:send/recv"
        assert by[g]["wait_ns"] == pytest.approx(w, abs=2_000)  # (JSON us with 3 decimals)
    # rank 1's receives wait for rank 0's sends and the other way round
    assert by["p2p 0->1"]["waited_for_rank"] == 0 and by["p2p 1->0"]["waited_for_rank"] == 1
    assert by["default"]["count"] == 4  # the all-reduces, still matched by order
    assert cc.metrics["matched"] == 20


def test_the_wait_finding_says_where_the_ranks_wait(analysis) -> None:
    f = {x.cause: x for x in analysis.findings}["synchronization_wait"]
    assert "at collectives and point-to-point transfers" in f.summary


def test_the_path_across_ranks_passes_the_transfers(analysis) -> None:
    # 16 matched transfers on the path (the 4 all-reduces alone before p2p pairing); rank 1
    # sleeps 20 ms a step to rank 0's 10 (capture.py): the longer stage holds more of the path
    m = analysis.cluster["critical_path_cluster"].metrics
    assert m["collectives_on_path"] == 16 and m["ranks_on_path"] == [0, 1]
    assert m["rank_pct"][1] > m["rank_pct"][0] > 0


def test_the_slower_pipeline_stage_is_named(analysis) -> None:
    """capture.py: per step rank 0 computes and sleeps 10 ms, then sends to rank 1 and waits;
    rank 1 receives, adds and sleeps 20 ms, then sends back. Rank 1's stage works ~10 ms more
    per step than rank 0's (and its aten::add, 1.8 ms a step, against rank 0's aten::mul, 0.9
    ms). The stages take turns, so balancing them alone would save nothing."""
    from hermes.advisor import advise

    (p,) = analysis.cluster["cluster"].metrics["pipelines"]
    assert p["ranks"] == [0, 1] and p["slow_ranks"] == [1]
    assert p["work_ms"][1] - p["work_ms"][0] == pytest.approx(10.9, rel=0.2)
    assert p["pipelined"] == 0.0 and p["gain_ms"] == 0.0
    adv = advise(analysis)
    f = next(f for f in analysis.findings if f.id == "parallel.poor_parallelism")
    assert "the slowest pipeline stage is rank 1" in f.summary
    assert "parallel.balance_stages" not in [r.rule for r in adv.for_finding(f.id)]
