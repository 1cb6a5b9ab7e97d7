"""Every example query of docs/query.md runs on a Kineto, an Ascend and an Nsight Systems
trace (the synthetic export, and the real one of ../shared when present); on the synthetic
export, whose every time is known by construction, the answers are checked by hand."""

from __future__ import annotations

import re

import pytest

from hermes import query as q
from hermes.collectors.importers.nsys import synthetic as syn
from tests.conftest import REPO, SHARED_TRACES, run_cli

EXAMPLES = re.findall(r"```sql\n(.*?)```", (REPO / "docs/query.md").read_text(), re.S)
SOURCES = {
    "kineto": REPO / "tests/data/kineto/gpt_balanced.pt.trace.json.gz",
    "ascend": REPO / "tests/data/ascend/trace_view.json",
    "nsys": None,  # the synthetic export
    "nsys-real": SHARED_TRACES / "nsys/mfu_2gpu_before.sqlite",
}


def test_ten_examples() -> None:
    assert len(EXAMPLES) == 10


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, q.Source]:
    tmp = tmp_path_factory.mktemp("query")
    out = {}
    for name, src in SOURCES.items():
        if src is None:
            src = syn.write(tmp / "syn.sqlite", 40, processes=2, steps=4, nccl_every=4,
                            memcpy_every=5)
        elif not src.exists():
            continue
        dst = tmp / f"{name}.parquet"
        code, _, err = run_cli("import", str(src), "--out", str(dst))
        assert code == 0, err
        out[name] = q.Source(dst)  # one analysis per trace, shared by the examples
    return out


@pytest.mark.parametrize("trace", list(SOURCES))
@pytest.mark.parametrize("i", range(len(EXAMPLES)), ids=lambda i: f"example{i + 1}")
def test_example_runs(traces: dict[str, q.Source], trace: str, i: int) -> None:
    if trace not in traces:
        pytest.skip(f"{SOURCES[trace]} not found")
    table, _ = q.run(traces[trace], EXAMPLES[i])
    assert table.num_columns >= 3


def _rows(traces: dict[str, q.Source], i: int) -> list[dict]:
    return q.run(traces["nsys"], EXAMPLES[i - 1])[0].to_pylist()


def test_answers_on_the_synthetic_export(traces: dict[str, q.Source]) -> None:
    # 40 kernels per rank, every 4th an NCCL collective: 30 kernels, 10 a step of 10 ...
    top = _rows(traces, 1)
    assert {(r["rank"], r["step"]) for r in top} == {(r, s) for r in (0, 1) for s in range(4)}
    assert sum(r["n"] for r in top) == 2 * 30
    # ... each launched LAUNCH_LEAD ns before it starts
    lat = _rows(traces, 2)
    assert [(r["rank"], r["kernels"], r["p50_ns"], r["p99_ns"]) for r in lat] == [
        (0, 30, syn.LAUNCH_LEAD, syn.LAUNCH_LEAD), (1, 30, syn.LAUNCH_LEAD, syn.LAUNCH_LEAD)]
    # the stream is never idle 100 us: kernels every PERIOD ns
    assert _rows(traces, 3) == []
    steps = _rows(traces, 4)
    # step s: from kernel 10s's launch - 200 ns to kernel 10s+9's end
    want = (9 * syn.PERIOD + syn.KERNEL_NS + syn.LAUNCH_LEAD + 200) / 1e6
    assert [r["step"] for r in steps] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert all(r["step_ms"] == pytest.approx(want) for r in steps)
    colls = _rows(traces, 5)
    assert sum(r["n"] for r in colls) == 2 * 10
    ops = _rows(traces, 8)
    assert ops == [{"name": "aten::mm", "calls": 80,
                    "total_ms": pytest.approx(80 * (syn.LAUNCH_NS + 200) / 1e6),
                    "longest_us": pytest.approx((syn.LAUNCH_NS + 200) / 1e3)}]
    grids = _rows(traces, 9)
    assert [(r["grid"], r["block"], r["n"]) for r in grids] == [("[128,1,1]", "[256,1,1]", 60)]
    copies = _rows(traces, 10)
    assert copies == [{"kind": "memcpy_h2d", "n": 16, "MB": pytest.approx(16 * 4096 / 1e6),
                       "GBps": pytest.approx(4096 / 500)}]


def test_kineto_answers_equal_pandas(traces: dict[str, q.Source]) -> None:
    ev = traces["kineto"].events().to_pandas()
    copies = {r["kind"]: r for r in q.run(traces["kineto"], EXAMPLES[9])[0].to_pylist()}
    mem = ev[ev["kind"].str.startswith("memcpy")]
    for kind, g in mem.groupby("kind"):
        assert copies[kind]["n"] == len(g)
        assert copies[kind]["MB"] == pytest.approx(g["bytes"].sum() / 1e6)
    steps = q.run(traces["kineto"], EXAMPLES[3])[0].to_pylist()
    st = ev[ev["kind"] == "step"].drop_duplicates("step").sort_values("step")
    assert [r["step"] for r in steps] == st["step"].astype(int).tolist()
