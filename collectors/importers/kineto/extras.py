"""Phase-1 extras of the Kineto import: collective identity (group, sequence, bytes) from
args, and PyTorch's ``[memory]`` instant events as counter samples."""

from __future__ import annotations

from operator import attrgetter

import msgspec
import numpy as np

from hermes.collectors.importers.kineto.mapping import (
    NO_INT,
    Args,
    ArgsList,
    coll_bytes,
    coll_group,
    with_key,
)
from hermes.collectors.importers.kineto.side import Side, codes
from hermes.trace.columns import floats, ints

_COLL_KEY = attrgetter("pg_name", "pg_desc", "in_nelems", "out_nelems", "dtype", "seq")


def coll_info(args: list, side: Side) -> tuple[np.ndarray, ...]:
    """(group code, seq, bytes, external id) arrays of collective args; -1 where unknown.

    The fields repeat (same group, sizes and dtype over many calls): each distinct
    combination is worked out once, only the sequence number varies per row."""
    idx, keys = codes(list(map(_COLL_KEY, args)))
    group = np.empty(len(keys), np.int64)
    nbytes = np.empty(len(keys), np.int64)
    seq = np.empty(len(keys), np.int64)
    for j, (pg_name, pg_desc, in_n, out_n, dtype, s) in enumerate(keys):
        a = Args(pg_name=pg_name, pg_desc=pg_desc, in_nelems=in_n, out_nelems=out_n,
                 dtype=dtype)
        group[j] = _group_code(coll_group(a), side)
        nbytes[j] = -1 if (b := coll_bytes(a)) is None else b
        seq[j] = s if isinstance(s, int) else -1
    ext = external_ids(args)
    return group[idx], seq[idx], nbytes[idx], np.where(ext == NO_INT, -1, ext)


def _group_code(group: str | None, side: Side) -> int:
    if group is None:
        return -1
    return side.groups.setdefault(group, len(side.groups))



def column(args: list, field_name: str, dtype: type) -> np.ndarray:
    """One field of decoded args as an array (its default where an event lacks it)."""
    if isinstance(args, ArgsList) and args.lacks(field_name):
        return np.full(len(args), _DEFAULTS[field_name], dtype)
    try:
        if dtype is np.float64:
            return floats(args, field_name)
        if dtype is np.int64:
            return ints(args, field_name)
        return np.fromiter(map(attrgetter(field_name), args), dtype, len(args))
    except OverflowError:  # an integer past int64 (as _tolerant reads one): the default
        default = _DEFAULTS[field_name]
        return np.fromiter((v if not isinstance(v, int) or -2 ** 63 < v < 2 ** 63 else default
                            for v in map(attrgetter(field_name), args)), dtype, len(args))


_DEFAULTS = dict(zip(Args.__struct_fields__[-len(Args.__struct_defaults__):],
                     Args.__struct_defaults__, strict=True))


def external_ids(args: list) -> np.ndarray:
    """'External id', or PyTorch 1.8-1.9's 'external id'; NO_INT where neither is there."""
    ext = column(args, "external_id", np.int64)
    old = ext == NO_INT
    if old.any():
        ext[old] = column(args, "external_id_old", np.int64)[old]
    return ext


_MEM = msgspec.json.Decoder(list[dict[str, object]])
#: c10::DeviceType codes PyTorch writes in 'Device Type' (ROCm builds report HIP as CUDA)
_DEVICE_TYPES = {0: "cpu", 1: "cuda", 9: "xla", 12: "xpu", 13: "mps", 14: "meta",
                 15: "hpu", 20: "privateuse1", 21: "mtia"}


def _num(v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return float("nan")
    return float(v)


def memory_samples(raws: list[msgspec.Raw]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(Total Allocated, Total Reserved, device label) of ``[memory]`` events' args.

    A device label is 'cuda:0', 'cpu', ...; a field that is missing or not a number is NaN."""
    decoded = _MEM.decode(b"[" + b",".join(raws) + b"]") if raws else []
    alloc = np.fromiter((_num(d.get("Total Allocated")) for d in decoded), np.float64,
                        len(decoded))
    resv = np.fromiter((_num(d.get("Total Reserved")) for d in decoded), np.float64,
                       len(decoded))
    labels = []
    for d in decoded:
        t, i = d.get("Device Type"), d.get("Device Id")
        name = _DEVICE_TYPES.get(t, f"device{t}") if isinstance(t, int) else str(t or "device")
        labels.append(name if name == "cpu" or not isinstance(i, int) or i < 0 else
                      f"{name}:{i}")
    return alloc, resv, labels


def with_unit(args_text: bytes, unit: str) -> bytes:
    """Add ``"unit"`` to a JSON object text (counter samples carry their unit in args)."""
    return with_key(args_text, "unit", unit)
