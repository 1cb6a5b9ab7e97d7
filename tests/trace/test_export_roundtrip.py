"""Round trip Kineto -> Hermes -> Chrome on real traces: every complete event of the source
comes back with the same name, start and duration (within 1 ns, compared as exact decimals),
and every ac2g flow arrow of the source comes back between the same two timestamps."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from hermes.trace.chrome import export_chrome
from tests.conftest import SHARED_TRACES, run_cli
from tests.trace.test_export_chrome import check_structure

kineto = pytest.importorskip("hermes.collectors.importers.kineto")

H100 = sorted((SHARED_TRACES / "kineto-h100").glob("*.pt.trace.json.gz"))
NS = Decimal("0.001")  # 1 ns in microseconds


def read_exact(path: Path) -> list[dict[str, Any]]:
    """Trace events with every JSON number as an exact Decimal (no float on the way)."""
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return json.loads(raw, parse_float=Decimal, parse_int=Decimal)["traceEvents"]


def complete_events(evs: list[dict[str, Any]], phases: tuple[str, ...] = ("X",)
                    ) -> dict[str, list[tuple[Decimal, Decimal]]]:
    """name -> sorted (ts, dur) of the complete events (an instant counts as dur 0)."""
    by_name: dict[str, list[tuple[Decimal, Decimal]]] = defaultdict(list)
    for e in evs:
        if e.get("ph") in phases:
            by_name[e["name"]].append((Decimal(e["ts"]), Decimal(e.get("dur", 0))))
    return {k: sorted(v) for k, v in by_name.items()}


def unmatched(want: list[tuple[Decimal, Decimal]], got: list[tuple[Decimal, Decimal]]
              ) -> list[tuple[Decimal, Decimal]]:
    """Source (ts, dur) with no exported event within 1 ns (both lists sorted; an exported
    event matches at most one source event; unmatched exported events are skipped)."""
    missing, j, got = [], 0, list(got)
    for ts, dur in want:
        while j < len(got) and got[j][0] < ts - NS:
            j += 1
        k = j
        while k < len(got) and got[k][0] <= ts + NS and abs(got[k][1] - dur) > NS:
            k += 1
        if k < len(got) and abs(got[k][0] - ts) <= NS and abs(got[k][1] - dur) <= NS:
            del got[k]
        else:
            missing.append((ts, dur))
    return missing


def flow_pairs(evs: list[dict[str, Any]]) -> Counter[tuple[Decimal, Decimal]]:
    """(start ts, end ts) of every ac2g flow."""
    start = {e["id"]: Decimal(e["ts"]) for e in evs
             if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    return Counter((start[e["id"]], Decimal(e["ts"])) for e in evs
                   if e.get("ph") == "f" and e.get("cat") == "ac2g" and e["id"] in start)


def import_export(sources: list[Path], tmp_path: Path) -> Path:
    trace = tmp_path / "t.parquet"
    kineto.run(sources, trace, {})
    out = tmp_path / "t.json.gz"
    code, _, err = run_cli("export", str(trace), "--format", "chrome", "--out", str(out))
    assert code == 0, err
    return out


@pytest.mark.parametrize("src", H100, ids=[p.name.split(".")[0] for p in H100])
def test_kineto_round_trip_keeps_every_complete_event(tmp_path: Path, src: Path) -> None:
    source = read_exact(src)
    exported = read_exact(import_export([src], tmp_path))
    check_structure(json.loads(gzip.decompress((tmp_path / "t.json.gz").read_bytes())))
    want = complete_events(source)
    got = complete_events(exported, ("X", "i"))
    assert sum(map(len, want.values())) > 500
    for name, events in want.items():
        missing = unmatched(events, got.get(name, []))
        assert not missing, (name, missing[:3])
    # the export's only extra events are the source's instants (kept by the importer)
    extra = sum(map(len, got.values())) - sum(map(len, want.values()))
    assert extra == sum(1 for e in source if e.get("ph") == "i")
    assert flow_pairs(exported) == flow_pairs(source)
    assert sum(flow_pairs(source).values()) > 50


def test_two_rank_import_exports_one_process_per_rank(tmp_path: Path) -> None:
    pair = [SHARED_TRACES / "hta" / "trace_filter" / f"sampled_rank-{r}.json.gz" for r in (0, 1)]
    if not all(p.exists() for p in pair):
        pytest.skip("HTA trace_filter traces not found")
    ranks = [int(json.loads(gzip.decompress(p.read_bytes()))["distributedInfo"]["rank"])
             for p in pair]
    trace = tmp_path / "t.parquet"
    kineto.run(pair, trace, {})
    stats = export_chrome(trace, tmp_path / "t.json")
    evs = check_structure(json.loads((tmp_path / "t.json").read_bytes()))
    procs = {e["pid"]: e["args"]["name"] for e in evs
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {r: f"rank {r}" for r in ranks}
    assert stats.ranks == tuple(sorted(ranks))
    for p, r in zip(pair, ranks, strict=True):
        src = complete_events(read_exact(p))
        mine = complete_events([e for e in evs if e.get("pid") == r], ("X", "i"))
        assert {k: len(v) for k, v in src.items()} == \
            {k: len(v) for k, v in mine.items() if k in src}
    # flows never cross ranks
    start = {e["id"]: e["pid"] for e in evs if e["ph"] == "s"}
    assert stats.flows > 0
    assert all(start[e["id"]] == e["pid"] for e in evs if e["ph"] == "f")
