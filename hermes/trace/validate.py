"""Trace validation (``hermes validate``): structure, values, references, and a summary.

Checks, per file: Hermes metadata and version, required columns and their types, values of the
vocabulary columns (kind, lane_kind, unit), non-negative durations, counts (flops, bytes) neither
negative nor infinite, and that every correlation id on a device-side event points at a
host-side event of the same rank. All checks are vectorized over columns.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hermes.errors import TraceFormatError
from hermes.trace.reader import TraceChanged, iter_tables, reread, table_to_pandas, trace_files
from hermes.trace.schema import DEVICE_LANES, EVENT_KINDS, LANE_KINDS, UNITS


@dataclass
class ValidationReport:
    path: Path
    errors: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors


def _vocab_errors(df: pd.DataFrame, col: str, vocab: dict[str, str], where: str) -> list[str]:
    values = df[col].dropna().unique()
    bad = sorted(str(v) for v in values if v not in vocab)
    if not bad:
        return []
    return [f"{where}: column {col!r} has value(s) outside the vocabulary: {', '.join(bad[:5])}"
            f" (valid: {', '.join(vocab)})"]


def time_errors(df: pd.DataFrame, where: str = "trace") -> list[str]:
    """The time checks every analysis relies on (``hermes analyze`` refuses a rank that fails
    them): no negative ``dur_ns``, no event ending past the int64 nanosecond range (its end
    would wrap negative). Human-readable error lines, each after ``where: `` (nothing before
    it when ``where`` is empty); none for an empty frame."""
    errors: list[str] = []
    if df.empty:
        return errors
    pre = f"{where}: " if where else ""
    dur = df["dur_ns"].to_numpy()
    neg = np.flatnonzero(dur < 0)
    if neg.size:
        i = int(neg[0])
        errors.append(f"{pre}{neg.size} event(s) with negative dur_ns, first at row {i} "
                      f"({df['name'].iloc[i]!r}, dur_ns={int(dur[i])})")
    ts = df["ts_ns"].to_numpy()
    with np.errstate(over="ignore"):
        wraps = np.flatnonzero((dur > 0) & (ts > np.iinfo(np.int64).max - np.maximum(dur, 0)))
    if wraps.size:
        i = int(wraps[0])
        errors.append(f"{pre}{wraps.size} event(s) end past the int64 ns range, first at "
                      f"row {i} ({df['name'].iloc[i]!r}, ts_ns={int(ts[i])}, "
                      f"dur_ns={int(dur[i])})")
    return errors


def rank_errors(df: pd.DataFrame, listed: Any, where: str = "trace") -> list[str]:
    """Rows of a rank the file's footer does not list (``hermes.ranks``; nothing to check when
    it lists none): the footer decides which file a rank's events are read from, so such rows
    would be analyzed as another rank's, or not at all. One line naming how many and the first;
    none for an empty frame."""
    if df.empty or not listed:
        return []
    rank = df["rank"].to_numpy()
    bad = np.flatnonzero(~np.isin(rank, np.asarray(list(listed), dtype=np.int64)))
    if not bad.size:
        return []
    i = int(bad[0])
    pre = f"{where}: " if where else ""
    others = ", ".join(str(int(r)) for r in np.unique(rank[bad])[:5])
    return [f"{pre}{bad.size} event(s) of rank(s) {others} that the footer's hermes.ranks "
            f"({', '.join(map(str, listed))}) does not list, first at row {i}"]


#: columns that count something (operations, bytes): none negative or infinite (null / NaN:
#: not known)
COUNT_COLUMNS = ("flops", "bytes")


def count_errors(df: pd.DataFrame, where: str = "trace") -> list[str]:
    """Counts (:data:`COUNT_COLUMNS`) that are negative or infinite: one line per column,
    naming how many events and the first. The analysis reads no rate from such counts (an MFU
    of an infinite FLOP total is none), so a trace that has them is not as it was recorded."""
    errors: list[str] = []
    for col in COUNT_COLUMNS:
        if col not in df.columns or df.empty:
            continue
        v = df[col].to_numpy(dtype=np.float64, na_value=np.nan)
        bad = np.flatnonzero(~np.isnan(v) & ((v < 0) | np.isinf(v)))
        if bad.size:
            i = int(bad[0])
            errors.append(f"{where}: {bad.size} event(s) with a negative or infinite {col}, "
                          f"first at row {i} ({df['name'].iloc[i]!r}, {col}={float(v[i])!r})")
    return errors


def check_events(df: pd.DataFrame, where: str = "trace") -> list[str]:
    """Value checks on an events frame; returns human-readable error lines."""
    errors: list[str] = []
    if df.empty:
        return errors
    errors += _vocab_errors(df, "kind", EVENT_KINDS, where)
    errors += _vocab_errors(df, "lane_kind", LANE_KINDS, where)
    errors += _vocab_errors(df, "unit", UNITS, where)
    errors += time_errors(df, where)
    errors += count_errors(df, where)
    corr = df["corr_id"]
    has = corr.notna().to_numpy()
    if has.any():
        lk = df["lane_kind"].astype(str).to_numpy()
        dev = has & np.isin(lk, DEVICE_LANES)
        host = has & (lk == "host")
        ranks = df["rank"].to_numpy()
        cvals = corr.to_numpy(dtype="int64", na_value=0)
        host_keys = pd.MultiIndex.from_arrays([ranks[host], cvals[host]])
        dev_keys = pd.MultiIndex.from_arrays([ranks[dev], cvals[dev]])
        dangling = ~dev_keys.isin(host_keys)
        if dangling.any():
            k = int(np.flatnonzero(dangling)[0])
            r, c = dev_keys[k]
            errors.append(f"{where}: {int(dangling.sum())} device event(s) with a corr_id that "
                          f"no host event of the same rank has (first: rank {r}, corr_id {c})")
    return errors


def summarize(df: pd.DataFrame) -> dict[str, Any]:
    if df.empty:
        return {"events": 0, "ranks": [], "kinds": {}, "span_ns": 0, "steps": {"count": 0}}
    start = int(df["ts_ns"].min())
    ts, dur = df["ts_ns"].to_numpy(), df["dur_ns"].to_numpy()
    # ends clipped at the int64 limit instead of wrapping around (such events are reported)
    end = int((ts + np.minimum(dur, np.iinfo(np.int64).max - ts)).max())
    kinds = df["kind"].astype(str).value_counts().sort_index()
    steps = df[df["kind"] == "step"]
    host_steps = steps[steps["lane_kind"] == "host"] if not steps.empty else steps
    steps = host_steps if not host_steps.empty else steps
    step_summary: dict[str, Any] = {"count": int(steps["step"].nunique()) if len(steps) else 0}
    if len(steps):
        durs_ms = steps["dur_ns"].to_numpy() / 1e6
        step_summary.update(median_ms=float(np.median(durs_ms)), min_ms=float(durs_ms.min()),
                            max_ms=float(durs_ms.max()))
    return {
        "events": int(len(df)),
        "ranks": sorted(int(r) for r in df["rank"].unique()),
        "kinds": {str(k): int(v) for k, v in kinds.items()},
        "start_ns": start,
        "end_ns": end,
        "span_ns": end - start,
        "steps": step_summary,
    }


#: The longest span a trace may cover, and the most its files' first events may differ: two
#: ranks of one run start within a day of each other on one time base.
MAX_SPAN_NS = 366 * 86400 * 10**9
MAX_RANK_START_SKEW_NS = 86400 * 10**9


def consistency_errors(metas: list[tuple[Path, Any, int | None]]) -> list[str]:
    """Files of one trace directory must come from one run: the same source, the same run id
    (``extra.run_id`` where written) and one time base (first events within a day)."""
    if len(metas) < 2:
        return []
    errors: list[str] = []
    f0, m0, _ = metas[0]
    for f, m, _ in metas[1:]:
        if m.source != m0.source:
            errors.append(f"{f}: source {m.source!r} differs from {m0.source!r} of {f0.name}: "
                          "files of two different runs are mixed in one directory")
            break
    for f, m, _ in metas[1:]:
        if m.extra.get("run_id") != m0.extra.get("run_id"):
            errors.append(f"{f}: run id {m.extra.get('run_id')!r} differs from "
                          f"{m0.extra.get('run_id')!r} of {f0.name}: files of two runs")
            break
    starts = [(s, f) for f, _, s in metas if s is not None]
    if starts:
        (lo, flo), (hi, fhi) = min(starts), max(starts)
        if hi - lo > MAX_RANK_START_SKEW_NS:
            errors.append(f"{fhi}: starts {(hi - lo) / 3600e9:,.1f} h after {flo.name}: the "
                          "ranks do not share a time base (files of different runs or clocks)")
    return errors


def _tables(path: str | os.PathLike[str], report: ValidationReport
            ) -> Iterator[tuple[Any, Any, Path]]:
    """``iter_tables`` of ``path``, file by file: a file of a directory that cannot be read
    as a trace (a truncated rank file) is an error line of the report, and the others are
    checked; a lone file, or a directory of such files only, raises."""
    files = trace_files(path)
    if len(files) == 1:
        yield from iter_tables(path, columns=None)
        return
    first: TraceFormatError | None = None
    read = 0
    for f in files:
        try:
            got = list(iter_tables(f, columns=None))
        except TraceChanged:
            raise
        except TraceFormatError as exc:
            first = first or exc
            report.errors.append(exc.one_line())
            continue
        read += 1
        yield from got
    if not read and first is not None:
        raise first


def validate(path: str | os.PathLike[str]) -> ValidationReport:
    """:func:`validate_once`, again while the trace changes under it (a profiled run that
    merges its segments as it is read)."""
    return reread(lambda: validate_once(path))


def validate_once(path: str | os.PathLike[str]) -> ValidationReport:
    """Validate a trace file or directory. Structural errors raise :class:`TraceFormatError`
    (the file cannot be read as a trace at all; in a directory, a file that cannot be read is
    an error of the report and the other files are checked); value errors are collected in
    the report."""
    report = ValidationReport(Path(path))
    frames = []
    source = None
    metas: list[tuple[Path, Any, int | None]] = []
    for table, meta, f in _tables(path, report):
        df = table_to_pandas(table)
        report.errors += check_events(df, where=str(f))
        report.errors += rank_errors(df, meta.ranks, where=str(f))
        frames.append(df)
        source = source or meta.source
        metas.append((f, meta, int(df["ts_ns"].min()) if len(df) else None))
    if not frames:
        raise TraceFormatError("no trace files", path=path)
    report.errors += consistency_errors(metas)
    all_df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if len(all_df):
        span = int((all_df["ts_ns"] + all_df["dur_ns"]).max()) - int(all_df["ts_ns"].min())
        if span > MAX_SPAN_NS:
            report.errors.append(f"{path}: the trace spans {span / 86400e9:,.0f} days; no "
                                 "training run does: timestamps in different units or clocks")
    report.summary = summarize(all_df)
    report.summary["source"] = source
    report.summary["files"] = len(frames)
    repaired: dict[str, int] = {}
    for _, meta, _ in metas:  # what the writers replaced to keep the files readable
        for key, n in (meta.extra.get("repaired") or {}).items():
            if isinstance(n, int):
                repaired[key] = repaired.get(key, 0) + n
    if repaired:
        report.summary["repaired"] = repaired
    from hermes.trace.segments import interrupted, interrupted_note

    if interrupted(path):  # a profiled run killed before it closed (or still running)
        report.summary["interrupted"] = interrupted(path)
        report.summary["interrupted_note"] = interrupted_note(path)
    return report
