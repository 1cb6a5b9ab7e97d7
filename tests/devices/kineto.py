"""A shared trace read straight from its JSON, for checks independent of Hermes' importers:

* Kineto (``trace``/``read``): the device dict as the importer stores it (name +
  deviceProperties[0]), the device tasks' names and durations (``kernel``, old ``Kernel``,
  MTIA's ``mtia_ccp_events``), the distinct host-side names by category (``cpu_op``,
  ``user_annotation``, ``python_function``, the runtime / driver calls) and ``distributedInfo``
  (world size, process groups);
* Ascend ``trace_view.json`` (``ascend_trace_view``): the tasks of the "Ascend Hardware"
  process (the device lanes) with their ``Task Type``, and the host names of the other
  processes (Python, CANN).

Only the fields read here are decoded (msgspec with a typed schema; the json module takes
~10x as long on the 60-90 MB traces), each file once per session."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

#: Kineto categories of device tasks (kernels; MTIA's compute-core events)
DEVICE_CATS = ("kernel", "Kernel", "mtia_ccp_events")
#: Kineto categories of host-side names -> the event kind they are in a Hermes trace
HOST_CATS = {"cpu_op": "host_op", "user_annotation": "marker", "python_function": "python",
             "python": "python", "cuda_runtime": "runtime", "cuda_driver": "runtime",
             "mtia_runtime": "runtime"}


class _Event(msgspec.Struct):
    name: Any = ""
    cat: Any = ""
    dur: Any = 0.0
    ph: Any = ""
    pid: Any = None
    args: Any = None


class _KinetoEvent(msgspec.Struct):
    name: Any = ""
    cat: Any = ""
    dur: Any = 0.0


class _Kineto(msgspec.Struct):
    traceEvents: list[_KinetoEvent] = msgspec.field(default_factory=list)  # (the files' keys)
    deviceProperties: Any = None
    distributedInfo: Any = None


@dataclass(frozen=True)
class Trace:
    device: dict[str, Any]
    #: device tasks: name, dur_us, cat (one row per task)
    kernels: pd.DataFrame
    #: distinct host-side names: name, cat, kind (the Hermes event kind of the category)
    host: pd.DataFrame
    #: ``distributedInfo`` ({} where absent)
    distributed: dict[str, Any]


def _frame(names: list[Any], cats: list[Any], durs: list[Any]) -> pd.DataFrame:
    return pd.DataFrame({"name": pd.Series(names, dtype=object).astype(str),
                         "cat": pd.Series(cats, dtype=object).astype(str),
                         "dur_us": pd.to_numeric(pd.Series(durs, dtype=object),
                                                 errors="coerce").fillna(0.0)})


@lru_cache(maxsize=64)
def trace(path: Path) -> Trace:
    with gzip.open(path, "rb") as f:
        doc = msgspec.json.decode(f.read(), type=_Kineto)
    props = doc.deviceProperties
    device: dict[str, Any] = {}
    if isinstance(props, list) and props and isinstance(props[0], dict):
        device = {"name": str(props[0].get("name", "")), "kineto": props[0]}
    ev = doc.traceEvents
    df = _frame([e.name for e in ev], [e.cat for e in ev], [e.dur for e in ev])
    dev = df["cat"].isin(DEVICE_CATS).to_numpy(bool)
    host = df.loc[df["cat"].isin(list(HOST_CATS)).to_numpy(bool), ["name", "cat"]] \
        .drop_duplicates().reset_index(drop=True)
    host["kind"] = host["cat"].map(HOST_CATS)
    dist = doc.distributedInfo if isinstance(doc.distributedInfo, dict) else {}
    return Trace(device, df[dev].reset_index(drop=True), host, dist)


def read(path: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    """(the device dict, the kernels' names and durations: ``kernel`` / ``Kernel`` events)."""
    t = trace(path)
    k = t.kernels
    return t.device, k.loc[k["cat"].isin(("kernel", "Kernel")).to_numpy(bool),
                           ["name", "dur_us"]].reset_index(drop=True)


@lru_cache(maxsize=4)
def ascend_trace_view(path: Path) -> Trace:
    """An Ascend ``trace_view.json``: the "Ascend Hardware" process' complete events are the
    device tasks (their ``Task Type`` as ``cat``); the other processes' are host names (kind
    ``python`` for ``python_function``, ``host_op`` for ``cpu_op``, ``runtime`` for CANN's)."""
    ev = msgspec.json.decode(path.read_bytes(), type=list[_Event])
    procs = {e.pid: str((e.args or {}).get("name", "")) for e in ev
             if e.ph == "M" and e.name == "process_name" and isinstance(e.args, dict)}
    x = [e for e in ev if e.ph == "X"]
    proc = np.array([procs.get(e.pid, "") for e in x], dtype=object)
    task = [str((e.args or {}).get("Task Type", "")) if isinstance(e.args, dict) else ""
            for e in x]
    df = _frame([e.name for e in x], [e.cat or "" for e in x], [e.dur for e in x])
    dev = proc == "Ascend Hardware"
    kernels = df[dev].assign(cat=np.asarray(task, dtype=object)[dev]).reset_index(drop=True)
    host = df[~dev].assign(proc=proc[~dev])
    host = host[np.isin(host["proc"].to_numpy(object), ("Python", "CANN"))]
    kind = np.where(host["proc"].to_numpy(object) == "CANN", "runtime",
                    host["cat"].map({"python_function": "python"}).fillna("host_op")
                    .to_numpy(object))
    host = pd.DataFrame({"name": host["name"].to_numpy(object),
                         "cat": host["cat"].to_numpy(object), "kind": kind}) \
        .drop_duplicates().reset_index(drop=True)
    return Trace({}, kernels, host, {})
