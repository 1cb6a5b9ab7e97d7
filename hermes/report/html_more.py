"""The HTML report's later sections: I/O, CPU causes, communication, cluster, step-time
fluctuation and memory. Each returns its section, or one line saying why it is left out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.engine.result import Analysis
from hermes.report.html_parts import Figures, esc, label, omitted, section
from hermes.report.html_sections import per_step_ms


def _nonempty(a: Analysis, key: str) -> pd.DataFrame | None:
    df = a.tables.get(key)
    return df if df is not None and len(df) else None


def io(a: Analysis, figs: Figures, events: pd.DataFrame | None) -> str:
    ps = _nonempty(a, "io.per_step")
    body = []
    cols = [c for c in ("data_wait_ns", "reading_ns", "processing_ns", "fetching_ns")
            if ps is not None and c in ps.columns]
    if ps is not None and float(ps[cols].to_numpy(np.float64).sum()) > 0:
        m = per_step_ms(ps, cols)
        x = [f"step {s}" for s in m["step"]]
        data = [{"type": "bar", "name": "data wait", "x": x, "y": m["data_wait_ns"]}]
        data += [{"type": "scatter", "mode": "lines+markers", "name": c.replace("_ns", ""),
                  "x": x, "y": m[c]} for c in cols if c != "data_wait_ns"]
        body.append("<h3>Data wait per step (ms, mean over ranks) and the loader's work</h3>"
                    + figs.div(data, {"yaxis": {"title": "ms"}}, 300))
    if events is not None and len(events):
        counters = events[events["kind"].astype(object) == "counter"]
        lanes = counters["lane"].astype(str)
        q = counters[lanes.str.contains("queue", case=False).to_numpy()]
        if len(q):
            t0 = int(events["ts_ns"].min())
            data = [{"type": "scatter", "mode": "lines", "line": {"shape": "hv"},
                     "name": label(f"r{r} {ln}"),
                     "x": ((g["ts_ns"] - t0) / 1e6).round(4).tolist(),
                     "y": g["value"].tolist()}
                    for (r, ln), g in q.groupby(["rank", q["lane"].astype(str)], sort=True)]
            body.append("<h3>Loader queue depth</h3>" + figs.div(
                data, {"xaxis": {"title": "ms since the first event"},
                       "yaxis": {"title": "batches ready"}}, 280))
    if not body:
        return omitted("I/O", "the trace has no data-loader activity or data waits")
    return section("io", "I/O", "".join(body))


def cpu(a: Analysis, figs: Figures) -> str:
    ps = _nonempty(a, "cpu.per_step")
    if ps is None:
        return omitted("CPU causes", "no host-bound time to attribute")
    causes = [c for c in ps.columns if c.endswith("_ns") and c not in ("dur_ns", "host_bound_ns")]
    tot = ps[causes].sum()
    tot = tot[tot > 0].sort_values(ascending=False)
    if not len(tot):
        return omitted("CPU causes", "the host never held the device back")
    cpu_only = a.run_kind == "cpu_only"
    names = [("operators (self time)" if cpu_only and c == "operator_dispatch_ns" else
              c.removesuffix("_ns").replace("_", " ")) for c in tot.index]
    data = [{"type": "bar", "orientation": "h", "x": (tot / 1e6).round(4).tolist(), "y": names,
             "name": "host-bound ms"}]
    return section("cpu", "CPU: where the step's time went" if cpu_only else
                   "CPU: what the host-bound time went to",
                   '<p class="note">Total over the capture, all ranks (ms).</p>'
                   + figs.div(data, {"yaxis": {"autorange": "reversed", "automargin": True},
                                     "xaxis": {"title": "ms"}}, 80 + 28 * len(names)))


def communication(a: Analysis, figs: Figures) -> str:
    m = _nonempty(a, "communication.matrix")
    c = _nonempty(a, "communication.collectives")
    if m is None and c is None:
        return omitted("Communication", "the trace has no collectives")
    body = []
    if m is not None:
        piv = m.pivot_table(index="rank", columns="op", values="bytes", aggfunc="sum",
                            fill_value=0)
        body.append("<h3>Bytes moved per rank and collective (MB)</h3>" + figs.div(
            [{"type": "heatmap", "z": (piv.to_numpy(np.float64) / 1e6).round(3).tolist(),
              "x": [label(o) for o in piv.columns], "y": [f"rank {r}" for r in piv.index],
              "colorscale": "Viridis",
              "hovertemplate": "%{y} %{x}: %{z:.1f} MB<extra></extra>"}],
            {"yaxis": {"autorange": "reversed"}}, 120 + 22 * len(piv)))
    if c is not None:
        g = c.groupby("op", sort=True)[["wait_ns", "transit_ns"]].sum() / 1e6
        body.append("<h3>Wait vs transmission per collective (ms, all ranks)</h3>" + figs.div(
            [{"type": "bar", "name": "waiting for peers", "x": [label(o) for o in g.index],
              "y": g["wait_ns"].round(4).tolist()},
             {"type": "bar", "name": "transmission", "x": [label(o) for o in g.index],
              "y": g["transit_ns"].round(4).tolist()}], {"barmode": "stack"}, 300))
        bw = c.dropna(subset=["busbw_GBps"])
        if len(bw) and "link" in bw.columns:
            lg = bw.groupby(bw["link"].astype(str), sort=True)["busbw_GBps"].median()
            body.append("<h3>Bus bandwidth per link (median GB/s)</h3>" + figs.div(
                [{"type": "bar", "x": [label(x) for x in lg.index], "y": lg.round(2).tolist(),
                  "name": "GB/s"}], {"yaxis": {"title": "GB/s"}}, 260))
    return section("communication", "Communication", "".join(body))


def cluster(a: Analysis, figs: Figures) -> str:
    r = _nonempty(a, "cluster.ranks")
    if r is None or len(r) < 2:
        return omitted("Cluster", "one rank: nothing to compare across ranks")
    parts = [("comp_only_ns", "computation only"), ("overlapped_ns", "overlapped"),
             ("comm_only_ns", "communication only"), ("wait_ns", "waiting"),
             ("bubble_ns", "bubble")]
    parts = [(k, lab) for k, lab in parts if k in r.columns]
    tot = np.maximum(r["step_total_ns"].to_numpy(np.float64), 1.0)
    z = np.vstack([100 * r[k].to_numpy(np.float64) / tot for k, _ in parts]).T
    med = float(r["step_median_ms"].median())
    slow = r["step_median_ms"].to_numpy(np.float64) > 1.05 * med
    ylab = [f"rank {k}{' (slow)' if s else ''}" for k, s in zip(r["rank"], slow, strict=True)]
    fig = figs.div([{"type": "heatmap", "z": z.round(2).tolist(), "x": [lab for _, lab in parts],
                     "y": ylab, "colorscale": "YlOrRd",
                     "hovertemplate": "%{y} %{x}: %{z:.1f}% of step<extra></extra>"}],
                   {"yaxis": {"autorange": "reversed", "automargin": True}},
                   140 + 22 * len(r))
    note = (f'<p class="note">Share of step time per rank; ranks whose median step is over 5% '
            f"above the cluster's ({med:.3f} ms) are marked slow: "
            f"{esc(', '.join(str(k) for k, s in zip(r['rank'], slow, strict=True) if s) or 'none')}"
            ".</p>")
    return section("cluster", "Cluster: per-rank step components", note + fig)


def fluctuation(a: Analysis, figs: Figures) -> str:
    f = _nonempty(a, "fluctuation.per_step")
    if f is None or f["step"].nunique() < 2:
        return omitted("Step-time fluctuation", "fewer than two steps")
    data: list[dict[str, Any]] = []
    for rank, g in f.groupby("rank", sort=True):
        data.append({"type": "scatter", "mode": "lines+markers", "name": f"rank {rank}",
                     "x": g["step"].tolist(), "y": (g["dur_ns"] / 1e6).round(4).tolist()})
    spikes = f[f["spike"].fillna(False).astype(bool)] if "spike" in f.columns else f.iloc[:0]
    if len(spikes):
        data.append({"type": "scatter", "mode": "markers", "name": "spike",
                     "x": spikes["step"].tolist(), "y": (spikes["dur_ns"] / 1e6).round(4)
                     .tolist(), "text": [label(t) for t in spikes["attributed_to"].fillna("")],
                     "marker": {"size": 12, "symbol": "x", "color": "#c0392b"},
                     "hovertemplate": "step %{x}: %{y:.2f} ms, %{text}<extra></extra>"})
    show_legend = f["rank"].nunique() <= 16
    return section("fluctuation", "Step-time fluctuation", figs.div(
        data, {"xaxis": {"title": "step", "dtick": 1}, "yaxis": {"title": "step time (ms)"},
               "showlegend": show_legend}, 320))


def memory(a: Analysis, figs: Figures) -> str:
    t = _nonempty(a, "memory.timeline")
    if t is None:
        return omitted("Memory", "a CPU-only run: no device memory" if a.run_kind == "cpu_only"
                       else "the trace has no device memory samples (PyTorch: "
                            "profile_memory=True)")
    t0 = int(t["ts_ns"].min())
    data = []
    for rank, g in t.groupby("rank", sort=True):
        x = ((g["ts_ns"] - t0) / 1e6).round(4).tolist()
        for col, name in (("allocated_bytes", "allocated"), ("reserved_bytes", "reserved")):
            data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv"},
                         "name": f"rank {rank} {name}", "x": x,
                         "y": (g[col] / 2**20).round(3).tolist()})
    peaks = "; ".join(f"rank {p['rank']} ({esc(p.get('device'))}): allocated "
                      f"{float(p['peak_allocated_bytes']) / 2**20:.1f} MiB, reserved "
                      f"{float(p['peak_reserved_bytes']) / 2**20:.1f} MiB" for p in a.memory)
    return section("memory", "Memory", f'<p class="note">Peak: {peaks}.</p>' + figs.div(
        data, {"xaxis": {"title": "ms since the first sample"}, "yaxis": {"title": "MiB"}},
        320))
