"""Tiny hand-made traces for tests (diff-test style: a few events, answers computed by hand)."""

from __future__ import annotations

from typing import Any

import pandas as pd


def events(*rows: dict[str, Any]) -> dict[str, list[Any]]:
    """Columns from rows; rows give rank, lane, lane_kind, kind, name, ts_ns, dur_ns (+ any)."""
    cols: dict[str, list[Any]] = {}
    keys: list[str] = []
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    for k in keys:
        cols[k] = [r.get(k) for r in rows]
    return cols


def ev(kind: str, name: str, ts: int, dur: int, *, rank: int = 0, lane: str | None = None,
       lane_kind: str | None = None, **extra: Any) -> dict[str, Any]:
    if lane_kind is None:
        lane_kind = "device" if kind in ("kernel", "memset", "collective") or \
            kind.startswith("memcpy") else "host"
    if lane is None:
        lane = "stream 7" if lane_kind == "device" else "thread 1"
    return {"rank": rank, "lane": lane, "lane_kind": lane_kind, "kind": kind, "name": name,
            "ts_ns": ts, "dur_ns": dur, **extra}


def frame(*rows: dict[str, Any]) -> pd.DataFrame:
    """One rank's events as the analyzers see them: the rows, plus the nullable columns
    (corr_id, stream as Int64; value, args, bytes) that a loaded trace always has."""
    df = pd.DataFrame(events(*rows)) if rows else pd.DataFrame(
        {c: [] for c in ("rank", "lane", "lane_kind", "kind", "name", "ts_ns", "dur_ns")})
    for c in ("corr_id", "stream"):
        if c not in df.columns:
            df[c] = pd.array([None] * len(df), dtype="Int64")
    for c in ("value", "args", "bytes"):
        if c not in df.columns:
            df[c] = None
    return df
