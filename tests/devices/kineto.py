"""A shared Kineto trace read straight from its JSON, for checks independent of Hermes' importer:
the device dict as the importer stores it (name + deviceProperties[0]) and the kernels' names and
durations."""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd


@lru_cache(maxsize=16)
def read(path: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    with gzip.open(path, "rt") as f:
        d = json.load(f)
    props = d.get("deviceProperties") if isinstance(d, dict) else None
    device: dict[str, Any] = {}
    if isinstance(props, list) and props:
        device = {"name": str(props[0].get("name", "")), "kineto": props[0]}
    events = d.get("traceEvents", []) if isinstance(d, dict) else d
    rows = [(e.get("name", ""), float(e.get("dur", 0) or 0)) for e in events
            if isinstance(e, dict) and e.get("cat") in ("kernel", "Kernel")]
    return device, pd.DataFrame(rows, columns=["name", "dur_us"])
