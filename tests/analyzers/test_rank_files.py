"""A worker analyzing one rank of a per-rank directory reads that rank's file, and the
directory's footers once per worker, not once per rank."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes.analyzers.engine import rankfiles, run
from hermes.trace import reader
from hermes.trace.meta import TraceMeta
from hermes.trace.writer import write_trace
from tests.tracegen import ev, frame


def _dir(tmp_path: Path, n: int) -> Path:
    d = tmp_path / "ranks"
    d.mkdir()
    for r in range(n):
        rows = [ev("step", "ProfilerStep#1", 0, 100 + r, rank=r),
                ev("host_op", "fwd", 0, 90 + r, rank=r)]
        write_trace(d / f"rank-{r:05d}.parquet", frame(*rows), TraceMeta(ranks=[r]))
    return d


def test_each_rank_reads_its_own_file_and_the_footers_once(tmp_path, monkeypatch):
    d = _dir(tmp_path, 4)
    rankfiles.rank_files.cache_clear()
    calls = []
    real = reader.read_ranks
    monkeypatch.setattr(reader, "read_ranks", lambda *a: calls.append(a) or real(*a))
    assert [Path(rankfiles.rank_file(str(d), r)).name for r in range(4)] == \
        [f"rank-{r:05d}.parquet" for r in range(4)]
    assert len(calls) == 4  # four footers, read once for the four ranks
    # what the worker analyzes is that rank's events alone, as from the directory
    r, res = run.rank_job(str(d), 2)
    assert r == 2
    steps = res["steps"].tables["windows"]
    assert steps["dur_ns"].tolist() == [102]


def test_a_rank_in_two_files_is_read_from_the_directory(tmp_path):
    # rank 1's events split over two files: the worker reads the directory (rank-filtered)
    d = tmp_path / "ranks"
    d.mkdir()
    write_trace(d / "a.parquet", frame(ev("host_op", "fwd", 0, 90, rank=0),
                                       ev("host_op", "fwd", 0, 80, rank=1)), TraceMeta())
    write_trace(d / "b.parquet", frame(ev("host_op", "opt", 90, 10, rank=1)), TraceMeta())
    rankfiles.rank_files.cache_clear()
    assert rankfiles.rank_file(str(d), 1) == str(d)
    assert Path(rankfiles.rank_file(str(d), 0)).name == "a.parquet"


@pytest.mark.parametrize("name", ["trace.parquet"])
def test_a_file_is_its_own_rank_file(tmp_path, name):
    f = tmp_path / name
    write_trace(f, frame(ev("host_op", "fwd", 0, 90)), TraceMeta(ranks=[0]))
    assert rankfiles.rank_file(str(f), 0) == str(f)


def test_a_single_file_whose_rows_hold_an_unlisted_rank_is_refused(tmp_path):
    """One file whose footer lists rank 0 but whose rows hold rank 3 too: the ranks analyzed
    come from the footer, so rank 3's rows would be left out without a word; refused instead,
    naming the rank (a footer listing both is analyzed)."""
    from hermes.errors import TraceFormatError

    rows = [ev("step", "ProfilerStep#1", 0, 100, rank=r) for r in (0, 3)] + \
        [ev("host_op", "fwd", 0, 90, rank=r) for r in (0, 3)]
    bad = tmp_path / "bad.parquet"
    write_trace(bad, frame(*rows), TraceMeta(ranks=[0]))
    with pytest.raises(TraceFormatError, match=r"rows of rank\(s\) 3 that the footer's "
                                               r"hermes.ranks \(0\) does not list"):
        run.analyze(bad)
    good = tmp_path / "good.parquet"
    write_trace(good, frame(*rows), TraceMeta(ranks=[0, 3]))
    assert run.analyze(good).ranks == [0, 3]
