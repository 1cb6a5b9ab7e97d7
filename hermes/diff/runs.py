"""A run to compare: its analysis, its step windows matched by order, and per-step totals per name.

``open_runs(paths)`` accepts Hermes traces (a ``.parquet`` file or a directory of per-rank files)
and anything ``hermes import`` reads; the latter are imported into a temporary directory that
lives as long as the context. Steps are matched by their order within each rank, not by number:
``ProfilerStep#3`` of one run is compared with ``ProfilerStep#7`` of another when both are the
first analyzed step (a warm-up step the analysis left out is left out here too).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.engine.result import Analysis
from hermes.diff.names import normalize_series
from hermes.errors import ImportFormatError
from hermes.trace.schema import COMM_KINDS, COMPUTE_KINDS

#: What a name's row is about, by event kind: framework operators on the host, user ranges
#: (``record_function``, NCCL annotations), and device work (kernels, copies, collectives).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "operator": ("host_op",),
    "range": ("marker",),
    "kernel": (*COMPUTE_KINDS, *COMM_KINDS),
}
_COLUMNS = ["rank", "kind", "name", "step", "ts_ns", "dur_ns"]
_WINDOW_COLUMNS = ["rank", "ordinal", "step", "start_ns", "end_ns", "dur_ns"]
#: Trace files a directory of profiler output is expanded to when no importer claims it
#: (the same patterns as ``hermes import``).
_PATTERNS = ("*.json", "*.json.gz")


@dataclass
class Run:
    """One side of a comparison."""

    label: str
    path: Path
    analysis: Analysis
    #: One row per (rank, analyzed step): ``rank, ordinal, step, start_ns, end_ns, dur_ns``.
    windows: pd.DataFrame
    #: One row per (rank, ordinal, category, name) with ``dur_ns`` (sum) and ``calls``.
    totals: pd.DataFrame
    #: The raw name that costs the most behind each (category, normalized name).
    raw_names: dict[tuple[str, str], str]

    @property
    def ranks(self) -> list[int]:
        return sorted(int(r) for r in self.windows["rank"].unique())

    def step_times(self, ranks: Sequence[int] | None = None) -> np.ndarray:
        """Wall time per step (ns), a step's time being its slowest rank's, in step order."""
        w = self.windows if ranks is None else self.windows[self.windows["rank"].isin(ranks)]
        return w.groupby("ordinal")["dur_ns"].max().sort_index().to_numpy(np.float64)


def is_hermes_trace(path: Path) -> bool:
    if path.is_dir():
        return any(f.suffix == ".parquet" and not f.name.startswith(".") for f in path.iterdir())
    return path.suffix == ".parquet"


def import_trace(src: Path, out: Path) -> Path:
    """Import profiler output ``src`` (a file or a directory) into a Hermes trace at ``out``.

    The one place outside ``hermes import`` that calls the importer registry (its public
    ``detect``/``get``): ``hermes diff``, ``hermes analyze`` and ``hermes report`` all import
    through it or :func:`import_in_memory` (the latter two via ``hermes.commands._util``).
    """
    imp, files = _importer(src)
    imp.run(files, out, {})
    return out


def import_in_memory(src: Path) -> Any:
    """Profiler output ``src`` imported straight into a :class:`hermes.Trace` (the events
    ``hermes.trace.load`` would give of the imported file, no file written) when it is a single
    file whose importer can (``Importer.in_memory``: Kineto JSON); None otherwise (import it
    with :func:`import_trace`)."""
    if not src.is_file():
        return None
    imp, files = _importer(src)
    if not imp.in_memory:
        return None
    return imp.run(files, src.with_name(src.name + ".parquet"), {"in_memory": True}).trace


def _importer(src: Path) -> tuple[Any, list[Path]]:
    """The importer that reads ``src`` and the files it reads (a directory no importer claims
    is expanded to its trace files, as ``hermes import`` does)."""
    from hermes.collectors import importers

    imp = importers.detect(src)
    files = [src]
    if imp is None and src.is_dir():  # a folder of trace files, as ``hermes import`` expands it
        files = sorted({f for pat in _PATTERNS for f in src.glob(pat)
                        if f.is_file() and not f.name.startswith(".")})
        imp = importers.detect(files[0]) if files else None
    if imp is None:
        readable = "; ".join(f"{i.description} ({', '.join(i.patterns)})"
                             for i in importers.IMPORTERS.values())
        raise ImportFormatError("neither a Hermes trace nor profiler output any importer "
                                "recognizes", path=src,
                                hint="Hermes reads a .parquet trace or a directory of per-rank "
                                     f".parquet files; {readable}")
    return importers.get(imp.name), files


def _windows(a: Analysis) -> pd.DataFrame:
    frames = []
    for r, rr in a.per_rank.items():
        if "steps" not in rr:
            continue
        w = rr["steps"].tables["windows"][["step", "start_ns", "end_ns", "dur_ns"]]
        w = w.sort_values("start_ns")
        frames.append(w.assign(rank=int(r), ordinal=np.arange(len(w))))
    if not frames:
        return pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in _WINDOW_COLUMNS})
    df = pd.concat(frames, ignore_index=True)
    return df[_WINDOW_COLUMNS].astype(np.int64)


def _step_of(ev: pd.DataFrame, windows: pd.DataFrame) -> np.ndarray:
    """Each event's step ordinal (-1: outside every analyzed step). An event's own step number
    is used when it has one; device work the importer could not tie to a step (no correlation
    id) falls in the step window its start lies in, on its rank's clock."""
    out = np.full(len(ev), -1, dtype=np.int64)
    ranks = ev["rank"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    step = ev["step"].astype("Int64").fillna(-1).to_numpy(np.int64)
    for r, w in windows.groupby("rank"):
        on = ranks == r
        # by number: the ordinal of the event's own step
        num = dict(zip(w["step"].to_numpy(), w["ordinal"].to_numpy(), strict=True))
        by_num = pd.Series(step[on]).map(num).fillna(-1).to_numpy(np.int64)
        # by time: the window the start lies in (windows sorted by start, not overlapping)
        starts, ends = w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
        i = np.searchsorted(starts, ts[on], side="right") - 1
        inside = (i >= 0) & (ts[on] < ends[i.clip(min=0)])
        by_time = np.where(inside, w["ordinal"].to_numpy()[i.clip(min=0)], -1)
        out[on] = np.where(step[on] >= 0, by_num, by_time)
    return out


def _totals(trace_path: Path, windows: pd.DataFrame, skip: Sequence[str] = ()
            ) -> tuple[pd.DataFrame, dict[tuple[str, str], str]]:
    from hermes.trace import load

    ev = load(trace_path, columns=_COLUMNS, skip=skip).events  # (skip: files not read)
    kind_to_cat = {k: c for c, kinds in CATEGORIES.items() for k in kinds}
    cat = ev["kind"].astype(object).map(kind_to_cat)
    keep = cat.notna().to_numpy()
    ev = ev.loc[keep].assign(category=cat[keep].to_numpy())
    ev["ordinal"] = _step_of(ev, windows)
    ev = ev.loc[ev["ordinal"].to_numpy() >= 0, ["rank", "ordinal", "category", "name",
                                                 "dur_ns"]]
    ev["raw"] = ev["name"].astype(object)
    ev["name"] = normalize_series(ev["name"]).astype(object)
    totals = (ev.groupby(["rank", "ordinal", "category", "name"], sort=False)["dur_ns"]
              .agg(dur_ns="sum", calls="size").reset_index())
    by_raw = ev.groupby(["category", "name", "raw"], sort=False)["dur_ns"].sum().reset_index()
    top = by_raw.sort_values("dur_ns", ascending=False).drop_duplicates(["category", "name"])
    raw = {(c, n): r for c, n, r in zip(top["category"], top["name"], top["raw"], strict=True)}
    return totals, raw


def load_run(path: Path, label: str, analysis: Analysis | None = None) -> Run:
    """Analyze a Hermes trace (unless ``analysis`` is given) and gather its per-step totals."""
    from hermes.analyzers.engine.run import analyze

    a = analysis if analysis is not None else analyze(path)
    windows = _windows(a)
    totals, raw = _totals(path, windows, a.unread_files)
    return Run(label=label, path=path, analysis=a, windows=windows, totals=totals, raw_names=raw)


@contextlib.contextmanager
def trace_paths(paths: Sequence[Path]) -> Iterator[list[Path]]:
    """Hermes trace paths for ``paths``; profiler outputs are imported into a temporary
    directory removed on exit."""
    with tempfile.TemporaryDirectory(prefix="hermes-diff-") as tmp:
        out: list[Path] = []
        for i, p in enumerate(paths):
            p = Path(p)
            if not p.exists():
                raise ImportFormatError("no such file or directory", path=p)
            out.append(p if is_hermes_trace(p) else import_trace(p, Path(tmp) / f"run{i}.parquet"))
        yield out


@contextlib.contextmanager
def open_runs(paths: Sequence[Path], labels: Sequence[str] | None = None
              ) -> Iterator[list[Run]]:
    """Load every path as a :class:`Run` (labels default to the paths as given)."""
    names: list[Any] = list(labels) if labels is not None else [str(p) for p in paths]
    with trace_paths(paths) as traces:
        yield [load_run(t, str(n)) for t, n in zip(traces, names, strict=True)]
