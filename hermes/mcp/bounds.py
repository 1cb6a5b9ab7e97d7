"""Results an agent can hold: at most so many rows and bytes, and saying so when cut.

Every tool result passes through :func:`bounded`. A tool with one main table (findings, kernels)
pages it: ``offset`` and ``limit`` pick the rows, and the result says how many there are in all
(``total``) and what to ask for next (``rest``). Any other list in a result (the per-rank
breakdown of a 4,096-rank job, a finding's evidence) is cut at ``max_rows`` items. When the JSON
is still over ``max_bytes``, the row limits are halved until it fits. ``truncated`` is true
whenever anything was left out, and ``truncation`` then names each cut list with its full length.
"""

from __future__ import annotations

import json
from typing import Any

#: Defaults of ``hermes mcp --max-rows`` / ``--max-bytes``.
MAX_ROWS = 100
MAX_BYTES = 256 * 1024


def size(doc: Any) -> int:
    return len(json.dumps(doc, default=str).encode())


def _cap(obj: Any, limit: int, where: str, cut: dict[str, int]) -> Any:
    """``obj`` with every list longer than ``limit`` cut to it (their lengths in ``cut``)."""
    if isinstance(obj, dict):
        return {k: _cap(v, limit, f"{where}.{k}" if where else str(k), cut)
                for k, v in obj.items()}
    if isinstance(obj, list):
        if len(obj) > limit:
            cut[where] = len(obj)
            obj = obj[:limit]
        return [_cap(v, limit, f"{where}[]", cut) for v in obj]
    return obj


def bounded(doc: dict[str, Any], *, main: str | None = None, offset: int = 0,
            limit: int | None = None, max_rows: int = MAX_ROWS, max_bytes: int = MAX_BYTES,
            rest: str = "") -> dict[str, Any]:
    """``doc`` within the caps, with ``truncated`` (and ``truncation``, ``rest``) set.

    ``main``: the key of the table to page (``offset``, ``limit`` at most ``max_rows``);
    ``rest``: how to get what was left out, for the agent (``{offset}``: the next row)."""
    offset = max(0, int(offset))
    rows: list[Any] = list(doc.get(main) or []) if main else []
    want = min(max_rows if limit is None else max(1, int(limit)), max_rows)
    nested = max_rows
    while True:
        cut: dict[str, int] = {}
        out = {k: v for k, v in doc.items() if k != main}
        out = _cap(out, nested, "", cut)
        if main:
            page = rows[offset:offset + want]
            out[main] = _cap(page, nested, f"{main}[]", cut)
            out.update(total=len(rows), offset=offset, returned=len(page))
            more = offset + len(page) < len(rows)
        else:
            more = False
        out["truncated"] = bool(cut) or more
        if cut:
            out["truncation"] = cut
        if out["truncated"]:
            nxt = offset + (len(out[main]) if main else 0)
            out["rest"] = rest.format(offset=nxt) if rest else \
                "lists were cut at the server's row or byte cap"
        if size(out) <= max_bytes or (want <= 1 and nested <= 1):
            break
        if main and want > 1:
            want = max(1, want // 2)
        else:
            nested = max(1, nested // 2)
    if size(out) > max_bytes:
        return {"truncated": True, "error": f"even one row is over the server's byte cap "
                f"({max_bytes} bytes)", "rest": rest.format(offset=offset) if rest else ""}
    return out
