"""HTA parity on real traces: our HTA-compatible figures against HolisticTraceAnalysis 0.5's.

The expected numbers were printed by HTA 0.5 itself (``python benchmarks/hta_parity.py`` runs
it in a separate venv and prints both side by side); HTA rounds to 2 decimals. Agreement is
required within 0.5 percentage points per rank.
"""

from __future__ import annotations

import gzip
import json
import statistics

import pytest

import hermes
from hermes.analyzers.engine.base import RankContext
from hermes.analyzers.engine.invariants import check_result
from hermes.analyzers.overlap import analyze
from hermes.errors import UsageError

TOL = 0.5
# trace -> (rank, idle %, compute %, non-compute %, comm/comp overlap % or None when HTA gives NaN)
HTA_0_5 = {
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz": (0, 98.53, 1.08, 0.39, None),
    "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz":
        (0, 99.49, 0.08, 0.43, None),
    "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz": (0, 78.71, 18.63, 2.66, None),
    "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz":
        (0, 98.08, 1.9, 0.02, None),
    "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz":
        (0, 99.7, 0.06, 0.24, None),
    "hta/df_index_resolver/df_index_resolver.json.gz": (1, 46.08, 35.55, 18.37, 0.0),
    "hta/nccl_parser_config/nccl_data.json.gz": (0, 77.78, 17.26, 4.97, 14.31),
    "hta/negative_queue_length_values_check/rank0.json.gz": (0, 69.44, 14.15, 16.41, 1.37),
    "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz":
        (0, 2.63, 96.75, 0.62, None),
    "hta/trace_diff/control/control.json.gz": (3, 16.2, 61.23, 22.57, 47.03),
    "hta/trace_diff/test/test.json.gz": (1, 7.47, 68.31, 24.23, 68.8),
    "hta/trace_filter/sampled_rank-0.json.gz": (0, 53.56, 17.71, 28.74, 11.81),
    "hta/trace_filter/sampled_rank-1.json.gz": (1, 54.72, 22.57, 22.72, 20.05),
    "kineto-h100/big_matmul.pt.trace.json.gz": (0, 3.48, 95.54, 0.98, None),
    "kineto-h100/gpt_balanced.pt.trace.json.gz": (0, 90.21, 9.69, 0.09, None),
    "kineto-h100/gpt_dataloader_starved.pt.trace.json.gz": (0, 96.08, 3.89, 0.03, None),
    "kineto-h100/two_stream_prefetch.pt.trace.json.gz": (0, 2.43, 95.46, 2.11, None),
}


def _import(src, tmp_path):
    from hermes.collectors import importers

    try:
        kineto = importers.get("kineto")
    except UsageError:
        pytest.skip("Kineto importer not available in this tree")
    out = tmp_path / "t.parquet"
    kineto.run([src], out, {})
    return hermes.load(out)


@pytest.mark.parametrize("rel", sorted(HTA_0_5))
def test_hta_figures_agree_with_hta(rel, shared_traces, tmp_path):
    rank, idle, comp, noncomp, overlap = HTA_0_5[rel]
    trace = _import(shared_traces / rel, tmp_path)
    ranks = trace.ranks
    # one rank per file; HTA numbers it from distributedInfo like the importer does
    ev = trace.rank(rank if rank in ranks else ranks[0])
    m = check_result(analyze(RankContext(rank=rank, events=ev, meta=trace.meta))).metrics
    assert m["idle_pct"] == pytest.approx(idle, abs=TOL)
    assert m["compute_pct"] == pytest.approx(comp, abs=TOL)
    assert m["non_compute_pct"] == pytest.approx(noncomp, abs=TOL)
    assert m["comm_comp_overlap_pct"] == pytest.approx(overlap or 0.0, abs=TOL)


@pytest.mark.parametrize("name", ["gpt_balanced", "gpt_dataloader_starved",
                                  "two_stream_prefetch", "big_matmul"])
def test_step_median_matches_profiler_steps(name, shared_traces, tmp_path):
    src = shared_traces / "kineto-h100" / f"{name}.pt.trace.json.gz"
    with gzip.open(src, "rt") as fh:
        raw = json.load(fh)["traceEvents"]
    steps = [e["dur"] for e in raw if e.get("ph") == "X" and e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    want_ms = statistics.median(steps) / 1e3
    trace = _import(src, tmp_path)
    m = analyze(RankContext(rank=0, events=trace.events, meta=trace.meta)).metrics
    assert m["steps"] == len(steps) == 4
    assert m["step_median_ms"] == pytest.approx(want_ms, rel=0.01)
    parts = [m[f"{p}_pct"] for p in ("computation_only", "communication_only", "overlapped",
                                     "host_bound", "free")]
    assert sum(parts) == pytest.approx(100.0)
