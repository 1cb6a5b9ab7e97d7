"""A trace path is analyzed with its args left in the file (``load(lazy_args=True)``, read on
demand by the analyzers and the what-if replay): the report is the one the same trace loaded
whole gives, on real traces whose args change the report when unread (GEMM input dims and dtypes,
pageable copies)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes.diff.runs import import_trace
from hermes.pipeline import analyze_and_advise
from hermes.report import RENDERERS
from hermes.trace import load
from hermes.trace.args import ROW
from tests.conftest import SHARED_TRACES

TRACES = ["kineto-h100/big_matmul.pt.trace.json.gz",
          "kineto-h100/two_stream_prefetch.pt.trace.json.gz"]


@pytest.mark.parametrize("name", TRACES)
def test_lazy_args_give_the_same_report(name: str, tmp_path: Path) -> None:
    src = SHARED_TRACES / name
    if not src.exists():
        pytest.skip(f"shared trace {name} not found")
    path = import_trace(src, tmp_path / "t.parquet")
    assert ROW in load(path, lazy_args=True).events.columns  # (the route under test)
    json = RENDERERS.get("json")
    lazy = json(*analyze_and_advise(path), 10)
    whole = json(*analyze_and_advise(load(path)), 10)
    assert lazy == whole


@pytest.mark.parametrize("name", TRACES)
def test_the_replay_reads_the_same_args_from_the_file(name: str, tmp_path: Path) -> None:
    """The what-if transforms read args of the graph events they ask about (fusion: kernels,
    pin_memory: host-to-device copies): from a lazily loaded trace, the text of the loaded
    column, for every graph event."""
    import numpy as np

    from hermes.whatif import graphs
    from hermes.whatif.facts import args_at

    src = SHARED_TRACES / name
    if not src.exists():
        pytest.skip(f"shared trace {name} not found")
    path = import_trace(src, tmp_path / "t.parquet")
    lazy, whole = graphs(load(path, lazy_args=True).events), graphs(load(path).events)
    assert lazy.keys() == whole.keys()
    for r, sg in whole.items():
        rows = np.arange(len(sg.info))
        got, want = args_at(lazy[r], rows), args_at(sg, rows)
        assert want is not None and want.notna().any()
        assert got is not None and got.astype(object).tolist() == want.astype(object).tolist()
