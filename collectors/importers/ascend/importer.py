"""Importer of Ascend PyTorch profiler (torch_npu) and msprof-analyze output.

Sources: a ``*_ascend_pt`` directory, its ``ASCEND_PROFILER_OUTPUT/``, a directory holding
several of those or loose files, or single files: ``trace_view.json``, ``kernel_details.csv``,
``communication.json`` / ``cluster_communication.json``, ``step_trace_time.csv`` /
``cluster_step_trace_time.csv``, ``op_statistic.csv``, ``communication_matrix.json`` /
``cluster_communication_matrix.json``, in any combination and for any subset of ranks. Each
file has its own parser (mapping in its module docstring):

* ``ascend_trace_view``: the timeline (host ops, CANN API calls, device tasks, HCCL, overlap
  analysis; flows -> ``corr_id`` / ``external_id``);
* ``ascend_csv``: ``kernel_details`` (units, shapes, pipe ratios) and ``step_trace_time`` (one
  ``step`` event per rank and step with the time breakdown in args);
* ``ascend_comm``: per-collective time, wait, sync and bandwidth;
* ``ascend_aggregates``: ``op_statistic`` and ``communication_matrix``, totals without times:
  no events, kept per rank in the import summary (keys ``op_statistic``,
  ``communication_matrix``).

Merging, per rank: a kernel_details row enriches the trace_view device event with the same
name starting within 1 µs (its unit, stream, step and args win), a communication record the
trace_view collective with the same name within 1 µs, a step_trace_time row the trace_view
step with the same number; what matches nothing is added as its own event. A rank without a
trace_view timeline gets its step_trace steps (which have no start times) placed at each step's
first kernel_details / communication event of that step number minus its ``Preparing`` time,
else end to end from its earliest such event, so that the summary's step holds the device work
it describes (the breakdown rule for such ranks: ``analyzers/overlap.py``). Rank: from
``profiler_info_<rank>.json`` of a ``*_ascend_pt`` directory, the cluster files' own rank
keys, else ``options["rank"]`` (default 0). Device: ``options["device"]``, else the first
Ascend chip name found in the profiler's small JSON info files, matched with
``hermes.devices.match``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hermes import devices
from hermes.collectors.importers.ascend import aggregates as ascend_aggregates
from hermes.collectors.importers.ascend import comm as ascend_comm
from hermes.collectors.importers.ascend import csv_files as ascend_csv
from hermes.collectors.importers.ascend import trace_view as ascend_trace_view
from hermes.collectors.importers.ascend.common import FRAME_COLUMNS, concat, encode_args
from hermes.collectors.importers.ascend.detect import (
    FILE_KINDS,
    OUTPUT_DIR,
    file_kind,
    is_profile_dir,
)
from hermes.collectors.importers.base import ImportResult
from hermes.errors import ImportFormatError, UsageError
from hermes.trace.meta import TraceMeta
from hermes.trace.writer import write_trace

MATCH_TOLERANCE_NS = 1000


@dataclass(frozen=True)
class SourceFile:
    path: Path
    kind: str  # a key of FILE_KINDS
    rank: int


def _rank_of(profile_dir: Path, default: int) -> int:
    """``profiler_info_<rank>.json`` names the rank of a distributed run."""
    root = profile_dir.parent if profile_dir.name == OUTPUT_DIR else profile_dir
    for p in sorted(root.glob("profiler_info_*.json")):
        m = re.fullmatch(r"profiler_info_(\d+)\.json", p.name)
        if m:
            return int(m.group(1))
    return default


def discover(sources: list[Path], rank: int) -> list[SourceFile]:
    """The Ascend files under ``sources`` with the rank each belongs to."""
    found: list[SourceFile] = []
    for src in sources:
        src = Path(src)
        if not src.exists():
            raise UsageError("source does not exist", path=src,
                             hint="give an *_ascend_pt directory or an Ascend profiler file")
        if src.is_file():
            kind = file_kind(src)
            if kind is None:
                raise UsageError("not an Ascend profiler file", path=src,
                                 hint=f"expected one of {', '.join(FILE_KINDS.values())}")
            found.append(SourceFile(src, kind, rank))
            continue
        found.extend(_walk(src, rank))
    if not found:
        raise UsageError("no Ascend profiler files found", path=", ".join(map(str, sources)),
                         hint="expected trace_view.json, kernel_details.csv, ... or an "
                              "*_ascend_pt directory with ASCEND_PROFILER_OUTPUT/ (run "
                              "torch_npu.profiler.profiler.analyse on raw profiles first)")
    return found


def _walk(directory: Path, rank: int) -> list[SourceFile]:
    if directory.name.endswith("_ascend_pt"):
        rank = _rank_of(directory, rank)
        out = directory / OUTPUT_DIR
        return _walk(out, rank) if out.is_dir() else []
    if directory.name == OUTPUT_DIR:
        rank = _rank_of(directory, rank)
    found = []
    for p in sorted(directory.iterdir()):
        if p.is_file() and file_kind(p) is not None:
            found.append(SourceFile(p, file_kind(p) or "", rank))
        elif p.is_dir() and (is_profile_dir(p) or p.name == "cluster_analysis_output"):
            found.extend(_walk(p, rank))
    return found


def _rank_clash(files: list[SourceFile]) -> str | None:
    """Several profile directories landing on one rank (none had profiler_info_<rank>.json)."""
    dirs: dict[int, set[Path]] = {}
    for f in files:
        pt = next((p for p in f.path.parents if p.name.endswith("_ascend_pt")), None)
        if pt is not None:
            dirs.setdefault(f.rank, set()).add(pt)
    clash = sorted(r for r, d in dirs.items() if len(d) > 1)
    if not clash:
        return None
    return (f"several *_ascend_pt directories were merged into rank(s) {clash}: they name no "
            "rank (profiler_info_<rank>.json); import them one by one with a rank option")


#: An Ascend chip name as the profiler writes it, whole: "Ascend910B3", "Ascend910_9392" (a
#: 910C), "Ascend910B4-1", "Ascend 910B"; and its family part ("Ascend910B" of "Ascend910B9").
CHIP = re.compile(r"Ascend\s?\d{3}[A-Za-z0-9_-]*", re.IGNORECASE)
FAMILY = re.compile(r"Ascend\s?\d{3}[A-Za-z]", re.IGNORECASE)


def chip_profile(text: str) -> devices.DeviceProfile | None:
    """The device profile of the first Ascend chip named in ``text`` that the device table
    names: its whole name (as written, then without the space) equal to a profile's name or
    alias, else the family its name starts with (a letter after the number: "Ascend910B9" is a
    910B). A name the table does not list and with no family letter ("Ascend910_9399") names
    no profile: its number alone ("Ascend910") would be the 910A's."""
    for m in CHIP.finditer(text):
        name = m.group(0).rstrip("_-")
        fam = FAMILY.match(name)
        for cand in (name, name.replace(" ", ""), fam.group(0) if fam else ""):
            prof = devices.match(cand) if cand else None
            if prof is not None and _named(prof, cand):
                return prof
    return None


def _named(prof: devices.DeviceProfile, name: str) -> bool:
    """``prof`` is named by ``name`` itself (its name or an alias equal to it), not by a word
    inside it (``devices.match`` also finds "Ascend910" in "Ascend910_9399")."""
    return name.lower() in {x.lower() for x in (prof.name, prof.display_name,
                                                *prof.fields.get("aliases", []))}


def _device(sources: list[Path], options: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    name = options.get("device")
    if name:
        return devices.get(str(name)).to_meta(), None
    for src in sources:
        root = Path(src) if Path(src).is_dir() else Path(src).parent
        infos = [p for glob in ("profiler_info*.json", "profiler_metadata.json",
                                "*_ascend_pt/profiler_info*.json", "**/info.json*")
                 for p in root.glob(glob)]
        for p in infos[:64]:
            try:
                if p.stat().st_size > 1 << 20:
                    continue
                prof = chip_profile(p.read_text(errors="replace"))
            except OSError:
                continue
            if prof is not None:
                return prof.to_meta(), None
    return {}, ("the files do not name the Ascend chip, so no device profile is stored "
                "(importer option device=NAME sets one, e.g. ascend910b)")


#: File kind -> parser(path, rank) -> (event frame, extra summary).
PARSERS: dict[str, Callable[[Path, int], tuple[pd.DataFrame, Any]]] = {
    "trace_view": ascend_trace_view.parse,
    "kernel_details": lambda p, r: (ascend_csv.parse_kernel_details(p, r), None),
    "communication": ascend_comm.parse,
    "step_trace": ascend_csv.parse_step_trace,
    "op_statistic": ascend_aggregates.parse_op_statistic,
    "communication_matrix": ascend_aggregates.parse_comm_matrix,
}
#: File kinds that are aggregates without times: kept in the import summary, no events.
AGGREGATES = ("op_statistic", "communication_matrix")


def _enrich(base: pd.DataFrame, extra: pd.DataFrame, mask: np.ndarray,
            by_step: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Merge ``extra`` rows into the ``base`` rows selected by ``mask`` that have the same rank
    and name and start within 1 µs (or, ``by_step``, the same rank and step). Returns
    (base updated, extra rows left unmatched)."""
    if len(extra) == 0 or not mask.any():
        return base, extra
    left = extra.assign(_x=np.arange(len(extra)))
    right = base[mask].assign(_b=np.flatnonzero(mask))
    if by_step:
        left = left[left["step"].notna()]
        right = right[right["step"].notna()]
        pairs = left[["rank", "step", "_x"]].merge(right[["rank", "step", "_b"]],
                                                    on=["rank", "step"])
    else:
        left = left.sort_values("ts_ns")
        right = right.sort_values("ts_ns")
        pairs = pd.merge_asof(left[["ts_ns", "rank", "name", "_x"]].astype({"name": str}),
                              right[["ts_ns", "rank", "name", "_b"]].astype({"name": str}),
                              on="ts_ns", by=["rank", "name"], direction="nearest",
                              tolerance=MATCH_TOLERANCE_NS).dropna(subset=["_b"])
    pairs = pairs.drop_duplicates("_b").drop_duplicates("_x")
    xi = pairs["_x"].to_numpy(np.int64)
    bi = pairs["_b"].to_numpy(np.int64)
    base = base.copy()
    for col in ("unit", "stream", "step", "coll_group", "coll_seq", "coll_bytes"):
        vals = extra[col].to_numpy(dtype=object)[xi]
        has = ~pd.isna(vals)
        if has.any():
            cur = np.array(base[col], dtype=object)  # writable copy
            cur[bi[has]] = vals[has]
            base[col] = pd.array(cur, dtype=base[col].dtype) if col != "unit" else cur
    bargs = list(base["args"])
    xargs = list(extra["args"])
    for x, b in zip(xi, bi, strict=True):  # one dict merge per matched pair
        bargs[b] = {**bargs[b], **xargs[x]}
    base["args"] = bargs
    keep = np.ones(len(extra), dtype=bool)
    keep[xi] = False
    return base, extra[keep]


def _merge(frames: dict[str, list[pd.DataFrame]]) -> pd.DataFrame:
    timeline = concat(frames.get("trace_view", []))
    kinds = timeline["kind"].to_numpy(dtype=object)
    device = timeline["lane_kind"].to_numpy(dtype=object) != "host"
    timeline, kd = _enrich(timeline, concat(frames.get("kernel_details", [])),
                           device & (kinds != "marker"))
    timeline, comm = _enrich(timeline, concat(frames.get("communication", [])),
                             kinds == "collective")
    step_rows = concat(frames.get("step_trace", []))
    timeline, steps = _enrich(timeline, step_rows, kinds == "step", by_step=True)
    if len(step_rows) > len(steps):
        # a step_trace row that enriched a trace_view step: that step's times are real
        args = list(timeline["args"])
        for i in np.flatnonzero(timeline["kind"].to_numpy(dtype=object) == "step"):
            args[i] = {k: v for k, v in args[i].items() if k != "ts_synthetic"}
        timeline["args"] = args
    if len(steps):
        device = concat([kd, comm])
        ts = steps["ts_ns"].to_numpy(np.int64) + _anchors(steps["rank"], timeline, device)
        steps = steps.assign(ts_ns=_by_step(steps, ts, timeline, device))
    return concat([timeline, kd, comm, steps])


def _by_step(steps: pd.DataFrame, ts: np.ndarray, timeline: pd.DataFrame,
             device: pd.DataFrame) -> np.ndarray:
    """Start of each synthetic step of a rank without a timeline whose device events carry
    step numbers (kernel_details ``Step Id``, communication.json ``stepN``): the step's first
    device event minus its ``Preparing`` time (0 when the file has none), so that the step's
    window holds its own work; kept only when every step of the rank has one and the windows
    follow each other without overlapping, else ``ts`` (end to end) stays."""
    if not len(device) or device["step"].isna().all():
        return ts
    dev = device[device["step"].notna()]
    first = dev.groupby([dev["rank"].astype(np.int64), dev["step"].astype(np.int64)])[
        "ts_ns"].min()
    prep = np.array([int(a.get("preparing_ns", 0) or 0) for a in steps["args"]], np.int64)
    key = pd.MultiIndex.from_arrays([steps["rank"].astype(np.int64),
                                     steps["step"].astype("float64").fillna(-1).astype(np.int64)])
    got = first.astype("Int64").reindex(key)  # integer ns: epoch stamps exceed float64's
    missing = got.isna().to_numpy(bool)
    cand = got.fillna(0).to_numpy(np.int64) - prep
    out = ts.copy()
    has_tl = set(timeline["rank"].unique()) if len(timeline) else set()
    dur = steps["dur_ns"].to_numpy(np.int64)
    ranks = steps["rank"].to_numpy(np.int64)
    for r in np.unique(ranks):  # a few ranks
        rows = np.flatnonzero(ranks == r)
        c = cand[rows]
        if r in has_tl or missing[rows].any():
            continue
        order = np.argsort(c, kind="stable")
        start, end = c[order], c[order] + dur[rows][order]
        if (start[1:] >= end[:-1]).all():
            out[rows] = c
    return out


def _anchors(ranks: pd.Series, timeline: pd.DataFrame, device: pd.DataFrame) -> np.ndarray:
    """Where each rank's synthetic (end-to-end from 0) steps start: at the start of the rank's
    trace_view timeline when it has one, else at its earliest kernel_details /
    communication event (the device work the step summary describes), else -- a rank known
    from a summary alone -- at the earliest anchor of the other ranks (the same job's steps:
    not at 0, decades away from their clock), else at 0."""
    starts = timeline.groupby("rank")["ts_ns"].min() if len(timeline) else pd.Series(dtype="int64")
    if len(device):
        starts = starts.combine_first(device.groupby("rank")["ts_ns"].min())
    # integer ns throughout (a float NaN for a rank without an anchor would round the others)
    got = starts.astype("Int64").reindex(ranks.astype(np.int64).to_numpy())
    return got.fillna(int(starts.min()) if len(starts) else 0).to_numpy(np.int64)


def run(sources: list[Path], out: Path, options: dict[str, Any]) -> ImportResult:
    """Import Ascend profiler output at ``sources`` into the Hermes trace ``out``."""
    rank = int(options.get("rank", 0) or 0)
    files = discover([Path(s) for s in sources], rank)
    frames: dict[str, list[pd.DataFrame]] = {}
    flows: dict[str, Any] = {}
    stages: list[Any] = []
    skipped: dict[str, int] = {}
    aggregates: dict[str, dict[str, list[dict[str, Any]]]] = {}
    report = options.get("progress")  # callable(bytes of sources done), from the CLI bar
    done = 0
    for f in files:
        df, extra = PARSERS[f.kind](f.path, f.rank)
        done += f.path.stat().st_size
        if callable(report):
            report(done)
        frames.setdefault(f.kind, []).append(df)
        if f.kind == "trace_view" and extra:
            for k, v in extra.items():
                if isinstance(v, dict):
                    for kk, vv in v.items():
                        flows.setdefault(k, {}).setdefault(kk, 0)
                        flows[k][kk] += vv
                else:
                    flows[k] = flows.get(k, 0) + v
        elif f.kind == "step_trace" and extra:
            stages.extend(extra)
        elif f.kind == "communication" and extra:
            for k, v in extra.items():
                skipped[k] = skipped.get(k, 0) + v
        elif f.kind in AGGREGATES and extra:
            for r, rows in extra.items():
                aggregates.setdefault(f.kind, {}).setdefault(r, []).extend(rows)
    events = _merge(frames).sort_values(["rank", "ts_ns"], kind="stable", ignore_index=True)
    if len(events) == 0 and all(f.kind in AGGREGATES for f in files):
        raise ImportFormatError(
            "op_statistic / communication_matrix hold totals without times: no step to analyse",
            path=files[0].path, hint="import them with the profile's step_trace_time.csv, "
                                     "kernel_details.csv, communication.json or trace_view.json")
    if len(events) == 0:
        raise ImportFormatError("no events in the sources", path=files[0].path,
                                hint="the profile is empty; profile at least one step")
    by_src = {str(k): int(v) for k, v in events["src"].value_counts().items()}
    other = events["kind"] == "other"
    unknown = {str(k): int(v) for k, v in events.loc[other, "src"].value_counts().items()}
    device, warn = _device([Path(s) for s in sources], options)
    warnings = [w for w in (warn, _rank_clash(files)) if w]
    summary = {"importer": "ascend", "source_files": [str(f.path) for f in files],
               "events_by_source_category": by_src, "unknown_kept_as_other": unknown,
               "flows": flows, "skipped": skipped, "cluster_stage_rows": stages,
               **aggregates}
    ranks = tuple(int(r) for r in sorted(events["rank"].unique()))
    meta = TraceMeta(source="ascend", device=device, ranks=ranks,
                     collector={"mode": "import"}, import_summary=summary)
    table = {c: events[c] for c in FRAME_COLUMNS if c not in ("args", "src")}
    table["args"] = encode_args(events["args"])
    path = write_trace(out, table, meta)
    by_kind = {str(k): int(v) for k, v in events["kind"].value_counts().items()}
    return ImportResult(out=path, events=len(events), ranks=ranks, by_kind=by_kind,
                        by_source_category=by_src, unknown_kept=unknown,
                        warnings=tuple(warnings))
