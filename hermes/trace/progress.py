"""What a profiled run's progress files say (``hermes.trace.segments`` writes them): how far
each rank of a run that did not close got, and whether its writer is still alive.

A progress file (``.rank-00003.progress``) holds one record, ``{"rank": 3, "pid": ...,
"steps": N, "last_step": S}`` and, on the next line, the CRC-32 of that text (8 hex digits):
the writer stores it in place through a shared mapping, so a record a death cut short is
told by its CRC (and read as unknown); while it journals each step, the journal's last
complete entry carries the count instead (``hermes.trace.journal.steps_of``). The writer
holds the file's ``flock`` while it runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hermes.trace.journal import held as _holder
from hermes.trace.journal import (  # noqa: F401 - (the record's helpers live there)
    RECORD_BYTES,
    journals,
    keep_count,
    record_line,
    record_of,
    recover,
    steps_of,
)


def progress_dir(path: str | os.PathLike[str]) -> Path | None:
    """Where the progress files of a trace at ``path`` are (the directory, or the
    ``.partial`` directory of a ``.parquet`` path), None when there is none."""
    p = Path(path)
    if p.suffix == ".parquet" or p.is_file():
        part = p.with_name(p.name + ".partial")
        return part if part.is_dir() else None
    return p if p.is_dir() else None


def interrupted(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The ranks of a profiled run at ``path`` that did not close: per rank its ``rank``,
    ``pid``, ``steps`` (completed steps the monitor saw: every one is saved, in segments and
    the journal, unless a write failed) and ``running`` (the writer is alive)."""
    d = progress_dir(path)
    if d is None:
        return []
    out = []
    for f in sorted(d.glob(".*.progress")):
        rec = record_of(f)
        steps = rec.get("steps")
        got = steps_of(f.with_name(f.name[: -len(".progress")] + ".journal"))
        if got is not None and rec.get("pid") in (None, got[0]) and (
                not isinstance(steps, int) or got[1] > steps):  # counted by its last entry
            steps = got[1]
        out.append({"rank": rec.get("rank"), "pid": rec.get("pid"),
                    "steps": steps, "running": bool(_holder(f))})
    return out


def busy(path: str | os.PathLike[str]) -> str | None:
    """Why a new profiled run must not write to ``path`` (another run is writing there, or
    an interrupted one left its steps), or None."""
    for rec in interrupted(path):
        what = "is being written by a running" if rec["running"] else \
            "holds the saved steps of an interrupted"
        return f"{what} hermes profile run (pid {rec['pid']}, rank {rec['rank']})"
    return None


def interrupted_note(path: str | os.PathLike[str]) -> str | None:
    """One line saying how far an interrupted (or still running) profiled run got, or None
    (a killed run's journals are recovered first: :func:`hermes.trace.journal.recover`)."""
    recs = interrupted(path)
    if not recs:
        return None
    d = progress_dir(path)
    lost = recover(d) if d is not None and journals(d) else []
    running = [r for r in recs if r["running"]]
    reached = ", ".join(f"rank {r['rank'] if r['rank'] is not None else 0} "
                        f"{r['steps']} step(s)" for r in recs[:8])
    more = f" and {len(recs) - 8} more rank(s)" if len(recs) > 8 else ""
    state = "is still running" if running else "was interrupted (killed before it closed)"
    saved = "the trace holds every step saved by then (each one as it completed)" if not lost \
        else (f"the steps journaled since the last save of {len(lost)} rank(s) cannot be read "
              f"here ({lost[0].parent} is not writable: copy it and read the copy)")
    return f"the profiled run {state}; the monitor saw {reached}{more} completed: {saved}"
