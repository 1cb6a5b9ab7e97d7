"""What shows pipeline stages (analyzers/common/precision.py ``facts``): stage-to-stage send/recv,
stage annotations, pipeline process-group names — not a Python stack frame whose module path or
function names a pipeline (an inference ``pipeline()``, a ``get_pp_group()`` that runs at any
pipeline degree), as the shared TraceLens traces' single-GPU jobs have them."""

from __future__ import annotations

import pandas as pd
import pytest

from hermes.analyzers.common.precision import facts
from hermes.analyzers.engine.base import RankContext
from hermes.trace.meta import TraceMeta
from tests.tracegen import ev, frame


def _shows(*rows: dict) -> dict:
    k = pd.DataFrame({"name": ["gemm_kernel"], "dur_ns": [1_000.0], "family": ["gemm"],
                      "elem": [float("nan")], "host_row": [-1], "unit": ["sm"]})
    ctx = RankContext(0, frame(ev("step", "ProfilerStep#1", 0, 10_000),
                               ev("kernel", "gemm_kernel", 100, 1_000), *rows),
                      TraceMeta(source="kineto", device={}))
    return facts(ctx, k)


#: Python frames of the shared single-GPU traces (world_size 1 or no distributed info)
FRAMES = ["transformers/pipelines/base.py(1306): __call__",
          "moca/library/pipeline/profile_model_pipeline.py(102): profile",
          "vllm/distributed/parallel_state.py(1233): get_pp_group",
          "/app/xDiT/xfuser/core/distributed/parallel_state.py(110): "
          "get_pipeline_parallel_world_size"]


@pytest.mark.parametrize("name", FRAMES)
def test_a_python_frame_shows_no_pipeline(name: str) -> None:
    got = _shows(ev("python", name, 10, 50))
    assert got["pipeline"] is False and got["parallel_evidence"]["stage_names"] == []


@pytest.mark.parametrize(("kind", "name"), [("marker", "pp_stage_1"),
                                            ("host_op", "nccl:send"),
                                            ("marker", "send_forward")])
def test_stage_evidence_still_shows_pipeline(kind: str, name: str) -> None:
    # the same names as an annotation / operator do, and the frames beside them change nothing
    got = _shows(ev(kind, name, 10, 50), *(ev("python", f, 70, 5) for f in FRAMES))
    assert got["pipeline"] is True
