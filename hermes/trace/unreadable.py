"""What a Parquet file that cannot be read raises, and the one error every reader turns it into
(the trace reader, the lazily read args, the Chrome export)."""

from __future__ import annotations

import os

import pyarrow as pa

from hermes.errors import TraceFormatError

#: What Arrow raises for a Parquet file it cannot read: a corrupt footer or page may also name
#: a type Arrow does not implement (an integer of 4 bits), not only an invalid one.
UNREADABLE = (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError)


def row_data_error(exc: BaseException, path: str | os.PathLike[str]) -> TraceFormatError:
    """A row group or page of ``path`` that could not be read (``exc``, one of
    :data:`UNREADABLE`), as the file's one-line error."""
    return TraceFormatError(f"cannot read row data ({str(exc).splitlines()[0]})", path=path,
                            hint="the file may be truncated; re-create it")
