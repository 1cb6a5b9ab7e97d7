"""Lanes of phase 1: 'thread <tid>' for host rows, '<pid>SEP stream <id>' for device rows, and
thread names from the metadata events."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from hermes.collectors.importers.kineto.mapping import NO_INT, decode_args
from hermes.collectors.importers.kineto.side import (
    ARGS,
    DEVICE_SEP,
    PID,
    Side,
    codes,
    take,
)
from hermes.trace.arrowbuf import dictionary
from hermes.trace.columns import ints as int64s


def thread_names(rows: list, side: Side) -> None:
    """First non-empty ``thread_name`` per tid (metadata events repeat: decode each once).

    Only the first event of each tid not named yet is decoded; the rare tid whose first name
    is empty has all its events looked at."""
    name_idx, names = codes(rows, "name")
    if "thread_name" not in names:
        return
    rows = take(rows, np.flatnonzero(name_idx == names.index("thread_name")))
    tid_idx, tids = codes(rows, "tid")
    text = [str(t) for t in tids]
    if len(set(text)) < len(text):  # 7 and "7" are one tid
        canon, text = codes(text)
        tid_idx = canon[tid_idx]
    new = np.array([t not in side.thread_names for t in text], bool)
    if not new.any():
        return
    first = np.full(len(text), len(rows), np.int64)
    np.minimum.at(first, tid_idx, np.arange(len(rows)))
    firsts = np.sort(first[new])
    args = decode_args(list(map(ARGS, take(rows, firsts))))
    unnamed = []
    for i, a in zip(firsts.tolist(), args, strict=True):
        if a.name:
            side.thread_names[text[tid_idx[i]]] = a.name.strip()
        else:
            unnamed.append(tid_idx[i])
    if unnamed:  # the first name was empty: the first non-empty one of any later event
        wanted = np.zeros(len(text), bool)
        wanted[unnamed] = True
        for r in take(rows, np.flatnonzero(wanted[tid_idx])):
            tid = str(r.tid)
            if tid not in side.thread_names:
                a = decode_args([r.args])[0]
                if a.name:
                    side.thread_names[tid] = a.name.strip()

def ints(values: list) -> np.ndarray | None:
    """int64 array of Python ints; None when some value is not an int (string tids)."""
    try:
        return int64s(values)
    except (TypeError, ValueError, OverflowError):
        return None


#: widest value range (max - min) :func:`factorize` codes with a table rather than a sort
_TABLE_RANGE = 1 << 16


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of int64 ``values`` (inverse 1-D); values
    that span a small range (thread ids, stream ids, codes) are coded through a presence
    table over that range, with no sort."""
    n = len(values)
    if n == 0:
        return values[:0].copy(), np.zeros(0, np.intp)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo >= max(_TABLE_RANGE, 4 * n):
        uniq, inverse = np.unique(values, return_inverse=True)
        return uniq, inverse.reshape(-1)
    off = (values - lo).astype(np.intp) if lo else values.astype(np.intp)
    present = np.zeros(hi - lo + 1, bool)
    present[off] = True
    at = np.flatnonzero(present)
    code = np.cumsum(present, dtype=np.intp) - 1
    return (at + lo).astype(values.dtype), code[off]


def lanes(tids: list, rows: list, dev: np.ndarray, dev_id: np.ndarray | None,
          side: Side, tid: np.ndarray | None = None) -> pa.DictionaryArray:
    """Lane labels: 'thread <tid>' for host rows, '<pid>SEP stream <id>' for device rows
    (phase 2 drops or spells out the pid), built once per distinct lane. ``tid``: ``ints(tids)``
    when the caller has it."""
    tid = ints(tids) if tid is None else tid
    dev_rows = np.flatnonzero(dev)
    pids = list(map(PID, take(rows, dev_rows))) if dev_rows.size else []
    pid = ints(pids)
    # the distinct pids (ints: from the array, not one set insert per row)
    side.device_pids.update(pids if pid is None else factorize(pid)[0].tolist())
    if tid is not None and pid is not None:
        ident = tid if dev_id is None else np.where(dev & (dev_id != NO_INT), dev_id, tid)
        dev_pid = np.zeros(len(tids), np.int64)
        dev_pid[dev_rows] = pid
        # one int per (device?, pid, id) from the codes of each part: a 1-D unique is cheap
        u_pid, c_pid = factorize(dev_pid)
        u_id, c_id = factorize(ident)
        key = (dev.astype(np.int64) * len(u_pid) + c_pid) * len(u_id) + c_id
        uniq, inverse = factorize(key)
        labels = []
        for k in uniq.tolist():
            rest, i = divmod(k, len(u_id))
            d, p = divmod(rest, len(u_pid))
            labels.append(f"{u_pid[p]}{DEVICE_SEP}stream {u_id[i]}" if d else
                          f"thread {u_id[i]}")
        return dictionary(inverse.reshape(-1), labels)
    labels = [f"thread {t}" for t in tids]
    for j, r in enumerate(dev_rows.tolist()):
        i = tids[r] if dev_id is None or dev_id[r] == NO_INT else int(dev_id[r])
        if isinstance(i, str):  # PyTorch 1.8-1.13 write the tid of a stream as 'stream 7'
            i = i.removeprefix("stream ")
        labels[r] = f"{pids[j]}{DEVICE_SEP}stream {i}"
    label_codes, uniq_labels = codes(labels)
    return dictionary(label_codes, uniq_labels)

