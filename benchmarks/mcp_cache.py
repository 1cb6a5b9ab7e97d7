"""``hermes mcp``'s analysis cache: the first ``analyze`` call of a trace against the second.

    python benchmarks/mcp_cache.py                    # a 200k-event Kineto JSON (synth.py)
    python benchmarks/mcp_cache.py --trace FILE       # any trace the server can read
    python benchmarks/mcp_cache.py --smoke            # the repository's small Kineto trace

The server is started as a client starts it (``hermes mcp --root DIR`` as a subprocess, spoken
to over stdio by the ``mcp`` SDK's client). Each figure is the wall time of one ``tools/call``
as the client sees it (JSON-RPC round trip, JSON of the result included): the first call
imports and analyzes the trace, the second is answered from the cache (the content hash of an
unchanged file is remembered by its identity and modification time, so nothing is re-read).
A third call on a byte-identical copy under another name shows the cost of hashing the file
(the analysis is found by its content). ``--repeat`` fresh servers; medians.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SMOKE_TRACE = REPO / "tests" / "data" / "kineto" / "big_matmul.pt.trace.json.gz"


def _server_command(root: Path) -> tuple[str, list[str]]:
    script = Path(sys.executable).with_name("hermes")
    cmd = [str(script)] if script.is_file() else [sys.executable, "-m", "hermes.cli"]
    return cmd[0], [*cmd[1:], "mcp", "--root", str(root), "--out-dir", str(root / "out")]


async def _session(root: Path, trace: Path, copy: Path) -> dict[str, float]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command, args = _server_command(root)
    params = StdioServerParameters(command=command, args=args)
    out: dict[str, float] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        for label, path in (("first", trace), ("second", trace), ("copy", copy)):
            t0 = time.perf_counter()
            res = await s.call_tool("analyze", {"trace": str(path)})
            out[label] = time.perf_counter() - t0
            if res.is_error:
                raise SystemExit(f"analyze failed: {res.content[0].text}")
            out[f"{label}_cached"] = float(bool(res.structured_content.get("cached")))
    return out


def _synth_trace(root: Path, events: int) -> Path:
    """One rank of ``synth.py``'s Kineto JSON, 10 steps, about ``events`` events."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import synth  # the benchmarks' trace generator

    src = root / "src"
    src.mkdir()
    synth.write_rank(src, 0, 1, steps=10, ops=max(1, (events // 10 - 11) // 3), fmt="kineto")
    return src / "rank-00000.pt.trace.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", type=Path, help="trace to analyze (default: a synthetic one)")
    ap.add_argument("--events", type=int, default=200_000,
                    help="events of the synthetic Kineto trace")
    ap.add_argument("--repeat", type=int, default=3, help="fresh servers (medians)")
    ap.add_argument("--smoke", action="store_true",
                    help="one server on the repository's small Kineto trace")
    a = ap.parse_args(argv)
    import anyio

    with tempfile.TemporaryDirectory(prefix="hermes-mcp-bench-") as tmp:
        root = Path(tmp)
        if a.smoke:
            src, repeat = SMOKE_TRACE, 1
        else:
            src = a.trace or _synth_trace(root, a.events)
            repeat = max(1, a.repeat)
        trace = root / src.name
        if src.is_dir():
            shutil.copytree(src, trace, dirs_exist_ok=True)
        elif src != trace:
            shutil.copy(src, trace)
        copy = root / f"copy-{src.name}"
        (shutil.copytree if src.is_dir() else shutil.copy)(trace, copy)
        size = sum(f.stat().st_size for f in ([trace] if trace.is_file() else
                                              trace.rglob("*")) if f.is_file())
        runs: list[dict[str, Any]] = [anyio.run(_session, root, trace, copy)
                                      for _ in range(repeat)]
    med = {k: statistics.median(r[k] for r in runs) for k in ("first", "second", "copy")}
    print(f"trace {src.name} ({size / 1e6:.1f} MB), {repeat} server(s), medians:")
    print(f"  first analyze call  {med['first'] * 1e3:9.1f} ms  (import + analysis + advice)")
    print(f"  second call         {med['second'] * 1e3:9.1f} ms  (cache hit: "
          f"{all(r['second_cached'] for r in runs)})")
    print(f"  identical copy      {med['copy'] * 1e3:9.1f} ms  (content hash, cache hit: "
          f"{all(r['copy_cached'] for r in runs)})")
    print(f"  first / second      {med['first'] / max(med['second'], 1e-9):9.0f}x")
    ok = all(r["second_cached"] and r["copy_cached"] and not r["first_cached"] for r in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
