"""`hermes analyze` / `hermes report` with several profiler files, one per rank, read as
`hermes import` reads them (the real 2-rank Gloo DDP traces of ../shared/traces)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli

NAMES = ("ddp_gloo_straggler_rank0.pt.trace.json.gz", "ddp_gloo_straggler_rank1.pt.trace.json.gz")


def test_several_profiler_files_are_the_ranks_of_one_run(shared_traces: Path,
                                                         tmp_path: Path) -> None:
    files = [str(shared_traces / "kineto-h100-dist" / n) for n in NAMES]
    code, out, err = run_cli("analyze", *files, "--format", "json")
    assert code == 0, err
    many = json.loads(out)
    assert many["ranks"] == [0, 1]
    # the same as importing them first
    code, _, err = run_cli("import", *files, "--out", str(tmp_path / "run"))
    assert code == 0, err
    code, out, err = run_cli("analyze", str(tmp_path / "run"), "--format", "json")
    assert code == 0, err
    one = json.loads(out)
    assert (many["steps"], many["bound"]) == (one["steps"], one["bound"])
    assert [f["id"] for f in many["findings"]] == [f["id"] for f in one["findings"]]
    code, out, err = run_cli("report", *files, "--out", str(tmp_path / "r.html"))
    assert code == 0, err
    assert (tmp_path / "r.html").stat().st_size > 0
    # a Hermes trace among them: one line, exit 2
    code, _, err = run_cli("analyze", files[0], str(tmp_path / "run"))
    assert code == 2 and "Hermes trace already" in err and err.count("\n") == 1
