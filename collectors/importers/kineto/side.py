"""What phase 1 of the Kineto import keeps besides the batches (:class:`Side`), the intermediate
batch schema, and small coding helpers shared by the phase-1 modules."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np
import pyarrow as pa

from hermes.trace.columns import codes, take  # noqa: F401 (the importer's own names)
from hermes.trace.comm_patterns import CommPatterns, default

ROLE_FLOW, ROLE_META, ROLE_EVENT = 0, 1, 2

INTERMEDIATE = pa.schema([
    ("kind", pa.int8()), ("lane", pa.dictionary(pa.int32(), pa.string())),
    ("lane_kind", pa.int8()), ("name", pa.dictionary(pa.int32(), pa.string())),
    ("ts_ns", pa.int64()), ("dur_ns", pa.int64()), ("step_n", pa.int32()),
    ("corr", pa.int64()), ("external_id", pa.int64()), ("stream", pa.int32()),
    ("unit", pa.int8()), ("flops", pa.float64()), ("bytes", pa.int64()),
    ("value", pa.float64()), ("args", pa.string()),
])


@dataclass
class Side:
    """Small per-file arrays gathered in phase 1 for phase 2."""

    host_steps: list[np.ndarray] = field(default_factory=list)  # rows of (start, end, N)
    dev_steps: list[np.ndarray] = field(default_factory=list)
    host_corr: list[np.ndarray] = field(default_factory=list)  # rows of (corr, ts)
    dev_corr: list[np.ndarray] = field(default_factory=list)
    # record_param_comms ops, rows of (external id, bytes, group code, seq, ts, lane code);
    # -1 = unknown
    rpc: list[np.ndarray] = field(default_factory=list)
    # collectives, rows of (global row, ts, group code, seq, bytes, external id, host lane code
    # or -1 on a device lane)
    colls: list[np.ndarray] = field(default_factory=list)
    groups: dict[str, int] = field(default_factory=dict)  # process group name -> code
    thread_names: dict[str, str] = field(default_factory=dict)
    #: pid of every device-side event: more than one means a multi-device process, whose
    #: device lanes are then named 'gpu <pid> stream <id>'
    device_pids: set = field(default_factory=set)
    by_category: Counter[str] = field(default_factory=Counter)
    unknown: Counter[str] = field(default_factory=Counter)
    flows: int = 0
    negative_dur: int = 0
    rows: int = 0
    ts_min: int | None = None
    #: which kernel names are communication (hermes/trace/comm_patterns.toml, user-extended)
    comm: CommPatterns = field(default_factory=default)
    #: host lane label -> code (matching a host collective to its record_param_comms op)
    lane_codes: dict[str, int] = field(default_factory=dict)


PH, CAT, NAME = attrgetter("ph"), attrgetter("cat"), attrgetter("name")
PID, TID, TS, DUR, ARGS = (attrgetter(a) for a in ("pid", "tid", "ts", "dur", "args"))
#: separates the device (pid) from the stream in phase 1 lane labels; phase 2 names the lane
DEVICE_SEP = "\x1f"


def member(values: np.ndarray, *members: int) -> np.ndarray:
    """``values`` in ``members`` (np.isin imports numpy.ma on first use)."""
    out = values == members[0]
    for m in members[1:]:
        out |= values == m
    return out
