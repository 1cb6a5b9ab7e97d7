"""The Hermes trace format: schema, writer, reader, validation, export.

The names below are imported on first use, so that importing one submodule (the writer, say)
does not pull in the reader and pandas.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "TraceMeta": "hermes.trace.meta",
    "Trace": "hermes.trace.reader",
    "iter_tables": "hermes.trace.reader",
    "load": "hermes.trace.reader",
    "load_table": "hermes.trace.reader",
    "COLUMN_NAMES": "hermes.trace.schema",
    "COLUMNS": "hermes.trace.schema",
    "EVENT_KINDS": "hermes.trace.schema",
    "SCHEMA_VERSION": "hermes.trace.schema",
    "RankedTraceWriter": "hermes.trace.writer",
    "TraceWriter": "hermes.trace.writer",
    "open_writer": "hermes.trace.writer",
    "write_trace": "hermes.trace.writer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hermes.trace' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = sorted(_LAZY)
