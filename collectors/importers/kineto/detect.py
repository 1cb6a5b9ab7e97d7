"""Is a file a Kineto (PyTorch profiler) trace? Answered from its text, cheaply, and without
the heavy modules of the reader (detection runs for every source the CLI is given).

A Kineto file is one JSON object with a ``traceEvents`` array, but the array need not come
first: TraceLens writes a tens-of-KB ``metadata`` object before it, other tools
``deviceProperties`` or ``distributedInfo``. So detection streams the (decompressed) text until
it finds the ``"traceEvents": [`` key, up to the same limit the reader accepts, instead of
looking for markers in a fixed-size head. Two PyTorch files that are *not* Kineto traces are
recognized by their own shape and named by :func:`explain`: the Execution Trace (a host
operator graph, ``{"schema": ..., "nodes": [...]}``) and the memory-timeline raw export
(``[[time, action, bytes, category], ...]``).
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

#: How far into a file the ``"traceEvents"`` key may start (headers hold INFO logs, metadata).
MAX_HEADER = 64 * 1024 * 1024
_BLOCK = 64 * 1024
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
#: an Execution Trace opens with its schema and then the node list (ExecutionTraceObserver)
_ET = re.compile(rb'^\s*\{\s*"schema"\s*:\s*"[^"]*"[^\[{]*?"nodes"\s*:\s*\[')
#: memory_timeline.raw: a list of [time, action, bytes, category] integer rows
_MEM_TIMELINE = re.compile(rb"^\s*\[\s*\[\s*-?\d+\s*,\s*-?\d+\s*,\s*-?\d+\s*,\s*-?\d+\s*\]")


def is_gz(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"\x1f\x8b"
    except OSError:
        return path.suffix == ".gz"


def peek(path: Path, n: int = 4096) -> bytes:
    """The first ``n`` bytes of a file's (decompressed) text; b'' when unreadable."""
    try:
        if is_gz(path):
            with gzip.open(path, "rb") as fh:
                return fh.read(n)
        with open(path, "rb") as fh:
            return fh.read(n)
    except (OSError, EOFError, zlib.error):
        return b""


def _has_events_key(path: Path) -> bool:
    """True when the text is a JSON object holding a ``"traceEvents": [`` key within
    ``MAX_HEADER`` bytes; stops at the key, so a Kineto file costs one block or a few."""
    try:
        opener = gzip.open if is_gz(path) else open
        with opener(path, "rb") as fh:  # type: ignore[operator]
            tail = b""
            read = 0
            first = True
            while read < MAX_HEADER:
                block = fh.read(_BLOCK)
                if not block:
                    return False
                if first:
                    start = block.lstrip()[:1]
                    if not start:
                        continue
                    if start != b"{" or _ET.match(block):
                        return False
                    first = False
                if _KEY.search(tail + block):
                    return True
                tail = block[-64:]  # a key cut between two blocks
                read += len(block)
    except (OSError, EOFError, zlib.error):
        return False
    return False


def detect(path: Path) -> bool:
    """A .json/.json.gz file (any stem: ``*.pt.trace.json.gz`` too) holding a Kineto trace."""
    if not path.is_file() or not (path.name.endswith(".json") or path.name.endswith(".json.gz")):
        return False
    return _has_events_key(path)


def explain(path: Path) -> str | None:
    """What a PyTorch file that is not a Kineto trace is, when it is one Hermes knows."""
    if not path.is_file():
        return None
    head = peek(path, 8192)
    if _ET.match(head):
        return ("a PyTorch Execution Trace (ExecutionTraceObserver: the host operator graph, "
                "without device timings), not a profiler timeline; import the Kineto trace "
                "recorded alongside it (torch.profiler, e.g. *_trace.json.gz)")
    if _MEM_TIMELINE.match(head):
        return ("a PyTorch memory-timeline raw export (export_memory_timeline: [time, action, "
                "bytes, category] rows), not a profiler timeline; import the Kineto trace "
                "recorded with profile_memory=True: its [memory] events give the memory "
                "timeline")
    return None
