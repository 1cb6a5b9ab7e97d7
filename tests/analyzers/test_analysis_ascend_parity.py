"""Peer parity with msprof-analyze's advisor on Ascend data (``../shared/traces/ascend``).

msprof-analyze reports, on these files: AI CPU operators (tasks > 20 us: the ``Cast`` tasks of
the older-CANN file), matmul / FlashAttention shapes missing the cube alignment (the newer file's
``MatMulV5`` with inner axis 15365 and the ``varlen`` FlashAttention with 511), dynamic-shape
operators (every task of the newer file is ``OP State = dynamic``), and the device-idle share.
Each must come out of the ``computation`` analyzer as a finding naming the operators.

The kernel_details rows are turned into trace events here the way an importer does (one
``kernel`` event per row, the CSV columns in ``args``); a second test goes through the Ascend
importer once it is registered.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers.computation.analysis import computation
from hermes.analyzers.engine.base import RankContext
from hermes.trace.meta import TraceMeta
from hermes.trace.reader import table_to_pandas
from hermes.trace.writer import to_table

META = TraceMeta(source="ascend", device={"name": "Ascend910B"})
UNIT = {"AI_CORE": "cube", "MIX_AIC": "mix", "MIX_AIV": "mix", "AI_VECTOR_CORE": "vector",
        "AI_CPU": "ai_cpu"}


def kernel_details_events(csv: Path) -> pd.DataFrame:
    d = pd.read_csv(csv, dtype=str, keep_default_na=False)
    d = d[d["Accelerator Core"].isin(list(UNIT))]
    ts_us = d["Start Time(us)"].str.strip().astype(float)
    ts = ((ts_us - ts_us.min()) * 1000).round().astype("int64")
    dur = (d["Duration(us)"].astype(float) * 1000).round().astype("int64")
    args = [json.dumps(r) for r in d.drop(columns=["Start Time(us)", "Duration(us)"])
            .to_dict("records")]
    cols = {"rank": [0] * len(d), "lane": ["stream " + s for s in d["Stream ID"]],
            "lane_kind": ["device"] * len(d), "kind": ["kernel"] * len(d),
            "name": d["Name"].tolist(), "ts_ns": ts.tolist(), "dur_ns": dur.tolist(),
            "unit": d["Accelerator Core"].map(UNIT).tolist(), "args": args}
    return table_to_pandas(to_table(cols))


def by_reason(result) -> dict[str, object]:
    """The named causes of the (one) underutilization finding, as findings of their own."""
    return {reason: SimpleNamespace(time_share=sub["share"], evidence=sub)
            for f in result.findings if f.id == "computation.underutilization"
            for reason, sub in f.evidence["causes"].items()}


def test_older_cann_ai_cpu_operators(shared_traces: Path) -> None:
    df = kernel_details_events(shared_traces / "ascend" / "kernel_details_older_cann.csv")
    r = computation(RankContext(0, df, META))
    f = by_reason(r)
    ai = f["ai_cpu"]
    assert sorted(ai.evidence["operators"]) == ["trans_Cast_18", "trans_Cast_5"]
    assert ai.evidence["tasks"] == 7                     # all 7 AI CPU tasks are > 20 us
    assert ai.evidence["time_ns"] == round((197.54 + 112.88 + 101.04 + 105.60 + 92.70 + 101.46
                                            + 73.96) * 1000)
    assert "shape_affinity" not in f                     # every matmul is 256-aligned
    assert "dynamic_shape" not in f                      # the older schema has no OP State
    # device-idle share of the (single, whole-trace) step, computed independently here
    s = df["ts_ns"].to_numpy()
    e = s + df["dur_ns"].to_numpy()
    order = np.argsort(s)
    busy, cur_s, cur_e = 0, s[order[0]], e[order[0]]
    for i in order[1:]:
        if s[i] > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s[i], e[i]
        else:
            cur_e = max(cur_e, e[i])
    busy += cur_e - cur_s
    span = e.max() - s.min()
    assert r.metrics["device_idle_pct"] == pytest.approx(100 * (1 - busy / span))


def test_newer_cann_shapes_and_dynamic_operators(shared_traces: Path) -> None:
    df = kernel_details_events(shared_traces / "ascend" / "kernel_details_newer_cann.csv")
    r = computation(RankContext(0, df, META))
    f = by_reason(r)
    assert sorted(f["shape_affinity"].evidence["operators"]) == [
        "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore_varlen",
        "aclnnMatmul_MatMulV3Common_MatMulV5"]
    assert f["shape_affinity"].evidence["tasks"] == 5    # 4 MatMulV5 + 1 varlen FA
    dyn = f["dynamic_shape"]
    assert dyn.evidence["tasks"] == 29
    assert "aclnnAdd_AddAiCore_Add" in dyn.evidence["operators"]
    assert "ai_cpu" not in f
    # pipe ratios (U = 0.7): a compute pipe (cube mac / vector) busy >= U decides first, then
    # MTE2. MatMulV2/V3: mac 0.72-0.83 -> compute-bound; MatMulV5 (mac 0.71) and the varlen FA:
    # misaligned -> underutilized; FlashAttention forward: vector 0.63, mte2 0.86-0.87 ->
    # memory-bound; FlashAttention grad: every pipe <= 0.53 -> underutilized; the 25-31 us Adds:
    # mte2 0.84-0.87 -> memory-bound; the 1.4 us Adds: all pipes < 0.4 -> underutilized
    k = r.tables["tasks"]
    cls = k.groupby("name")["class"].agg(lambda c: "/".join(sorted(set(c))))
    assert cls["aclnnMatmul_MatMulCommon_MatMulV2"] == "compute_bound"
    assert cls["aclnnMatmul_MatMulV3Common_MatMulV3"] == "compute_bound"
    assert cls["aclnnMatmul_MatMulV3Common_MatMulV5"] == "underutilized"
    fa = "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore"
    assert cls[fa] == "memory_bound"
    assert cls[fa + "_varlen"] == "underutilized"
    assert cls["aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad"] \
        == "underutilized"
    add = k["name"] == "aclnnAdd_AddAiCore_Add"
    assert set(k.loc[add & (k["dur_ns"] > 20_000), "class"]) == {"memory_bound"}
    assert set(k.loc[add & (k["dur_ns"] < 2_000), "class"]) == {"underutilized"}


def _ascend_importer():
    from hermes.collectors import importers
    from hermes.errors import HermesError

    try:
        return importers.get("ascend")
    except HermesError:
        return None


@pytest.mark.parametrize("csv", ["kernel_details_older_cann.csv",
                                 "kernel_details_newer_cann.csv"])
def test_through_ascend_importer(shared_traces: Path, tmp_path: Path, csv: str) -> None:
    imp = _ascend_importer()
    if imp is None:
        pytest.skip("Ascend importer not registered yet")
    import hermes

    src = shared_traces / "ascend"
    out = tmp_path / "run.parquet"
    imp.run([src / "trace_view.json", src / csv], out, {})
    tr = hermes.load(out)
    results = [computation(RankContext(int(r), g.reset_index(drop=True), tr.meta))
               for r, g in tr.events.groupby("rank", observed=True)]
    reasons = {reason for res in results for reason in by_reason(res)}
    want = {"ai_cpu"} if "older" in csv else {"shape_affinity", "dynamic_shape"}
    assert want <= reasons
    assert all(0 <= res.metrics["device_idle_pct"] <= 100 for res in results)
