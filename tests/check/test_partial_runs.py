"""A run whose analysis left ranks out (``missing_ranks``) in ``hermes diff`` and ``hermes
check``: the left-out ranks are named in every diff format, and the CI gate fails on such a run
unless ``--allow-missing`` (a rank "only in base" may be one the new run could not analyze)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import emulated_run, negative_dur, run_cli


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("partial")
    base = emulated_run(d / "base", "deepfm", 3, 4)
    bad = emulated_run(d / "bad", "deepfm", 3, 4)
    negative_dur(bad / "rank-00001.parquet", 4)
    cut = emulated_run(d / "cut", "deepfm", 3, 4)
    f = cut / "rank-00002.parquet"
    f.write_bytes(f.read_bytes()[:3000])  # no footer: a rank that died writing it
    return {"base": base, "bad": bad, "cut": cut}


def test_diff_names_what_each_run_left_out(runs: dict[str, Path]) -> None:
    rank1 = "MISSING in new: rank 1: not analyzed (1 event(s) with negative dur_ns"
    code, out, err = run_cli("diff", str(runs["base"]), str(runs["bad"]))
    assert code == 0, err
    assert "only in base: 1;" in out and rank1 in out
    code, out, err = run_cli("diff", str(runs["base"]), str(runs["bad"]), "--format", "md")
    assert code == 0 and f"- **{rank1}" in out, err
    code, out, err = run_cli("diff", str(runs["base"]), str(runs["bad"]), "--format", "html")
    assert code == 0 and f'<p class="missing"><b>{rank1}' in out, err
    code, out, err = run_cli("diff", str(runs["bad"]), str(runs["cut"]), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)["ranks"]
    assert [m["rank"] for m in doc["missing_base"]] == [1]
    assert [(m["rank"], m["file"]) for m in doc["missing_new"]] == [(None, "rank-00002.parquet")]
    assert doc["matched"] == [0]
    # complete runs: no such key, no such line
    code, out, err = run_cli("diff", str(runs["base"]), str(runs["base"]), "--format", "json")
    assert code == 0 and "missing_base" not in out and "missing_new" not in out, err


def test_check_fails_a_partial_run_unless_allowed(runs: dict[str, Path]) -> None:
    code, out, err = run_cli("check", str(runs["bad"]), "--baseline", str(runs["base"]))
    assert code == 1, err
    assert "FAIL  ranks_analyzed: new run: rank 1: not analyzed (1 event(s) with negative" in out
    code, out, err = run_cli("check", str(runs["cut"]), "--baseline", str(runs["base"]),
                             "--allow-missing")
    assert code == 0, out + err
    assert "pass  ranks_analyzed [flagged]: new run: file rank-00002.parquet: not read" in out
    # a partial baseline counts too
    code, out, err = run_cli("check", str(runs["base"]), "--baseline", str(runs["bad"]))
    assert code == 1 and f"baseline {runs['bad']}: rank 1: not analyzed" in out, out + err
    code, out, err = run_cli("check", str(runs["base"]), "--baseline", str(runs["base"]))
    assert code == 0 and "ranks_analyzed" not in out, out + err
