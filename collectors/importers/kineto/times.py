"""Kineto timestamps (microseconds with up to three decimals) -> exact integer nanoseconds.

Epoch-scale values (1.7e15 us) have more significant digits than a double holds, so they are
converted from their decimal text (:func:`us_text_to_ns`), never through a float; values a
double does hold exactly take the cheaper :func:`float_us_to_ns`.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import msgspec
import numpy as np
import pyarrow as pa

from hermes.trace.columns import lengths

_POW10 = np.array([10 ** k for k in range(19)], dtype=np.int64)


#: Below this many microseconds (~51 days) a double holds every value to well within 0.5 ns.
_EXACT_US = 2.0 ** 42


def float_us_to_ns(us: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Microseconds read as doubles (NaN: missing) -> ``(ns, present)``, exactly what
    :func:`us_text_to_ns` gives for their text; None when that cannot be told from the
    doubles (the text path then decides).

    For |t| < 2^42 us, the double d of a decimal text t is within 2^-12 us of it, so
    N = rint(d * 1000) is t * 1000 for a text with three decimals; and whenever N / 1000 is
    again d, |t * 1000 - N| < 0.49 ns, so N is also what rounding the text gives.
    """
    present = ~np.isnan(us)
    v = np.where(present, us, 0.0)
    if len(v) and not (np.abs(v) < _EXACT_US).all():
        return None
    ns = np.rint(v * 1000.0)
    if not (ns / 1000.0 == v).all():
        return None
    return ns.astype(np.int64), present


def us_text_to_ns(raws: list[msgspec.Raw]) -> tuple[np.ndarray, np.ndarray]:
    """Convert raw JSON numbers in microseconds to exact int64 nanoseconds.

    Returns ``(ns, present)``; ``present`` is False where the field was missing. Raises
    ``ValueError(i)`` with the index of the first value that is not a number. Vectorized over
    the text: digits are weighted by their power of ten relative to the decimal point; a fourth
    decimal rounds half up. Exponent notation (rare) goes through ``Decimal``.
    """
    n = len(raws)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    lens = lengths(raws)
    present = lens > 0
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    text = pa.LargeStringArray.from_buffers(
        n, pa.py_buffer(offsets), pa.py_buffer(b"".join(raws)),
        pa.py_buffer(np.packbits(present, bitorder="little")), int(n - present.sum()))
    try:
        # Arrow parses decimal text exactly; a decimal with scale 3 is stored as the integer
        # value * 10^3, i.e. the nanoseconds, in the low 64 bits of each 128-bit slot
        import pyarrow.compute as pc  # here: only text times need it (slow to import)

        dec = pc.cast(text, pa.decimal128(30, 3))
        ns = np.frombuffer(dec.buffers()[1], dtype=np.int64)[::2][dec.offset:dec.offset + n]
        hi = np.frombuffer(dec.buffers()[1], dtype=np.int64)[1::2][dec.offset:dec.offset + n]
        if ((hi == 0) | (hi == -1)).all() and ((hi == -1) == (ns < 0)).all():
            return np.where(present, ns, 0), present
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    return us_text_to_ns_numpy(raws, n)


def us_text_to_ns_numpy(raws: list[msgspec.Raw], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Digit-by-digit fallback for text Arrow rejects (more than 3 decimals, odd values)."""
    buf = b"\n".join(raws) + b"\n"
    a = np.frombuffer(buf, dtype=np.uint8)
    ends = np.flatnonzero(a == 10)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lens = ends - starts
    present = lens > 0
    width = int(min(lens.max(), 24))
    ns = np.zeros(n, dtype=np.int64)
    if width == 0:
        return ns, present
    j = np.arange(width)
    inside = j[None, :] < lens[:, None]
    ch = np.where(inside, a[np.minimum(starts[:, None] + j[None, :], len(a) - 1)], 0)
    neg = ch[:, 0] == 45  # '-'
    isdot = ch == 46
    hasdot = isdot.any(axis=1)
    dotpos = np.where(hasdot, isdot.argmax(axis=1), lens)
    isdigit = (ch >= 48) & (ch <= 57)
    odd = (inside & ~isdigit & ~isdot).copy()
    odd[:, 0] &= ~neg
    slow = odd.any(axis=1) | (lens > width) | (isdot.sum(axis=1) > 1)
    # power of ten of each digit in nanoseconds: 3 for the units digit of the microseconds
    exp = dotpos[:, None] - 1 - j[None, :] + (j[None, :] > dotpos[:, None]) + 3
    use = isdigit & (exp >= 0) & (exp <= 18)
    digits = (ch.astype(np.int64) - 48) * use
    # the magnitude in uint64 (at most 19 digits: < 1.9e19 < 2^64), so that a value just past
    # int64 is seen, not wrapped around (9223372036854776 us was stored as a negative time)
    mag = (digits.astype(np.uint64) * _POW10[np.clip(exp, 0, 18)].astype(np.uint64)).sum(
        axis=1, dtype=np.uint64)
    round_up = (isdigit & (exp == -1) & (ch >= 53)).any(axis=1)
    mag = mag + round_up.astype(np.uint64)
    too_big = (isdigit & (exp > 18)).any(axis=1)
    too_big |= mag > np.where(neg, np.uint64(2**63), np.uint64(2**63 - 1))
    slow |= too_big
    ns = np.where(too_big, 0, mag).astype(np.int64)
    ns = np.where(neg, -ns, ns)
    for i in np.flatnonzero(slow & present):
        ns[i] = _slow_ns(bytes(raws[i]), int(i))
    return ns, present


def _slow_ns(text: bytes, i: int) -> int:
    try:
        value = Decimal(text.decode("ascii")) * 1000
    except (InvalidOperation, UnicodeDecodeError):
        raise ValueError(i) from None
    if not value.is_finite():
        raise ValueError(i)
    ns = int(value.to_integral_value())  # rounded first: 2^63 - 0.5 ns rounds out of range
    if not -(2 ** 63) <= ns < 2 ** 63:
        raise ValueError(i)
    return ns
