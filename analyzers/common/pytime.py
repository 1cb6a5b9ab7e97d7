"""Python time outside operators: the host's own Python code, by function and line.

``python`` events are Python frames: the PyTorch profiler's ``with_stack`` frames, or the
stack samples ``hermes profile`` records in fine mode (``args.source = "hermes.sampler"``, with
the line most samples saw in ``args.line``). Each instant of a host lane belongs to the
innermost frame active there, so a frame's *self* time is its time minus its callees' frames.

The ``cpu`` analyzer hands in ``outside``: the device-idle time the host spends in dispatch-class
work (its ``operator_dispatch`` claim) that no non-Python host event covers -- time in Python
code between operators. :func:`split` carves that out of the dispatch claim;
:func:`functions` names who spends it: every frame's self time inside ``outside``, summed per
function, largest first. Vectorized: one sort of the frames' start/end nodes, one overlap
pass of the segments with ``outside``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from hermes.analyzers.common import intervals as iv
from hermes.analyzers.common.names import col, is_, name_matches
from hermes.analyzers.common.nesting import event_nodes
from hermes.analyzers.common.spans import spans
from hermes.trace.args import args_of

TOP = 5
#: the name prefix the sampler gives frames of Hermes's own hooks (``pysample.OWN``)
OWN_NAME = r"^\[hermes\] "


def python_mask(ev: pd.DataFrame) -> np.ndarray:
    return is_(ev, "kind", "python") & is_(ev, "lane_kind", "host")


def own_mask(ev: pd.DataFrame) -> np.ndarray:
    """Frames of Hermes's own hooks (``hermes profile``'s sampler names them ``[hermes] ...``)."""
    return python_mask(ev) & name_matches(ev["name"], OWN_NAME)


def split(ev: pd.DataFrame, dispatch: np.ndarray, claimed: iv.Union
          ) -> tuple[iv.Union, iv.Union, iv.Union]:
    """``claimed`` (the dispatch claim) as (Python-only time, the rest, the collector's own):
    the time no dispatch-class event other than a Python frame covers is Python's
    (``dispatch``: the dispatch class's mask), except where the innermost frame is one of
    Hermes's own hooks (the collector's time: neither the job's Python nor its dispatch)."""
    py = python_mask(ev)
    if not py.any():
        return iv.EMPTY, claimed, iv.EMPTY
    own = iv.intersect(claimed, spans(ev, own_mask(ev)))
    others = spans(ev, dispatch & ~py)
    only = iv.subtract(iv.subtract(iv.intersect(claimed, spans(ev, py)), others), own)
    return only, iv.subtract(iv.subtract(claimed, only), own), own


def _segments(ev: pd.DataFrame, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(owner position in ``idx``, segment start, segment end): each lane's timeline cut at
    every frame start/end, each piece owned by the innermost frame active there."""
    t, ln, st, eid, active = event_nodes(ev, idx)
    owner = active[:-1]
    ok = (owner >= 0) & (ln[1:] == ln[:-1]) & (t[1:] > t[:-1])
    return owner[ok], t[:-1][ok], t[1:][ok]


def _where(args: Any) -> tuple[str | None, int | None]:
    """(file, line) a frame's args record (the sampler's), else (None, None)."""
    if not isinstance(args, str) or not args.startswith("{"):
        return None, None
    try:
        a = json.loads(args)
    except ValueError:
        return None, None
    line = a.get("line")
    return a.get("file"), int(line) if isinstance(line, int) else None


def functions(ev: pd.DataFrame, outside: iv.Union, steps: int, top: int = TOP
              ) -> list[dict[str, Any]]:
    """The functions whose own frames spend the time ``outside`` (ns), largest first:
    ``{"name", "file", "line", "time_ms", "ms_per_step", "share"}`` (share of ``outside``)."""
    total = iv.total(outside)
    idx = np.flatnonzero(python_mask(ev))
    if total == 0 or idx.size == 0:
        return []
    owner, a, b = _segments(ev, idx)
    ns = iv.overlap_per_interval(a, b, outside)
    per_event = np.bincount(owner, weights=ns, minlength=idx.size)
    if isinstance(ev["name"].dtype, pd.CategoricalDtype):  # by code: no string per event
        names = col(ev, "name")[idx]
    else:
        names = ev["name"].iloc[idx].to_numpy(object).astype(str)
    frame = pd.DataFrame({"name": names, "ns": per_event})
    by = frame.groupby("name", sort=False)["ns"].sum()
    by = by[by > 0].sort_values(ascending=False, kind="stable").head(top)
    # the line of the frame of each function that spent the most (args read for those only)
    names_np = frame["name"].to_numpy()
    best = []
    for name in by.index:
        pos = np.flatnonzero(names_np == name)
        best.append(pos[np.argmax(per_event[pos])])
    args = args_of(ev, idx[np.asarray(best, np.int64)]).to_numpy(object)
    out = []
    for (name, t_ns), arg in zip(by.items(), args, strict=True):
        file, line = _where(arg)
        out.append({"name": str(name), "file": file, "line": line,
                    "time_ms": round(float(t_ns) / 1e6, 3),
                    "ms_per_step": round(float(t_ns) / 1e6 / max(steps, 1), 3),
                    "share": round(float(t_ns) / total, 4)})
    return out
