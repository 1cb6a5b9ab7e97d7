"""The HTML report's first sections: summary, findings, breakdown, timeline, roofline, tables.

Each function takes the analysis document (``Analysis.to_dict()`` with recommendations), the
analysis itself for its tables, and the page's :class:`Figures`; it returns the section's HTML,
or an ``omitted`` line saying why there is nothing to show.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.engine.result import Analysis, missing_text
from hermes.report.common import (
    HTA,
    OPERATOR_HEADER,
    PARTS,
    across_ranks_text,
    cpu_part_rows,
    device_text,
    dtype_mix_text,
    explained_pct_text,
    explained_text,
    mfu_text,
    operator_rows,
    operators_title,
    run_kind_text,
    short_name,
    unique_short_names,
    warmup_text,
)
from hermes.report.html_parts import (
    PART_COLORS,
    Figures,
    esc,
    label,
    ms,
    omitted,
    section,
    table,
)
from hermes.report.timeline import Timeline, critical_path_bars


def summary(d: dict[str, Any], a: Analysis) -> str:
    st = d["steps"]
    meta = a.meta
    dev = getattr(meta, "device", None) or {}
    extra = getattr(meta, "extra", None) or {}
    software = [f"{k}: {v}" for k, v in sorted(extra.items())
                if "version" in k.lower() and isinstance(v, (str, int, float))]
    rows = [("ranks", f"{len(d['ranks'])} ({', '.join(map(str, d['ranks'][:16]))}"
                      f"{'…' if len(d['ranks']) > 16 else ''})"),
            ("steps", f"{st['count']} analyzed; median {st['median_ms']:.3f} ms, "
                      f"p90 {st['p90_ms']:.3f} ms per step"),
            ("device", "none: a CPU-only run" if d.get("run_kind") == "cpu_only" else
             dev.get("display_name") or dev.get("name") or "not described by the trace"),
            ("source", f"{d.get('source') or '-'} (written by "
                       f"{getattr(meta, 'created_by', '-') or '-'})")]
    if software:
        rows.append(("software", "; ".join(software)))
    comp = d.get("computation") or {}
    if device_text(d):
        rows.append(("device (advice)", device_text(d)))
    if dtype_mix_text(comp):
        rows.append(("matmul dtypes", dtype_mix_text(comp)))
    if d.get("run_kind") != "cpu_only":
        rows.append(("MFU", mfu_text(comp) or "not known: the trace gives no kernel FLOPs or no "
                                              "device peak"))
    rows += [("warm-up left out", warmup_text(w)) for w in d.get("warmup", [])]
    rows += [("MISSING", missing_text(m)) for m in d.get("missing_ranks", ())]
    kv = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows)
    verdict = (f'<p class="verdict">Verdict: <span class="bound">{esc(d["bound"]).upper()}'
               f'-bound</span> ({esc(explained_pct_text(d["verdict"]))}) — '
               f'{esc(d["verdict"]["reason"])}</p>'
               f'<p class="note">{esc(explained_text(d["verdict"]))}</p>')
    if run_kind_text(d):
        verdict += f'<p class="verdict">Run: {esc(run_kind_text(d))}</p>'
    if cpu_part_rows(d):
        verdict += ("<p>Where the CPU's time goes (mean over ranks, % of step wall time)</p>"
                    + table(("part", "% of step"), [(k, f"{v:.1f}") for k, v in
                                                    cpu_part_rows(d)], numeric=(1,)))
        if operator_rows(d, 10):
            verdict += (f"<p>{esc(operators_title(d))}</p>"
                        + table(OPERATOR_HEADER, operator_rows(d, 10), numeric=(1, 2, 3)))
    return section("summary", "Summary", verdict + f'<dl class="kv">{kv}</dl>')


def _evidence(ev: dict[str, Any]) -> str:
    """The finding's evidence: its top operators, then its scalar figures."""
    out = []
    ops = [o for o in ev.get("top_ops") or [] if isinstance(o, dict)][:5]
    if ops:
        out.append("top operators: " + "; ".join(
            f"{esc(short_name(o.get('name'), 80))} ({float(o.get('time_ns') or 0) / 1e6:.3f} ms)"
            for o in ops))
    scalars = [(k, v) for k, v in ev.items()
               if k != "top_ops" and isinstance(v, (int, float, str)) and not isinstance(v, bool)
               and v != ""]  # an empty string says nothing (runtime unknown, no framework)
    if scalars:
        out.append(", ".join(f"{esc(k)} = {esc(f'{v:.4g}' if isinstance(v, float) else v)}"
                             for k, v in scalars[:12]))
    return "<br>".join(out)


def findings(d: dict[str, Any], top: int) -> str:
    fs = d["findings"]
    if not fs:
        return section("findings", "Findings", "<p>No findings: nothing costs a measurable share "
                                               "of step time.</p>")
    parts = [f'<p class="note">{len(fs)} finding(s), ranked by the share of step time they '
             f"cost; the top {min(top, len(fs))} shown with their evidence.</p>"]
    for i, f in enumerate(fs[:top], 1):
        recs = "".join(
            f'<div class="rec">→ <b>{esc(r["optimization"])}</b> — estimated '
            f'{float(r["estimated_speedup"]):.2f}× speed-up'
            f'{" (replayed)" if r.get("estimate") == "replay" else ""}: {esc(r["how"])}</div>'
            for r in f.get("recommendations") or [])
        parts.append(
            f'<div class="finding sev-{esc(f["severity"])}"><b>{i}. {esc(f["id"])}</b> '
            f'[{esc(f["severity"])}] — {100 * float(f["time_share"]):.1f}% of step time, '
            f'ranks {esc(", ".join(map(str, f["ranks"][:16])))}<br>{esc(f["summary"])}'
            f'<div class="note">{_evidence(f.get("evidence") or {})}</div>{recs}</div>')
    return section("findings", "Findings and recommendations", "".join(parts))


def breakdown(d: dict[str, Any], a: Analysis, figs: Figures) -> str:
    rows = d["breakdown"]["per_rank"]
    if not rows:
        return omitted("Breakdown", "no rank has step windows to break down")
    if cpu_part_rows(d):  # a CPU-only run: the step in CPU terms, no device partition
        parts = cpu_part_rows(d)
        data = [{"type": "bar", "orientation": "h", "x": [round(v, 3) for _, v in parts],
                 "y": [k for k, _ in parts], "name": "% of step"}]
        return section("breakdown", "Step time breakdown (CPU-only run)",
                       "<h3>Where the CPU's time goes (% of step wall time, mean over ranks)</h3>"
                       + figs.div(data, {"xaxis": {"title": "% of step"}}, 320))
    x = [f"rank {r['rank']}" for r in rows]
    data = [{"type": "bar", "name": lab, "x": x, "y": [float(r.get(k) or 0) for r in rows],
             "marker": {"color": PART_COLORS[lab]}} for k, lab in PARTS]
    body = ["<h3>Per rank (% of step wall time)</h3>",
            figs.div(data, {"barmode": "stack", "yaxis": {"title": "% of step"}}, 320)]
    ps = a.tables.get("overlap.per_step")
    if ps is not None and len(ps):
        g = ps.groupby("step", sort=True)
        data = [{"type": "bar", "name": lab, "x": [f"step {s}" for s in g.groups],
                 "y": (g[k.replace("_pct", "_ns")].mean() / 1e6).round(4).tolist(),
                 "marker": {"color": PART_COLORS[lab]}} for k, lab in PARTS
                if k.replace("_pct", "_ns") in ps.columns]
        body += ["<h3>Per step (ms, mean over ranks)</h3>",
                 figs.div(data, {"barmode": "stack", "yaxis": {"title": "ms"}}, 320)]
    hta = [[r["rank"], *[f"{float(r.get(k) or 0):.1f}" for k, _ in HTA]] for r in rows]
    body += ["<h3>HTA-compatible figures (% of step)</h3>",
             table(["rank", *[lab for _, lab in HTA]], hta, numeric=range(1, 5))]
    return section("breakdown", "Step time breakdown", "".join(body))


def timeline(tl: Timeline | None, d: dict[str, Any], a: Analysis, figs: Figures,
             why: str) -> str:
    if tl is None:
        return omitted("Timeline", why)
    cp_rank = d["critical_path"].get("rank")
    windows = a.tables.get("steps.windows")
    bars = critical_path_bars(a.tables, windows, int(cp_rank), tl.t0_ns) \
        if cp_rank is not None else []
    star = len(set(tl.ranks)) > 1  # with one rank every lane is the critical path's
    ylabels = [label(s) + (" ★" if star and r == cp_rank else "")
               for s, r in zip(tl.labels, tl.ranks, strict=True)]
    heat = {"type": "heatmap", "x": np.round(tl.x_ms, 4).tolist(), "y": ylabels,
            "z": np.round(np.minimum(tl.busy, 4.0), 3).tolist(), "zmin": 0, "zmax": 1,
            "colorscale": [[0, "#f4f6f8"], [0.15, "#c6dbef"], [1, "#08306b"]],
            "colorbar": {"title": "busy", "len": 0.6},
            "hovertemplate": "%{y}<br>%{x:.2f} ms: %{z:.0%} busy<extra></extra>",
            "xaxis": "x", "yaxis": "y"}
    lanes = len(tl.labels)
    height = int(min(1400, 160 + 18 * lanes + (140 if bars else 0)))
    frac = 130 / height if bars else 0.0
    layout = {"xaxis": {"title": "ms since the first event"},
              "yaxis": {"domain": [0, 1 - frac - 0.02] if bars else [0, 1], "automargin": True,
                        "dtick": 1, "tickfont": {"size": 10},
                        "autorange": "reversed"},
              "barmode": "stack", "bargap": 0, "showlegend": bool(bars),
              # above the figure: below a tall heatmap it would sit far from the path it keys
              "legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0}}
    if bars:
        layout["yaxis2"] = {"domain": [1 - frac, 1], "title": "path %", "range": [0, 100]}
    note = (f'<p class="note">{tl.events:,} events in {lanes} lanes, each binned into '
            f"{tl.busy.shape[1]} buckets of {tl.width_ms:.3f} ms (colour: share of the bucket "
            "the lane is busy). ")
    if bars:
        note += (f"Top: the critical path of rank {esc(cp_rank)} (the slowest rank"
                 f"{', lanes marked ★' if star else ''}) step by step, split into what it runs "
                 "through. ")
    if across_ranks_text(d["critical_path"]):
        note += f"{esc(across_ranks_text(d['critical_path']))}. "
    if tl.lanes_dropped:
        note += f"The {tl.lanes_dropped} least busy lanes are left out. "
    note += ("Every event is in the full trace: <code>hermes export TRACE --format chrome "
             "--out trace.json</code>, then open it in <a href=\"https://ui.perfetto.dev\">"
             "Perfetto</a>.</p>")
    return section("timeline", "Timeline (aggregated)",
                   note + figs.div([heat, *bars], layout, height))


def _ceilings(dev: dict[str, Any]) -> list[tuple[str, float]]:
    peaks = dev.get("peak_flops")
    if isinstance(peaks, dict):
        return [(str(k), float(v)) for k, v in peaks.items() if isinstance(v, (int, float))
                and v > 0]
    if isinstance(peaks, (int, float)) and peaks > 0:
        return [("peak", float(peaks))]
    return []


def _ranked(g: pd.DataFrame, top_n: int) -> tuple[pd.DataFrame, pd.Series, list[str], int]:
    """The ``top_n`` rows of ``g`` by ``total``, their share of all rows' total (%), names
    shortened without two reading the same, and how many rows there were."""
    g = g.sort_values("total", ascending=False)
    share = 100 * g["total"] / max(float(g["total"].sum()), 1.0)
    top = g.head(top_n)
    return top, share.head(top_n), unique_short_names([str(n) for n in top.index], 90), len(g)


def roofline(a: Analysis, figs: Figures) -> str:
    k = a.tables.get("computation.kernels")
    dev = getattr(a.meta, "device", None) or {}
    bw = dev.get("hbm_bw_Bps")
    ceilings = _ceilings(dev)
    if a.run_kind == "cpu_only":
        return omitted("Roofline", "a CPU-only run: no accelerator kernels to place")
    if k is None or not len(k) or not ceilings or not bw:
        why = ("the trace does not describe its device's peak FLOP/s and memory bandwidth"
               if not ceilings or not bw else "the trace has no kernels")
        return omitted("Roofline", why)
    g = k.groupby("name", sort=False).agg(total_ns=("total_ns", "sum"), flops=("flops", "sum"),
                                          bytes=("bytes", "sum"), family=("family", "first"))
    g = g[(g["flops"] > 0) & (g["bytes"] > 0) & (g["total_ns"] > 0)]
    if not len(g):
        return omitted("Roofline", "no kernel has both FLOPs and bytes known")
    g = g.sort_values("total_ns", ascending=False).head(300)
    ai = (g["flops"] / g["bytes"]).to_numpy(np.float64)
    tf = (g["flops"] / g["total_ns"]).to_numpy(np.float64) / 1e3  # FLOP/ns -> TFLOP/s
    size = 6 + 30 * np.sqrt(g["total_ns"].to_numpy(np.float64) / float(g["total_ns"].max()))
    text = [f"{label(short_name(n, 80))}<br>{label(f)}: {t / 1e6:.3f} ms" for n, f, t in
            zip(g.index, g["family"], g["total_ns"], strict=True)]
    lo, hi = float(min(ai.min(), 0.1)), float(max(ai.max(), 1e4))
    xs = np.logspace(np.log10(lo), np.log10(hi), 60)
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "name": f"{label(n)} {p / 1e12:.3g} TFLOP/s",
         "x": xs.tolist(), "y": (np.minimum(p, xs * float(bw)) / 1e12).tolist()}
        for n, p in ceilings]
    data.append({"type": "scatter", "mode": "markers", "name": "kernels (size: time)",
                 "x": ai.tolist(), "y": tf.tolist(), "text": text,
                 "marker": {"size": size.round(1).tolist(), "opacity": 0.6},
                 "hovertemplate": "%{text}<br>%{x:.2f} FLOP/B, %{y:.2f} TFLOP/s<extra></extra>"})
    layout = {"xaxis": {"type": "log", "title": "arithmetic intensity (FLOP/byte)"},
              "yaxis": {"type": "log", "title": "achieved TFLOP/s"}}
    return section("roofline", "Roofline", f'<p class="note">Ceilings of '
                   f"{esc(dev.get('display_name') or dev.get('name'))}: peak FLOP/s and "
                   f"{float(bw) / 1e9:.0f} GB/s memory bandwidth; one point per kernel (the "
                   f"{len(g)} longest with FLOPs and bytes known).</p>"
                   + figs.div(data, layout, 460))


def top_tables(a: Analysis, top_n: int = 30) -> str:
    parts = []
    k = a.tables.get("computation.kernels")
    if k is not None and len(k):
        g = k.groupby("name", sort=False).agg(count=("count", "sum"), total=("total_ns", "sum"),
                                              family=("family", "first"),
                                              bound=("bound", "first"))
        g, share, names, n_all = _ranked(g, top_n)
        rows = [[(sn, n), int(c), f"{t / 1e6:.3f}", f"{t / max(c, 1) / 1e3:.1f}", f"{s:.1f}", f,
                 str(b).replace("_", "-")]
                for sn, n, c, t, s, f, b in zip(names, g.index, g["count"], g["total"], share,
                                            g["family"], g["bound"], strict=True)]
        parts.append(f"<h3>Top kernels (all ranks, total over the capture; {len(rows)} of "
                     f"{n_all})</h3>" + table(["kernel", "count", "total ms", "mean µs",
                                                "share %", "family", "bound"], rows,
                                               numeric=(1, 2, 3, 4)))
    o = a.tables.get("critical_path.ops")
    if o is not None and len(o):
        o = o[o["kind"].astype(str) == "host_op"]
    if o is not None and len(o):  # framework operators: their time, and how much of it is on
        # the critical path (time off it could grow without slowing the step)
        g = o.groupby("name", sort=False).agg(count=("count", "sum"), total=("dur_ns", "sum"),
                                              cp=("cp_time_ns", "sum"))
        g, share, names, n_all = _ranked(g, top_n)
        rows = [[(sn, n), int(c), f"{t / 1e6:.3f}", f"{t / max(c, 1) / 1e3:.1f}", f"{s:.1f}",
                 f"{cp / 1e6:.3f}"]
                for sn, n, c, t, s, cp in zip(names, g.index, g["count"], g["total"], share,
                                              g["cp"], strict=True)]
        parts.append(f"<h3>Top operators (host, all ranks, total over the capture; {len(rows)} "
                     f"of {n_all})</h3>" + table(["operator", "count", "total ms", "mean µs",
                                                  "share %", "on critical path ms"], rows,
                                                 numeric=(1, 2, 3, 4, 5)))
    if not parts:
        return omitted("Top kernels and operators", "the trace has no device kernels")
    return section("tables", "Top operators" if a.run_kind == "cpu_only" else
                   "Top kernels and operators",
                   '<p class="note">Click a column header to sort.</p>' + "".join(parts))


def per_step_ms(df: pd.DataFrame, cols: list[str]) -> dict[str, list[float]]:
    """Mean over ranks per step of ``cols`` (ns), in ms, keyed by column."""
    g = df.groupby("step", sort=True)[cols].mean()
    return {"step": [int(s) for s in g.index], **{c: [ms(v) for v in g[c]] for c in cols}}
