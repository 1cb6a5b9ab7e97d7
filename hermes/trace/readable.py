"""What every trace writer does to a batch before it is stored, so that it reads back.

* an event whose end does not fit int64 nanoseconds is refused, named (nothing is stored that
  differs from what the source said);
* invalid UTF-8 in any text column is replaced by U+FFFD (``hermes.trace.textsafe``);
* ``args`` that are not JSON objects are wrapped (``hermes.trace.argsfix``).

The counts of what was replaced go into the writer's ``repairs`` (stored as
``extra.repaired`` in the metadata; docs/trace-format.md).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from hermes.errors import TraceFormatError
from hermes.trace.argsfix import wrap_args
from hermes.trace.textsafe import repair_utf8


def _int64s(chunk: pa.Array) -> np.ndarray:
    """An int64 chunk's values, nulls as 0, from its buffer (no pyarrow.compute: its import
    costs more than a small import's whole write)."""
    values = np.frombuffer(chunk.buffers()[1], np.int64)[chunk.offset: chunk.offset + len(chunk)]
    if chunk.null_count:
        bits = np.unpackbits(np.frombuffer(chunk.buffers()[0], np.uint8), bitorder="little")
        values = np.where(bits[chunk.offset: chunk.offset + len(chunk)].astype(bool), values, 0)
    return values


def _refuse_end_past_int64(table: pa.Table) -> None:
    """An event whose end (``ts_ns + dur_ns``) does not fit int64 nanoseconds is refused,
    named: what would be stored is not what the source said (docs/trace-format.md)."""
    for ts_c, dur_c, name_c in zip(table.column("ts_ns").chunks, table.column("dur_ns").chunks,
                                   table.column("name").chunks):
        ts, dur = _int64s(ts_c), _int64s(dur_c)
        with np.errstate(over="ignore"):
            end = ts + dur
        bad = np.flatnonzero((dur > 0) & (end < ts) | (dur < 0) & (end > ts))
        if len(bad):
            i = int(bad[0])
            raise TraceFormatError(
                f"event {name_c[i].as_py()!r} at ts_ns={int(ts[i])} with dur_ns={int(dur[i])} "
                f"ends past the int64 nanosecond range (+-{2**63 - 1} ns, about 292 years)"
                + (f"; {len(bad) - 1} more" if len(bad) > 1 else ""),
                hint="the source's times or durations are not in the unit it declares")


def readable(table: pa.Table, repairs: dict[str, int]) -> pa.Table:
    """``table`` as a reader can read it back (see the module doc); what was changed is
    added to ``repairs`` (key -> values changed)."""
    _refuse_end_past_int64(table)
    for i, name in enumerate(table.column_names):
        typ = table.schema.field(i).type
        if not (pa.types.is_string(typ) or pa.types.is_dictionary(typ)):
            continue
        col = table.column(i)
        chunks, changed = [], 0
        for chunk in col.chunks:
            fixed, n = repair_utf8(chunk)
            chunks.append(fixed)
            changed += n
        if changed:
            repairs[f"invalid_utf8.{name}"] = repairs.get(f"invalid_utf8.{name}", 0) + changed
            table = table.set_column(i, table.schema.field(i),
                                     pa.chunked_array(chunks, type=typ))
    args, wrapped = wrap_args(table.column("args"))
    if wrapped:
        repairs["args_not_object"] = repairs.get("args_not_object", 0) + wrapped
        table = table.set_column(table.schema.get_field_index("args"),
                                 table.schema.field("args"), args)
    return table
