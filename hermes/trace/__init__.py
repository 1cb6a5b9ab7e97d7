"""The Hermes trace format: schema, writer, reader, validation, export."""

from hermes.trace.meta import TraceMeta
from hermes.trace.reader import Trace, iter_tables, load, load_table
from hermes.trace.schema import COLUMN_NAMES, COLUMNS, EVENT_KINDS, SCHEMA_VERSION
from hermes.trace.writer import RankedTraceWriter, TraceWriter, open_writer, write_trace

__all__ = [
    "COLUMNS",
    "COLUMN_NAMES",
    "EVENT_KINDS",
    "SCHEMA_VERSION",
    "RankedTraceWriter",
    "Trace",
    "TraceMeta",
    "TraceWriter",
    "iter_tables",
    "load",
    "load_table",
    "open_writer",
    "write_trace",
]
