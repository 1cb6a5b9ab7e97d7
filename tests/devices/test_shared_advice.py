"""The shared traces (kineto-h100, hta, public/tracelens, ascend): the device, the matmul dtype mix
and the parallelism each shows, read straight from the files (not through Hermes' importer), and
every rule run on those facts: no advice needs a capability the device table says the device
lacks, a parallelism the trace does not show, or another vendor's tools."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from hermes.advisor import machine_facts, recommend
from hermes.analyzers.common.precision import combine, facts
from hermes.analyzers.engine.base import AnalyzerResult, RankContext
from hermes.devices.dtypes import is_matmul
from hermes.findings import CAUSE_IDS, Finding
from hermes.rules import TABLE
from hermes.trace.meta import TraceMeta
from tests.devices.grid import NUMBERS, REASONS, violations
from tests.devices.kineto import read

#: Kineto traces up to this size (gz) are read here; the larger ones are the same devices
MAX_BYTES = 1_300_000
KINETO_DIRS = ("kineto-h100", "kineto-h100-dist", "hta", "public/tracelens")
NOT_TRACES = {"memory_timeline.raw.gz", "benchmark_simple_add_et.json.gz"}


def _kineto(root: Path) -> list[str]:
    out = []
    for d in KINETO_DIRS:
        for p in sorted((root / d).rglob("*.gz")):
            if p.name not in NOT_TRACES and p.stat().st_size <= MAX_BYTES:
                out.append(str(p.relative_to(root)))
    return out


def _rank(device: dict, names: pd.Series, dur_ns: np.ndarray, host: list[str], source: str,
          units: pd.Series | None = None) -> dict:
    mm = is_matmul(names)
    k = pd.DataFrame({"name": names.astype(object), "dur_ns": dur_ns,
                      "family": np.where(mm, "gemm", "other"), "elem": np.nan, "host_row": -1,
                      "unit": units if units is not None else "sm"})
    rows = pd.DataFrame({"name": list(names) + host,
                         "kind": ["kernel"] * len(names) + ["runtime"] * len(host)})
    meta = TraceMeta(source=source, device=device)
    res = AnalyzerResult("computation", metrics={"precision": facts(RankContext(0, rows, meta), k)})
    return combine({0: {"computation": res}})


def _check(m: dict, source: str, device: dict) -> list[str]:
    f = machine_facts(SimpleNamespace(machine=m))
    meta = TraceMeta(source=source, device=device)
    recs = []
    for cid in CAUSE_IDS:
        cat, cause = cid.split(".", 1)
        for reason in REASONS.get(cid, ("",)):
            finding = Finding(cat, cause, 0.5, "shared", evidence={**NUMBERS, "reason": reason},
                              ranks=(0,))
            recs += [(cid, r) for r in recommend(finding, meta, TABLE, f)]
    assert recs  # the facts leave advice to give
    return violations(f, recs)


def test_kineto_traces(shared_traces) -> None:
    bad, seen = [], 0
    for rel in _kineto(shared_traces):
        device, k = read(shared_traces / rel)
        if k.empty:
            continue
        seen += 1
        m = _rank(device, k["name"], (k["dur_us"] * 1e3).to_numpy(), [], "kineto")
        # none of these jobs shows pipeline stages: no pipeline advice may appear
        assert not m["shown"]["pipeline"], rel
        bad += [f"{rel}: {b}" for b in _check(m, "kineto", device)]
    assert seen >= 20 and bad == []


@pytest.mark.parametrize("name", ["kernel_details_newer_cann.csv", "kernel_details_older_cann.csv"])
def test_ascend_kernel_details(shared_traces, name: str) -> None:
    t = pd.read_csv(shared_traces / "ascend" / name)
    units = t["Accelerator Core"].map({"AI_VECTOR_CORE": "vector", "MIX_AIC": "mix",
                                       "MIX_AIV": "mix", "AI_CORE": "cube"})
    m = _rank({}, t["Name"].astype(str), (t["Duration(us)"].astype(float) * 1e3).to_numpy(), [],
              "ascend", units)
    # separate vector cores: Ascend 910B or 910C (dav-c220), both bf16, neither fp8
    assert m["device"]["arch"] == "dav-c220" and m["device"]["vendor"] == "huawei"
    assert _check(m, "ascend", {}) == []
