"""``hermes import``: summary, JSON, per-rank directories, and one-line errors on bad input."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

import hermes
from tests.conftest import DATA, run_cli

KINETO = DATA / "kineto"
SMALL = KINETO / "two_stream_prefetch.pt.trace.json.gz"


def test_import_prints_summary_and_writes_a_valid_trace(tmp_path: Path) -> None:
    out = tmp_path / "run.parquet"
    code, stdout, stderr = run_cli("import", str(SMALL), "--out", str(out))
    assert code == 0, stderr
    assert "with kineto" in stdout and str(out) in stdout
    assert "kernel" in stdout and "Trace 1" in stdout  # unknown category kept and counted
    assert run_cli("validate", str(out))[0] == 0
    assert len(hermes.load(out).events) == 660


def test_import_json_and_rank_directory(tmp_path: Path) -> None:
    out = tmp_path / "ranks"
    srcs = [str(KINETO / "sampled_rank-0.json.gz"), str(KINETO / "sampled_rank-1.json.gz")]
    code, stdout, _ = run_cli("import", *srcs, "--out", str(out), "--from", "kineto", "--json")
    assert code == 0
    summary = json.loads(stdout)
    assert summary["ranks"] == [0, 1] and summary["importer"] == "kineto"
    assert sorted(p.name for p in out.iterdir()) == ["rank-00000.parquet", "rank-00001.parquet"]
    assert summary["events"] == len(hermes.load(out).events)
    assert summary["by_kind"]["collective"] > 0


def test_source_directory_is_expanded(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "r0.json.gz").write_bytes((KINETO / "sampled_rank-0.json.gz").read_bytes())
    (src / "r1.json.gz").write_bytes((KINETO / "sampled_rank-1.json.gz").read_bytes())
    code, stdout, _ = run_cli("import", str(src), "--out", str(tmp_path / "o.parquet"), "--json")
    assert code == 0 and json.loads(stdout)["ranks"] == [0, 1]


def test_unknown_importer_lists_the_valid_ones(tmp_path: Path) -> None:
    code, _, stderr = run_cli("import", str(SMALL), "--out", str(tmp_path / "o.parquet"),
                              "--from", "nvprof")
    assert code == 2 and "nvprof" in stderr and "kineto" in stderr
    assert not list(tmp_path.iterdir())


def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    """name -> (source path, text the error must mention)."""
    empty = tmp / "empty.json"
    empty.write_bytes(b"")
    rand = tmp / "random.json"
    rand.write_bytes(os.urandom(4096))
    trunc = tmp / "truncated.json.gz"
    trunc.write_bytes(SMALL.read_bytes()[:8000])
    notrace = tmp / "other.json"
    notrace.write_text(json.dumps({"schemaVersion": 1, "rows": [1, 2, 3]}))
    cut = tmp / "cut.json.gz"
    with gzip.open(SMALL, "rb") as fh:
        cut.write_bytes(gzip.compress(fh.read()[:200_000]))
    emptydir = tmp / "emptydir"
    emptydir.mkdir()
    ev = {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": 1}
    huge = tmp / "huge.json"
    huge.write_text(json.dumps({"traceEvents": [ev, dict(ev, ts=1e30)]}))
    word = tmp / "word.json"
    word.write_text(json.dumps({"traceEvents": [ev, dict(ev, dur="soon")]}))
    return {"huge ts": (huge, "(event 1): 'ts' 1e+30 us is out of range"),
            "text dur": (word, "(event 1): 'ts'/'dur' is not a number"),
            "empty": (empty, "empty"), "random": (rand, "random.json"),
            "truncated gzip": (trunc, "truncated gzip"), "not a trace": (notrace, "other.json"),
            "cut json": (cut, "cut.json.gz"), "empty directory": (emptydir, "no trace files"),
            "missing": (tmp / "nope.json", "no such file")}


@pytest.mark.parametrize("case", ["empty", "random", "truncated gzip", "not a trace", "cut json",
                                  "empty directory", "missing", "huge ts", "text dur"])
@pytest.mark.parametrize("forced", [False, True])
def test_bad_input_is_one_line_exit_2_and_no_output(case: str, forced: bool,
                                                    tmp_path: Path) -> None:
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    src, text = _bad_inputs(src_dir)[case]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    args = ["import", str(src), "--out", str(out_dir / "o.parquet")]
    code, stdout, stderr = run_cli(*args, *(["--from", "kineto"] if forced else []))
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr
    assert src.name in lines[0] and text in lines[0]
    assert list(out_dir.iterdir()) == []  # nothing left behind, not even a temp file


def test_output_in_missing_directory(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "o.parquet"
    code, _, stderr = run_cli("import", str(SMALL), "--out", str(out))
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert "missing" in stderr and "does not exist" in stderr
    assert not out.parent.exists()


def test_failed_rank_directory_import_leaves_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "a", "ts": "x"}]}')
    out = tmp_path / "ranks"
    code, _, stderr = run_cli("import", str(SMALL), str(bad), "--out", str(out))
    assert code == 2 and "bad.json" in stderr and "event 0" in stderr
    assert not out.exists()


# -- --rank and --device ------------------------------------------------------------------
def _profile(name: str) -> dict:
    from hermes import devices

    return devices.get(name).to_meta()


def test_rank_option_sets_the_rank_of_a_file_without_distributed_info(tmp_path: Path) -> None:
    out = tmp_path / "r3.parquet"
    code, stdout, stderr = run_cli("import", str(SMALL), "--rank", "3", "--out", str(out),
                                   "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["ranks"] == [3]
    trace = hermes.load(out)
    assert set(trace.events["rank"]) == {3} and len(trace.events) == 660
    assert list(trace.meta.ranks) == [3]


def test_rank_option_does_not_override_distributed_info(tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    code, stdout, _ = run_cli("import", str(KINETO / "sampled_rank-1.json.gz"), "--rank", "5",
                              "--out", str(out), "--json")
    summary = json.loads(stdout)
    assert code == 0 and summary["ranks"] == [1]
    assert any("rank 1" in w and "5" in w for w in summary["warnings"])


def test_rank_option_with_several_files_is_exit_2(tmp_path: Path) -> None:
    srcs = [str(KINETO / "sampled_rank-0.json.gz"), str(KINETO / "sampled_rank-1.json.gz")]
    code, _, stderr = run_cli("import", *srcs, "--rank", "2", "--out",
                              str(tmp_path / "o.parquet"))
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert "--rank" in stderr and "2 were given" in stderr
    assert not list(tmp_path.iterdir())


def test_negative_rank_is_a_usage_error(tmp_path: Path) -> None:
    code, _, stderr = run_cli("import", str(SMALL), "--rank", "-1", "--out",
                              str(tmp_path / "o.parquet"))
    assert code == 2 and "Traceback" not in stderr


def test_device_option_fills_a_trace_without_device_properties(tmp_path: Path) -> None:
    # sampled_rank-0 has an empty deviceProperties list: no device profile without --device
    src = str(KINETO / "sampled_rank-0.json.gz")
    assert run_cli("import", src, "--out", str(tmp_path / "a.parquet"))[0] == 0
    assert hermes.load(tmp_path / "a.parquet").meta.device == {}
    code, _, stderr = run_cli("import", src, "--device", "H100", "--out",
                              str(tmp_path / "b.parquet"))
    assert code == 0, stderr
    device = hermes.load(tmp_path / "b.parquet").meta.device
    assert device["name"] == "h100" and device["peak_flops"]["sm"] > 0


def test_device_option_does_not_replace_known_device_properties(tmp_path: Path) -> None:
    code, _, _ = run_cli("import", str(SMALL), "--device", "ascend910b", "--out",
                         str(tmp_path / "o.parquet"))
    device = hermes.load(tmp_path / "o.parquet").meta.device
    assert code == 0 and device["name"] == "NVIDIA H100 80GB HBM3"
    assert device["display_name"] == _profile("h100")["display_name"]


def test_unknown_device_is_exit_2_listing_the_profiles(tmp_path: Path) -> None:
    code, _, stderr = run_cli("import", str(SMALL), "--device", "tpu-v5", "--out",
                              str(tmp_path / "o.parquet"))
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert "tpu-v5" in stderr and all(n in stderr for n in ("h100", "ascend910a", "ascend910b"))
    assert not list(tmp_path.iterdir())


def test_help_shows_rank_and_device_examples() -> None:
    code, stdout, _ = run_cli("import", "--help")
    # rich wraps lines at the terminal width, inside the options box
    text = " ".join(stdout.replace("\u2502", " ").split())
    assert code == 0
    assert "--rank 3 --device h100" in text and "e.g. --rank 3" in text
