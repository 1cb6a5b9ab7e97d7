"""``hermes diff``: name normalization, and the rows it reports on real trace pairs checked
against per-step totals measured independently from the raw Kineto JSON (json + pandas)."""

from __future__ import annotations

import gzip
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from hermes.diff import RENDERERS, compare
from hermes.diff.names import normalize
from hermes.diff.stats import mann_whitney, median_ratio_ci, min_p
from tests.conftest import run_cli


def test_normalize_matches_instances_of_one_kernel() -> None:
    assert normalize("void foo<128, float>(float*, int)") == "void foo"
    assert normalize("void foo<256, float>(float*, int)") == "void foo"
    assert normalize("void ns::k<ns::F<int>, 4>(ns::A<float>)") == "void ns::k"
    assert normalize("kernel_0x7fa3b2") == "kernel"
    assert normalize("nccl:all_reduce#17") == "nccl:all_reduce"
    assert normalize("ProfilerStep#3") == normalize("ProfilerStep#7")
    # words in parentheses are not a parameter list; a trailing underscore is not a counter
    assert normalize("Memcpy HtoD (Pinned -> Device)") != normalize(
        "Memcpy HtoD (Pageable -> Device)")
    assert normalize("aten::add_") == "aten::add_"
    assert normalize("sm90_gemm_bf16_128x64") == "sm90_gemm_bf16_128x64"


def test_stats_small_cases() -> None:
    assert min_p(4, 4, "less") == pytest.approx(1 / 70)
    assert min_p(2, 2) == pytest.approx(2 / 6)
    ci = median_ratio_ci([10.0] * 5 + [11.0] * 5, [11.0] * 10)
    assert ci.ratio == pytest.approx(11 / 10.5)
    assert ci.lo <= ci.ratio <= ci.hi
    p = mann_whitney([[1, 2, 3, 4, 5], [1, 1, 1, 1, 1]], [[6, 7, 8, 9, 10], [1, 1, 1, 1, 1]],
                     alternative="less")
    assert p[0] < 0.01 and p[1] == 1.0  # a row with ties: scipy's normal approximation
    exact = mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], alternative="less")[0]
    assert exact == pytest.approx(1 / 252) == min_p(5, 5, "less")  # small, no ties: exact


def _raw_per_step(path: Path) -> pd.DataFrame:
    """Mean time per ProfilerStep (us) of every name, straight from the Kineto JSON: host
    events by their start, device events by the start of the runtime call that launched them
    (correlation id), kernel names without template arguments and parameter list."""
    with gzip.open(path) as fh:
        ev = pd.DataFrame(json.load(fh)["traceEvents"])
    ev = ev[ev["ph"] == "X"].copy()
    corr = ev["args"].map(lambda a: a.get("correlation") if isinstance(a, dict) else None)
    ev["corr"] = corr
    steps = ev[ev["name"].str.startswith("ProfilerStep#") & (ev["cat"] == "user_annotation")]
    steps = steps.sort_values("ts")  # the host's; GPU-side copies (gpu_user_annotation) aside
    launch_ts = ev[ev["cat"].isin(["cuda_runtime", "cuda_driver"])].set_index("corr")["ts"]
    launch_ts = launch_ts[~launch_ts.index.duplicated()]
    device = ev["cat"].isin(["kernel", "gpu_memcpy", "gpu_memset"])
    ev["when"] = ev["ts"]
    ev.loc[device, "when"] = ev.loc[device, "corr"].map(launch_ts).fillna(ev.loc[device, "ts"])
    ev["step"] = -1
    for i, s in enumerate(steps.itertuples()):
        ev.loc[(ev["when"] >= s.ts) & (ev["when"] < s.ts + s.dur), "step"] = i

    def strip(name: str) -> str:
        while re.search(r"<[^<>]*>", name):
            name = re.sub(r"<[^<>]*>", "", name)
        return re.sub(r"(?<=\w)\([^()]*\)$", "", name)

    ev.loc[ev["cat"] == "kernel", "name"] = ev.loc[ev["cat"] == "kernel", "name"].map(strip)
    ev = ev[(ev["step"] >= 0) & ev["cat"].isin(
        ["cpu_op", "user_annotation", "kernel", "gpu_memcpy", "gpu_memset"])]
    return ev.groupby("name")["dur"].sum() / len(steps)


def _rows(d, names: list[str]) -> dict[str, dict]:
    df = d.names.set_index("name")
    return {n: df.loc[n].to_dict() for n in names}


def _check_rows(d, base: Path, new: Path, expected: dict[str, tuple[str, float]]) -> None:
    raw_b, raw_n = _raw_per_step(base), _raw_per_step(new)
    rows = _rows(d, list(expected))
    for name, (status, change_us) in expected.items():
        independent = raw_n.get(name, 0.0) - raw_b.get(name, 0.0)
        assert independent == pytest.approx(change_us, abs=1e-3), name
        assert rows[name]["status"] == status, name
        assert rows[name]["change_us"] == pytest.approx(change_us, abs=1e-3), name


def _all_formats(d, names: list[str]) -> None:
    for fmt in RENDERERS.names():
        text = RENDERERS.get(fmt)(d, 1000)
        if fmt == "json":
            doc = json.loads(text)
            assert doc["schema"] == "hermes.diff/1"
            got = {r["name"] for r in doc["names"]}
            assert set(names) <= got
            continue
        if fmt == "html":
            root = ET.fromstring(text.split("\n", 1)[1].replace("<meta charset=\"utf-8\">",
                                                               "<meta charset=\"utf-8\"/>"))
            cells = {td.text for td in root.iter("td")}
            assert set(names) <= cells, fmt
            continue
        for n in names:
            assert n.replace("|", "\\|") in text.replace("-&gt;", "->"), (fmt, n)


def test_hta_trace_compare(shared_traces: Path) -> None:
    base = shared_traces / "hta/trace_compare/base"
    new = shared_traces / "hta/trace_compare/test"
    d = compare(base, new)
    assert d.ranks == [1] and d.base_steps.count == d.new_steps.count == 2
    # measured: test adds three operators in ProfilerStep#1010 (311, 207, 11 us over 2 steps),
    # loses one nccl:all_reduce range (67 us) and the 4 us kernel launched at its end
    expected = {"All2All_Pooled_Req": ("new", 155.5), "AddmmBackward0": ("new", 103.5),
                "nccl:all_reduce": ("faster", -33.5), "CatBackward0": ("new", 5.5),
                "void at::native::vectorized_elementwise_kernel": ("faster", -2.0)}
    _check_rows(d, base / "base.json.gz", new / "test.json.gz", expected)
    assert list(d.changed()["name"]) == list(expected)  # sorted by |change|, nothing else
    _all_formats(d, list(expected))


def test_kineto_h100_pair(shared_traces: Path) -> None:
    base = shared_traces / "kineto-h100/gpt_dataloader_starved.pt.trace.json.gz"
    new = shared_traces / "kineto-h100/gpt_balanced.pt.trace.json.gz"
    d = compare(base, new)
    # measured from the raw JSON: the starved loader's collate work (aten::rand ... on the main
    # thread) is gone; copies switch from pageable to pinned memory
    expected = {"aten::rand": ("gone", -2947.3385), "aten::div": ("gone", -2709.0265),
                "aten::mm": ("faster", -101760.3815),
                "Memcpy HtoD (Pinned -> Device)": ("new", 6.264),
                "Memcpy HtoD (Pageable -> Device)": ("gone", -5.968)}
    _check_rows(d, base, new, expected)
    assert d.names.iloc[0]["name"] in ("aten::matmul", "aten::mm")
    assert d.new_steps.median_ms < d.base_steps.median_ms
    fids = {f["id"]: f["status"] for f in d.findings}
    assert fids["io.slow_data_processing"] == "disappeared"
    _all_formats(d, list(expected))


def test_cli_diff_formats_and_errors(shared_traces: Path, tmp_path: Path) -> None:
    base = shared_traces / "hta/trace_compare/base"
    new = shared_traces / "hta/trace_compare/test"
    out = tmp_path / "d.html"
    code, _, err = run_cli("diff", str(base), str(new), "--format", "html", "--out", str(out))
    assert code == 0 and "All2All_Pooled_Req" in out.read_text()
    code, _, err = run_cli("diff", str(base), str(new), "--format", "xml")
    assert code == 2 and "valid: text, md, json, html" in err
    code, _, err = run_cli("diff", str(base), str(new), "--out", str(new / "x.md"))
    assert code == 2 and "overwrite an input" in err
    code, _, err = run_cli("diff", str(tmp_path / "nope"), str(new))
    assert code == 2 and "nope" in err and err.count("\n") == 1
