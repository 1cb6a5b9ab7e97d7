"""Counts and per-kernel totals of an Nsight Systems SQLite export, straight from SQLite with
the standard library (no Hermes code): the independent measurement that docs/real-traces.md
compares the nsys importer's output with (tests/collectors/test_import_nsys_real.py).

    python docs/nsys_counts.py ../shared/traces/nsys/h100_2gpu_1s.sqlite

Prints JSON: kernels, memcpys (and bytes per copyKind), memsets, NVTX events (marks and
ranges: eventType 34, 59, 60), CUDA runtime calls, and per kernel name (demangled) the count
and the total of end - start in ns.
"""

from __future__ import annotations

import json
import sqlite3
import sys


def measure(path: str) -> dict:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)

    def one(sql: str) -> int:
        return int(con.execute(sql).fetchone()[0] or 0)

    out = {
        "kernels": one("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"),
        "kernel_ns": one("SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL"),
        "memcpys": one("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY"),
        "memcpy_bytes": {str(k): b for k, b in con.execute(
            "SELECT copyKind, sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1")},
        "memsets": one("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET"),
        "nvtx": one("SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (34, 59, 60)"),
        "runtime": one("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME"),
        "per_kernel": {name: [n, ns] for name, n, ns in con.execute(
            "SELECT s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value")},
    }
    con.close()
    return out


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(json.dumps({"file": p, **measure(p)}, indent=1, sort_keys=True))
