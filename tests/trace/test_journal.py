"""The step journal (``hermes.trace.journal``): what a killed profiled run journaled since its
last checkpoint loads, each step once; a torn last entry or stale entries of an earlier
segment are left out; a journal whose writer is alive is left alone.

The whole path with real deaths (SIGKILL, abort, segfault) is tests/collectors/
test_crash_signals.py; here the journal is written directly (through its shared mapping), cut
at every byte of an entry over zeros or over an earlier segment's entries and read back, and
written by processes SIGKILLed at random instants in the middle of their stores.
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
from hermes.trace.journal import CHUNK, ROW_COLUMNS, JournalWriter, parse, read, recover
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


def _records(step: int) -> list[tuple]:
    """A session's rows of one step as tuples (ROW_COLUMNS): nulls, a NaN, a non-ASCII
    string first seen in this step, strings seen in earlier steps."""
    return [(0, "steps", "host", "step", "step", step * 10**6, 900, step, 2.5e12, None, None,
             None),
            (0, "monitor", "counter", "counter", "host_cpu_pct", step * 10**6 + 5, 0, step,
             None, 1 << 40, float("nan") if step == 2 else 12.5 + step, '{"unit": "%"}'),
            (0, "thread 7", "host", "marker", f"région {step % 2}", step, 1, step, None, None,
             None, '{"k": "\u00e9"}')]


def _journal(d: Path, segment: int, steps: range, n: int) -> tuple[Path, list[int]]:
    """A journal of ``steps`` (each ``n`` events and the two monitor rows) for ``segment``
    of rank 0, with its (unlocked) progress file; where each entry ends."""
    (d / ".rank-00000.progress").write_text("{}")
    j = JournalWriter(d / ".rank-00000.journal")
    sizes = []
    for s in steps:
        j.append(segment, META.to_kv, s, [_events(s, n)], _rows(s))
        sizes.append(j.offset)
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
    assert len(whole) == CHUNK and not any(whole[sizes[2]:])  # a mapped chunk, zeros after
    assert read(path).steps == [1, 2, 3] and not read(path).torn
    # cut anywhere inside the last entry (header, rows, IPC stream, trailer) or at its start:
    # the rest of the file zeros (a death between two stores), or the file cut there
    cuts = [sizes[1], sizes[1] + 1, sizes[1] + 40, (sizes[1] + sizes[2]) // 2, sizes[2] - 25,
            sizes[2] - 8]
    for cut in cuts:
        for data in (whole[:cut] + bytes(len(whole) - cut), whole[:cut]):
            got = parse(data)
            assert got.steps == [1, 2], cut
            assert got.torn == (cut != sizes[1]), cut
            assert [t.num_rows for t in got.tables] == [50, 50]
    path.write_bytes(whole[:cuts[3]] + bytes(len(whole) - cuts[3]))
    assert recover(tmp_path) == []
    assert not path.exists()
    assert [f.name for f in trace_files(tmp_path)] == [f"rank-00000.seg-{PID}-00002.parquet"]
    assert _loaded(tmp_path) == _expect(range(1, 3), 50)
    ev = load(tmp_path, columns=["kind", "args"]).events
    args = ev.loc[ev["kind"] == "host_op", "args"]
    assert args.notna().sum() == 50 and args.dropna().iloc[0] == '{"k": 1}'  # nulls kept


class _Stores:
    """A journal's mapping that records each store (offset, bytes) as it passes it on."""

    def __init__(self, real: object) -> None:
        self.real, self.stores = real, []

    def __len__(self) -> int:
        return len(self.real)

    def __setitem__(self, at: slice, value: bytes) -> None:
        self.stores.append((at.start, bytes(value)))
        self.real[at] = value

    def close(self) -> None:
        self.real.close()


def test_a_death_inside_any_store_never_yields_a_half_written_entry(tmp_path: Path) -> None:
    """After a checkpoint the next segment's entries are stored over the earlier one's (whose
    entry numbers and lengths line up with theirs). A death inside any store of the next
    segment's header and entries, with any part of that store's bytes in place (its first
    bytes, its last ones: a copy need not go in order), leaves the entries whose trailer is
    stored, each read whole, or (inside the header) the earlier segment whole or nothing."""
    (tmp_path / ".rank-00000.progress").write_text("{}")
    j = JournalWriter(tmp_path / ".rank-00000.journal")
    for s in (1, 2, 3):  # segment 2: the same entries as segment 3's below
        j.append(2, META.to_kv, s, [_events(s, 3)], _rows(s), (ROW_COLUMNS, _records(s)))
    before = bytearray(j.path.read_bytes())
    j._map = rec = _Stores(j._map)
    trailers = []  # the store that completes each entry of segment 3
    for s in (1, 2, 3):
        j.append(3, META.to_kv, s, [_events(s, 3)], _rows(s), (ROW_COLUMNS, _records(s)))
        trailers.append(len(rec.stores) - 1)
    j.close(remove=False)
    assert len(rec.stores) == 3 + 3 * 3  # header (magic zeroed, the rest, magic), 3 an entry
    # (its header and rows, its Arrow stream, its trailer)
    state, tried = before, 0
    for k, (at, data) in enumerate(rec.stores):
        done = sum(t < k for t in trailers)
        for part in {*range(0, len(data), max(1, len(data) // 64)), len(data) - 1}:
            for torn in (state[:at] + data[:part] + state[at + part:],  # its first bytes
                         state[:at + part] + data[part:] + state[at + len(data):]):  # last
                got = parse(bytes(torn))
                tried += 1
                if k < 3:  # inside the header: nothing, the earlier segment or the new one, whole
                    assert got is None or (got.segment, got.steps) in ((2, [1, 2, 3]), (3, [])), \
                        (k, part)
                    continue
                assert got.segment == 3, (k, part)
                whole = done + (k == trailers[done] and torn[at:at + len(data)] == data)
                assert got.steps == list(range(1, whole + 1)), (k, part)
                assert [r["step"] for r in got.rows] == [
                    x for s in got.steps for x in ([s, s, s], [s, s])]  # (binary first)
                assert [t.column("step").to_pylist() for t in got.tables] == [
                    [s] * 3 for s in got.steps]
        state[at:at + len(data)] = data
    assert parse(bytes(state)).steps == [1, 2, 3] and tried > 200


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
    assert j.path.stat().st_size == big == CHUNK  # overwritten in place, not grown
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


WRITER = """
import os, sys
from hermes.trace.meta import TraceMeta
from hermes.trace.segments import SegmentedTraceWriter
from hermes.trace.writer import to_table
w = SegmentedTraceWriter(sys.argv[1], TraceMeta(source="profile", ranks=(0,)))
n = int(sys.argv[2])
for s in range(10**6):  # rows and events as a session records them, a save every 25 steps
    w.write_rows({"rank": [0] * n, "lane": ["steps"] * n, "lane_kind": ["host"] * n,
                  "kind": ["step"] + ["marker"] * (n - 1), "name": ["step"] * n,
                  "ts_ns": list(range(s * n, s * n + n)), "dur_ns": [7] * n, "step": [s] * n,
                  "args": [f'{{"s": {s}, "k": {k}}}' for k in range(n)]})
    w.write(to_table({"rank": [0] * n, "lane": ["thread 1"] * n, "lane_kind": ["host"] * n,
                      "kind": ["host_op"] * n, "name": ["op"] * n, "ts_ns": [s] * n,
                      "dur_ns": [1] * n, "step": [s] * n}))
    w.journal(s)
    w.progress(0, s)
    if s % 25 == 24:
        w.checkpoint()
    os.write(1, b"%d\\n" % s)  # completed (journaled or saved)
"""


def test_a_writer_sigkilled_at_random_instants_keeps_every_completed_step(tmp_path: Path
                                                                         ) -> None:
    """Writers of big steps (most of their time in the journal's stores) SIGKILLed at random
    instants: every step they reported complete loads, whole and once, none half-written."""
    import random
    import signal
    import subprocess
    import sys
    import time

    from hermes.trace.segments import interrupted

    n, rng = 400, random.Random(36)
    procs = []
    for i in range(4):
        out = tmp_path / f"w{i}"
        procs.append((out, subprocess.Popen([sys.executable, "-c", WRITER, str(out), str(n)],
                                            stdout=subprocess.PIPE)))
    for out, proc in procs:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # running (imports done)
        assert first == b"0\n", proc.communicate()
        time.sleep(rng.uniform(0.1, 0.6))
        proc.send_signal(signal.SIGKILL)
        said = [int(x) for x in proc.communicate()[0].split()]
        assert proc.returncode == -signal.SIGKILL
        last = said[-1] if said else 0
        ev = load(out, columns=["kind", "step", "args"]).events
        per = Counter(zip(ev["kind"].astype(str), ev["step"].astype(int), strict=True))
        got = max(s for _, s in per)
        assert got >= last > 0, (got, last)  # (the step after the last said may be whole)
        for s in range(got + 1):
            assert (per[("step", s)], per[("marker", s)], per[("host_op", s)]) == (1, n - 1, n)
        assert len(ev) == (got + 1) * 2 * n
        marks = ev[ev["kind"] == "marker"]
        assert (marks["args"].str.extract(r'"s": (\d+)')[0].astype(int) == marks["step"]).all()
        rec = interrupted(out)
        # the progress record is stored after the journal: one behind if the death fell in
        # between, unknown if it fell inside its store (its CRC)
        assert rec[0]["steps"] in (got + 1, got, None) and not rec[0]["running"], rec


def test_the_progress_record_is_stored_in_place_and_a_torn_one_is_not_read(
        tmp_path: Path) -> None:
    """The progress file (a shared mapping, no write per step) holds the last record whole;
    a record a death cut short (its CRC-32 not its text's) reads as unknown, never as another
    count; a record without a CRC (older runs) reads as it is."""
    from hermes.trace.segments import interrupted

    w = SegmentedTraceWriter(tmp_path / "tr", META)
    for s in range(7):
        w.progress(0, s)
    path = tmp_path / "tr" / ".rank-00000.progress"
    raw = path.read_bytes()
    assert len(raw) == 128 and raw.startswith(b'{"rank": 0, ') and b'"steps": 7' in raw
    assert interrupted(tmp_path / "tr") == [{"rank": 0, "pid": PID, "steps": 7,
                                              "running": True}]
    w.abort()  # (the lock goes, the file stays, as after a death)
    path.write_bytes(raw.replace(b'"steps": 7', b'"steps": 6'))  # old text, new count
    assert interrupted(tmp_path / "tr")[0]["steps"] is None
    path.write_bytes(b'{"rank": 0, "pid": 5, "steps": 3, "last_step": 2}'.ljust(128))
    assert interrupted(tmp_path / "tr")[0]["steps"] == 3


def test_a_run_killed_before_its_first_step_leaves_nothing_that_refuses_the_next(
        tmp_path: Path) -> None:
    """The journal is mapped when the rank is claimed (at the session's start, not in a
    step): a run that dies before journaling a step leaves an empty one, which neither
    refuses a new run into the same output nor loads as a step; one holding a step does."""
    from hermes.errors import OutputError

    w = SegmentedTraceWriter(tmp_path / "tr", META)
    w.progress(0, -1)
    j = tmp_path / "tr" / ".rank-00000.journal"
    got = read(j)
    assert j.stat().st_size == CHUNK and (got is None or got.steps == [])
    w._release(remove=False)  # the lock goes (a death), the files stay
    w2 = SegmentedTraceWriter(tmp_path / "tr", META)
    w2.write_rows(_rows(0))
    w2.journal(0)
    w2._release(remove=False)
    with pytest.raises(OutputError, match="interrupted run"):
        SegmentedTraceWriter(tmp_path / "tr", META).progress(0, -1)
    assert _loaded(tmp_path / "tr") == Counter({("step", 0): 1, ("counter", 0): 1})


def test_a_sessions_rows_as_tuples_go_in_the_binary_row_format_and_come_back(
        tmp_path: Path) -> None:
    """Rows of ROW_COLUMNS are journaled in the binary row format (strings numbered once a
    segment: the later entries refer to the earlier ones' numbers; a new segment numbers
    them again) and read back as they were, nulls, NaN and non-ASCII strings included;
    values the format does not hold (a float in an integer column, a number as a name) and
    other columns go as JSON, read back the same."""
    import math

    j = JournalWriter(tmp_path / ".rank-00000.journal")
    for s in (1, 2, 3):
        j.append(2, META.to_kv, s, [], _rows(s), (ROW_COLUMNS, _records(s)))
    odd = [(0, "steps", "host", "step", "step", 1, 2, 4, None, 1.5, None, None),
           (0, "steps", "host", "step", 7, 1, 2, 4, None, None, None, None)]
    j.append(2, META.to_kv, 4, [], None, (ROW_COLUMNS, odd[:1]))
    j.append(2, META.to_kv, 5, [], None, (ROW_COLUMNS, odd[1:]))
    j.append(2, META.to_kv, 6, [], None, (("rank", "name"), [(0, "a"), (0, None)]))
    raw = j.path.read_bytes()
    assert raw.count("région 1".encode()) == 1 and raw.count(b'"monitor"') == 0  # binary
    j.append(3, META.to_kv, 7, [], None, (ROW_COLUMNS, _records(7)))  # numbered again
    j.close(remove=False)
    got = parse(raw)
    assert got.steps == [1, 2, 3, 4, 5, 6] and not got.torn
    parts = got.rows
    for s in (1, 2, 3):  # the binary rows first, then the JSON ones
        want = dict(zip(ROW_COLUMNS, map(list, zip(*_records(s)))))
        back = parts.pop(0)
        if s == 2:
            assert math.isnan(back["value"][1])
            back["value"][1] = want["value"][1] = 0.0
        assert back == want, s
        assert parts.pop(0) == _rows(s)
    assert parts == [dict(zip(ROW_COLUMNS, map(list, zip(*odd[:1])))),
                     dict(zip(ROW_COLUMNS, map(list, zip(*odd[1:])))),
                     {"rank": [0, 0], "name": ["a", None]}]
    again = read(j.path)
    assert again.segment == 3 and again.rows == [
        dict(zip(ROW_COLUMNS, map(list, zip(*_records(7)))))]


def test_while_steps_are_journaled_their_entries_carry_the_count(tmp_path: Path) -> None:
    """progress(store=False) then journal(): no progress record is stored a step (the
    entry carries the count); readers count from the last complete entry, recovery writes
    it into the progress file before removing the journal, and a checkpoint stores it."""
    from hermes.trace.segments import interrupted

    w = SegmentedTraceWriter(tmp_path / "tr", META)
    for s in range(5):
        w.progress(0, s, store=False)
        w.write_rows(_rows(s))
        w.journal(s)
    path = tmp_path / "tr" / ".rank-00000.progress"
    assert b'"steps": 0,' in path.read_bytes()  # (as claimed)
    assert interrupted(tmp_path / "tr")[0]["steps"] == 5
    w.checkpoint()
    assert b'"steps": 5,' in path.read_bytes()
    w.progress(0, 5, store=False)
    w.write_rows(_rows(5))
    w.journal(5)
    w._release(remove=False)  # dies: the lock goes
    assert interrupted(tmp_path / "tr")[0]["steps"] == 6
    assert _loaded(tmp_path / "tr")[("step", 5)] == 1  # (recovered: the journal removed)
    assert not (tmp_path / "tr" / ".rank-00000.journal").exists()
    assert b'"steps": 6,' in path.read_bytes()
    assert interrupted(tmp_path / "tr") == [{"rank": 0, "pid": PID, "steps": 6,
                                              "running": False}]
