"""``op_statistic.csv`` and ``(cluster_)communication_matrix.json`` -> import-summary tables.

Both files are aggregates without times on a timeline, so they make no events (an event needs
a start): they are kept, per rank, in the trace's import summary, where a reader (or an
analysis that wants the vendor's totals) finds them.

* ``op_statistic``: one row per operator type and core -> ``{"op_type", "core_type", "count",
  "total_ns", "min_ns", "avg_ns", "max_ns", "ratio_pct", "device_id"}`` under the rank of its
  directory (``Device_id`` is the chip on its node, not the rank); µs -> integer ns.
* ``communication_matrix``: per link ``"src-dst"`` under ``step -> collective|p2p -> op``
  (cluster file: ``rank group -> step -> op``) -> totals per ``(src, dst, transport)`` over
  every operator (``Total Op Info`` aggregates skipped): ``{"src", "dst", "transport",
  "bytes", "transit_ns", "GBps", "ops"}`` with GBps = bytes / transit ns (the files' MB are
  10^6 B). Rows are attributed to their ``src`` rank; the link ids are the file's (global
  ranks in a cluster file).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hermes.collectors.importers.ascend.common import (
    frame,
    load_json,
    numeric,
    read_csv,
    times_ns,
)
from hermes.errors import ImportFormatError

_LINK = re.compile(r"(\d+)\s*-\s*(\d+)")
_TOTAL = "Total Op Info"


def parse_op_statistic(path: Path, rank: int) -> tuple[pd.DataFrame, dict[str, list[dict]]]:
    """No events; ``{rank: rows}`` for the import summary (module docstring)."""
    df = read_csv(path, [["OP Type"], ["Core Type"], ["Count"], ["Total Time(us)"]])
    if len(df) == 0:
        return frame(0), {}
    count = numeric(df, "Count", path, what="a count")
    cols = {"total_ns": "Total Time(us)", "min_ns": "Min Time(us)", "avg_ns": "Avg Time(us)",
            "max_ns": "Max Time(us)"}
    ns = {k: times_ns(df, c, path, allow_na=True) for k, c in cols.items() if c in df.columns}
    ratio = numeric(df, "Ratio(%)", path, what="a percentage") if "Ratio(%)" in df.columns \
        else np.full(len(df), np.nan)
    dev = numeric(df, "Device_id", path, what="an integer") if "Device_id" in df.columns \
        else np.full(len(df), np.nan)
    rows: list[dict[str, Any]] = []
    for i in range(len(df)):  # one row per operator type: a few hundred at most
        row: dict[str, Any] = {"op_type": df["OP Type"].iat[i], "core_type": df["Core Type"].iat[i],
                               "count": int(count[i]) if not np.isnan(count[i]) else 0}
        row.update({k: int(v[i]) for k, v in ns.items()})
        if not np.isnan(ratio[i]):
            row["ratio_pct"] = float(ratio[i])
        if not np.isnan(dev[i]):
            row["device_id"] = int(dev[i])
        rows.append(row)
    return frame(0), {str(rank): rows}


def parse_comm_matrix(path: Path, rank: int) -> tuple[pd.DataFrame, dict[str, list[dict]]]:
    """No events; ``{src rank: link rows}`` for the import summary (module docstring)."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise ImportFormatError("top level is not an object", path=path, where="byte offset 0",
                                hint="expected {step: {collective: {op: {'src-dst': {...}}}}}")
    rows: list[dict[str, Any]] = []
    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:  # walks keys (steps x ops x links), not events
        node, keys = stack.pop()
        if not isinstance(node, dict):
            continue
        if "Transport Type" in node:
            if _TOTAL not in keys:
                rows.append(_link_row(node, keys, path))
            continue
        stack.extend((v, (*keys, str(k))) for k, v in node.items())
    if not rows:
        return frame(0), {}
    df = pd.DataFrame(rows)
    g = df.groupby(["src", "dst", "transport"], sort=True).agg(
        bytes=("bytes", "sum"), transit_ns=("transit_ns", "sum"), ops=("bytes", "size"))
    g = g.reset_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        g["GBps"] = np.where(g["transit_ns"] > 0, g["bytes"] / g["transit_ns"], 0.0)
    out: dict[str, list[dict]] = {}
    for rec in g.to_dict("records"):
        out.setdefault(str(int(rec["src"])), []).append(
            {"src": int(rec["src"]), "dst": int(rec["dst"]), "transport": str(rec["transport"]),
             "bytes": int(rec["bytes"]), "transit_ns": int(rec["transit_ns"]),
             "GBps": float(rec["GBps"]), "ops": int(rec["ops"])})
    return frame(0), out


def _link_row(node: dict[str, Any], keys: tuple[str, ...], path: Path) -> dict[str, Any]:
    where = "key " + " > ".join(repr(k) for k in keys)
    m = _LINK.fullmatch(keys[-1].strip()) if keys else None
    if m is None:
        raise ImportFormatError(f"link key {keys[-1] if keys else ''!r} is not 'src-dst'",
                                path=path, where=where,
                                hint="expected an msprof communication_matrix link record")
    try:
        size = float(node.get("Transit Size(MB)") or 0)
        ms = float(node.get("Transit Time(ms)") or 0)
    except (TypeError, ValueError):
        raise ImportFormatError("'Transit Size(MB)' / 'Transit Time(ms)' is not a number",
                                path=path, where=where, hint="re-export the profile") from None
    return {"src": int(m.group(1)), "dst": int(m.group(2)),
            "transport": str(node.get("Transport Type") or ""),
            "bytes": int(round(size * 1e6)), "transit_ns": int(round(ms * 1e6))}
