"""The step journal (``hermes.trace.journal``): what a killed profiled run journaled since its
last checkpoint loads, each step once; a torn last entry or stale entries of an earlier
segment are left out; a journal whose writer is alive is left alone.

The whole path with real deaths (SIGKILL, abort, segfault) is tests/collectors/
test_crash_signals.py; here the journal is written directly, cut and read back.
"""

from __future__ import annotations

import fcntl
import os
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from hermes.trace import load
from hermes.trace import writer as trace_writer
from hermes.trace.journal import JournalWriter, read, recover
from hermes.trace.meta import TraceMeta
from hermes.trace.reader import trace_files
from hermes.trace.segments import ROWS_LIMIT, SegmentedTraceWriter, interrupted_note
from hermes.trace.writer import TraceWriter, to_table

META = TraceMeta(source="profile", ranks=(0,))
PID = os.getpid()


def _events(step: int, n: int, rank: int = 0) -> pa.Table:
    """``n`` host_op events of ``step`` (args on every other one, the other nullable columns
    null: the journal leaves those out and the reader fills them back)."""
    return to_table({"rank": [rank] * n, "lane": ["thread 1"] * n, "lane_kind": ["host"] * n,
                     "kind": ["host_op"] * n, "name": [f"op{k % 3}" for k in range(n)],
                     "ts_ns": [step * 10**6 + k for k in range(n)], "dur_ns": [1] * n,
                     "step": [step] * n,
                     "args": [f'{{"k": {k}}}' if k % 2 else None for k in range(n)]})


def _rows(step: int, rank: int = 0) -> dict[str, list]:
    """A monitor's rows of one step: the step and one counter (Python lists)."""
    return {"rank": [rank, rank], "lane": ["hermes.steps", "hermes.counters"],
            "lane_kind": ["host", "counter"], "kind": ["step", "counter"],
            "name": ["step", "host_cpu_pct"], "ts_ns": [step * 10**6, step * 10**6 + 5],
            "dur_ns": [900, 0], "step": [step, step], "value": [None, 12.5],
            "args": [None, '{"unit": "%"}']}


def _journal(d: Path, segment: int, steps: range, n: int) -> tuple[Path, list[int]]:
    """A journal of ``steps`` (each ``n`` events and the two monitor rows) for ``segment``
    of rank 0, with its (unlocked) progress file; the file size after each entry."""
    (d / ".rank-00000.progress").write_text("{}")
    j = JournalWriter(d / ".rank-00000.journal")
    sizes = []
    for s in steps:
        j.append(segment, META.to_kv, s, [_events(s, n)], _rows(s))
        sizes.append(j.path.stat().st_size)
    j.close(remove=False)
    return j.path, sizes


def _loaded(d: Path) -> Counter:
    """(kind, step) -> events, of what every reader reads in ``d``."""
    ev = load(d, columns=["kind", "step"]).events
    return Counter(zip(ev["kind"].astype(str), ev["step"].astype(int), strict=True))


def _expect(steps: range, n: int) -> Counter:
    out: Counter = Counter()
    for s in steps:
        out.update({("host_op", s): n, ("step", s): 1, ("counter", s): 1})
    return out


def test_a_torn_last_entry_is_left_out_and_the_complete_ones_load(tmp_path: Path) -> None:
    path, sizes = _journal(tmp_path, 2, range(1, 4), 50)
    whole = path.read_bytes()
    assert read(path).steps == [1, 2, 3] and not read(path).torn
    # cut anywhere inside the last entry (header, rows, IPC stream, trailer) or at its start
    cuts = [sizes[1], sizes[1] + 1, sizes[1] + 40, (sizes[1] + sizes[2]) // 2, sizes[2] - 25,
            sizes[2] - 1]
    for cut in cuts:
        path.write_bytes(whole[:cut])
        got = read(path)
        assert got.steps == [1, 2], cut
        assert got.torn == (cut != sizes[1]), cut
        assert [t.num_rows for t in got.tables] == [50, 50]
    assert recover(tmp_path) == []
    assert not path.exists()
    assert [f.name for f in trace_files(tmp_path)] == [f"rank-00000.seg-{PID}-00002.parquet"]
    assert _loaded(tmp_path) == _expect(range(1, 3), 50)
    ev = load(tmp_path, columns=["kind", "args"]).events
    args = ev.loc[ev["kind"] == "host_op", "args"]
    assert args.notna().sum() == 50 and args.dropna().iloc[0] == '{"k": 1}'  # nulls kept


def test_stale_entries_of_an_earlier_segment_are_not_read(tmp_path: Path) -> None:
    """After a checkpoint the journal starts over at offset 0: the earlier segment's longer
    entries beyond the new end are stale and must not come back."""
    (tmp_path / ".rank-00000.progress").write_text("{}")
    j = JournalWriter(tmp_path / ".rank-00000.journal")
    for s in (1, 2, 3):
        j.append(2, META.to_kv, s, [_events(s, 400)], _rows(s))
    big = j.path.stat().st_size
    j.append(3, META.to_kv, 4, [_events(4, 10)], _rows(4))  # segment 2 was checkpointed
    j.close(remove=False)
    assert j.path.stat().st_size == big  # overwritten in place, not grown
    got = read(j.path)
    assert (got.segment, got.steps, got.torn) == (3, [4], False)
    recover(tmp_path)
    assert _loaded(tmp_path) == _expect(range(4, 5), 10)


@pytest.mark.parametrize("published", ["segment", "merged"])
def test_a_step_checkpointed_and_journaled_loads_once(tmp_path: Path, published: str) -> None:
    """A death between a checkpoint (segment 2 renamed into place) and the journal's next
    entry, or during a clean close (merged, segments removed): the journal is redundant."""
    path, _ = _journal(tmp_path, 2, range(1, 3), 30)
    name = f"rank-00000.seg-{PID}-00002.parquet" if published == "segment" \
        else "rank-00000.parquet"
    w = TraceWriter(tmp_path / name, META)
    for s in (1, 2):
        w.write(_events(s, 30))
        w.write(_rows(s))
    w.close()
    assert recover(tmp_path) == [] and not path.exists()
    assert [f.name for f in trace_files(tmp_path)] == [name]
    assert _loaded(tmp_path) == _expect(range(1, 3), 30)


def test_a_live_writers_journal_is_left_alone(tmp_path: Path) -> None:
    path, _ = _journal(tmp_path, 2, range(1, 3), 5)
    TraceWriter(tmp_path / f"rank-00000.seg-{PID}-00001.parquet", META).close()
    fd = os.open(tmp_path / ".rank-00000.progress", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as the running writer holds it
    try:
        assert len(load(tmp_path)) == 0 and path.exists()  # its checkpoints only
    finally:
        os.close(fd)  # the writer dies: the kernel drops the lock
    assert _loaded(tmp_path) == _expect(range(1, 3), 5) and not path.exists()


def test_a_journal_that_cannot_be_recovered_is_said(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = _journal(tmp_path, 2, range(1, 3), 5)
    (tmp_path / ".rank-00000.progress").write_text(
        '{"rank": 0, "pid": 1, "steps": 3, "last_step": 2}')
    TraceWriter(tmp_path / f"rank-00000.seg-{PID}-00001.parquet", META).close()

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(30, "Read-only file system")
    monkeypatch.setattr(trace_writer, "TraceWriter", refuse)
    note = interrupted_note(tmp_path)
    assert note is not None and "the monitor saw rank 0 3 step(s)" in note
    assert "journaled since the last save of 1 rank(s) cannot be read here" in note
    assert path.exists()


def test_the_journal_holds_what_the_next_checkpoint_writes(tmp_path: Path) -> None:
    """SegmentedTraceWriter: producers' tables and Python rows (of two ranks, and rows
    lacking columns) journaled step by step, each once; a checkpoint starts the journal over;
    a clean close merges everything and removes the journals."""
    w = SegmentedTraceWriter(tmp_path / "tr", META)
    w.write_rows({**_rows(0), "value": [None, 1.0]})
    w.write(_events(0, 20))
    w.checkpoint()  # step 0: the first checkpoint
    for s in (1, 2, 3):
        w.write(_events(s, 20))
        w.write(_events(s, 4, rank=1))
        w.write_rows(_rows(s))
        w.write_rows(_rows(s, rank=1))
        w.write_rows({c: v[1:] for c, v in _rows(s).items() if c != "value"})  # no value
        w.journal(s)
    j0 = read(tmp_path / "tr" / ".rank-00000.journal")
    j1 = read(tmp_path / "tr" / ".rank-00001.journal")
    assert j0.steps == [1, 2, 3] and j1.steps == [1, 2, 3]
    assert [t.num_rows for t in j0.tables] == [20] * 3 and [t.num_rows for t in j1.tables] \
        == [4] * 3
    assert [r["value"] for r in j0.rows] == [[None, 12.5, None]] * 3  # (lacking: null)
    assert [r["step"] for r in j1.rows] == [[1, 1], [2, 2], [3, 3]]
    w.checkpoint()
    w.write_rows(_rows(4))
    w.journal(4)
    assert read(tmp_path / "tr" / ".rank-00000.journal").steps == [4]
    w.close(META)
    assert sorted(p.name for p in (tmp_path / "tr").iterdir()) == ["rank-00000.parquet",
                                                                   "rank-00001.parquet"]
    got = _loaded(tmp_path / "tr")
    assert got[("host_op", 2)] == 24 and got[("step", 2)] == 2 and got[("counter", 2)] == 3
    assert got[("step", 4)] == 1 and sum(got.values()) == 22 + 3 * (20 + 4 + 5) + 2


def test_rows_past_the_limit_become_a_table_journaled_once(tmp_path: Path) -> None:
    """A rank's Python rows past ``ROWS_LIMIT`` go into its open segment as a table: the
    part already journaled is not journaled again, the rest is (as a table)."""
    w = SegmentedTraceWriter(tmp_path / "tr", META)
    w.write_rows(_rows(0))
    w.checkpoint()
    half = ROWS_LIMIT // 4 + 1
    many = {c: v * half for c, v in _rows(1).items()}  # 2 * half rows (over half the limit)
    w.write_rows(many)
    w.journal(1)
    w.write_rows({**many, "step": [2] * (2 * half)})  # past the limit: spilled
    w.journal(2)
    got = read(tmp_path / "tr" / ".rank-00000.journal")
    assert got.steps == [1, 2]
    assert [len(r["rank"]) for r in got.rows] == [2 * half]
    assert [t.num_rows for t in got.tables] == [2 * half]
    assert got.tables[0].column("step").to_pylist() == [2] * (2 * half)
    w.close(META)
    assert _loaded(tmp_path / "tr") == Counter({("step", 0): 1, ("counter", 0): 1,
                                                ("step", 1): half, ("counter", 1): half,
                                                ("step", 2): half, ("counter", 2): half})
