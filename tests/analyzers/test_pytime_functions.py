"""Python functions by own time (``analyzers/common/pytime.functions``) on hand-made frames."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hermes.analyzers.common.pytime import functions
from tests.tracegen import ev, frame

MS = 1_000_000


def _frames() -> list[dict]:
    def py(name: str, ts: int, dur: int, line: int) -> dict:
        return ev("python", name, ts, dur, lane="thread 1", lane_kind="host",
                  args=json.dumps({"file": "train.py", "line": line}))

    # train() [0, 10) ms holds step() [2, 5) and again step() [6, 7): own time train 6 ms,
    # step 3 + 1 = 4 ms; a kernel on the device is no Python frame
    return [py("train.py(10): train", 0, 10 * MS, 10), py("train.py(20): step", 2 * MS, 3 * MS, 21),
            py("train.py(20): step", 6 * MS, 1 * MS, 22), ev("kernel", "k", 0, 10 * MS)]


@pytest.mark.parametrize("name_type", ["category", "object"])
def test_own_time_per_function_inside_the_outside_time(name_type: str) -> None:
    df = frame(*_frames())
    df["name"] = df["name"].astype(name_type)
    for c in ("kind", "lane_kind", "lane"):
        df[c] = df[c].astype("category")
    outside = (np.array([0], np.int64), np.array([10 * MS], np.int64))
    got = functions(df, outside, steps=2)
    assert [(f["name"], f["time_ms"], f["ms_per_step"], f["share"]) for f in got] == [
        ("train.py(10): train", 6.0, 3.0, 0.6), ("train.py(20): step", 4.0, 2.0, 0.4)]
    # the line of the frame that spent most: step()'s first call (3 ms) at line 21
    assert (got[1]["file"], got[1]["line"]) == ("train.py", 21)
    # only the time outside counts: [0, 4) ms -> train 2 ms, step 2 ms (its first call's part)
    part = functions(df, (np.array([0], np.int64), np.array([4 * MS], np.int64)), steps=1)
    assert {f["name"]: f["time_ms"] for f in part} == {"train.py(10): train": 2.0,
                                                       "train.py(20): step": 2.0}
