"""Shared helpers of the Ascend importer: exact µs -> ns conversion, CSV loading with positioned
errors, JSON loading with byte offsets, and the intermediate event frame.

Every parser of the Ascend importer returns an *event frame*: a pandas DataFrame with the trace
schema's columns (``rank``, ``lane``, ``lane_kind``, ``kind``, ``name``, ``ts_ns``, ``dur_ns``,
``step``, ``corr_id``, ``external_id``, ``stream``, ``unit``, ``coll_group``, ``coll_seq``,
``coll_bytes``, ``bytes``), plus ``args`` (a Python dict per row, encoded to JSON only when the
trace is written, so that enrichment can merge dicts) and ``src`` (the source category counted
in the import summary, e.g. ``"trace_view/CANN"``).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hermes.errors import ImportFormatError

#: Columns of an event frame, in order (``args`` holds dicts, ``src`` the source category).
FRAME_COLUMNS: tuple[str, ...] = (
    "rank", "lane", "lane_kind", "kind", "name", "ts_ns", "dur_ns", "step", "corr_id",
    "external_id", "stream", "unit", "coll_group", "coll_seq", "coll_bytes", "bytes", "value",
    "args", "src",
)
_INT_COLUMNS = ("step", "corr_id", "external_id", "stream", "coll_seq", "coll_bytes", "bytes")

#: Cell values the Ascend tools write for "no value".
NA_TOKENS = frozenset({"", "N/A", "NA", "n/a", "-", "None", "nan", "NaN"})

_PLAIN_DECIMAL = r"^(?P<sign>[+-]?)(?P<whole>\d+)(?:\.(?P<frac>\d*))?$"


def frame(n: int, **cols: Any) -> pd.DataFrame:
    """An event frame of ``n`` rows; columns not given are null (``args`` empty dicts)."""
    data: dict[str, Any] = {}
    for c in FRAME_COLUMNS:
        if c in cols:
            v = cols[c]
            data[c] = v if not np.isscalar(v) and v is not None else [v] * n
        elif c == "args":
            data[c] = [{} for _ in range(n)]
        elif c == "value":
            data[c] = np.full(n, np.nan)
        elif c in _INT_COLUMNS:
            data[c] = pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, dtype=bool))
        else:
            data[c] = [None] * n
    df = pd.DataFrame(data, columns=list(FRAME_COLUMNS))
    for c in _INT_COLUMNS:
        if df[c].dtype != "Int64":
            df[c] = pd.array(df[c], dtype="Int64")
    return df


def empty_frame() -> pd.DataFrame:
    return frame(0)


def concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    parts = [f for f in frames if len(f)]
    if not parts:
        return empty_frame()
    out = pd.concat(parts, ignore_index=True)
    for c in _INT_COLUMNS:
        out[c] = pd.array(out[c], dtype="Int64")
    return out


def us_to_ns(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """Microsecond values (decimal strings or numbers) -> exact integer ns, rounded half up.

    Strings are split at the decimal point (in Arrow, vectorized) instead of going through
    float64, which at epoch microseconds (~1.7e15) cannot hold nanoseconds. Returns
    ``(ns, bad)``: ``bad`` marks cells that are not numbers (their ns is 0), NA cells included.
    """
    arr = np.asarray(values, dtype=object)
    n = len(arr)
    ns = np.zeros(n, dtype=np.int64)
    bad = np.zeros(n, dtype=bool)
    if n == 0:
        return ns, bad
    # Floats go through repr, the shortest string that round-trips: exactly the digits the
    # producer wrote. Only float cells pay for the Python call.
    is_float = np.fromiter((type(v) is float for v in arr), dtype=bool, count=n)
    if is_float.any():
        arr = arr.copy()
        arr[is_float] = [repr(v) for v in arr[is_float]]
    text = pa.array([v if isinstance(v, str) else (None if v is None else str(v))
                     for v in arr], type=pa.string())
    parts = pc.extract_regex(pc.utf8_trim_whitespace(text), _PLAIN_DECIMAL)
    plain = parts.is_valid().to_numpy(zero_copy_only=False)
    if plain.any():
        # 16+ integer digits of µs overflow int64 ns when scaled: the exact (Decimal) path
        # range-checks those instead of letting the multiplication wrap around
        long_whole = pc.utf8_length(parts.filter(pa.array(plain)).field("whole")).to_numpy(
            zero_copy_only=False) > 15
        if long_whole.any():
            plain[np.flatnonzero(plain)[long_whole]] = False
    if plain.any():
        ok = parts.filter(pa.array(plain))
        sign = ok.field("sign").to_numpy(zero_copy_only=False)
        whole = pc.cast(ok.field("whole"), pa.int64()).to_numpy()
        frac = pc.utf8_rpad(ok.field("frac").fill_null(""), 4, "0")
        first3 = pc.cast(pc.utf8_slice_codeunits(frac, 0, 3), pa.int64()).to_numpy()
        fourth = pc.cast(pc.utf8_slice_codeunits(frac, 3, 4), pa.int64()).to_numpy()
        mag = whole * 1000 + first3 + (fourth >= 5)
        ns[plain] = np.where(sign == "-", -mag, mag)
    for i in np.flatnonzero(~plain):  # exponent forms and garbage only: rare
        try:
            d = Decimal(str(arr[i]).strip()) * 1000
            if not d.is_finite() or abs(d) > _INT64_MAX:  # never wrapped around
                raise InvalidOperation
            ns[i] = int(d.to_integral_value(rounding="ROUND_HALF_UP"))
        except (InvalidOperation, ValueError, TypeError, OverflowError):
            bad[i] = True
    return ns, bad


_INT64_MAX = 2**63 - 1


def lookup(values: Any, table: dict[Any, Any], default: Any = None) -> np.ndarray:
    """``table[v]`` for each value (``default`` when absent), computed once per distinct value."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=False)
    lut = np.empty(len(uniques), dtype=object)
    lut[:] = [table.get(u, default) for u in uniques]
    return lut[codes]


def snake(name: str) -> str:
    """``'aic_mac_time(us)'`` -> ``'aic_mac_time_us'``; ``'Block Dim'`` -> ``'block_dim'``;
    ``'cube_utilization(%)'`` -> ``'cube_utilization_pct'``."""
    t = name.strip().replace("%", "pct")
    t = re.sub(r"[^0-9A-Za-z]+", "_", t)
    t = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", t)
    return t.strip("_").lower()


CSV_CELL_LIMIT = 16 << 20


def read_csv(path: Path, required: Sequence[Sequence[str]]) -> pd.DataFrame:
    """A CSV as strings (whitespace stripped). ``required``: groups of alternative header
    names, one of each group must be present. Rows with a wrong number of fields raise an
    ``ImportFormatError`` naming the line (1 = header)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", path=path,
                                where=f"byte {exc.start}", hint="expected a CSV file") from None
    # Cells of up to 16 MiB: csv's default limit (128 KiB) is below a long Input Shapes cell
    # of a real kernel_details.csv; a longer one is refused with the file named.
    csv.field_size_limit(max(csv.field_size_limit(), CSV_CELL_LIMIT))
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:  # a cell beyond the field limit, a NUL byte, a broken quote
        raise ImportFormatError(f"malformed CSV ({exc})", path=path,
                                hint="the file is damaged or not an Ascend profiler CSV"
                                ) from None
    if not rows:
        raise ImportFormatError("empty file", path=path, where="line 1",
                                hint="expected a CSV header")
    header = [h.strip() for h in rows[0]]
    for group in required:
        if not any(g in header for g in group):
            want = " or ".join(repr(g) for g in group)
            raise ImportFormatError(f"header has no column {want}", path=path, where="line 1",
                                    hint=f"found {', '.join(header[:8])}...; is this an "
                                         f"Ascend profiler {path.name}?")
    repeated = [h for h, n in Counter(header).items() if n > 1]
    if repeated:  # a column read by name would be two columns
        raise ImportFormatError(f"header repeats column {repeated[0]!r}", path=path,
                                where="line 1", hint="the file is hand-edited or damaged; "
                                                     "keep one column of each name")
    # Line numbers: csv.reader joins quoted multi-line cells, so count physical lines via
    # line_num of a second pass only when a row is bad (rare).
    width = len(header)
    body = rows[1:]
    lens = np.fromiter((len(r) for r in body), dtype=np.int64, count=len(body))
    wrong = np.flatnonzero((lens != width) & (lens != 0))
    if len(wrong):
        i = int(wrong[0])
        raise ImportFormatError(f"row has {lens[i]} fields, the header has {width}", path=path,
                                where=f"line {_physical_line(text, i + 1)}",
                                hint="the file is cut or hand-edited; re-export it")
    body = [r for r in body if r]
    df = pd.DataFrame(body, columns=header, dtype=object)
    for c in df.columns:
        df[c] = df[c].astype(str).str.strip()
    df.attrs["lines"] = _row_lines(text, len(rows))
    return df


def _row_lines(text: str, nrows: int) -> np.ndarray:
    """Physical line number (1-based) of each data row, accounting for multi-line cells."""
    reader = csv.reader(io.StringIO(text, newline=""))
    lines = []
    start = 1
    for r in reader:
        if r:
            lines.append(start)
        start = reader.line_num + 1
    return np.asarray(lines[1:nrows], dtype=np.int64)


def _physical_line(text: str, row_index: int) -> int:
    reader = csv.reader(io.StringIO(text, newline=""))
    start = 1
    for i, _ in enumerate(reader):
        if i == row_index:
            return start
        start = reader.line_num + 1
    return start


def numeric(df: pd.DataFrame, col: str, path: Path, *, what: str = "a number") -> np.ndarray:
    """Column as float64 (NA tokens -> NaN); a non-numeric cell raises naming its line."""
    raw = df[col]
    na = raw.isin(NA_TOKENS).to_numpy()
    vals = pd.to_numeric(raw.where(~na), errors="coerce").to_numpy(float)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(vals) & ~na  # text, "inf", "nan", overflowing exponents
        if what == "an integer":  # ids and step numbers: whole, and exact in int64/float64
            bad |= ~na & np.isfinite(vals) & ((vals != np.round(vals)) | (np.abs(vals) > 2**53))
    if bad.any():
        _bad_cell(df, col, int(np.flatnonzero(bad)[0]), path, what)
    return vals


def times_ns(df: pd.DataFrame, col: str, path: Path, *, allow_na: bool = False) -> np.ndarray:
    """A µs column as exact int64 ns; a non-numeric (or, unless allowed, NA) cell raises."""
    raw = df[col]
    na = raw.isin(NA_TOKENS).to_numpy()
    ns, bad = us_to_ns(raw.where(~na, "0").to_numpy())
    bad |= na & (not allow_na)
    if bad.any():
        _bad_cell(df, col, int(np.flatnonzero(bad)[0]), path, "a time in µs")
    return ns


def _bad_cell(df: pd.DataFrame, col: str, i: int, path: Path, what: str) -> None:
    lines = df.attrs.get("lines")
    line = int(lines[i]) if lines is not None and i < len(lines) else i + 2
    raise ImportFormatError(f"column {col!r} has {df[col].iat[i]!r}, expected {what}",
                            path=path, where=f"line {line}",
                            hint="the file is damaged or not an Ascend profiler export")


def load_json(path: Path) -> Any:
    """Parse a JSON file; malformed or truncated input raises naming the byte offset."""
    data = path.read_bytes()
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        pass
    # Only on the error path: the standard parser gives line and column as well.
    try:
        obj = json.loads(data)
    except json.JSONDecodeError as exc:
        offset = len(exc.doc[:exc.pos].encode("utf-8")) if isinstance(exc.doc, str) else exc.pos
        truncated = exc.pos >= len(exc.doc.rstrip()) if isinstance(exc.doc, str) else False
        raise ImportFormatError(
            f"invalid JSON: {exc.msg}" + (" (the file ends early: truncated?)" if truncated
                                          else ""),
            path=path, where=f"byte offset {offset}, line {exc.lineno} column {exc.colno}",
            hint="expected a complete JSON document; re-export the profile") from None
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", path=path,
                                where=f"byte offset {exc.start}",
                                hint="expected a JSON file") from None
    _no_lone_surrogate(obj, data, path)
    return obj


#: a UTF-16 surrogate escape that is not half of a pair
_LONE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|"
                   rb"(?<![0-9a-fA-F]{4})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _no_lone_surrogate(obj: Any, data: bytes, path: Path) -> None:
    """The standard parser (unlike msgspec) accepts ``"\\udc80"``: a string no UTF-8 output
    can hold. Refused here, on the rare path only, naming the first such escape's offset."""
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        m = _LONE.search(data)
        raise ImportFormatError("invalid JSON: a string holds half a UTF-16 surrogate pair",
                                path=path, where=f"byte offset {m.start()}" if m else None,
                                hint="the file is damaged; re-export the profile") from None


def encode_args(args: pd.Series) -> list[str | None]:
    """Dicts -> JSON strings (None for empty dicts)."""
    enc = msgspec.json.encode
    return [enc(a).decode() if a else None for a in args]
