"""Hermes: profiling and bottleneck analysis for ML training on accelerators.

Public API (stable): ``hermes.load`` reads a trace; the collectors add ``hermes.profile``,
``hermes.step`` and ``hermes.region``; the analyzers add ``hermes.analyze``.
"""

from __future__ import annotations

from typing import Any

from hermes._version import __version__
from hermes.errors import HermesError

# Names provided by other parts of the package, imported on first use so that
# `import hermes` stays light: the CLI starts without pandas/pyarrow, and collectors
# import nothing heavy.
_LAZY = {
    "Trace": "hermes.trace.reader",
    "TraceMeta": "hermes.trace.meta",
    "load": "hermes.trace.reader",
    "profile": "hermes.collectors.api",
    "step": "hermes.collectors.api",
    "region": "hermes.collectors.api",
    "analyze": "hermes.pipeline",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hermes' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["HermesError", "__version__", *_LAZY]
