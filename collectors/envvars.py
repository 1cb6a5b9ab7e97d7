"""Integers a profiled process reads from its environment (torchrun's ``RANK``,
``WORLD_SIZE``)."""

from __future__ import annotations

import os

from hermes.errors import UsageError


def env_int(name: str, default: int, lo: int = 0, hi: int = 2**31 - 1) -> int:
    """An integer from the environment, ASCII digits in [lo, hi] only: '²', '1.5' or 10**30
    are refused by name, never wrapped around."""
    raw = os.environ.get(name, "")
    text = raw.strip()
    if not text:
        return default
    if not (text.isascii() and text.isdigit() and len(text) <= 10 and lo <= int(text) <= hi):
        raise UsageError(f"environment variable {name}={raw[:40]!r} is not an integer from "
                         f"{lo} to {hi}")
    return int(text)
