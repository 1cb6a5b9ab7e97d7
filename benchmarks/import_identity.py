"""The importers' output and ``hermes analyze`` of raw profiler files are unchanged by a refactor.

    python benchmarks/import_identity.py --before /work/main/.venv/bin/hermes
    python benchmarks/import_identity.py --before OLD_HERMES --sources a.json.gz b.json.gz
    python benchmarks/import_identity.py --smoke   # the smallest shared trace, this tree's
                                                   # hermes as --before too

For every profiler source (default: every trace under ../shared/traces that an importer reads):

1. ``hermes import SRC`` with ``--before`` (another checkout's console script) and with this
   tree's: the two Parquet files hold equal Arrow tables (schema and metadata included) and equal
   key-value metadata, or both refuse the source with the same message;
2. this tree's ``hermes analyze SRC --format json`` (the in-memory import, one process) against
   ``hermes analyze`` of the Parquet this tree imported: the same bytes.

Prints one line per difference and a summary; exit 1 when anything differs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from shared_traces_json import hermes, sources  # noqa: E402


def _run(exe: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([exe, *args], capture_output=True, text=True)


def _same_parquet(a: Path, b: Path) -> bool:
    ta, tb = pq.read_table(a), pq.read_table(b)
    return ta.equals(tb) and ta.schema.equals(tb.schema, check_metadata=True) and \
        pq.read_metadata(a).metadata == pq.read_metadata(b).metadata


def check(src: Path, before: str, tmp: Path) -> list[str]:
    """What differs for one source (empty: nothing)."""
    old, new = tmp / "old.parquet", tmp / "new.parquet"
    r_old, r_new = _run(before, "import", str(src), "--out", str(old)), \
        _run(hermes(), "import", str(src), "--out", str(new))
    if r_old.returncode or r_new.returncode:
        same = (r_old.returncode, r_old.stderr) == (r_new.returncode, r_new.stderr)
        return [] if same else [f"import refused differently: {r_new.stderr.strip()[:120]}"]
    out = [] if _same_parquet(old, new) else ["imported Parquet differs"]
    direct = _run(hermes(), "analyze", str(src), "--format", "json")
    via = _run(hermes(), "analyze", str(new), "--format", "json")
    if (direct.returncode, direct.stdout) != (via.returncode, via.stdout):
        out.append(f"analyze of the source differs from analyze of its import "
                   f"(rc {direct.returncode} vs {via.returncode})")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="the other checkout's hermes executable (required)")
    ap.add_argument("--sources", nargs="*", type=Path, help="default: the shared traces")
    ap.add_argument("--smoke", action="store_true",
                    help="the smallest shared trace; --before defaults to this tree's hermes")
    args = ap.parse_args()
    srcs = args.sources or [p for p in sources() if p.suffix in (".gz", ".json")]
    if args.smoke:
        srcs = args.sources or [min(srcs, key=lambda p: p.stat().st_size)]
        args.before = args.before or hermes()
    elif not args.before:
        ap.error("the following arguments are required: --before")
    bad = 0
    for src in srcs:
        with tempfile.TemporaryDirectory() as tmp:
            problems = check(src, args.before, Path(tmp))
        for p in problems:
            print(f"DIFF {src}: {p}")
        bad += bool(problems)
    print(f"{len(srcs)} sources, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
