"""Chrome trace-event JSON text, built for many events at once (see ``hermes.trace.chrome``).

Every function turns Arrow/numpy columns into Arrow string arrays, one JSON element per event,
each starting with ``",\\n"`` (the array separator), using Arrow's vectorized string kernels: no
Python object per event. Times are exact: integer nanoseconds become microsecond decimal text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Typed columns copied into ``args`` when non-null, in this order.
ARG_COLUMNS: tuple[str, ...] = ("step", "corr_id", "external_id", "stream", "unit", "flops",
                                "bytes", "value", "coll_group", "coll_seq", "coll_bytes")
FLOW_CAT = "ac2g"  # Kineto's category for launch -> device-task flows


def codes(arr: pa.Array) -> tuple[np.ndarray, list[Any]]:
    """Integer codes and their values for a (dictionary) column."""
    if not pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_encode()
    idx = arr.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return idx, arr.dictionary.to_pylist()


def mask_of(arr: pa.Array, value: str) -> np.ndarray:
    """Rows of a dictionary/string column equal to ``value`` (compares distinct values only)."""
    idx, values = codes(arr)
    hits = [i for i, v in enumerate(values) if v == value]
    return np.isin(idx, hits) & pc.is_valid(arr).to_numpy(zero_copy_only=False)


def us_text(ns: np.ndarray) -> pa.Array:
    """Integer nanoseconds -> exact microsecond decimal text with 3 decimals."""
    ns = np.asarray(ns, dtype=np.int64)
    neg = ns < 0
    # the magnitude as uint64: np.abs(-2**63) would overflow back to -2**63 ("--..." text)
    a = np.where(neg, ~ns.view(np.uint64) + np.uint64(1), ns.view(np.uint64))
    thousand = np.uint64(1000)
    whole = pc.cast(pa.array(a // thousand), pa.string())
    frac = pc.utf8_lpad(pc.cast(pa.array(a % thousand), pa.string()), width=3, padding="0")
    text = pc.binary_join_element_wise(whole, frac, ".")
    if neg.any():
        text = pc.if_else(pa.array(neg), pc.binary_join_element_wise("-", text, ""), text)
    return text


def _json_strings(arr: pa.Array) -> pa.Array:
    """JSON string literals of a dictionary/string column (escaping each distinct value once)."""
    idx_arr = arr if pa.types.is_dictionary(arr.type) else arr.dictionary_encode()
    lits = pa.array([None if v is None else json.dumps(v, ensure_ascii=False)
                     for v in idx_arr.dictionary.to_pylist()], pa.string())
    return pc.take(lits, idx_arr.indices)


def _number_text(arr: pa.Array) -> pa.Array:
    """JSON number text; null where null or not finite (JSON has no NaN/inf)."""
    text = pc.cast(arr, pa.string())
    if pa.types.is_floating(arr.type):
        text = pc.if_else(pc.is_finite(arr), text, pa.scalar(None, pa.string()))
    return text


def _keyed(key: str, text: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(f'"{key}":', text, "")  # null stays null


_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def _args_inner(args: pa.Array) -> pa.Array:
    """The members of each ``args`` JSON object without braces (null when empty or null).
    A value that is not a JSON object is kept as ``"args_text": "<the text>"``."""
    text = pc.utf8_trim_whitespace(args)
    is_obj = pc.and_(pc.starts_with(text, "{"), pc.ends_with(text, "}"))
    inner = pc.utf8_trim_whitespace(pc.utf8_slice_codeunits(text, 1, -1))
    inner = pc.if_else(pc.equal(inner, ""), pa.scalar(None, pa.string()), inner)
    ok = pc.fill_null(is_obj, True)
    valid = pc.filter(text, pc.fill_null(is_obj, False))
    if len(valid):  # one C-level parse of the whole batch checks that the objects are JSON
        joined = pc.binary_join(pa.array([valid], pa.list_(pa.string())), ",")[0].as_py()
        try:
            _RAW_LIST.decode(f"[{joined}]")
        except msgspec.DecodeError:
            ok = pc.and_(ok, pa.array([_is_json(t) for t in text.to_pylist()]))
    if pc.all(ok).as_py() is True:
        return inner
    kept = pc.binary_join_element_wise('"args_text":', _json_strings(args), "")
    return pc.if_else(ok, inner, kept)


def _is_json(text: str | None) -> bool:
    if text is None:
        return True
    if not (text.startswith("{") and text.endswith("}")):
        return False
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError:
        return False
    return True


def format_batch(batch: pa.RecordBatch, tids: np.ndarray, ts_ns: np.ndarray) -> pa.Array:
    """One text per event, each starting with ``",\\n"`` (the array separator)."""
    col = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
    dur_ns = col["dur_ns"].fill_null(0).to_numpy(zero_copy_only=False)
    counter_np = mask_of(col["kind"], "counter")
    is_counter = pa.array(counter_np)
    is_instant = pa.array(mask_of(col["kind"], "marker") & (dur_ns == 0))
    head = pc.if_else(is_counter, '{"ph":"C"',
                      pc.if_else(is_instant, '{"ph":"i","s":"t"', '{"ph":"X"'))
    dur = pc.if_else(pc.or_(is_counter, is_instant), "",
                     pc.binary_join_element_wise(',"dur":', us_text(dur_ns), ""))
    pieces = [_keyed(c, _json_strings(col[c]) if pa.types.is_dictionary(col[c].type)
                     else _number_text(col[c]))
              for c in ARG_COLUMNS if col[c].null_count < len(col[c])]  # skip all-null ones
    # Each present member ends with ","; the last one's comma is trimmed (JSON members never
    # end with a comma). (binary_join's null_handling="skip" drops all-null rows in Arrow 26.)
    if col["args"].null_count < len(col["args"]):
        pieces.append(_args_inner(col["args"]))
    members = [pc.binary_join_element_wise(p, ",", "") for p in pieces] or [""]
    general = pc.utf8_rtrim(pc.binary_join_element_wise(*members, "", null_handling="replace"),
                            characters=",")
    value = _keyed("value", _number_text(col["value"]))
    args = pc.if_else(is_counter, value, general)
    line = pc.binary_join_element_wise(
        ",\n", head, ',"cat":', _json_strings(col["kind"]),
        ',"name":', _json_strings(col["name"]), ',"pid":', pc.cast(col["rank"], pa.string()),
        ',"tid":', pc.cast(pa.array(tids), pa.string()),
        ',"ts":', us_text(ts_ns), dur, ',"args":{', args, "}}", "",
        null_handling="replace")
    # Counters without a value cannot be plotted: leave them out.
    drop = counter_np & pc.is_null(col["value"]).to_numpy(zero_copy_only=False)
    return pc.filter(line, pa.array(~drop)) if drop.any() else line


#: Per correlated event, the fields a flow needs (compact dtypes: held for a whole file).
FLOW_FIELDS: dict[str, type] = {"rank": np.int32, "corr_id": np.int64, "host": np.bool_,
                                "launch": np.bool_, "ts_ns": np.int64, "tid": np.int32}


def format_flows(ev: dict[str, np.ndarray], first_id: int, chunk_rows: int = 65_536,
                 ) -> tuple[Iterator[pa.Array], int]:
    """Flow events for the correlated events of one file, each text starting with ``",\\n"``.

    ``ev``: arrays named as in ``FLOW_FIELDS`` (ts_ns on the output clock). Per (rank,
    corr_id), the host event is the launch if there is one, else the earliest host event.
    Returns (chunks of at most ``chunk_rows`` device events: the ``s`` events of the flows
    they end, then their ``f`` events; the next free flow id)."""
    if not len(ev["rank"]):
        return iter(()), first_id
    # Each (rank, corr_id) group sorted: host events first (launches first, then by time),
    # then device events by time. No pandas merge: a few index arrays instead.
    order = np.lexsort((ev["ts_ns"], ~ev["launch"], ~ev["host"], ev["corr_id"], ev["rank"]))
    rank, corr, host = ev["rank"][order], ev["corr_id"][order], ev["host"][order]
    new = np.r_[True, (rank[1:] != rank[:-1]) | (corr[1:] != corr[:-1])]
    group_start = np.maximum.accumulate(np.where(new, np.arange(len(order)), 0))
    dev = np.flatnonzero(~host & host[group_start])  # device events of groups with a host
    if not len(dev):
        return iter(()), first_id
    h = group_start[dev]
    ids = np.cumsum(np.r_[True, h[1:] != h[:-1]]) - 1 + first_id
    starts = np.r_[True, ids[1:] != ids[:-1]]
    cols = {"rank": rank[dev], "tid_h": ev["tid"][order[h]], "tid_d": ev["tid"][order[dev]],
            "ts_ns_h": ev["ts_ns"][order[h]], "ts_ns_d": ev["ts_ns"][order[dev]]}

    def text(ph: str, sel: slice | np.ndarray, side: str) -> pa.Array:
        return pc.binary_join_element_wise(
            f',\n{{"ph":"{ph}",' + ('"bp":"e",' if ph == "f" else "")
            + f'"cat":"{FLOW_CAT}","name":"{FLOW_CAT}","id":',
            pc.cast(pa.array(ids[sel]), pa.string()),
            ',"pid":', pc.cast(pa.array(cols["rank"][sel]), pa.string()),
            ',"tid":', pc.cast(pa.array(cols[f"tid_{side}"][sel]), pa.string()),
            ',"ts":', us_text(cols[f"ts_ns_{side}"][sel]), "}", "")

    def chunks() -> Iterator[pa.Array]:
        for lo in range(0, len(ids), chunk_rows):
            part = slice(lo, lo + chunk_rows)
            first = np.flatnonzero(starts[part]) + lo
            yield text("s", first, "h")
            yield text("f", part, "d")

    return chunks(), int(ids.max()) + 1
