"""Measure every shared Kineto / Ascend trace *without* Hermes's analyzers (docs/real-traces.md).

Reads the Chrome-trace JSON directly (json/gzip + pandas) and prints, per trace, what a
performance engineer would measure first:

* ``busy``  GPU/NPU busy %: union of kernel, memcpy and memset intervals (all device lanes)
  inside the measured window, over the window;
* ``dl``    data-loader wait %: union of host ranges named like a DataLoader ``__next__``;
* ``comm``  exposed communication %: communication kernels (NCCL/RCCL/HCCL names) not overlapped
  by any other device work;
* ``sync``  sync wait %: union of host calls that block on the device (``*Synchronize``,
  synchronous ``cudaMemcpy``/``hipMemcpy``/``hipMemcpyWithStream``, ``aten::item``/
  ``_local_scalar_dense``, calls whose copy is a ``Memcpy DtoH (Device -> Pageable)``), and
  ``sync_idle``, the part of it during which the device is idle too (what a sync costs: a
  host that waits on a busy device loses nothing);
* ``families`` the top kernel families by device time (name patterns, as a person reading a
  kernel table would group them).

The window is the union of the ``ProfilerStep#N`` ranges when the trace has them, else the span
of all timed events (one window: inference, a single capture). One command::

    python benchmarks/real_traces.py            # table of every shared trace
    python benchmarks/real_traces.py --json     # the same as JSON lines
    python benchmarks/real_traces.py --smoke    # the smallest shared trace only
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# the patterns group alternatives; str.contains only needs the match, not the groups
warnings.filterwarnings("ignore", "This pattern is interpreted as a regular expression")

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
NOT_TRACES = {"steps.json", "h100_calibration.json", "cluster_communication.json",
              "benchmark_simple_add_et.json.gz", "memory_timeline.raw.gz"}
#: Kineto device-event categories over its generations (lower- and upper-case), MTIA's, and
#: Ascend's (events of the "Ascend Hardware" process carry no category).
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset",
               "mtia_ccp_events"}
COMM = re.compile(r"(?i)nccl|rccl|hccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|"
                  r"broadcast|sendrecv")
SYNC = re.compile(r"(?i)synchroniz|^(cuda|hip)Memcpy(2D|3D|WithStream)?$|"
                  r"^aten::item$|^aten::_local_scalar_dense$|^acl\w*Synchronize")
LOADER = re.compile(r"DataLoader.*__next__|_next_data\b")
#: kernel families, first match wins (order matters: a flash-attention GEMM is attention)
FAMILIES = (
    ("communication", COMM.pattern),
    ("attention", r"(?i)flash|fmha|attention|sdpa|attn"),
    ("gemm", r"(?i)gemm|cutlass|matmul|xmma|cublas|hipblas|Cijk|sm\d+_.*_(tn|nt|nn|tt)|"
             r"MatMul|BatchMatMul|wgrad|dgrad|conv"),
    ("norm", r"(?i)norm"),
    ("softmax", r"(?i)softmax"),
    ("reduction", r"(?i)reduce|triton_red|sum|mean|argmax|topk|cross_entropy"),
    ("copy", r"(?i)memcpy|memset|copy|transpose|cat_|CatArray|TransData|gather|index|scatter"),
    ("elementwise", r"(?i)elementwise|vectorized|unrolled|triton_poi|add|mul|relu|gelu|silu|"
                    r"act_and_mul|fill|cast|where|div|sub|exp|sqrt|tanh|sigmoid|dropout|"
                    r"rotary|rope|Zeros|Ones|Cast|Mul|Add"),
)


def _load(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc if isinstance(doc, list) else list(doc.get("traceEvents", []))


def _frame(events: list[dict[str, Any]]) -> pd.DataFrame:
    """Timed ('X') events as a frame: name, cat, pid, tid, ts/end in us (floats)."""
    x = [e for e in events if e.get("ph") == "X" and "dur" in e]
    df = pd.DataFrame({"name": [str(e.get("name", "")) for e in x],
                       "corr": pd.to_numeric(pd.Series(
                           [(e.get("args") or {}).get("correlation") for e in x], dtype=object),
                           errors="coerce"),
                       "cat": [str(e.get("cat", "")) for e in x],
                       "pid": [str(e.get("pid", "")) for e in x],
                       "ts": pd.to_numeric(pd.Series([e.get("ts") for e in x], dtype=object),
                                           errors="coerce"),
                       "dur": pd.to_numeric(pd.Series([e.get("dur") for e in x], dtype=object),
                                            errors="coerce")})
    df = df.dropna(subset=["ts", "dur"])
    df = df[df["dur"] >= 0]
    df["end"] = df["ts"] + df["dur"]
    # Ascend: device tasks live in the process named "Ascend Hardware"
    hw = {str(e.get("pid")) for e in events if e.get("ph") == "M" and
          e.get("name") == "process_name" and
          "Ascend Hardware" in str((e.get("args") or {}).get("name", ""))}
    df["device"] = df["cat"].isin(DEVICE_CATS) | df["pid"].isin(hw)
    return df.reset_index(drop=True)


def union(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted union of intervals [s, e)."""
    if s.size == 0:
        return s, e
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    run = np.maximum.accumulate(e)
    new = np.ones(s.size, bool)
    new[1:] = s[1:] > run[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def clip_total(u: tuple[np.ndarray, np.ndarray], w: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the intersection of two unions."""
    s, e = u
    total = 0.0
    for a, b in zip(*w, strict=True):  # few windows
        total += float(np.clip(np.minimum(e, b) - np.maximum(s, a), 0, None).sum())
    return total


def subtract_total(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray],
                   w: tuple[np.ndarray, np.ndarray]) -> float:
    """|a - b| inside w = |(a ∪ b) ∩ w| - |b ∩ w|."""
    both = union(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
    return clip_total(both, w) - clip_total(b, w)


def windows(df: pd.DataFrame) -> tuple[tuple[np.ndarray, np.ndarray], str]:
    steps = df[~df["device"] & df["name"].str.match(r"ProfilerStep#\d+")]
    if len(steps):
        return union(steps["ts"].to_numpy(), steps["end"].to_numpy()), f"{len(steps)} steps"
    timed = df[df["cat"] != "Trace"]
    return (np.array([timed["ts"].min()]), np.array([timed["end"].max()])), "one window"


def families(dev: pd.DataFrame) -> list[tuple[str, float]]:
    k = dev[~dev["cat"].isin({"gpu_memcpy", "gpu_memset", "Memcpy", "Memset"})]
    fam = pd.Series("other", index=k.index)
    todo = pd.Series(True, index=k.index)
    for name, pat in FAMILIES:
        hit = todo & k["name"].str.contains(pat, regex=True)
        fam[hit] = name
        todo &= ~hit
    t = k.groupby(fam)["dur"].sum().sort_values(ascending=False)
    total = float(t.sum()) or 1.0
    return [(str(n), round(100.0 * float(v) / total, 1)) for n, v in t.head(3).items()]


def measure(path: Path) -> dict[str, Any]:
    df = _frame(_load(path))
    w, source = windows(df)
    wt = float((w[1] - w[0]).sum())
    dev = df[df["device"]]
    host = df[~df["device"]]
    busy = union(dev["ts"].to_numpy(), dev["end"].to_numpy())
    comm_m = dev["name"].str.contains(COMM.pattern, regex=True)
    comm = union(dev.loc[comm_m, "ts"].to_numpy(), dev.loc[comm_m, "end"].to_numpy())
    comp = union(dev.loc[~comm_m, "ts"].to_numpy(), dev.loc[~comm_m, "end"].to_numpy())
    dl_m = host["name"].str.contains(LOADER.pattern, regex=True)
    dl = union(host.loc[dl_m, "ts"].to_numpy(), host.loc[dl_m, "end"].to_numpy())
    # a copy into pageable host memory blocks the call that issued it (by correlation id)
    pageable = dev.loc[dev["name"].str.contains(r"DtoH.*Pageable", regex=True), "corr"].dropna()
    sync_m = host["name"].str.contains(SYNC.pattern, regex=True) | host["corr"].isin(pageable)
    sync = union(host.loc[sync_m, "ts"].to_numpy(), host.loc[sync_m, "end"].to_numpy())

    def pct(x: float) -> float:
        return round(100.0 * x / wt, 1) if wt > 0 else 0.0

    return {"trace": str(path.relative_to(SHARED)), "window": source,
            "window_ms": round(wt / 1e3, 3), "device_events": int(len(dev)),
            "busy_pct": pct(clip_total(busy, w)), "dataloader_pct": pct(clip_total(dl, w)),
            "exposed_comm_pct": pct(subtract_total(comm, comp, w)),
            "sync_pct": pct(clip_total(sync, w)),
            "sync_idle_pct": pct(subtract_total(sync, busy, w)),
            "families": families(dev)}


def sources() -> list[Path]:
    return [p for p in sorted(SHARED.rglob("*.json*"))
            if p.is_file() and p.name not in NOT_TRACES]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    ap.add_argument("paths", nargs="*", type=Path, help="traces (default: all shared ones)")
    ap.add_argument("--smoke", action="store_true", help="the smallest shared trace only")
    a = ap.parse_args(argv)
    paths = a.paths or sources()
    if a.smoke and not a.paths:
        paths = sorted(paths, key=lambda p: p.stat().st_size)[:1]
    for p in paths:
        try:
            m = measure(p.resolve())
        except (OSError, ValueError, KeyError) as exc:
            print(f"{p}: unreadable ({exc})", file=sys.stderr)
            continue
        if a.json:
            print(json.dumps(m))
        else:
            fam = ", ".join(f"{n} {v}%" for n, v in m["families"])
            print(f"{m['trace']:<75} {m['window']:>10} busy {m['busy_pct']:5.1f}% "
                  f"dl {m['dataloader_pct']:5.1f}% comm {m['exposed_comm_pct']:5.1f}% "
                  f"sync {m['sync_pct']:5.1f}% (idle {m['sync_idle_pct']:4.1f}%) | {fam}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
