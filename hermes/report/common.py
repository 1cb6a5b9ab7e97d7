"""What the renderers share: labels, name shortening, small formatting helpers."""

from __future__ import annotations

from typing import Any

PARTS = (("computation_only_pct", "computation only"), ("overlapped_pct", "overlapped"),
         ("communication_only_pct", "communication only"), ("host_bound_pct", "host-bound"),
         ("free_pct", "free"))
HTA = (("idle_pct", "idle"), ("compute_pct", "compute"), ("non_compute_pct", "non-compute"),
       ("comm_comp_overlap_pct", "comm/comp overlap"))
DEFAULT_TOP = 10
BAR = 30
#: Operator names in text/Markdown reports are cut to this many characters (the JSON keeps them
#: whole): demangled CUDA kernel names run to thousands of characters of template arguments.
NAME_WIDTH = 100
#: How the critical path's components read in reports (keys as in the JSON).
CP_LABELS = {"other": "gaps"}


def short_name(name: Any, width: int = NAME_WIDTH) -> str:
    """A readable operator name: a long C++ signature loses its ``void`` return type, then its
    template arguments and parameter list (``kernel<...>(...)``), then is cut with an ellipsis."""
    s = str(name)
    if len(s) <= width:
        return s
    if s.startswith("void "):
        s = s[5:]
    out, depth = [], 0
    for ch in s:  # collapse everything nested inside <...> and (...)
        if ch in "<(":
            if depth == 0:
                out.append(ch + "...")
            depth += 1
        elif ch in ">)" and depth:
            depth -= 1
            if depth == 0:
                out.append(">" if ch == ">" else ")")
        elif depth == 0:
            out.append(ch)
    s = "".join(out)
    return s if len(s) <= width else s[:width - 3] + "..."


def bar(pct: float) -> str:
    n = int(round(max(0.0, min(100.0, pct)) / 100 * BAR))
    return "#" * n + "." * (BAR - n)


def top_ops(ev: dict[str, Any], n: int = 3) -> str:
    ops = ev.get("top_ops") or []
    out = []
    for op in ops[:n]:
        if isinstance(op, dict):
            t = op.get("time_ns")
            ms = f" ({t / 1e6:.3f} ms)" if isinstance(t, (int, float)) else ""
            out.append(short_name(op.get("name")) + ms)
    return "; ".join(out)


def mean_breakdown(rows: list[dict[str, Any]], key: str) -> float:
    vals = [float(r[key]) for r in rows if r.get(key) is not None]
    return sum(vals) / len(vals) if vals else 0.0


def warmup_text(w: dict[str, Any]) -> str:
    return (f"rank {w['rank']} step {w['step']} ({w['dur_ms']:.1f} ms, {w['factor']:.0f}x the "
            f"median {w['median_ms']:.3f} ms of the others: compilation, lazy loading, "
            "allocator and cache warm-up); --keep-warmup analyzes it too")


def ranks_text(ranks: list[int]) -> str:
    if not ranks:
        return "-"
    if len(ranks) <= 6:
        return ",".join(map(str, ranks))
    return f"{ranks[0]}..{ranks[-1]} ({len(ranks)})"


