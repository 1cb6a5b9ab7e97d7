"""Kineto categories and names -> Hermes event kinds, lanes and columns, one chunk at a time.

The mapping is data: ``CATEGORIES`` says what each Kineto category becomes, and a few name
rules refine it (``ProfilerStep#N`` -> step, DataLoader ``__next__`` -> data_wait, NCCL kernels
-> collective, copy direction from the memcpy name, runtime calls -> launch/sync/alloc/runtime).
Names are classified once per distinct name, then spread over rows with numpy indexing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import msgspec
import numpy as np

from hermes.trace.columns import take
from hermes.trace.schema import EVENT_KINDS, LANE_KINDS, UNITS

KINDS: tuple[str, ...] = tuple(EVENT_KINDS)
K = {k: i for i, k in enumerate(KINDS)}
LANE_KIND_NAMES: tuple[str, ...] = tuple(LANE_KINDS)
LK = {k: i for i, k in enumerate(LANE_KIND_NAMES)}
UNIT_NAMES: tuple[str, ...] = tuple(UNITS)
U = {k: i for i, k in enumerate(UNIT_NAMES)}

# Pseudo-kinds refined by the event name (negative so they never collide with real kinds).
RUNTIME, KERNEL, MEMCPY, CCP = -1, -2, -3, -4
#: "absent" for the integer args fields (a JSON int is never this small in a Kineto trace)
NO_INT = -(2 ** 63)


@dataclass(frozen=True)
class CategoryRule:
    kind: int  # an index into KINDS, or a pseudo-kind refined by name
    lane_kind: str  # "host" (lane 'thread <tid>') or "device" (lane 'stream <id>')
    #: the stream is args.stream (MTIA: tid is the firmware thread); else tid, as CUDA writes
    stream_from_args: bool = False


#: What each Kineto category becomes, keyed by the lower-cased category (lookups lower-case
#: too: one Kineto release wrote ``gpu_user_Annotation``). Every spelling Kineto has written:
#: the ActivityType names of libkineto (cpu_op ... privateuse1_*), and the capitalised ones of
#: PyTorch 1.8-1.13's output_json (Operator, Runtime, Kernel, Memcpy, Memset, Python, ...,
#: ``ProfilerStep#N`` under Operator), so an old trace is never read as a CPU-only run.
#: Anything else is kept as kind 'other' on a host lane.
CATEGORIES: dict[str, CategoryRule] = {
    "cpu_op": CategoryRule(K["host_op"], "host"),
    "operator": CategoryRule(K["host_op"], "host"),  # PyTorch 1.8-1.13
    "hpu_op": CategoryRule(K["host_op"], "host"),
    "user_annotation": CategoryRule(K["marker"], "host"),
    "user annotation": CategoryRule(K["marker"], "host"),  # PyTorch 1.8-1.9
    "cpu_instant_event": CategoryRule(K["marker"], "host"),  # '[memory]' ones: counters
    "python_function": CategoryRule(K["python"], "host"),
    "python": CategoryRule(K["python"], "host"),  # PyTorch 1.8-1.13
    "cuda_runtime": CategoryRule(RUNTIME, "host"),
    "cuda_driver": CategoryRule(RUNTIME, "host"),
    "runtime": CategoryRule(RUNTIME, "host"),  # PyTorch 1.8-1.13 (CUDA and HIP calls)
    "driver": CategoryRule(RUNTIME, "host"),
    "mtia_runtime": CategoryRule(RUNTIME, "host"),
    "xpu_runtime": CategoryRule(RUNTIME, "host"),
    "xpu_driver": CategoryRule(RUNTIME, "host"),
    "privateuse1_runtime": CategoryRule(RUNTIME, "host"),
    "privateuse1_driver": CategoryRule(RUNTIME, "host"),
    "glow_runtime": CategoryRule(RUNTIME, "host"),
    "kernel": CategoryRule(KERNEL, "device"),  # 'Kernel' in PyTorch 1.8-1.13
    "gpu_memcpy": CategoryRule(MEMCPY, "device"),
    "memcpy": CategoryRule(MEMCPY, "device"),  # PyTorch 1.8-1.13
    "mlu_memcpy": CategoryRule(MEMCPY, "device"),
    "gpu_memset": CategoryRule(K["memset"], "device"),
    "memset": CategoryRule(K["memset"], "device"),  # PyTorch 1.8-1.13
    "mlu_memset": CategoryRule(K["memset"], "device"),
    "gpu_user_annotation": CategoryRule(K["marker"], "device"),
    "mlu_user_annotation": CategoryRule(K["marker"], "device"),
    "cuda_sync": CategoryRule(K["sync"], "device"),
    "xpu_sync": CategoryRule(K["sync"], "device"),
    # MTIA device-side (command processor) events: kernels, and DMA copies named 'dma_*'
    # whose args.direction gives the copy direction and args.size its bytes
    "mtia_ccp_events": CategoryRule(CCP, "device", stream_from_args=True),
}


def category_rule(cat: str | None) -> CategoryRule | None:
    return CATEGORIES.get(cat.lower()) if cat else None


#: Event phases that carry an event (complete, instant, counter); others are flows/metadata.
EVENT_PHASES = frozenset({"X", "i", "I", "C"})
FLOW_PHASES = frozenset({"s", "f", "t"})

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
#: ProcessGroup ranges of backends whose collectives run on the host CPU (Gloo, MPI, UCC's CPU
#: path): the range is the collective itself. NCCL/RCCL/HCCL ranges ('nccl:all_reduce') only
#: enqueue the kernel that is the collective, so they stay markers.
_HOST_PG = re.compile(r"^(gloo|mpi|ucc):(\w+)$")
#: PyTorch's memory-profiler instant events (profile_memory=True)
MEMORY_EVENT = "[memory]"
# runtime/driver calls by what they do; the first rule that matches wins
_RUNTIME_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"synchronize", re.I), "sync"),
    (re.compile(r"^(cuda|hip)Memcpy(2D|3D)?$|^cuMemcpy(HtoD|DtoH|DtoD)?(_v2)?$", re.I), "sync"),
    (re.compile(r"malloc|free|hostalloc|memalloc|memfree|hostregister|memcreate|"
                r"memaddressreserve|memmap", re.I), "alloc"),
    (re.compile(r"launch|memcpy|memset|memprefetch", re.I), "launch"),
)
_DTYPE_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2,
    "bfloat16": 2, "int": 4, "int32": 4, "long": 8, "int64": 8, "short": 2, "int16": 2,
    "char": 1, "int8": 1, "byte": 1, "uint8": 1, "bool": 1, "complexfloat": 8,
    "complexdouble": 16, "complexhalf": 4, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "uint16": 2, "uint32": 4, "uint64": 8,
}


@dataclass(frozen=True)
class NameInfo:
    """What an event name tells, computed once per distinct name."""

    step: int  # N of ProfilerStep#N, else -1
    data_wait: bool
    host_collective: bool  # a 'gloo:all_reduce'-style ProcessGroup range
    runtime_kind: int
    memcpy_kind: int
    dma: bool  # an MTIA DMA request (HTA's memory-kernel pattern '^dma')


@lru_cache(maxsize=1 << 16)
def name_info(name: str) -> NameInfo:
    m = _STEP.match(name)
    runtime = "runtime"
    for pat, kind in _RUNTIME_RULES:
        if pat.search(name):
            runtime = kind
            break
    # CUDA: 'Memcpy HtoD (Pageable -> Device)'; ROCm: 'CopyHostToDevice'
    if "HtoD" in name or "HostToDevice" in name:
        memcpy = "memcpy_h2d"
    elif "DtoH" in name or "DeviceToHost" in name:
        memcpy = "memcpy_d2h"
    else:  # DtoD, PtoP (peer to peer) and anything unexpected
        memcpy = "memcpy_d2d"
    return NameInfo(
        step=int(m.group(1)) if m else -1,
        data_wait=name.startswith("enumerate(DataLoader)") and "__next__" in name,
        host_collective=bool(_HOST_PG.match(name)),
        runtime_kind=K[runtime],
        memcpy_kind=K[memcpy],
        dma=name.startswith("dma"),
    )


def dtype_bytes(dtype: object) -> int | None:
    """Bytes per element of a PyTorch dtype name ("Float", "BFloat16", "torch.int8")."""
    if not isinstance(dtype, str):
        return None
    return _DTYPE_BYTES.get(dtype.lower().removeprefix("torch."))


class Args(msgspec.Struct, gc=False):
    """The args fields Hermes turns into columns; the whole args text is kept as well.

    The fields read for every event are plain ints/floats with an "absent" value (``NO_INT``,
    NaN), so whole columns come out with one ``np.fromiter`` each.
    """

    correlation: int = NO_INT
    external_id: int = msgspec.field(default=NO_INT, name="External id")
    external_id_old: int = msgspec.field(default=NO_INT, name="external id")  # PyTorch 1.8-1.9
    flops: float = float("nan")
    bytes: float = float("nan")
    stream: int = NO_INT
    direction: str | None = None  # MTIA DMA: HOST_TO_DEVICE, DEVICE_TO_HOST, ...
    size: float = float("nan")  # MTIA DMA: bytes
    in_nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: int | None = msgspec.field(default=None, name="Out msg nelems")
    dtype: str | None = None
    pg_name: str | int | None = msgspec.field(default=None, name="Process Group Name")
    pg_desc: str | None = msgspec.field(default=None, name="Process Group Description")
    seq: int | str | None = msgspec.field(default=None, name="Seq")
    name: str | None = None  # metadata events: process/thread name


class HotArgs(msgspec.Struct, gc=False):
    """The args fields read for every event (the columns); :class:`Args` has these and the
    fields read for a few events only (collectives, DMA copies), decoded for those alone."""

    correlation: int = NO_INT
    external_id: int = msgspec.field(default=NO_INT, name="External id")
    external_id_old: int = msgspec.field(default=NO_INT, name="external id")
    flops: float = float("nan")
    bytes: float = float("nan")
    stream: int = NO_INT


_ARGS = msgspec.json.Decoder(list[Args])
_ONE_ARGS = msgspec.json.Decoder(Args)
_ONE_HOT = msgspec.json.Decoder(HotArgs)
_ANY = msgspec.json.Decoder()
#: any JSON, a number past float64 read as +-inf (as Python's json reads it; msgspec refuses it):
#: the args of the few events that do not decode as :class:`Args`, whose counts then read as
#: not known instead of failing the import
_WIDE = msgspec.json.Decoder(float_hook=float)


class ArgsList(list):
    """Decoded args, and the text they were decoded from: a field whose JSON key the text does
    not hold (:meth:`lacks`) is its default in every event, with no pass over them."""

    text: bytes = b""
    _escapes: bool | None = None
    #: (raws, joined) of :func:`decode_hot_args`: what :meth:`full` decodes every field from
    _source: tuple | None = None
    _full: ArgsList | None = None

    def full(self) -> ArgsList:
        """Every field (:class:`Args`) of the same events: ``decode_args`` of their text,
        decoded on first use (these are the decoded fields themselves when they are Args)."""
        if self._source is None:
            return self
        if self._full is None:
            self._full = decode_args(*self._source)
        return self._full

    def some(self, rows: np.ndarray) -> list:
        """Every field (:class:`Args`) of the events at ``rows``, as ``full()`` gives them,
        decoding only their text.

        The hot fields of all events decoded as their types say, and the events' own text
        decodes so too: then ``decode_args`` of every event decodes them so, or falls back to
        :func:`_tolerant` for all (a field of another type in some other event), which reads
        every well-typed value the same but a ``Seq`` written as text and a process group
        name written as a number; where one is, the events are read from ``full()``."""
        if self._source is None or not len(rows):
            return take(self, rows)
        raws = self._source[0]
        out = decode_args([raws[i] for i in rows.tolist()])
        if any(isinstance(a.seq, str) or isinstance(a.pg_name, int) for a in out):
            return take(self.full(), rows)
        return out

    def lacks(self, field_name: str) -> bool:
        """True when no event has ``field_name`` (its key, in quotes, is not in the text and no
        escape could spell it); False when some event may have it."""
        if not self.text or _KEYS[field_name] in self.text:
            return False
        if self._escapes is None:
            self._escapes = b"\\u" in self.text
        return not self._escapes


#: Field -> its JSON key in quotes, as the text holding the key must contain it (the keys are
#: letters and spaces: only a \u escape could write them otherwise)
_KEYS = {f: b'"' + k.encode() + b'"' for f, k in
         zip(Args.__struct_fields__, Args.__struct_encode_fields__, strict=True)}


def decode_args(raws: Sequence[msgspec.Raw], joined: bytes | None = None) -> ArgsList:
    """Decode the interesting args fields of many events in one call.

    ``joined``: the texts of ``raws`` end to end (``b"".join(raws)``, the args column's data),
    decoded as a sequence of values with no copy made to put them in a JSON array; when the
    values do not come apart as one per event (two numbers run together) or one is not an
    object, they are decoded as an array as before.
    Falls back to a tolerant per-field extraction when some trace stores a field with an
    unexpected type (a string correlation, say) instead of failing the import.
    """
    if not raws:
        return ArgsList()
    values = _one_per_event(_ONE_ARGS, joined, len(raws))
    if values is not None:
        out = ArgsList(values)
        out.text = joined
        return out
    text = b"[" + b",".join(raws) + b"]"
    try:
        out = ArgsList(_ARGS.decode(text))
    except msgspec.ValidationError:
        try:
            out = ArgsList(_tolerant(d) for d in _WIDE.decode(text))
        except msgspec.DecodeError:  # invalid UTF-8 in a string: read as U+FFFD (issue 38)
            out = ArgsList(_tolerant(d) for d in _WIDE.decode(
                text.decode("utf-8", "replace").encode()))
    out.text = text
    return out


def decode_hot_args(raws: Sequence[msgspec.Raw], joined: bytes | None) -> ArgsList:
    """The :class:`HotArgs` fields of every event's args, from their joined text; ``full()``
    gives all the fields. When the text does not decode so (a field of another type, values
    that do not come apart one per event), this is :func:`decode_args` itself.

    Where the hot fields decode, their values are :func:`decode_args`'s: a field of another
    type elsewhere in the args makes that fall back to :func:`_tolerant`, which reads every
    well-typed value the same (an integer beyond int64 aside: a caller whose columns overflow
    uses ``full()``)."""
    values = _one_per_event(_ONE_HOT, joined, len(raws)) if raws else None
    if values is not None:
        out = ArgsList(values)
        out.text = joined
        out._source = (raws, joined)
        return out
    return decode_args(list(raws), joined)


def _one_per_event(decoder: Any, joined: bytes | None, n: int) -> list[Any] | None:
    """``joined`` decoded by ``decoder`` as a sequence of values, when it comes apart as ``n``
    of them (one per event); else None."""
    if joined is None:
        return None
    try:
        values = decoder.decode_lines(joined)
    except msgspec.DecodeError:  # ValidationError included
        return None
    return values if len(values) == n else None


def _tolerant(d: object) -> Args:
    if not isinstance(d, dict):
        return Args()
    out = {}
    for f in Args.__struct_fields__:
        key = Args.__struct_encode_fields__[Args.__struct_fields__.index(f)]
        v = d.get(key)
        if f in ("correlation", "external_id", "external_id_old", "stream"):
            v = _as_int(v)
            v = NO_INT if v is None or not -2 ** 63 < v < 2 ** 63 else v
        elif f in ("in_nelems", "out_nelems", "seq"):
            v = _as_int(v)
        elif f in ("flops", "bytes", "size"):
            v = _as_float(v)
            v = float("nan") if v is None else v
        elif f in ("dtype", "pg_desc", "name", "direction") and v is not None:
            v = str(v)
        elif f == "pg_name" and v is not None:
            v = str(v)
        out[f] = v
    return Args(**out)


def _as_int(v: object) -> int | None:
    try:
        return None if v is None or isinstance(v, bool) else int(v)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # (int(inf), say)
        return None


def _as_float(v: object) -> float | None:
    try:
        return None if v is None or isinstance(v, bool) else float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # (float(10**400), say)
        return None


def coll_bytes(a: Args) -> int | None:
    nelems = a.in_nelems if a.in_nelems is not None else a.out_nelems
    size = dtype_bytes(a.dtype)
    if nelems is None or size is None:
        return None
    nbytes = int(nelems) * size
    return nbytes if 0 <= nbytes < 2**63 else None  # past int64: unknown, never an overflow


def coll_group(a: Args) -> str | None:
    if a.pg_name is not None and a.pg_name != "":
        return str(a.pg_name)
    return a.pg_desc or None


def with_key(args_text: bytes, key: str, value: str) -> bytes:
    """Add ``"key": value`` in front of a JSON object text without decoding it (args stay raw
    JSON until they are needed); text that is not an object becomes ``{"key": value}``."""
    head = b"{" + msgspec.json.encode(key) + b": " + msgspec.json.encode(value)
    body = args_text.lstrip()[1:].lstrip()
    if not args_text.lstrip().startswith(b"{") or body.startswith(b"}"):
        return head + b"}"
    return head + b", " + body


def with_source_category(args_text: bytes, category: str) -> bytes:
    """Add ``"source_category"`` to a JSON object text (kept-unknown events)."""
    return with_key(args_text, "source_category", category)


