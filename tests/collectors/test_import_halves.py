"""A Kineto file read by two processes (``kineto.halves``): the helper reads the second half
and the trace is the one-process import's to the byte; wherever the helper cannot be used
(a boundary inside a string, a helper killed, a malformed second half) the reader reads on
and gives the same trace or the same error; a helper whose reader is gone stops.

Block and chunk sizes are made small (``SMALL``) so that the repository's small traces span
many blocks. Every fork happens in a fresh interpreter (``_run``): the test process may hold
threads, where :func:`halves.start` rightly refuses."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import DATA

ROOT = Path(__file__).resolve().parents[2]
KINETO = DATA / "kineto"
LINUX_2CPU = sys.platform.startswith("linux") and len(os.sched_getaffinity(0)) >= 2
needs_fork = pytest.mark.skipif(not LINUX_2CPU, reason="forks only on Linux with >= 2 CPUs")

#: a prologue for every script: blocks of BLOCK bytes (argv[2]), a cut window of 1/16 of it,
#: helpers for any size, the helper's share argv[3]
SMALL = """
import os, sys
from pathlib import Path
from hermes.collectors import importers
from hermes.collectors.importers.kineto import halves, reader
reader.CHUNK_BYTES = reader.READ_BYTES = int(sys.argv[2])
reader._CUT_WINDOW = reader.READ_BYTES // 16
halves.MIN_TEXT_BYTES = 0
halves.HELPER_SHARE = float(sys.argv[3])
imp = importers.get("kineto")
src = Path(sys.argv[1])
"""

SAME = SMALL + """
import pyarrow.parquet as pq
mode = sys.argv[4]
if mode == "kill":  # the helper dies half-way
    def die(*args):
        os.kill(os.getpid(), 9)
    halves._second_half = die
def one(helpers, out=None):
    opts = {"helpers": helpers} if out else {"in_memory": "arrow", "helpers": helpers}
    return imp.run([src], out or src.with_name("x.parquet"), opts)
a, b = one(0), one(1)
assert b.trace.equals(a.trace), "tables differ"
assert b.trace.schema.metadata == a.trace.schema.metadata, "metadata differs"
for k in ("by_kind", "by_source_category", "unknown_kept", "warnings", "events", "ranks"):
    x, y = getattr(a, k), getattr(b, k)
    assert x == y and (list(x) == list(y) if isinstance(x, dict) else True), k
used = halves.merged
if mode == "parquet":  # the Parquet a file import writes: the same too
    tmp = Path(sys.argv[5])
    one(0, tmp / "a.parquet"), one(1, tmp / "b.parquet")
    ta, tb = pq.read_table(tmp / "a.parquet"), pq.read_table(tmp / "b.parquet")
    assert ta.equals(tb) and ta.schema.metadata == tb.schema.metadata, "parquet differs"
    assert pq.ParquetFile(tmp / "a.parquet").metadata.num_row_groups == \\
        pq.ParquetFile(tmp / "b.parquet").metadata.num_row_groups
print(used, halves.merged - used)
"""


def _run(script: str, *args: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, **(env or {})}, timeout=300)


def _same(src: Path, block: int, share: float, mode: str = "memory", *more: str) -> list[int]:
    """Parts taken from helpers by the in-memory import (and the Parquet one)."""
    r = _run(SAME, str(src), str(block), str(share), mode, *more)
    assert r.returncode == 0, r.stderr[-3000:]
    return [int(x) for x in r.stdout.split()]


@needs_fork
@pytest.mark.parametrize("name,block", [("gpt_dataloader_starved.pt.trace.json.gz", 65536),
                                        ("gpt_balanced.pt.trace.json.gz", 32768),
                                        ("two_stream_prefetch.pt.trace.json.gz", 8192),
                                        ("sampled_rank-0.json.gz", 16384),
                                        ("torch_compile_cpu.json.gz", 16384)])
@pytest.mark.parametrize("share", [0.2, 0.5, 0.8])
def test_a_file_read_in_two_processes_is_the_one_process_import(name: str, block: int,
                                                                 share: float) -> None:
    """Tables (every column, its dictionaries and their order), metadata and the import
    summary equal, and the helper's part was the one used."""
    assert _same(KINETO / name, block, share) == [1, 0]


@needs_fork
def test_a_file_imported_to_parquet_by_two_processes_is_the_same_file(tmp_path: Path) -> None:
    assert _same(KINETO / "gpt_balanced.pt.trace.json.gz", 16384, 0.5, "parquet",
                 str(tmp_path)) == [1, 1]


MANY = SMALL.replace("src = Path(sys.argv[1])", "srcs = sys.argv[4:]") + """
used = 0
for src in map(Path, srcs):
    a, b = (imp.run([src], src.with_name("x.parquet"), {"in_memory": "arrow", "helpers": h})
            for h in (0, 1))
    assert b.trace.equals(a.trace) and b.trace.schema.metadata == a.trace.schema.metadata, src
    assert b.by_kind == a.by_kind and b.warnings == a.warnings, src
    used, before = halves.merged, used
    assert used == before + 1, f"no helper's part used: {src}"
print(used)
"""


@needs_fork
def test_shared_traces_read_in_two_processes_are_the_one_process_imports(
        shared_traces: Path) -> None:
    """Every real Kineto trace of ../shared of 20 to 800 KB (collectives of several process
    groups, several devices, counters, memory events, text tids among them)."""
    from hermes.collectors import importers

    srcs = sorted(str(p) for p in shared_traces.rglob("*.json*")
                  if p.name.endswith((".json", ".json.gz"))
                  and 20_000 < p.stat().st_size < 800_000
                  and (i := importers.detect(p)) is not None and i.name == "kineto")
    assert len(srcs) >= 10
    r = _run(MANY, "", "32768", "0.5", *srcs)
    assert r.returncode == 0, r.stderr[-3000:]
    assert int(r.stdout) == len(srcs)


def _events(n: int, name: str) -> list[dict]:
    return [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1 + i % 3,
             "ts": 10 + 20 * i, "dur": 15, "args": {"External id": i}} for i in range(n)]


@needs_fork
def test_a_boundary_inside_a_string_is_not_where_the_helper_is_used(tmp_path: Path) -> None:
    """Every name is full of '}, {': the first one the helper finds in its block is inside a
    string, where the reader does not cut; the helper's part is dropped, the trace the same."""
    src = tmp_path / "strings.json"
    src.write_text(json.dumps({"traceEvents": _events(3000, "x}, {" * 40)}, indent=1))
    assert _same(src, 16384, 0.5) == [0, 0]
    # the same file with plain names: the helper's part is used
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"traceEvents": _events(3000, "x" * 200)}, indent=1))
    assert _same(plain, 16384, 0.5) == [1, 0]


@needs_fork
def test_a_killed_helper_leaves_the_reader_to_read_on() -> None:
    assert _same(KINETO / "gpt_balanced.pt.trace.json.gz", 32768, 0.5, "kill") == [0, 0]


ERROR = SMALL + """
from hermes.errors import HermesError
out = []
for helpers in (0, 1):
    try:
        imp.run([src], src.with_name("x.parquet"), {"in_memory": "arrow", "helpers": helpers})
        out.append("no error")
    except HermesError as exc:
        out.append(str(exc))
assert out[0] == out[1], out
print(out[0])
print(halves.merged)
"""


@needs_fork
@pytest.mark.parametrize("fault", ["time", "json"])
def test_a_malformed_second_half_gives_the_one_process_error(tmp_path: Path,
                                                             fault: str) -> None:
    """The helper fails on it; the reader reads on and reports it: the same words, the
    same event and byte."""
    text = gzip.decompress((KINETO / "gpt_balanced.pt.trace.json.gz").read_bytes()).decode()
    at = text.index('"ts":', text.index('"ph": "X"', int(len(text) * 0.8)))
    bad = text[:at] + ('"ts": "soon", "was":' if fault == "time" else '"ts": [}, "was":') + \
        text[at + 5:]
    src = tmp_path / "bad.json"
    src.write_text(bad)
    r = _run(ERROR, str(src), "32768", "0.5")
    assert r.returncode == 0, r.stderr[-2000:]
    message, used = r.stdout.strip().rsplit("\n", 1)
    assert used == "0" and "no error" not in message
    assert ("not a number" if fault == "time" else "malformed JSON") in message


MUTATED = SMALL + r"""
import gzip, random
from hermes.errors import HermesError
base = gzip.decompress(src.read_bytes())
rng = random.Random(int(sys.argv[4]))
tmp = Path(sys.argv[5])
agree = used = 0
for case in range(int(sys.argv[6])):
    b = bytearray(base)
    pos = len(b) // 2 + rng.randint(-6000, 6000)  # about where the helper begins
    op = rng.randrange(5)
    if op == 0:
        b[pos] = rng.choice(b'{}[],:"\\ 0a-\xff')
    elif op == 1:
        del b[pos:pos + rng.randint(1, 300)]
    elif op == 2:
        b[pos:pos] = rng.choice([b'}, {', b'"}, {"', b'\\', b'"', b'\xc3'])
    elif op == 3:
        del b[pos:]
    else:
        b[pos:pos] = b" " * rng.randint(1, 20000)
    f = tmp / "mutated.json"
    f.write_bytes(bytes(b))
    got = []
    for helpers in (0, 1):
        before = halves.merged
        try:
            r = imp.run([f], tmp / "x.parquet", {"in_memory": "arrow", "helpers": helpers})
            got.append(("trace", r.trace, r.by_kind, r.warnings))
        except HermesError as exc:
            got.append(("error", str(exc)))
        used += halves.merged - before
    (a, b2) = got
    same = a[0] == b2[0] and (a[1].equals(b2[1]) and a[2:] == b2[2:] if a[0] == "trace"
                              else a[1] == b2[1])
    assert same, (case, op, pos, a[:1] + a[1:] if a[0] == "error" else a[0], b2[0])
    agree += 1
print(agree, used)
"""


@needs_fork
def test_files_mutated_where_the_helper_begins_import_alike_in_one_and_two_processes(
        tmp_path: Path) -> None:
    """Bytes flipped, cut, inserted or deleted about the split: the same trace or the same
    error whether or not a helper read the second half (some cases do use its part)."""
    r = _run(MUTATED, str(KINETO / "two_stream_prefetch.pt.trace.json.gz"), "8192", "0.5",
             "7", str(tmp_path), "40")
    assert r.returncode == 0, r.stderr[-3000:]
    agree, used = map(int, r.stdout.split())
    assert agree == 40 and used >= 5


ORPHAN = SMALL + """
import time
from hermes.collectors.importers.kineto import chunk
from hermes.trace.comm_patterns import default
real = chunk.chunk_to_batch
def slow(*args):  # the helper (forked below) reads slowly
    time.sleep(0.2)
    return real(*args)
halves.chunk_to_batch = slow
helper = halves.start(src, default(), 1 << 26)
assert helper is not None
print(helper.pending.pid, flush=True)
os._exit(0)  # the reader dies without ending its helper
"""


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


@needs_fork
def test_a_helper_whose_reader_is_gone_stops() -> None:
    r = _run(ORPHAN, str(KINETO / "gpt_balanced.pt.trace.json.gz"), "16384", "0.5")
    assert r.returncode == 0, r.stderr[-2000:]
    pid = int(r.stdout)
    deadline = time.monotonic() + 10
    while _state(pid) not in ("gone", "Z", "X") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _state(pid) in ("gone", "Z", "X"), "the helper still runs"


FORKED = SMALL + """
from hermes.collectors.importers import forked
from hermes.diff.runs import import_in_memory
import pandas as pd
forked._cpus = lambda: int(sys.argv[4])
marker = Path(sys.argv[5])
take = halves.Helper.take
def taking(self, *args, **kwargs):  # (runs in the forked child, which writes the marker)
    part = take(self, *args, **kwargs)
    if part is not None:
        marker.write_text("taken")
    return part
halves.Helper.take = taking
pending = forked.start(src)
assert pending is not None, "no fork"
got = pending.result()
os.environ[halves.ENV] = "0"
ref = import_in_memory(src)
pd.testing.assert_frame_equal(got.events, ref.events, check_exact=True)
for c in ("lane", "kind", "name", "coll_group"):
    assert list(got.events[c].cat.categories) == list(ref.events[c].cat.categories), c
print(marker.exists())
"""


@needs_fork
@pytest.mark.parametrize("cpus,helped", [(4, "True"), (2, "False")])
def test_the_forked_import_has_a_helper_with_three_cpus_or_more(tmp_path: Path, cpus: int,
                                                                 helped: str) -> None:
    """With two, the parent's own imports take the other CPU: no helper."""
    r = _run(FORKED, str(KINETO / "gpt_balanced.pt.trace.json.gz"), "32768", "0.5", str(cpus),
             str(tmp_path / "marker"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == helped


USABLE = """
import os, threading, time
from hermes.collectors.importers.kineto import halves
print(halves.usable())
os.environ[halves.ENV] = "0"
print(halves.usable())
del os.environ[halves.ENV]
t = threading.Thread(target=time.sleep, args=(1,))
t.start()
print(halves.usable())
"""


@needs_fork
def test_helpers_only_where_a_fork_is_safe_and_not_turned_off() -> None:
    r = _run(USABLE)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "0", "0"]


ON_A_TERMINAL = SMALL + """
import pty
master, terminal = pty.openpty()
os.dup2(terminal, 2)  # stderr is a terminal: the progress bar is drawn
os.environ.pop("HERMES_NO_PROGRESS", None)
from hermes.commands._util import is_tty
assert is_tty()
from hermes.cli import main
code = main(["import", str(src), "--out", sys.argv[4]])
used = halves.merged
import pyarrow.parquet as pq
ref = Path(sys.argv[4]).with_name("ref.parquet")
imp.run([src], ref, {"helpers": 0})  # one process, the same blocks
same = pq.read_table(sys.argv[4]).equals(pq.read_table(ref))
print("result", code, used, same, file=sys.stdout)
"""


@needs_fork
def test_hermes_import_on_a_terminal_still_has_its_helper(tmp_path: Path) -> None:
    """The import's progress bar is drawn without a refreshing thread (which would rule the
    fork out): the helper reads the second half, and the file is the one-process import's."""
    out = tmp_path / "tty.parquet"
    src = KINETO / "gpt_balanced.pt.trace.json.gz"
    r = _run(ON_A_TERMINAL, str(src), "32768", "0.5", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines()[-1].split() == ["result", "0", "1", "True"]


@needs_fork
def test_a_pipe_is_read_by_one_process_only(tmp_path: Path) -> None:
    """A named pipe is not a file a second reader may open (it would take the first's data,
    or wait for a writer): no helper, and its size is not even looked for in it."""
    fifo = tmp_path / "trace.json.gz"
    os.mkfifo(fifo)
    code = ("import sys; from pathlib import Path\n"
            "from hermes.collectors.importers.kineto import halves\n"
            "from hermes.trace.comm_patterns import default\n"
            "p = Path(sys.argv[1])\n"
            "print(halves.text_bytes(p), halves.start(p, default(), 1 << 26))")
    r = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["0", "None"]


OTHER_FILE = SMALL + """
real = reader.KinetoFile.identity
me = os.getpid()
def identity(self):  # the helper sees another file (the path renamed over, or grown meanwhile)
    got = real(self)
    return got if os.getpid() == me else (*got[:2], got[2] + 1, got[3])
reader.KinetoFile.identity = identity
a, b = (imp.run([src], src.with_name("x.parquet"), {"in_memory": "arrow", "helpers": h})
        for h in (0, 1))
print(b.trace.equals(a.trace), halves.merged)
"""


@needs_fork
def test_a_helper_that_read_another_file_is_not_used() -> None:
    r = _run(OTHER_FILE, str(KINETO / "gpt_balanced.pt.trace.json.gz"), "32768", "0.5")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["True", "0"]
