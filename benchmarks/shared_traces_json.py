"""Import and analyze every trace under ../shared/traces; write each analysis JSON to a folder.

Used to prove a refactor changes no output: run it before and after, then compare the folders
(``--compare OLD NEW``). One command::

    python benchmarks/shared_traces_json.py --out /tmp/before
    python benchmarks/shared_traces_json.py --out /tmp/after
    python benchmarks/shared_traces_json.py --compare /tmp/before /tmp/after
    python benchmarks/shared_traces_json.py --smoke   # the smallest trace into a temporary
                                                      # folder, compared with itself
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
#: Files under ../shared/traces that are not profiler traces (see its README).
NOT_TRACES = {"memory_timeline.raw.gz", "benchmark_simple_add_et.json.gz", "steps.json",
              "h100_calibration.json", "cluster_communication.json",
              "cluster_step_trace_time.csv"}


def sources() -> list[Path]:
    out = []
    for p in sorted(SHARED.rglob("*")):
        if p.is_file() and p.name not in NOT_TRACES and p.suffix in (".gz", ".json", ".csv") \
                and p.name != "README.md":
            out.append(p)
    return out


def hermes() -> str:
    exe = Path(sys.executable).with_name("hermes")
    return str(exe) if exe.exists() else "hermes"


def _step(command: str, args: list[str], out: Path, key: str) -> str | None:
    """stdout of ``hermes COMMAND ARGS``, or None after recording its failure as KEY.err."""
    r = subprocess.run([hermes(), command, *args], capture_output=True, text=True)
    if r.returncode == 0:
        return r.stdout
    (out / f"{key}.err").write_text(f"{command} rc={r.returncode}\n{r.stderr}")
    print(f"{command:<7} rc={r.returncode}  {key}: {r.stderr.strip()[:150]}")
    return None


def run(out: Path, srcs: list[Path] | None = None) -> int:
    out.mkdir(parents=True, exist_ok=True)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, src in enumerate(sources() if srcs is None else srcs):
            key = str(src.relative_to(SHARED)).replace("/", "__")
            pq = Path(tmp) / f"{i}.parquet"
            if _step("import", [str(src), "--out", str(pq)], out, key) is None or \
                    (text := _step("analyze", [str(pq), "--format", "json"], out, key)) is None:
                bad += 1
                continue
            (out / f"{key}.json").write_text(text)
            doc = json.loads(text)
            lead = doc["findings"][0]["id"] if doc.get("findings") else "-"
            print(f"ok  {key}: bound={doc.get('bound')} lead={lead}")
    return bad


def compare(a: Path, b: Path) -> int:
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    diff = 0
    for n in names:
        pa, pb = a / n, b / n
        if not pa.exists() or not pb.exists():
            print(f"only in one: {n}")
            diff += 1
        elif pa.read_bytes() != pb.read_bytes():
            print(f"differs: {n}")
            diff += 1
    print(f"{len(names)} files, {diff} differ")
    return 1 if diff else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path)
    ap.add_argument("--smoke", action="store_true",
                    help="the smallest trace into a temporary folder, compared with itself")
    a = ap.parse_args()
    if a.smoke:
        smallest = min(sources(), key=lambda p: p.stat().st_size)
        with tempfile.TemporaryDirectory() as tmp:
            failed = run(Path(tmp), [smallest])
            sys.exit(1 if failed or compare(Path(tmp), Path(tmp)) else 0)
    if a.compare:
        sys.exit(compare(*a.compare))
    sys.exit(1 if run(a.out or Path("shared-json")) else 0)
