"""Which files of a per-rank directory a rank is read from, and the checks that the rows read
for a rank are that rank's alone (:mod:`hermes.analyzers.engine.run`'s workers call these)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import pandas as pd

from hermes.errors import TraceFormatError
from hermes.trace.validate import rank_errors


def check_rank(events: pd.DataFrame, rank: int, where: str) -> None:
    """Every row read for ``rank`` holds that rank: a per-rank file (named in ``where``) whose
    footer lists it but whose rows hold another (a file renamed or rewritten by hand) is
    refused, not analyzed under the footer's rank while the rows' own rank goes unnamed."""
    errors = rank_errors(events, (int(rank),), where)
    if errors:
        raise TraceFormatError(errors[0], hint="the file's footer and rows disagree; re-create "
                                               "it (`hermes validate` lists the problems)")


def load_rank(path: str | os.PathLike[str], rank: int) -> Any:
    """Rank ``rank``'s trace as the executor reads it: from its own file of a per-rank
    directory (else from the directory, but the files whose footer cannot be read: the driver
    lists those as missing), its args left in the file (``lazy_args``)."""
    from hermes.trace import load

    src = rank_file(str(path), rank)
    skip = rank_files(src, os.stat(src).st_mtime_ns)[1] if os.path.isdir(src) else ()
    return load(src, ranks=[rank], lazy_args=True, skip=skip)


def rank_file(path: str, rank: int) -> str:
    """The one file of a per-rank directory whose footer lists ``rank`` (else ``path``): a
    worker reads the directory's footers once, not once per rank (4,096 ranks: 4,096 footers
    per rank read)."""
    if not os.path.isdir(path):
        return path
    files = rank_files(path, os.stat(path).st_mtime_ns)[0].get(int(rank), ())
    return files[0] if len(files) == 1 else path


def check_copies(path: str, rank: int) -> None:
    """The files of a per-rank directory that list ``rank`` are not one file twice (a link)
    nor identical copies: their events would be read twice and every sum doubled."""
    if not os.path.isdir(path):
        return
    files = rank_files(path, os.stat(path).st_mtime_ns)[0].get(int(rank), ())
    if len(files) < 2:
        return
    import filecmp

    sizes = [os.stat(f).st_size for f in files]  # (a link: its target's size)
    for i, a in enumerate(files):
        for b, size in zip(files[i + 1:], sizes[i + 1:], strict=True):
            if size == sizes[i] and (os.path.samefile(a, b) or filecmp.cmp(a, b, shallow=False)):
                raise TraceFormatError(
                    f"{Path(b).name} is {'a link to' if os.path.samefile(a, b) else 'a copy of'}"
                    f" {Path(a).name}: rank {rank}'s events would be read twice",
                    hint=f"remove {Path(b).name} from the trace directory")


def rank_where(path: str, rank: int) -> str:
    """Where rank ``rank``'s rows were read from, for an error: its file's name, the names of
    the directory's files whose footers list it, else the path."""
    if not os.path.isdir(path):
        return Path(path).name
    files = rank_files(path, os.stat(path).st_mtime_ns)[0].get(int(rank), ())
    return ", ".join(Path(f).name for f in files) or path


@functools.lru_cache(maxsize=4)
def rank_files(path: str, stamp: int) -> tuple[dict[int, tuple[str, ...]], tuple[str, ...]]:
    """(rank -> the files of directory ``path`` whose footers list it, the names of its files
    whose footer cannot be read); the mapping is empty when a footer lists no ranks: then the
    rank column decides, read from every file. ``stamp``: the directory's modification time,
    so a changed directory is read again."""
    from hermes.trace.reader import read_ranks, trace_files

    out: dict[int, tuple[str, ...]] = {}
    unread: list[str] = []
    listed = True
    for f in trace_files(path):
        try:
            ranks = read_ranks(f)
        except TraceFormatError:  # an unreadable footer: the driver lists the file as missing
            unread.append(f.name)
            continue
        listed = listed and bool(ranks)
        for r in ranks:
            out[int(r)] = (*out.get(int(r), ()), str(f))
    return (out if listed else {}), tuple(unread)
