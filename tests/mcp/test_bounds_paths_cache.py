"""The server's parts without a server: result caps, the roots' path checks, the cache."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from hermes.errors import HermesError
from hermes.mcp.bounds import bounded, size
from hermes.mcp.cache import Cache
from hermes.mcp.paths import PathRefused, Roots


def test_a_table_is_paged_and_cut_to_the_byte_cap() -> None:
    doc = {"trace": "t", "kernels": [{"name": f"k{i:04d}", "pad": "x" * 80} for i in range(1000)]}
    out = bounded(doc, main="kernels", offset=10, limit=500, max_rows=200, max_bytes=5000,
                  rest="offset={offset}")
    assert size(out) <= 5000 and out["truncated"] is True and out["total"] == 1000
    n = out["returned"]
    # 200 rows halved until they fit: 200 -> 100 -> 50 -> 25 (about 100 bytes a row)
    assert n == 25 and [r["name"] for r in out["kernels"]] == [f"k{i:04d}" for i in
                                                               range(10, 10 + n)]
    assert out["rest"] == f"offset={10 + n}"


def test_nested_lists_are_cut_and_named() -> None:
    doc = {"breakdown": {"per_rank": list(range(300))}, "x": [1, 2]}
    out = bounded(doc, max_rows=100)
    assert out["breakdown"]["per_rank"] == list(range(100)) and out["x"] == [1, 2]
    assert out["truncated"] is True and out["truncation"] == {"breakdown.per_rank": 300}
    whole = bounded(doc, max_rows=1000)
    assert whole["truncated"] is False and "truncation" not in whole
    assert {k: whole[k] for k in doc} == doc


def test_roots_resolve_relative_paths_and_refuse_escapes(tmp_path: Path) -> None:
    root, away = tmp_path / "root", tmp_path / "away"
    (root / "run").mkdir(parents=True)
    away.mkdir()
    (root / "run" / "a.json").write_text("{}")
    (away / "secret.json").write_text("{}")
    roots = Roots([root])
    assert roots.resolve("run/a.json") == (root / "run" / "a.json").resolve()
    with pytest.raises(PathRefused, match="outside the directories"):
        roots.resolve("../away/secret.json")
    (root / "run" / "link.json").symlink_to(away / "secret.json")
    with pytest.raises(PathRefused, match="symlink out of"):
        roots.resolve("run/link.json")
    (root / "run" / "folder").symlink_to(away)  # a folder on the way out
    with pytest.raises(PathRefused, match="symlink out of"):
        roots.resolve("run/folder/secret.json")
    # a trace directory holding a link out of the roots: refused when hashed
    os.unlink(root / "run" / "folder")
    with pytest.raises(PathRefused, match="holds a symlink out of"):
        roots.digest(roots.resolve("run"))
    with pytest.raises(HermesError, match="no such file"):
        roots.resolve("run/missing.json")
    with pytest.raises(HermesError, match="expected a path"):
        roots.resolve("")


def test_the_digest_is_of_the_content(tmp_path: Path) -> None:
    roots = Roots([tmp_path])
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"traceEvents": []}))
    b.write_text(json.dumps({"traceEvents": []}))
    assert roots.digest(a) == roots.digest(b)
    before = roots.digest(a)
    a.write_text(json.dumps({"traceEvents": [1]}))
    assert roots.digest(a) != before
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    for d in (d1, d2):
        d.mkdir()
        (d / "x.csv").write_text("1,2\n")
    assert roots.digest(d1) == roots.digest(d2)
    (d2 / "x.csv").write_text("1,3\n")
    assert roots.digest(d1) != roots.digest(d2)


def test_the_cache_computes_once_for_concurrent_callers_and_forgets_failures() -> None:
    cache, calls = Cache(2), []
    gate = threading.Event()

    def compute() -> int:
        calls.append(1)
        gate.wait(5)
        return 42

    out: list[tuple[int, bool]] = []
    threads = [threading.Thread(target=lambda: out.append(cache.get("k", compute)))
               for _ in range(10)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert len(calls) == 1 and sorted(out) == [(42, False)] + [(42, True)] * 9

    def boom() -> int:
        raise ValueError("no")

    with pytest.raises(ValueError):
        cache.get("bad", boom)
    assert cache.get("bad", lambda: 7) == (7, False)
    cache.get("third", lambda: 3)  # size 2: "k" is the least recently used, evicted
    assert cache.get("k", lambda: 0) == (0, False)
    assert cache.peek("k") == 0 and cache.peek("gone") is None
    hits = cache.hits
    cache.peek("k")
    assert cache.hits == hits + 1 and cache.misses == 4  # a peek computes nothing


def test_a_trace_content_is_imported_once(tmp_path: Path) -> None:
    import shutil

    from hermes.mcp.analysis import Workspace, imported

    src = Path(__file__).parents[1] / "data" / "kineto" / "big_matmul.pt.trace.json.gz"
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    shutil.copy(src, a)
    shutil.copy(src, b)
    ws = Workspace(Roots([tmp_path]), tmp_path / "out")
    pa, da = ws.trace(str(a))
    first = imported(ws, pa, da)
    assert first.is_relative_to(ws.scratch()) and first.name == "trace.parquet"
    stamp = first.stat().st_mtime_ns
    pb, db = ws.trace(str(b))
    assert db == da and imported(ws, pb, db) == first  # same content: the same import
    ws.imports = type(ws.imports)(1)  # its cache entry gone: the files are found again
    assert imported(ws, pb, db) == first and first.stat().st_mtime_ns == stamp
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": ')
    pbad, dbad = ws.trace(str(bad))
    with pytest.raises(HermesError):
        imported(ws, pbad, dbad)
    assert not (ws.scratch() / dbad / "done").exists()
