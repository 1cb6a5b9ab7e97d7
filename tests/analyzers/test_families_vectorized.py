"""``families.families_of`` (pattern by pattern over all names, RE2 for ASCII names) gives
exactly ``family_of`` (every pattern per name, Python's ``re``) on real kernel names and on
spellings where the two engines could differ."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from hermes.analyzers.computation import families as F

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
REAL = ["public/tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz",
        "hta/df_index_resolver/df_index_resolver.json.gz"]
HOSTILE = ["NCCL\nkernel", "\u017fgemm", "K\u212aernel", "gemm\n", "\u0130norm", "\u0131gemm",
           "triton_poi\n", "x" * 5000, "", "  ", "all_reduce\u00e9", "GEMM_Kernel", "AllReduce",
           "CUTLASS_sm90", "Triton_Poi_fused", "LayerNorm", "ELEMENTWISE", "\tmemcpy"]


def _names() -> list[str]:
    out: set[str] = set()
    for rel in REAL:
        with gzip.open(SHARED / rel, "rt") as f:
            ev = json.load(f)["traceEvents"]
        out.update(e["name"] for e in ev if isinstance(e.get("name"), str))
    return sorted(out)


def test_the_same_family_as_name_by_name() -> None:
    names = _names()
    rng = random.Random(0)
    mixed = names + HOSTILE * 5 + [rng.choice(names) + tail for tail in ("\n", "\u00e9", "K")
                                   for _ in range(40)]
    assert len(names) > 2000  # (enough names for the RE2 path)
    want = [F.family_of(n) for n in mixed]
    assert F.families_of(mixed) == want
    assert len(set(want)) >= 6  # the names span the families, not only "other"
    assert F.families_of(HOSTILE) == [F.family_of(n) for n in HOSTILE]  # (few: Python alone)
