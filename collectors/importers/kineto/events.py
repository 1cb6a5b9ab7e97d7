"""Kineto events as msgspec decodes them: the typed structs and the decoder of a chunk's text.

``ph`` and the categories PyTorch writes are Literals (one shared string object each); ``ts`` and
``dur`` are doubles where that is exact (``times``), else raw text; ``args`` stays raw JSON text,
decoded later, vectorized, per chunk (``mapping``). Used by ``reader``, which cuts the text into
chunks, and ``chunk``, which makes their columns.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

_EMPTY_ARGS = msgspec.Raw(b"{}")


#: The Chrome trace event phases. Decoded as a Literal, every event's ``ph`` is one shared
#: string object, which makes coding phases per chunk cheaper than new strings would.
Phase = Literal["X", "B", "E", "i", "I", "C", "M", "s", "t", "f", "b", "e", "n", "S", "T", "p",
                "F", "P", "O", "N", "D", "R", "c", "(", ")", "V", "v", "="]


class Event(msgspec.Struct, gc=False):
    """One Kineto event; ts/dur/args are kept as raw JSON text."""

    ph: Phase = ""  # type: ignore[assignment] # "" (missing) is reported by the importer
    cat: str | None = None
    name: str | int | float | None = ""
    pid: int | str | float | None = 0
    tid: int | str | float | None = 0
    ts: msgspec.Raw = msgspec.Raw()
    dur: msgspec.Raw = msgspec.Raw()
    args: msgspec.Raw = _EMPTY_ARGS


#: Categories PyTorch writes. Decoded as a Literal too (while a file holds no other).
Category = Literal[
    "cpu_op", "user_annotation", "gpu_user_annotation", "python_function", "kernel",
    "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cuda_sync", "ac2g", "fwdbwd",
    "Trace", "overhead", "cpu_instant_event", "mtia_runtime", "mtia_ccp_events",
    "xpu_runtime", "privateuse1_runtime", "gpu_memory_usage", "cpu_memory_usage"]

#: How ts/dur are read: both as doubles, ts as text and dur as a double, both as text.
BOTH_FLOAT, DUR_FLOAT, TEXT = 2, 1, 0
#: How names are read: phase and category from the lists above, phase only, neither.
KNOWN_CATEGORIES, KNOWN_PHASES, ANY_NAMES = 2, 1, 0

_NAN = float("nan")
_TIME_TYPES: dict[int, tuple[Any, Any, Any]] = {  # (ts type, dur type, default)
    BOTH_FLOAT: (float, float, _NAN), DUR_FLOAT: (msgspec.Raw, float, None),
    TEXT: (msgspec.Raw, msgspec.Raw, None)}
_NAME_TYPES: dict[int, tuple[Any, Any]] = {  # (ph type, cat type)
    KNOWN_CATEGORIES: (Phase, Category | None), KNOWN_PHASES: (Phase, str | None),
    ANY_NAMES: (str, str | None)}


def _event_type(mode: int, names: int) -> type[Event]:
    """The Event variant whose times are read as ``mode`` says and names as ``names`` does.

    Doubles (NaN: missing) are cheaper than raw text and exact where
    :func:`float_us_to_ns` says so; else the chunk is read again (``Chunk.exact``). Literal
    phases and categories are one shared string each, cheaper to code per chunk."""
    if (mode, names) == (TEXT, KNOWN_PHASES):
        return Event
    ts_t, dur_t, _ = _TIME_TYPES[mode]
    ph_t, cat_t = _NAME_TYPES[names]
    fields: list[tuple[str, Any, Any]] = [("ph", ph_t, ""), ("cat", cat_t, None)]
    fields += [(f, t, _NAN if t is float else msgspec.Raw()) for f, t in
               (("ts", ts_t), ("dur", dur_t))]
    return msgspec.defstruct(f"Event{mode}{names}", fields, bases=(Event,),  # type: ignore
                             gc=False)


#: (time mode, names mode) of each event type, and the type of each pair
EVENT_TYPES: dict[tuple[int, int], type[Event]] = {
    (m, n): _event_type(m, n) for m in (BOTH_FLOAT, DUR_FLOAT, TEXT)
    for n in (KNOWN_CATEGORIES, KNOWN_PHASES, ANY_NAMES)}
_MODES: dict[type, tuple[int, int]] = {t: k for k, t in EVENT_TYPES.items()}


class _Events:
    """Decoder of a ``[...]`` text of events: times as ``mode`` and names as ``names`` say,
    or the next looser way wherever a value does not fit; the loosest is plain text."""

    def __init__(self) -> None:
        self._decoders = {k: msgspec.json.Decoder(list[t]) for k, t in EVENT_TYPES.items()}

    def decode(self, text: bytes | bytearray | memoryview, mode: int = TEXT,
               names: int = KNOWN_PHASES) -> list[Event]:
        tries = [(m, n) for m in range(mode, TEXT - 1, -1) for n in range(names, -1, -1)]
        for key in tries[:-1]:
            try:
                return self._decoders[key].decode(text)  # type: ignore[no-any-return]
            except msgspec.ValidationError:
                pass
            except UnicodeDecodeError:  # invalid UTF-8 in a name or args: keep it, replaced
                return self.decode(bytes(text).decode("utf-8", "replace").encode(), mode, names)
        return self._decoders[tries[-1]].decode(text)  # type: ignore[no-any-return]


def time_mode(events: list[Event]) -> int:
    """How the events' ts/dur were read (``BOTH_FLOAT``, ``DUR_FLOAT`` or ``TEXT``)."""
    return _MODES[type(events[0])][0] if events else TEXT


def names_mode(events: list[Event]) -> int:
    return _MODES[type(events[0])][1] if events else ANY_NAMES


EVENTS = _Events()
