"""``kernel_details.csv`` and ``(cluster_)step_trace_time.csv`` -> Ascend event frames.

kernel_details: one row per device task. ``Accelerator Core`` (newer CANN) or ``Task Type``
(older) picks kind and unit from :data:`CORES`; an ``AI_CORE`` row whose Cube pipe did nothing
(every ``aic_mac*`` ratio 0 and no cube FLOPs) while its vector pipe worked is vector-only and
gets unit ``vector``. Lane ``stream <Stream ID>`` (device), HCCL rows without a stream on lane
``hccl`` (link). Block dims, shapes/dtypes/formats and every pipe utilization column go to
args under snake_case names (``aic_mac_ratio``, ``aiv_vec_ratio``, ``aicore_time_us``, ...).

step_trace_time: one ``step`` event per (rank, step) on lane ``step trace`` (host), carrying
every figure of the row in args as integer ns (``computing_ns``,
``communication_not_overlapped_ns``, ``overlapped_ns``, ``communication_ns``, ``free_ns``,
``stage_ns``, ``bubble_ns``, ...). The files carry no start times, so a rank's steps are
laid end to end from 0 with ``dur_ns = computing + communication(not overlapped) + free`` and
``args.ts_synthetic = true``; the importer then moves them to the start of the rank's
timeline, or without one to its first kernel_details / communication event, and when
``trace_view.json`` of the same rank has the step, the figures enrich that step instead (see
``importer.py``). The cluster file's ``stage`` rows (aggregates over a rank group) are not
events; they are kept in the import summary. The overlap analyzer takes a rank's breakdown from
these figures when its events do not record what they report (``analyzers/overlap.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hermes.collectors.importers.ascend.common import (
    NA_TOKENS,
    frame,
    numeric,
    read_csv,
    snake,
    times_ns,
)
from hermes.errors import ImportFormatError

#: Accelerator Core / Task Type -> (kind, unit).
CORES: dict[str, tuple[str, str | None]] = {
    "AI_CORE": ("kernel", "cube"), "AI_VECTOR_CORE": ("kernel", "vector"),
    "AI_CPU": ("kernel", "ai_cpu"), "MIX_AIC": ("kernel", "mix"), "MIX_AIV": ("kernel", "mix"),
    "HCCL": ("collective", "link"), "COMMUNICATION": ("collective", "link"),
    "DSA_SQE": ("kernel", None), "DSA": ("kernel", None),
}

#: Columns that become event columns, not args.
_KD_COLUMNS = {"Name", "Start Time(us)", "Duration(us)", "Accelerator Core", "Task Type",
               "Stream ID", "Step Id"}
#: Text columns kept in args as strings (everything else numeric when it parses).
_KD_TEXT = {"Type", "OP State", "HF32 Eligible", "Input Shapes", "Input Data Types",
            "Input Formats", "Output Shapes", "Output Data Types", "Output Formats",
            "Context ID"}


def parse_kernel_details(path: Path, rank: int) -> pd.DataFrame:
    """Events of one ``kernel_details.csv`` for ``rank``."""
    df = read_csv(path, [["Name"], ["Start Time(us)"], ["Duration(us)"],
                         ["Accelerator Core", "Task Type"]])
    n = len(df)
    ts = times_ns(df, "Start Time(us)", path)
    dur = times_ns(df, "Duration(us)", path)
    core_col = "Accelerator Core" if "Accelerator Core" in df.columns else "Task Type"
    core = df[core_col]
    mapped = core.map(CORES)
    known = mapped.notna().to_numpy()
    kind = np.full(n, "other", dtype=object)
    unit = np.full(n, None, dtype=object)
    kind[known] = [m[0] for m in mapped[known]]
    unit[known] = [m[1] for m in mapped[known]]

    vals: dict[str, np.ndarray] = {}
    text_cols = [c for c in df.columns if c in _KD_TEXT]
    for c in df.columns:
        if c in _KD_COLUMNS or c in _KD_TEXT:
            continue
        # Metric columns differ between CANN versions: a column that is not numeric
        # throughout is kept as text rather than rejected.
        raw = df[c]
        v = pd.to_numeric(raw.where(~raw.isin(NA_TOKENS)), errors="coerce").to_numpy(float)
        if (np.isnan(v) & ~raw.isin(NA_TOKENS).to_numpy()).any():
            text_cols.append(c)
        else:
            vals[c] = v
    vector_only = _vector_only(vals, n)
    unit[(core == "AI_CORE").to_numpy() & vector_only] = "vector"

    stream = _int_column(df, "Stream ID", path)
    step = _int_column(df, "Step Id", path)
    no_stream = np.asarray(pd.isna(stream), dtype=bool)
    lane = np.where(no_stream, "hccl",
                    ("stream " + pd.Series(stream).astype(str)).to_numpy(dtype=object)
                    ).astype(object)
    lane_kind = np.where(no_stream & (kind == "collective"), "link", "device")

    keys = {c: snake(c) for c in df.columns}
    records: list[dict[str, Any]] = [{} for _ in range(n)]
    # Shapes are written as '"4,1025"' (quoted once more so spreadsheets keep them text).
    text = {c: df[c].str.strip('"').to_numpy() for c in text_cols}
    nums = {c: v for c, v in vals.items()}
    for i in range(n):  # building one args dict per row is inherent to the args column
        a = records[i]
        a["accelerator_core"] = core.iat[i]
        for c, arr in text.items():
            if arr[i] not in NA_TOKENS:
                a[keys[c]] = arr[i]
        for c, arr in nums.items():
            x = arr[i]
            if not np.isnan(x):
                a[keys[c]] = int(x) if x.is_integer() and abs(x) < 2**53 else float(x)
        if kind[i] == "other":
            a["source_category"] = f"kernel_details/{core.iat[i]}"
    return frame(n, rank=rank, lane=lane, lane_kind=lane_kind, kind=kind,
                 name=df["Name"].to_numpy(), ts_ns=ts, dur_ns=np.maximum(dur, 0), step=step,
                 stream=stream, unit=unit, args=records,
                 src=("kernel_details/" + core).to_numpy(dtype=object))


def _vector_only(vals: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Rows whose Cube pipe was idle while a vector pipe worked (both schemas)."""
    cube = [v for c, v in vals.items()
            if c.startswith("aic_mac") and c.endswith("ratio") or c == "aic_cube_fops"]
    vec = [v for c, v in vals.items()
           if (c.startswith(("aiv_vec", "aic_vec")) and c.endswith("ratio"))
           or c in ("aic_vector_fops", "aiv_vector_fops")]
    if not cube or not vec:
        return np.zeros(n, dtype=bool)
    cube_work = np.nansum(np.vstack(cube), axis=0) > 0
    cube_seen = ~np.all(np.isnan(np.vstack(cube)), axis=0)
    vec_work = np.nansum(np.vstack(vec), axis=0) > 0
    return cube_seen & ~cube_work & vec_work


def _int_column(df: pd.DataFrame, col: str, path: Path) -> pd.arrays.IntegerArray:
    if col not in df.columns:
        return pd.array([pd.NA] * len(df), dtype="Int64")
    v = numeric(df, col, path, what="an integer")
    return pd.array(np.where(np.isnan(v), np.nan, v), dtype="Int64")


#: step_trace_time columns that sum to the step's wall time (see the module docstring).
_WALL_PARTS = ("Computing", "Communication(Not Overlapped)", "Free")


def parse_step_trace(path: Path, rank: int) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Step events of a ``step_trace_time.csv`` (``rank``) or a cluster file (ranks from its
    ``Type``/``Index`` columns). Returns (event frame, stage rows for the import summary)."""
    df = read_csv(path, [["Step"], *[[c] for c in _WALL_PARTS]])
    cluster = "Type" in df.columns and "Index" in df.columns
    stages: list[dict[str, Any]] = []
    if cluster:
        is_rank = (df["Type"].str.lower() == "rank").to_numpy()
        for i in np.flatnonzero(~is_rank):
            stages.append({"type": df["Type"].iat[i], "index": df["Index"].iat[i],
                           "step": df["Step"].iat[i]})
        lines = df.attrs.get("lines")
        df = df[is_rank].reset_index(drop=True)
        if lines is not None:
            df.attrs["lines"] = np.asarray(lines)[is_rank]
        ranks = _int_column(df, "Index", path).to_numpy(dtype=object)
        no_rank = np.flatnonzero(pd.isna(ranks))
        if no_rank.size:  # a rank row must say which rank it is
            line = df.attrs["lines"][no_rank[0]] if lines is not None else None
            raise ImportFormatError("a 'rank' row has no 'Index' (its rank)", path=path,
                                    where=None if line is None else f"line {line}",
                                    hint="the file is cut or hand-edited; re-export it")
    else:
        ranks = np.full(len(df), rank, dtype=object)
    n = len(df)
    figures = [c for c in df.columns if c not in ("Step", "Type", "Index")]
    ns = {c: times_ns(df, c, path, allow_na=True) for c in figures}
    step = _int_column(df, "Step", path)
    dur = np.maximum(sum(ns[c] for c in _WALL_PARTS), 0)
    # Lay each rank's steps end to end from 0, in file order.
    rank_s = pd.Series(ranks.astype(np.int64))
    ts = (pd.Series(dur).groupby(rank_s).cumsum() - dur).to_numpy(np.int64)
    keys = {c: snake(c) + "_ns" for c in figures}
    records: list[dict[str, Any]] = []
    for j in range(n):
        a: dict[str, Any] = {keys[c]: int(ns[c][j]) for c in figures
                             if df[c].iat[j] not in NA_TOKENS}
        a["ts_synthetic"] = True
        records.append(a)
    name = np.where(np.asarray(pd.isna(step), dtype=bool), "step",
                    ("step " + pd.Series(step).astype(str)).to_numpy(dtype=object))
    src = "cluster_step_trace_time" if cluster else "step_trace_time"
    return frame(n, rank=rank_s.to_numpy(), lane="step trace", lane_kind="host", kind="step",
                 name=name.astype(object), ts_ns=ts, dur_ns=dur, step=step, args=records,
                 src=src), stages
