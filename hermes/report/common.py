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


def summary_ranks_text(rows: list[dict[str, Any]]) -> str:
    """The ranks whose breakdown comes from a vendor's step summary (``from_summary``: no
    timeline, host time not recorded), in words; empty when there is none."""
    summ = [int(r["rank"]) for r in rows if r.get("from_summary")]
    if not summ:
        return ""
    return ("from the step summary only (step_trace_time, no timeline; host time not "
            f"recorded): rank(s) {ranks_text(summ)}")




def device_text(d: dict[str, Any]) -> str:
    """``NVIDIA H100 80GB HBM3 (SXM) (trace field: device name '...')``: the device the advice
    is fitted to and how Hermes knows it; empty where the analysis has no device facts."""
    dev = d.get("device") or {}
    if d.get("run_kind") == "cpu_only":
        return "none: a CPU-only run (no accelerator in the trace)"
    if not dev.get("name"):
        return ""
    return f"{dev['name']} ({dev.get('source', 'unknown')}: {dev.get('evidence', '')})"


def dtype_mix_text(comp: dict[str, Any]) -> str:
    """``bf16 92%, fp32 8% of 120.5 ms of matmul time (60% of device time; dtype unknown
    for 0%)``; empty without matmul time."""
    mix = comp.get("matmul_dtypes") or {}
    if not mix.get("matmul_ms"):
        return ""
    parts = ", ".join(f"{k} {100 * v:.0f}%" for k, v in mix["shares"].items()) or "dtype unknown"
    return (f"{parts} of {mix['matmul_ms']:,.1f} ms of matmul time ("
            f"{100 * mix.get('device_share', 0):.0f}% of device time; dtype unknown for "
            f"{100 * mix.get('unknown_share', 0):.0f}%)")


def mfu_text(comp: dict[str, Any]) -> str:
    """``MFU 67.8% (670.5 TFLOP/s achieved of 989.4 peak; FLOPs known for 98% of kernel
    time)`` for the rank with the lowest MFU; empty when no FLOPs are known."""
    rows = [r for r in comp.get("per_rank") or [] if r.get("achieved_tflops") is not None]
    if not rows:
        return ""
    r = min(rows, key=lambda x: x["achieved_tflops"])
    mfu = f"MFU {100 * r['mfu']:.1f}% (" if r.get("mfu") is not None else "("
    peak = f" of {r['mfu_peak_tflops']:.1f} peak" if r.get("mfu_peak_tflops") else ""
    where = f"rank {r['rank']}, " if len(rows) > 1 else ""
    return (f"{mfu}{where}{r['achieved_tflops']:.1f} TFLOP/s achieved{peak}; FLOPs known for "
            f"{r['flops_known_pct']:.0f}% of kernel time)")


def _template_hint(name: str, width: int) -> str:
    """``kernel<first template argument ...>``: what tells two instances of one kernel apart."""
    s = str(name)
    for ns in ("(anonymous namespace)::", "at::native::", "at::", "c10::", "std::", "void "):
        s = s.replace(ns, "")
    head, lt, rest = s.partition("<")
    if not lt:
        return short_name(s, width)
    depth, inner = 1, []
    for ch in rest:
        depth += ch == "<"
        depth -= ch == ">"
        if depth == 0:
            break
        inner.append(ch)
    arg = "".join(inner)
    room = max(8, width - len(head) - 3)
    return f"{head}<{arg if len(arg) <= room else arg[:room - 3] + '...'}>"


def unique_short_names(names: list[str], width: int = NAME_WIDTH) -> list[str]:
    """Shortened names (``short_name``) that never make two different names read the same:
    colliding ones show their template arguments, and any left equal get a ``#n`` suffix."""
    short = [short_name(n, width) for n in names]
    groups: dict[str, list[int]] = {}
    for i, sn in enumerate(short):
        groups.setdefault(sn, []).append(i)
    for idx in groups.values():
        if len({names[i] for i in idx}) > 1:
            for i in idx:
                short[i] = _template_hint(names[i], width)
    seen: dict[str, int] = {}
    for i, sn in enumerate(short):
        seen[sn] = seen.get(sn, 0) + 1
        if seen[sn] > 1:
            short[i] = f"{sn} #{seen[sn]}"
    return short


def kernel_rows(comp: dict[str, Any], n: int) -> list[tuple[str, ...]]:
    """(name, count, total ms, mean us, share %, family, bound) of the top ``n`` kernels."""
    out = []
    top = (comp.get("top_kernels") or [])[:n]
    names = unique_short_names([k["name"] for k in top], 60)
    for k, name in zip(top, names, strict=True):
        out.append((name, str(k["count"]), f"{k['total_ns'] / 1e6:.3f}",
                    f"{k['mean_ns'] / 1e3:.1f}", f"{k['share_pct']:.1f}", str(k["family"]),
                    str(k["bound"]).replace("_", "-")))
    return out


KERNEL_HEADER = ("kernel", "count", "total ms", "mean us", "share %", "family", "bound")


def estimate_text(r: dict[str, Any]) -> str:
    """``" by replaying the step"`` for a speedup the what-if replay predicted, else ``""`` (a
    rule's formula over the finding's share)."""
    return " by replaying the step" if r.get("estimate") == "replay" else ""


#: How the explained parts of a verdict and a CPU-only run's parts read in reports.
PART_LABELS = {
    "unexplained": "unexplained", "unattributed": "unattributed", "transfer": "transfer",
    "waiting_for_peers": "waiting for peers", "idle_in_collective": "idle inside collectives",
    "transfer_or_waiting": "transfer or waiting (one rank: not told apart)",
    "data_waits": "data waits", "host_causes": "host causes", "bound_unknown": "bound unknown",
    "operator_dispatch": "operator dispatch", "python": "Python outside operators",
    "garbage_collection": "garbage collection", "operator_compilation": "compilation",
    "initialization": "start-up", "memory_allocation": "allocator calls",
    "environment_configuration": "logging / environment", "resource_contention": "contention",
    "host_device_sync": "host-device syncs", "reading": "reading", "processing": "processing",
    "fetching": "fetching", "compute_bound": "compute-bound kernels",
    "memory_bound": "memory-bound kernels", "underutilized": "underutilized kernels",
    "communication": "communication", "other_host_work": "other host work",
    "nothing_recorded": "nothing recorded"}
#: A CPU-only run's parts (``cpu.parts_pct``): the CPU's operators are its computation.
CPU_PART_LABELS = {**PART_LABELS, "operator_dispatch": "operators (self time)"}
#: What a report says of a run that is not an ordinary accelerator run (``run_kind``).
RUN_KIND_TEXT = {
    "cpu_only": "CPU-only run: no accelerator in the trace; the step is the CPU's work",
    "device_not_captured": "the device was not captured: the host launches device work but "
                           "no device activity is recorded, so findings and estimates that "
                           "need device times are withheld -- "}


def run_kind_text(d: dict[str, Any]) -> str:
    """The report's line on the run's kind ("" for an accelerator run)."""
    from hermes.analyzers.common.runkind import HOW_TO_CAPTURE

    kind = d.get("run_kind") or "accelerator"
    if kind == "device_not_captured":  # how to capture it, unless the verdict says so already
        said = HOW_TO_CAPTURE in str((d.get("verdict") or {}).get("reason") or "")
        return RUN_KIND_TEXT[kind] + ("see the verdict for how to record it" if said
                                      else HOW_TO_CAPTURE)
    return RUN_KIND_TEXT.get(kind, "")


def part_label(name: str, labels: dict[str, str] | None = None) -> str:
    """How a part of ``verdict.explained`` (or of a CPU-only run) reads."""
    labels = labels or PART_LABELS
    if name.startswith("withheld_"):
        return f"{part_label(name.removeprefix('withheld_'), labels)} (withheld: no device times)"
    return labels.get(name, name.replace("_", " "))


def explained_pct_text(v: dict[str, Any]) -> str:
    """``explained N%`` of a verdict (``verdict.explained.pct``)."""
    ex = v.get("explained") or {}
    return f"explained {float(ex.get('pct') or 0.0):.0f}%"


def explained_text(v: dict[str, Any], labels: dict[str, str] | None = None) -> str:
    """The verdict's share split into the findings that explain it and the unexplained
    remainder with its parts (percent of the verdict's share)."""
    labels = labels or PART_LABELS
    ex = v.get("explained") or {}
    out = []
    for p in ex.get("parts") or []:
        name = labels.get(p["name"], p["name"])  # (a finding by its id)
        text = f"{name} {float(p['pct']):.1f}%"
        sub = [s for s in p.get("parts") or [] if float(s["pct"]) >= 0.05]  # (not 0.0 %)
        if sub:
            text += " (" + ", ".join(f"{part_label(s['name'], labels)} {float(s['pct']):.1f}%"
                                     for s in sub) + ")"
        out.append(text)
    share = float(ex.get("share_pct") or 0.0)
    return (f"{explained_pct_text(v)} of the verdict's {share:.1f}% of step time: "
            + "; ".join(out)) \
        if out else f"{explained_pct_text(v)} (nothing to explain)"


def cpu_part_rows(d: dict[str, Any]) -> list[tuple[str, float]]:
    """A CPU-only run's step in CPU terms: (label, % of step time), largest first."""
    parts = (d.get("cpu") or {}).get("parts_pct") or {}
    return [(part_label(k, CPU_PART_LABELS), float(v))
            for k, v in sorted(parts.items(), key=lambda kv: -kv[1])]


OPERATOR_HEADER = ("operator", "calls", "self ms", "% of step")


def operator_rows(d: dict[str, Any], n: int) -> list[tuple[str, ...]]:
    """A CPU-only run's top operators by self time, as text cells."""
    return [(short_name(o["name"]), f"{int(o['calls'])}", f"{float(o['self_ms']):.3f}",
             f"{float(o['share_pct']):.1f}") for o in ((d.get("cpu") or {}).get("operators")
                                                       or [])[:n]]


def operators_title(d: dict[str, Any]) -> str:
    """``Operators by self time (all ranks; on N host thread(s))`` of a CPU-only run."""
    n = int((d.get("cpu") or {}).get("threads") or 0)
    on = f"; on {n} host thread{'s' if n != 1 else ''}" if n else ""
    return f"Operators by self time (all ranks{on})"


def across_ranks_text(cp: dict[str, Any]) -> str:
    """The job's critical path across ranks (``critical_path.across_ranks``) in one line --
    the ranks it passes through with their shares, the transfers -- or "" without one."""
    x = cp.get("across_ranks") or {}
    if not x.get("ranks_on_path"):
        return ""
    pct = {int(k): float(v) for k, v in (x.get("rank_pct") or {}).items()}
    ranks = ", ".join(f"rank {r} {v:.1f}%" for r, v in
                      sorted(pct.items(), key=lambda kv: -kv[1]) if v >= 0.05)
    transfers = float(x.get("transfer_pct") or 0)
    return (f"Critical path across ranks: {ranks}, transfers {transfers:.1f}%"
            f" ({int(x.get('collectives_on_path') or 0)} collectives on the path, joined where "
            "the last rank arrives)")
