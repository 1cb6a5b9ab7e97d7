"""Invariants every analyzer result must satisfy; one checker, called after every analyzer in
tests.

``problems(result) -> list[str]`` lists what is wrong (empty when the result is sound);
``check_result(result)`` raises :class:`InvariantError` listing them. Checked:

* partitions sum to 100 %: the five overlap parts (``computation_only_pct``,
  ``communication_only_pct``, ``overlapped_pct``, ``host_bound_pct``, ``free_pct``) in the metrics
  and in every row of a table that has them; critical-path ``components_pct`` (when not empty);
* shares within range: findings' ``time_share`` in 0..1, every ``*_pct`` metric and table column in
  0..100, every ``share`` / ``*_share`` value in 0..1;
* critical path <= step time: a table with ``path_ns`` (or ``length_ns``) and ``dur_ns`` columns;
* no finding larger than the time its category occupies: the ``cpu`` findings together <= the
  host-bound share (``host_bound_ns / step_total_ns``); no finding without events (an
  ``evidence.events`` of 0);
* no negative durations: table columns named ``dur_ns``, ``*_dur_ns``, ``time_ns``, ``*_time_ns``,
  ``slack_ns`` and the ``<part>_ns`` columns of a partition.

Tolerances: percentages may exceed their bounds by ``PCT_TOL`` (float rounding of sums of integer
ns); nothing else is tolerated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.engine.base import AnalyzerResult
from hermes.findings import CAUSES

PARTITION = ("computation_only", "communication_only", "overlapped", "host_bound", "free")
PCT_TOL = 1e-6 * 100  # 1e-6 of the whole, in percent


class InvariantError(AssertionError):
    """An analyzer result broke an invariant (a bug in the analyzer, never a user error)."""


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _check_metrics(name: str, metrics: Mapping[str, Any], out: list[str]) -> None:
    for key, val in metrics.items():
        if not _is_num(val) or (isinstance(val, float) and math.isnan(val)):
            continue
        v = float(val)
        if key.endswith("_pct") and not (-PCT_TOL <= v <= 100 + PCT_TOL):
            out.append(f"{name}: metric {key}={v} outside 0..100")
        if (key == "share" or key.endswith("_share")) and not (0.0 <= v <= 1.0):
            out.append(f"{name}: metric {key}={v} outside 0..1")
        if (key == "dur_ns" or key.endswith("_dur_ns") or key.endswith("_time_ns")) and v < 0:
            out.append(f"{name}: metric {key}={v} negative")
    parts = [metrics.get(f"{p}_pct") for p in PARTITION]
    if all(_is_num(p) for p in parts):
        s = float(sum(parts))  # type: ignore[arg-type]
        if abs(s - 100.0) > 1e-3:
            out.append(f"{name}: overlap parts sum to {s:.6f} %, not 100")
    comp = metrics.get("components_pct")
    if isinstance(comp, Mapping) and comp:
        vals = [float(v) for v in comp.values() if _is_num(v)]
        s = sum(vals)
        if any(v < -PCT_TOL for v in vals) or (s > 0 and abs(s - 100.0) > 1e-3):
            out.append(f"{name}: critical-path components_pct sum to {s:.6f} %, not 100")


def _is_duration(col: str) -> bool:
    return col in ("dur_ns", "time_ns", "slack_ns") or col.endswith("_dur_ns") \
        or col.endswith("_time_ns") or any(col == f"{p}_ns" for p in PARTITION)


def _numeric(df: pd.DataFrame, col: str) -> np.ndarray:
    vals = pd.to_numeric(df[col], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    return vals[~np.isnan(vals)]


def _check_table(name: str, tname: str, df: pd.DataFrame, out: list[str]) -> None:
    where = f"{name}.{tname}"
    for col in df.columns:
        c = str(col)
        if _is_duration(c):
            v = _numeric(df, c)
            if v.size and v.min() < 0:
                out.append(f"{where}: column {c} has a negative value ({v.min()})")
        elif c.endswith("_pct"):
            v = _numeric(df, c)
            if v.size and (v.min() < -PCT_TOL or v.max() > 100 + PCT_TOL):
                out.append(f"{where}: column {c} outside 0..100 ({v.min()}..{v.max()})")
        elif c == "share" or c.endswith("_share"):
            v = _numeric(df, c)
            if v.size and (v.min() < 0 or v.max() > 1 + 1e-9):
                out.append(f"{where}: column {c} outside 0..1 ({v.min()}..{v.max()})")
    pcts = [f"{p}_pct" for p in PARTITION]
    if len(df) and all(c in df.columns for c in pcts):
        s = df[pcts].astype("float64").sum(axis=1).to_numpy()
        dur = df["dur_ns"].to_numpy(np.float64) if "dur_ns" in df.columns else np.ones(len(df))
        bad = (dur > 0) & (np.abs(s - 100.0) > 1e-3)
        if bad.any():
            out.append(f"{where}: {int(bad.sum())} row(s) whose parts do not sum to 100 %")
    nss = [f"{p}_ns" for p in PARTITION]
    if len(df) and "dur_ns" in df.columns and all(c in df.columns for c in nss):
        s = df[nss].astype("int64").sum(axis=1).to_numpy()
        if (s != df["dur_ns"].to_numpy(np.int64)).any():
            out.append(f"{where}: part durations do not sum to the step duration")
    for path_col in ("path_ns", "length_ns"):
        if len(df) and path_col in df.columns and "dur_ns" in df.columns:
            p = df[path_col].to_numpy(np.float64)
            d = df["dur_ns"].to_numpy(np.float64)
            if (p > d).any():
                out.append(f"{where}: critical path ({path_col}) longer than the step")


def _check_category(result: AnalyzerResult, out: list[str]) -> None:
    """Host causes share the host-bound time: together they cannot exceed it."""
    m = result.metrics
    if result.name != "cpu" or not _is_num(m.get("step_total_ns")) or not m["step_total_ns"]:
        return
    bound = float(m.get("host_bound_ns") or 0) / float(m["step_total_ns"])
    total = sum(f.time_share for f in result.findings if f.category == "cpu")
    if total > bound + 1e-9:
        out.append(f"cpu: findings sum to {total:.6f} of step time, more than the host-bound "
                   f"share {bound:.6f}")


def problems(result: AnalyzerResult) -> list[str]:
    """Everything wrong with ``result`` (empty list when it is sound)."""
    out: list[str] = []
    name = result.name
    for f in result.findings:
        if f.cause not in CAUSES.get(f.category, ()):
            out.append(f"{name}: finding with unknown cause {f.id}")
        if not 0.0 <= f.time_share <= 1.0:
            out.append(f"{name}: finding {f.id} time_share {f.time_share} outside 0..1")
        if not f.summary:
            out.append(f"{name}: finding {f.id} without a summary")
        if f.evidence.get("events") == 0:
            out.append(f"{name}: finding {f.id} counts no event (a finding needs evidence)")
    _check_category(result, out)
    _check_metrics(name, result.metrics, out)
    cp_len = result.metrics.get("path_ns", result.metrics.get("length_ns"))
    step_len = result.metrics.get("step_ns", result.metrics.get("step_dur_ns"))
    if _is_num(cp_len) and _is_num(step_len) and float(cp_len) > float(step_len):
        out.append(f"{name}: critical path {cp_len} ns longer than the step ({step_len} ns)")
    for tname, df in result.tables.items():
        if isinstance(df, pd.DataFrame):
            _check_table(name, tname, df, out)
        else:
            out.append(f"{name}: table {tname} is {type(df).__name__}, not a DataFrame")
    return out


def check_result(result: AnalyzerResult) -> AnalyzerResult:
    """Raise :class:`InvariantError` when ``result`` breaks an invariant; return it otherwise."""
    bad = problems(result)
    if bad:
        raise InvariantError("; ".join(bad))
    return result
