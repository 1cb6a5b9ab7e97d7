"""Several profiler files (one per rank) as one trace, for ``hermes analyze`` and ``report``.

``hermes analyze rank0.pt.trace.json rank1.pt.trace.json`` reads the files as ``hermes import``
does with the same arguments: each file a rank (Kineto: from its ``distributedInfo``, else
its order), one importer for all of them, repeats of the same file imported once. The trace
is written into ``--save-trace`` when given (kept), else into a temporary directory removed
when the command ends.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from hermes.errors import UsageError


@contextlib.contextmanager
def imported(sources: list[Path], save: Path | None = None) -> Iterator[Path]:
    """A Hermes trace of the profiler files ``sources`` (two or more)."""
    from hermes.commands._util import check_output_path
    from hermes.commands.import_ import dedupe, expand_sources, pick_importer
    from hermes.diff.runs import is_hermes_trace

    for src in sources:
        if src.exists() and is_hermes_trace(src):
            raise UsageError("several sources are profiler files, one per rank; this is a "
                             "Hermes trace already", path=src,
                             hint="pass a Hermes trace alone (a per-rank directory holds "
                                  "every rank)")
    files, _ = dedupe(expand_sources(sources))
    importer = pick_importer(files, None)
    if save is not None:
        check_output_path(save, files, flag="--save-trace")
        importer.run(files, save, {})
        yield save
        return
    with tempfile.TemporaryDirectory(prefix="hermes-ranks-") as tmp:
        out = Path(tmp) / "trace"
        importer.run(files, out, {})
        yield out
