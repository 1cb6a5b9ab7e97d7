"""``hermes mcp`` driven as a client drives it: started as a subprocess, spoken to over stdio
by the ``mcp`` SDK's own client (``mcp.client.stdio`` + ``ClientSession``). Every tool's
numbers are compared with what the CLI prints for the same trace (``--format json``)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA, SHARED_TRACES, run_cli

pytest.importorskip("mcp.client.stdio")


def _shared_kineto(name: str) -> Path:
    """The shared H100 trace when /work/shared is there, else the repository's byte-identical
    copy of it (tests/data/kineto/SOURCES.md)."""
    shared = SHARED_TRACES / "kineto-h100" / name
    return shared if shared.is_file() else DATA / "kineto" / name


#: shared Kineto traces (one H100): every tool is compared with the CLI on them
KINETO = _shared_kineto("big_matmul.pt.trace.json.gz")
OTHER = _shared_kineto("two_stream_prefetch.pt.trace.json.gz")
#: the Ascend profiler output of 8 ranks (msprof-analyze fixtures, tests/data/ascend)
ASCEND = DATA / "ascend"
#: a shared Kineto trace with device-memory samples (profile_memory=True): 572 on cuda:0
MEMORY = SHARED_TRACES / "public" / "tracelens" / "h100" / \
    "Falconsai_nsfw_image_detection__1016002.json.gz"
#: keys the server adds to a CLI document
ADDED = ("cached", "truncated", "truncation", "rest")
#: the slower Ascend run: each rank's computing time this many times over (step time with it)
SLOWER = 3.0


def _command() -> list[str]:
    script = Path(sys.executable).with_name("hermes")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "hermes.cli"]


class Client:
    """A server subprocess and a client session on it, called synchronously from the tests
    (the session lives in an event loop on a thread: anyio's blocking portal)."""

    def __init__(self, roots: list[Path], out_dir: Path) -> None:
        import contextlib

        from anyio.from_thread import start_blocking_portal
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        cmd = _command()
        args = [*cmd[1:], "mcp", "--out-dir", str(out_dir)]
        for r in roots:
            args += ["--root", str(r)]
        params = StdioServerParameters(command=cmd[0], args=args,
                                       env={"HERMES_NO_PROGRESS": "1"})
        self._stack = contextlib.ExitStack()
        self.portal = self._stack.enter_context(start_blocking_portal())
        read, write = self._stack.enter_context(
            self.portal.wrap_async_context_manager(stdio_client(params)))
        self.session = self._stack.enter_context(
            self.portal.wrap_async_context_manager(ClientSession(read, write)))
        self.portal.call(self.session.initialize)

    def close(self) -> None:
        self._stack.close()

    def raw(self, name: str, **args: Any) -> Any:
        return self.portal.call(lambda: self.session.call_tool(name, args))

    def start(self, name: str, **args: Any) -> Any:
        """Send a call now, answered while the test goes on (a Future of its result): the
        server works in its own process while the test runs the CLI."""
        return self.portal.start_task_soon(lambda: self.session.call_tool(name, args))

    def call(self, name: str, **args: Any) -> dict[str, Any]:
        res = self.raw(name, **args)
        assert not res.is_error, res.content[0].text
        return res.structured_content

    def error(self, name: str, **args: Any) -> str:
        res = self.raw(name, **args)
        assert res.is_error
        return res.content[0].text

    def many(self, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        import anyio

        async def go() -> list[Any]:
            out: list[Any] = [None] * len(calls)

            async def one(i: int, name: str, args: dict[str, Any]) -> None:
                out[i] = await self.session.call_tool(name, args)

            async with anyio.create_task_group() as tg:
                for i, (name, args) in enumerate(calls):
                    tg.start_soon(one, i, name, args)
            return out

        return self.portal.call(go)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-root")


def slower_ascend(src: Path, dst: Path) -> float:
    """A copy of the Ascend output ``src`` at ``dst`` whose device work takes longer: each
    rank's Computing (and so its Stage, the step) ``SLOWER`` times over in the cluster step
    table (and the table's ``stage`` row, the maxima over the ranks, with them), each Ascend
    Hardware kernel ``SLOWER`` times as long in the timeline. Returns the step time added to
    the slowest rank (ms), from the table, by hand."""
    import csv

    shutil.copytree(src, dst)
    table = dst / "cluster_step_trace_time.csv"
    with table.open(newline="") as fh:
        rows = list(csv.reader(fh))
    head = rows[0]
    kind, comp, stage = head.index("Type"), head.index("Computing"), head.index("Stage")
    ranks = [r for r in rows[1:] if r[kind] == "rank"]
    before = max(float(r[stage]) for r in ranks)
    for r in ranks:
        r[stage] = repr(float(r[stage]) + (SLOWER - 1) * float(r[comp]))
        r[comp] = repr(SLOWER * float(r[comp]))
    after = max(float(r[stage]) for r in ranks)
    for r in rows[1:]:
        if r[kind] == "stage":
            r[comp] = repr(max(float(x[comp]) for x in ranks))
            r[stage] = repr(after)
    with table.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    view = dst / "trace_view.json"
    events = json.loads(view.read_text())
    device = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") ==
              "process_name" and e["args"]["name"] == "Ascend Hardware"}
    for e in events:
        if e.get("ph") == "X" and e.get("pid") in device:
            e["dur"] = float(e["dur"]) * SLOWER
    view.write_text(json.dumps(events))
    return (after - before) / 1e3


@pytest.fixture(scope="module")
def ascend_slow(work: Path) -> tuple[Path, float]:
    dst = work / "ascend-slower"
    return dst, slower_ascend(ASCEND, dst)


@pytest.fixture(scope="module")
def server(work: Path, ascend_slow: tuple[Path, float],
           tmp_path_factory: pytest.TempPathFactory) -> Any:
    roots = [DATA, work, KINETO.parent]
    if MEMORY.is_file():
        roots.append(MEMORY.parent)
    c = Client(roots, tmp_path_factory.mktemp("mcp-out"))
    # the slow first analyses, started at once (the server takes them in turn) while the
    # tests' CLI runs compute the expected documents; each trace is analyzed once by the
    # server, every later call on it is answered from its cache
    warm = [c.start("analyze", trace=str(KINETO)),
            c.start("diff", base=str(KINETO), new=str(OTHER)),
            c.start("analyze", trace=str(ASCEND)),
            c.start("diff", base=str(ASCEND), new=str(ascend_slow[0]))]
    if MEMORY.is_file():
        warm.append(c.start("analyze", trace=str(MEMORY)))
    yield c
    for f in warm:
        f.result()
    c.close()


def cli_json(*args: str) -> Any:
    code, out, err = run_cli(*args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def kineto_doc() -> dict[str, Any]:
    return cli_json("analyze", str(KINETO))


@pytest.fixture(scope="module")
def ascend_doc() -> dict[str, Any]:
    return cli_json("analyze", str(ASCEND))


def strip(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ADDED}



def _query_as_cli(server: Any, trace: Path, sql: str) -> dict[str, Any]:
    """The server's ``query`` of ``sql`` on ``trace``, asserted equal to ``hermes query
    --format json`` and not truncated."""
    got = server.call("query", trace=str(trace), sql=sql)
    code, out, err = run_cli("query", str(trace), sql, "--format", "json")
    assert code == 0, err
    assert got["rows"] == json.loads(out) and got["truncated"] is False
    return got

def test_tools_are_listed_with_schemas_and_descriptions(server: Client) -> None:
    tools = {t.name: t for t in server.portal.call(server.session.list_tools).tools}
    want = {"analyze", "findings", "kernels", "critical_path", "memory", "diff", "check",
            "whatif", "report"}
    assert want <= set(tools)
    for name in want:
        t = tools[name]
        assert len(t.description) > 150, name
        props = t.input_schema["properties"]
        assert all(p.get("description") for p in props.values()), name
        first = "base" if name == "diff" else "new" if name == "check" else "trace"
        assert first in t.input_schema["required"]
    assert tools["kernels"].input_schema["properties"]["top"]["type"] == "integer"
    assert tools["whatif"].input_schema["properties"]["apply"]["anyOf"][0]["type"] == "array"
    assert tools["analyze"].annotations.read_only_hint is True
    assert tools["report"].annotations.read_only_hint is False


def test_analyze_is_the_cli_document_and_the_second_call_is_cached(
        server: Client, kineto_doc: dict[str, Any]) -> None:
    first = server.call("analyze", trace=str(KINETO))
    assert strip(first) == kineto_doc
    assert first["truncated"] is False
    again = server.call("analyze", trace="kineto/big_matmul.pt.trace.json.gz")  # relative
    assert again["cached"] is True and strip(again) == kineto_doc


def test_findings_kernels_critical_path_memory_match_the_cli(
        server: Client, kineto_doc: dict[str, Any]) -> None:
    f = server.call("findings", trace=str(KINETO))
    assert f["findings"] == kineto_doc["findings"] and f["total"] == len(kineto_doc["findings"])
    cat = kineto_doc["findings"][0]["category"]
    only = server.call("findings", trace=str(KINETO), category=cat)
    assert only["findings"] == [x for x in kineto_doc["findings"] if x["category"] == cat]
    k = server.call("kernels", trace=str(KINETO), top=50)
    assert k["kernels"] == kineto_doc["computation"]["top_kernels"]  # 12 kernels: all of them
    assert k["per_rank"] == kineto_doc["computation"]["per_rank"] and not k["truncated"]
    by_count = server.call("kernels", trace=str(KINETO), sort="count", top=3)["kernels"]
    counts = sorted((r["count"] for r in kineto_doc["computation"]["top_kernels"]),
                    reverse=True)
    assert [r["count"] for r in by_count] == counts[:3]
    cp = server.call("critical_path", trace=str(KINETO))
    assert cp["critical_path"] == kineto_doc["critical_path"]
    r0 = server.call("critical_path", trace=str(KINETO), rank=0)  # the slowest (only) rank
    assert r0["critical_path"] == kineto_doc["critical_path"]
    mem = server.call("memory", trace=str(KINETO))
    assert mem["memory"] == kineto_doc.get("memory", {"per_rank": []})


def test_ascend_trace_and_its_large_kernel_table(server: Client,
                                                 ascend_doc: dict[str, Any]) -> None:
    assert strip(server.call("analyze", trace=str(ASCEND))) == ascend_doc
    f = server.call("findings", trace=str(ASCEND), limit=1)
    assert f["findings"] == ascend_doc["findings"][:1] and f["truncated"] is True
    assert f["total"] == len(ascend_doc["findings"]) and "offset=1" in f["rest"]
    page1 = server.call("kernels", trace=str(ASCEND), top=1000)
    # the server's cap: 100 rows of the 281 kernel names of the eight ranks
    assert page1["truncated"] is True and page1["returned"] == 100
    assert page1["total"] == 281 and "offset=100" in page1["rest"]
    top20 = ascend_doc["computation"]["top_kernels"]
    assert page1["kernels"][:20] == top20
    page2 = server.call("kernels", trace=str(ASCEND), top=100, offset=100)
    assert page2["offset"] == 100 and page2["returned"] == 100
    names = [r["name"] for r in page1["kernels"] + page2["kernels"]]
    assert len(set(names)) == 200
    totals = [r["total_ns"] for r in page1["kernels"] + page2["kernels"]]
    assert totals == sorted(totals, reverse=True)
    assert sum(r["share_pct"] for r in page1["kernels"][:20]) == pytest.approx(
        sum(r["share_pct"] for r in top20))
    cp = server.call("critical_path", trace=str(ASCEND))
    assert cp["critical_path"] == ascend_doc["critical_path"]
    assert server.call("memory", trace=str(ASCEND))["memory"] == \
        ascend_doc.get("memory", {"per_rank": []})


def test_whatif_on_the_ascend_trace_matches_the_cli(server: Client) -> None:
    opts = ["cpu.sync_remove", "cpu.compile_static_shapes"]
    w = server.call("whatif", trace=str(ASCEND), apply=opts)
    cli = cli_json("whatif", str(ASCEND), "--apply", opts[0], "--apply", opts[1])
    assert {k: w[k] for k in cli} == cli and w["applied"] == opts


def memory_peaks(trace: Path) -> tuple[int, int, int]:
    """(peak allocated, peak reserved, samples) of a Kineto trace's cuda ``[memory]`` events,
    read from the JSON here (PyTorch's allocator totals in their args)."""
    import gzip

    with gzip.open(trace, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    cuda = [e["args"] for e in events if e.get("name") == "[memory]"
            and e["args"].get("Device Type") == 1]  # c10::DeviceType::CUDA
    return (max(a["Total Allocated"] for a in cuda), max(a["Total Reserved"] for a in cuda),
            2 * len(cuda))  # an allocated and a reserved sample per event


@pytest.mark.skipif(not MEMORY.is_file(), reason="shared traces not found")
def test_memory_of_a_trace_with_memory_samples_matches_the_cli(server: Client) -> None:
    cli = cli_json("analyze", str(MEMORY))
    assert strip(server.call("analyze", trace=str(MEMORY))) == cli
    mem = server.call("memory", trace=str(MEMORY))
    assert mem["memory"] == cli["memory"] and "note" not in mem and mem["cached"] is True
    (row,) = mem["memory"]["per_rank"]
    assert (row["rank"], row["device"]) == (0, "cuda:0")
    assert (row["peak_allocated_bytes"], row["peak_reserved_bytes"], row["samples"]) == \
        memory_peaks(MEMORY) == (231332864, 245366784, 1144)
    k = server.call("kernels", trace=str(MEMORY), top=20)
    assert k["kernels"] == cli["computation"]["top_kernels"]


def test_diff_and_check_on_the_ascend_trace_match_the_cli(
        server: Client, ascend_slow: tuple[Path, float]) -> None:
    slow, added_ms = ascend_slow
    d = server.call("diff", base=str(ASCEND), new=str(slow))
    cli = cli_json("diff", str(ASCEND), str(slow))
    # the 330 operators and kernels that changed are cut at the server's 100 rows, and it
    # says so
    assert len(cli["names"]) == 330
    assert d["truncated"] is True and d["truncation"] == {"names": 330}
    assert d["names"] == cli["names"][:100]
    assert strip(d) == dict(cli, names=d["names"])
    assert d["ranks"]["matched"] == list(range(8))
    steps = d["steps"]
    # the slowest rank's step grew by (SLOWER - 1) x its computing time: 160.6 ms
    assert steps["new"]["median_ms"] - steps["base"]["median_ms"] == \
        pytest.approx(added_ms, abs=1e-3)
    assert added_ms == pytest.approx(160.619, abs=1e-3)
    v = server.call("check", new=str(slow), baselines=[str(ASCEND)])
    code, out, _ = run_cli("check", str(slow), "--baseline", str(ASCEND))
    assert v["text"] == out and v["exit_code"] == code == 1 and v["status"] == "fail"
    gate = v["gates"][0]
    assert gate["name"] == "step_time_regression" and gate["status"] == "fail"
    assert gate["details"]["new_median_ms"] == pytest.approx(steps["new"]["median_ms"])
    assert gate["details"]["base_median_ms"] == pytest.approx(steps["base"]["median_ms"])


def test_report_and_query_on_the_ascend_trace_match_the_cli(server: Client,
                                                            tmp_path: Path) -> None:
    r = server.call("report", trace=str(ASCEND))
    code, _, err = run_cli("analyze", str(ASCEND), "--format", "html", "--out",
                           str(tmp_path / "cli.html"))
    assert code == 0, err
    assert Path(r["path"]).read_text() == (tmp_path / "cli.html").read_text()
    # the events of each rank next to the analysis's kernel table of it, in one query
    sql = ("SELECT coalesce(e.rank, k.rank) AS rank, e.events, e.event_ns, k.kernels, "
           "k.kernel_ns FROM (SELECT rank, count(*) AS events, sum(dur_ns) AS event_ns "
           "FROM events GROUP BY rank) e FULL JOIN (SELECT rank, count(*) AS kernels, "
           "sum(total_ns) AS kernel_ns FROM kernels GROUP BY rank) k ON e.rank = k.rank "
           "ORDER BY rank")
    got = _query_as_cli(server, ASCEND, sql)
    assert [row["rank"] for row in got["rows"]] == list(range(8))
    # rank 0's kernel names: the 281 rows of the kernels tool's table
    assert got["rows"][0]["kernels"] == server.call("kernels", trace=str(ASCEND))["total"] \
        == 281


def test_diff_and_check_match_the_cli(server: Client) -> None:
    d = server.call("diff", base=str(KINETO), new=str(OTHER))
    assert strip(d) == cli_json("diff", str(KINETO), str(OTHER))
    v = server.call("check", new=str(OTHER), baselines=[str(KINETO)])
    code, out, _ = run_cli("check", str(OTHER), "--baseline", str(KINETO))
    assert v["text"] == out and v["exit_code"] == code == 1 and v["status"] == "fail"
    gate = v["gates"][0]
    assert gate["name"] == "step_time_regression"
    assert gate["details"]["new_median_ms"] == pytest.approx(d["steps"]["new"]["median_ms"])


def test_whatif_matches_the_cli(server: Client) -> None:
    opts = ["computation.memory_fusion", "cpu.dispatch_sink"]
    w = server.call("whatif", trace=str(KINETO), apply=opts)
    code, out, err = run_cli("whatif", str(KINETO), "--apply", opts[0], "--apply", opts[1],
                             "--format", "json")
    assert code == 0, err
    cli = json.loads(out)
    assert {k: w[k] for k in cli} == cli
    for o in opts:  # each alone: what a call with that one optimization predicts
        alone = server.call("whatif", trace=str(KINETO), apply=[o])
        assert w["per_optimization"][o] == {k: alone[k] for k in ("predicted_ms", "speedup")}
        assert "per_optimization" not in alone


def test_report_writes_the_html_the_cli_writes(server: Client, tmp_path: Path) -> None:
    r = server.call("report", trace=str(KINETO))
    out = Path(r["path"])
    assert out.is_file() and out.stat().st_size == r["bytes"] and r["written"] is True
    code, _, err = run_cli("analyze", str(KINETO), "--format", "html", "--out",
                           str(tmp_path / "cli.html"))
    assert code == 0, err
    assert out.read_text() == (tmp_path / "cli.html").read_text()
    assert server.call("report", trace=str(KINETO))["written"] is False  # same content


def test_refused_paths_and_a_malformed_trace_are_error_results(server: Client,
                                                               work: Path,
                                                               tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    assert "outside the directories this server may read" in \
        server.error("analyze", trace=str(outside))
    link = work / "escape.json"
    link.symlink_to(outside)
    assert "symlink out of the directories" in server.error("analyze", trace=str(link))
    fifo = work / "pipe.json"
    os.mkfifo(fifo)
    assert "device, FIFO or socket" in server.error("analyze", trace=str(fifo))
    bad = work / "bad.pt.trace.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": ')
    code, _, err = run_cli("analyze", str(bad))
    assert code == 2
    line = err.strip().removeprefix("hermes: error: ")
    assert line in server.error("analyze", trace=str(bad))
    assert "no such file" in server.error("findings", trace=str(work / "nope.json"))
    assert "unknown sort" in server.error("kernels", trace=str(KINETO), sort="speed")
    # the server keeps serving
    assert server.call("analyze", trace=str(KINETO))["cached"] is True


def test_twenty_concurrent_calls_complete(server: Client, work: Path) -> None:
    copy = work / "copy.pt.trace.json.gz"  # same content, another name: the same analysis
    shutil.copy(KINETO, copy)
    calls = [("analyze", {"trace": str(KINETO if i % 2 else copy)}) for i in range(8)]
    calls += [("findings", {"trace": str(ASCEND), "limit": 2}) for _ in range(4)]
    calls += [("kernels", {"trace": str(KINETO), "top": 3}) for _ in range(4)]
    calls += [("critical_path", {"trace": str(ASCEND)}) for _ in range(2)]
    calls += [("analyze", {"trace": "/etc/hostname"}), ("memory", {"trace": str(OTHER)})]
    results = server.many(calls)
    assert len(results) == 20
    assert [r.is_error for r in results] == [False] * 18 + [True, False]
    docs = [strip(r.structured_content) for r in results[:8]]
    assert all(d == docs[0] for d in docs)
    assert len({json.dumps(r.structured_content["kernels"]) for r in results[12:16]}) == 1


def test_query_matches_the_cli_where_hermes_query_exists(
        server: Client, kineto_doc: dict[str, Any]) -> None:
    tools = {t.name for t in server.portal.call(server.session.list_tools).tools}
    try:
        import hermes.commands.query  # noqa: F401
    except ImportError:
        assert "query" not in tools
        pytest.skip("hermes.query is not part of this installation")
    assert "query" in tools
    # the events and an analysis table (the kernels), in one query: one CLI run
    sql = ("SELECT * FROM (SELECT 'events' AS tbl, kind AS key, count(*) AS n, "
           "sum(dur_ns) AS total FROM events GROUP BY kind) UNION ALL SELECT * FROM ("
           "SELECT 'kernels', name, sum(count), sum(total_ns) FROM kernels GROUP BY name "
           "ORDER BY 4 DESC, 2 LIMIT 5) ORDER BY tbl, total DESC, key")
    got = _query_as_cli(server, KINETO, sql)
    # the same kernels as analyze's table: its five biggest, and all its launches as events
    top = kineto_doc["computation"]["top_kernels"]
    kernels = [r for r in got["rows"] if r["tbl"] == "kernels"]
    assert [(r["key"], r["n"], r["total"]) for r in kernels] == \
        [(k["name"], k["count"], k["total_ns"]) for k in top[:5]]
    (launches,) = [r["n"] for r in got["rows"] if (r["tbl"], r["key"]) == ("events", "kernel")]
    assert launches == sum(k["count"] for k in top)
    every = server.call("query", trace=str(KINETO), sql="SELECT * FROM events")
    assert every["truncated"] is True and len(every["rows"]) == 100
    assert "LIMIT" in every["rest"]
    assert "DROP refused: queries are read-only" in \
        server.error("query", trace=str(KINETO), sql="DROP TABLE events")


def test_resources_vocabulary_rules_and_docs(server: Client) -> None:
    from hermes.findings import CAUSE_IDS

    listed = {str(r.uri) for r in server.portal.call(server.session.list_resources).resources}
    assert {"hermes://causes", "hermes://rules", "hermes://whatif/transforms"} <= listed

    def read(uri: str) -> str:
        return server.portal.call(lambda: server.session.read_resource(uri)).contents[0].text

    assert json.loads(read("hermes://causes"))["finding_ids"] == list(CAUSE_IDS)
    assert read("hermes://rules") == (Path(__file__).parents[2] / "rules" / "rules.toml"
                                      ).read_text()
    assert "remove_syncs" in json.loads(read("hermes://whatif/transforms"))
    if "hermes://docs/analysis" in listed:
        assert read("hermes://docs/analysis").startswith("#")


def test_help_shows_client_configuration() -> None:
    code, out, _ = run_cli("mcp", "--help")
    assert code == 0 and "Example" in out and '"mcpServers"' in out
    assert "Claude Desktop" in out and "Cursor" in out and "VS Code" in out
