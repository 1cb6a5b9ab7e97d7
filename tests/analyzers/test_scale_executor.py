"""The embedded executor: retries, failures reported (never dropped), and what a partial
analysis looks like in the report and the exit code."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from hermes.analyzers.engine.executor import Failure, LocalExecutor, make_executor, pool_size
from tests.conftest import emulated_run, negative_dur, run_cli


def _flaky(flag_dir: str, item: int) -> int:
    """Fails (raises) on the first try of item 1 and on every try of item 2."""
    flag = Path(flag_dir, f"tried-{item}")
    if item == 2 or (item == 1 and not flag.exists()):
        flag.touch()
        raise RuntimeError(f"item {item} failed")
    return item * 10


def _die_once(flag_dir: str, item: int) -> int:
    """Kills its own worker process on the first try of item 1 (a dead worker, not an error)."""
    flag = Path(flag_dir, f"died-{item}")
    if item == 1 and not flag.exists():
        flag.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return item * 10


def test_serial_retries_once_then_reports(tmp_path: Path) -> None:
    import functools

    got = dict(LocalExecutor(0).map(functools.partial(_flaky, str(tmp_path)), [0, 1, 2]))
    assert got[0] == 0 and got[1] == 10
    assert got[2] == Failure("RuntimeError: item 2 failed", 2)


def test_pool_survives_a_dead_worker(tmp_path: Path) -> None:
    import functools

    ex = LocalExecutor(2)
    assert ex.workers == pool_size(2) >= 1
    if ex.workers < 2:
        pytest.skip("one core or too little memory for a pool")
    got = dict(ex.map(functools.partial(_die_once, str(tmp_path)), [0, 1, 2, 3]))
    assert got == {0: 0, 1: 10, 2: 20, 3: 30}  # the dead worker's items ran again


def test_make_executor_default_is_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    assert isinstance(make_executor(None, 0), LocalExecutor)


def test_a_rank_that_does_not_load_is_missing_and_exit_code_says_so(tmp_path: Path) -> None:
    src = tmp_path / "run"
    emulated_run(src, "deepfm", 2, 3)
    bad = src / "rank-00001.parquet"
    # the footer stays readable (the rank list), the row data does not
    data = bad.read_bytes()
    bad.write_bytes(data[:4] + b"\0" * (len(data) // 2) + data[4 + len(data) // 2:])
    code, out, err = run_cli("analyze", str(src), "--format", "json")
    if code == 2 and "rank" not in err:  # the corruption hit the footer: nothing to test here
        pytest.skip(err)
    assert code == 1, err
    assert "rank(s) not analyzed: 1" in err
    import json

    doc = json.loads(out)
    assert [m["rank"] for m in doc["missing_ranks"]] == [1] and doc["ranks"] == [0]
    assert doc["missing_ranks"][0]["attempts"] == 2
    code, out, _ = run_cli("analyze", str(src), "--allow-missing")
    assert code == 0 and "MISSING rank 1" in out
    code, out, _ = run_cli("analyze", str(src), "--allow-missing", "--format", "md")
    assert code == 0 and "missing rank 1" in out


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_unreadable_rank_file_is_missing_and_the_others_are_analyzed(
        tmp_path: Path, workers: str) -> None:
    """A per-rank directory where one file's footer is gone (a rank that died while writing
    it): the other ranks are analyzed, the file is named as missing in every renderer (its
    ranks unknown), and the exit code says so (0 with --allow-missing)."""
    import json

    src = tmp_path / "run"
    emulated_run(src, "deepfm", 3, 3)
    bad = src / "rank-00001.parquet"
    bad.write_bytes(bad.read_bytes()[:3000])  # truncated: no footer
    code, out, err = run_cli("analyze", str(src), "--format", "json", "--workers", workers)
    assert code == 1, err
    assert "rank(s) not analyzed: file rank-00001.parquet (not a readable Parquet file" in err
    doc = json.loads(out)
    assert doc["ranks"] == [0, 2]
    (m,) = doc["missing_ranks"]
    assert (m["rank"], m["file"], m["attempts"]) == (None, "rank-00001.parquet", 2)
    assert m["error"].startswith("not a readable Parquet file") and "truncated" in m["error"]
    line = "file rank-00001.parquet: not read (not a readable Parquet file"
    for fmt, shown in (("text", f"MISSING {line}"), ("md", "**missing file rank-00001.parquet**"
                                                     ": not read (not a readable"),
                       ("html", f"<dt>MISSING</dt><dd>{line}")):
        code, out, err = run_cli("analyze", str(src), "--allow-missing", "--format", fmt,
                                 "--workers", workers)
        assert code == 0, err
        assert shown in out, fmt
    # hermes report too: the page names it, the exit code says so
    page = tmp_path / f"report-{workers}.html"
    code, _, err = run_cli("report", str(src), "--out", str(page), "--workers", workers)
    assert code == 1 and "rank(s) not analyzed: file rank-00001.parquet" in err, err
    assert f"<dt>MISSING</dt><dd>{line}" in page.read_text()
    code, _, err = run_cli("report", str(src), "--out", str(page), "--allow-missing")
    assert code == 0, err
    # a directory of such files only: nothing to analyze, the file's own error
    (src / "rank-00000.parquet").unlink()
    (src / "rank-00002.parquet").unlink()
    code, _, err = run_cli("analyze", str(src))
    assert code == 2 and "rank-00001.parquet: not a readable Parquet file" in err


def test_a_rank_failure_names_the_rank_once(tmp_path: Path) -> None:
    """A rank refused by the analysis' time checks: its line names the rank once (the
    check's own message does not repeat it)."""

    src = tmp_path / "run"
    emulated_run(src, "deepfm", 2, 3)
    f = src / "rank-00001.parquet"
    negative_dur(f, 4)
    code, out, err = run_cli("analyze", str(src), "--allow-missing")
    assert code == 0, err
    assert "MISSING rank 1: not analyzed (1 event(s) with negative dur_ns, first at row 4" in out
    code, _, err = run_cli("analyze", str(f))
    assert code == 2
    assert "no rank could be analyzed: rank 1: 1 event(s) with negative dur_ns" in err, err


def _rewrite(f: Path, edit: Any) -> None:
    """Rewrite a Hermes Parquet file's table through ``edit(table)``, its footer kept."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(f)
    meta = {**(pf.schema_arrow.metadata or {}), **(pf.metadata.metadata or {})}
    pq.write_table(edit(pf.read()).replace_schema_metadata(meta), f)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_rank_file_whose_rows_hold_another_rank_is_missing(tmp_path: Path,
                                                             workers: str) -> None:
    """fuzz pdir: rank-00002.parquet's footer lists rank 2, its rows hold rank 5. Rank 2 was
    analyzed from rank 5's rows (exit 0, rank 5 named nowhere); now rank 2 is missing, the
    file and both ranks named, and validate says why."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "run"
    emulated_run(src, "deepfm", 3, 3)
    f = src / "rank-00002.parquet"
    _rewrite(f, lambda t: t.set_column(t.schema.get_field_index("rank"), "rank",
                                       pa.array([5] * len(t), t.schema.field("rank").type)))
    code, out, err = run_cli("analyze", str(src), "--format", "json", "--workers", workers)
    assert code == 1, err
    n = pq.ParquetFile(f).metadata.num_rows
    needle = f"rank-00002.parquet: {n} event(s) of rank(s) 5 that the footer's hermes.ranks (2)"
    assert f"rank(s) not analyzed: 2 ({needle}" in err
    doc = json.loads(out)
    assert doc["ranks"] == [0, 1] and [m["rank"] for m in doc["missing_ranks"]] == [2]
    code, out, _ = run_cli("analyze", str(src), "--allow-missing", "--workers", workers)
    assert code == 0 and f"MISSING rank 2: not analyzed ({needle}" in out
    code, out, err = run_cli("validate", str(src))
    assert code == 1 and f"{f}: {n} event(s) of rank(s) 5" in err


@pytest.mark.parametrize(("layout", "workers"), [("segments", "1"), ("segments", "2"),
                                                 ("unlisted", "1")])
def test_an_unreadable_file_does_not_fail_the_ranks_read_from_the_directory(
        tmp_path: Path, layout: str, workers: str) -> None:
    """fuzz pdir: a rank read from the directory (its rows in two files, or footers that list
    no ranks) was failed with another file's unreadable footer as its error; now only that
    file is missing and every rank is analyzed."""
    import json

    import pyarrow.parquet as pq

    src = tmp_path / "run"
    emulated_run(src, "deepfm", 3, 3)
    first = src / "rank-00000.parquet"
    if layout == "segments":  # rank 0 in two files, as a profiled run's segments are
        pf = pq.ParquetFile(first)
        meta = {**(pf.schema_arrow.metadata or {}), **(pf.metadata.metadata or {})}
        t = pf.read().replace_schema_metadata(meta)
        pq.write_table(t.slice(0, len(t) // 2), first)
        pq.write_table(t.slice(len(t) // 2), src / "rank-00000.seg-1-00001.parquet")
    else:  # footers without hermes.ranks: the rank column decides
        for f in sorted(src.glob("*.parquet")):
            pf = pq.ParquetFile(f)
            meta = {**(pf.schema_arrow.metadata or {}), **(pf.metadata.metadata or {})}
            meta.pop(b"hermes.ranks")
            pq.write_table(pf.read().replace_schema_metadata(meta), f)
    bad = src / "rank-00001.parquet"
    bad.write_bytes(bad.read_bytes()[:3000])  # truncated: no footer
    code, out, err = run_cli("analyze", str(src), "--format", "json", "--workers", workers)
    assert code == 1, err
    doc = json.loads(out)
    assert doc["ranks"] == [0, 2]
    assert [(m["rank"], m.get("file")) for m in doc["missing_ranks"]] == \
        [(None, "rank-00001.parquet")]


@pytest.mark.parametrize(("how", "workers"), [("copy", "1"), ("link", "2")])
def test_a_rank_file_twice_is_missing_not_counted_twice(tmp_path: Path, how: str,
                                                        workers: str) -> None:
    """fuzz pdir: a copy of (or a link to) a rank's file under another name in the directory
    had that rank's events read twice (exit 0, sums doubled); now the rank is missing and the
    extra file named."""
    import json
    import shutil

    src = tmp_path / "run"
    emulated_run(src, "deepfm", 3, 3)
    extra = src / "rank-00009.parquet"
    if how == "copy":
        shutil.copy(src / "rank-00001.parquet", extra)
    else:
        extra.symlink_to("rank-00001.parquet")
    code, out, err = run_cli("analyze", str(src), "--format", "json", "--workers", workers)
    assert code == 1, err
    what = "a copy of" if how == "copy" else "a link to"
    assert f"rank(s) not analyzed: 1 (rank-00009.parquet is {what} rank-00001.parquet" in err
    assert "remove rank-00009.parquet" in err
    doc = json.loads(out)
    assert doc["ranks"] == [0, 2] and [m["rank"] for m in doc["missing_ranks"]] == [1]


def test_files_of_two_runs_in_one_directory_are_refused(tmp_path: Path) -> None:
    """fuzz pdir: a rank file of another run (another source) in a per-rank directory was
    analyzed with the others as one job (exit 0); now the input is refused, the odd file and
    both sources named."""
    import pyarrow.parquet as pq

    src = tmp_path / "run"
    emulated_run(src, "deepfm", 2, 3)
    f = src / "rank-00001.parquet"
    pf = pq.ParquetFile(f)
    meta = {**(pf.schema_arrow.metadata or {}), **(pf.metadata.metadata or {}),
            b"hermes.source": b"kineto"}
    pq.write_table(pf.read().replace_schema_metadata(meta), f)
    for workers in ("1", "2"):
        code, _, err = run_cli("analyze", str(src), "--workers", workers)
        assert code == 2, err
        assert err.count("hermes: error:") == 1
        assert "rank-00001.parquet: source 'kineto' differs from 'emulator' of " \
               "rank-00000.parquet: files of two different runs" in err
    code, _, err = run_cli("validate", str(src))
    assert code == 1 and "files of two different runs" in err
