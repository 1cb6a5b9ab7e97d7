"""Per-event facts of a step graph the what-if transforms read (kind, numbers, text, duration)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hermes.trace.args import args_of
from hermes.whatif.replay import StepGraph


def kinds(sg: StepGraph) -> np.ndarray:
    return sg.info["kind"].astype(str).to_numpy()


def number(sg: StepGraph, col: str) -> np.ndarray:
    """Column ``col`` of the graph's events as float (NaN where unknown or absent)."""
    if col not in sg.info.columns:
        return np.full(len(sg.info), np.nan)
    return np.asarray(pd.to_numeric(sg.info[col], errors="coerce"), np.float64)


def text(sg: StepGraph, col: str) -> np.ndarray:
    if col not in sg.info.columns:
        return np.full(len(sg.info), "", object)
    return sg.info[col].astype(object).where(sg.info[col].notna(), "").astype(str).to_numpy()


def args_at(sg: StepGraph, rows: np.ndarray) -> pd.Series | None:
    """The ``args`` text of graph events ``rows`` (index: ``rows``; None: the trace has no
    args): taken from the events for those rows only (a copy of every event's text costs
    ~20 ms at 200k events; a trace loaded with ``lazy_args`` reads just those rows' from its
    file)."""
    if sg.args is None:
        return None
    src = sg.info["src"].to_numpy(np.int64)[rows]
    return pd.Series(args_of(sg.args, src).array, index=sg.info.index[rows], name="args")


def duration(sg: StepGraph) -> np.ndarray:
    return (sg.info["end"] - sg.info["start"]).to_numpy(np.float64)
