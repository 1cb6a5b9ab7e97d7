"""A warm heap for a process about to analyze: its first analysis then reuses memory already
faulted in instead of faulting in fresh pages (issue 15: the first call in a process).

A rank's analysis allocates and frees many arrays of its events' length (1.6 MB per int64 column
at 200k events). On a fresh heap each page they touch is a minor page fault the first time (~20k
faults, 0.05-0.1 s of kernel time, on the 200k-event trace); glibc also returns freed memory above
its trim threshold and serves large blocks by ``mmap``, so the next array faults its pages in again.
:func:`warm_heap` keeps freed memory in the heap (``mallopt``: blocks up to ``MMAP_MAX`` from the
heap, no trimming below ``TRIM_AT``) and faults in ``nbytes`` of it now, in blocks the allocator
keeps for reuse. A caller with idle time before an analysis -- ``hermes analyze`` while its forked
importer parses the file -- pays the faults there. ``release_memory`` (``analyzers.run``) still
trims explicitly after a big rank. A no-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes

#: blocks up to this size come from the heap (glibc's default: 128 KiB, raised on the fly)
MMAP_MAX = 64 << 20
#: freed memory at the top of the heap is kept up to this size (glibc's default: 128 KiB)
TRIM_AT = 512 << 20
#: memory faulted in by default: a 200k-event rank's analysis peak
WARM_BYTES = 96 << 20
_BLOCK = 1 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def warm_heap(nbytes: int = WARM_BYTES, keep: bool = True) -> bool:
    """Keep freed memory in this process's heap and fault in ``nbytes`` of it now (1 MiB blocks,
    written once, then freed back to the heap). ``keep=False``: the ``mallopt`` settings are
    left as the caller made them (``hermes.commands._util.keep_freed_memory`` makes the same
    kind: 1 MiB blocks from the heap, freed memory kept). False where it cannot (not glibc)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl)
        return False
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    if keep and not (mallopt(_M_MMAP_THRESHOLD, MMAP_MAX) and mallopt(_M_TRIM_THRESHOLD, TRIM_AT)):
        return False
    blocks = []
    for _ in range(max(0, int(nbytes)) // _BLOCK):
        p = libc.malloc(_BLOCK)
        if not p:
            break
        libc.memset(p, 0, _BLOCK)  # (each page written: faulted in now)
        blocks.append(p)
    for p in blocks:
        libc.free(p)
    return True
