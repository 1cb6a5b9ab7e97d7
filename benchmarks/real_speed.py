"""Hermes against HolisticTraceAnalysis 0.5 on real traces (issue 37), for ``analysis_speed.py``.

Item 4, every shared Kineto trace of at least ``--real-min-events`` events (the
``traceEvents`` entries, metadata and flows included, as ``import_speed.py`` counts them): one
``hermes analyze FILE`` process per run against HTA's load + temporal breakdown + comm/comp
overlap of the same file, wall seconds and peak RSS of each child, medians; the ratios
HTA / Hermes (speed) and Hermes / HTA (memory).

Item 5, a ~``--big-mb`` MB trace of repeated real steps (:func:`repeat_steps`): the whole
source trace once, then its events from the first ``ProfilerStep#`` on again and again, each
copy shifted past the previous one in time and in every id (correlation, ``External id``,
flow ids, event and record-function indices), its steps renumbered -- the event mix, args,
names, threads and streams of a real run, at the size of a long capture. Cached under
``benchmarks/.cache``.

A helper of ``analysis_speed.py`` (``--items 4,5``); it has no command of its own.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
CACHE = Path(__file__).resolve().parent / ".cache"
#: the issue's bar for a "big" real trace, and its targets
MIN_EVENTS = 100_000
REAL_SPEEDUP, REAL_RSS_SHARE = 8.0, 0.5  # item 4: >= 8x faster, <= 0.5 of HTA's peak RSS
BIG_SPEEDUP, BIG_RSS_SHARE, BIG_S = 15.0, 0.2, 12.0  # item 5
#: the source of item 5: a training trace with 5 ProfilerStep ranges, memory events, flows
BIG_SOURCE = "hta/df_index_resolver/df_index_resolver.json.gz"
#: item 4's file in a smoke run (5k events), and item 5's source there
SMOKE_TRACE = "kineto-h100-dist/ddp_gloo_balanced_rank0.pt.trace.json.gz"
SMOKE_SOURCE = "kineto-h100/gpt_balanced.pt.trace.json.gz"
#: ids shifted per copy: in args, and the flow events' own ``id``
ARG_IDS = ("correlation", "External id", "Ev Idx", "Record function id", "Python id",
           "Python parent id", "Sequence number")


def _open(path: Path) -> Any:
    return gzip.open(path, "rt") if path.suffix == ".gz" else open(path)


_PH = re.compile(rb'"ph"\s*:')


def count_events(path: Path) -> int:
    """Events of a Chrome-trace JSON file, counted in its text without parsing it (one ``"ph":``
    key each; 0 for a file that is not a trace): this process stays small, and the children it
    measures start from it (``childproc``)."""
    n, tail = 0, b""
    try:
        with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as f:
            while block := f.read(1 << 22):
                buf = tail + block
                n += len(_PH.findall(buf))
                tail = buf[-16:]  # a key cut at the border is counted in the next block...
                n -= len(_PH.findall(tail))  # ...and not twice
        n += len(_PH.findall(tail))  # (the last block's tail has no next block)
    except (OSError, EOFError, gzip.BadGzipFile):
        return 0
    return n


def real_traces(min_events: int = MIN_EVENTS, root: Path = SHARED) -> list[tuple[str, Path, int]]:
    """(name relative to ``root``, path, events) of every Kineto trace there with at least
    ``min_events`` events, largest first. Files under 0.5 MB are skipped unread below 100k
    (no Kineto file of 100k events is that small, even gzipped: ~14 bytes an event)."""
    out = []
    for p in sorted(root.rglob("*.json*")):
        if p.suffix not in (".json", ".gz") or (min_events >= 100_000 and
                                                p.stat().st_size < 500_000):
            continue
        n = count_events(p)
        if n >= max(min_events, 1):
            out.append((str(p.relative_to(root)), p, n))
    return sorted(out, key=lambda t: -t[2])


def _hermes(path: Path, repeat: int) -> tuple[float, float, list[float]]:
    from analysis_speed import _hermes_exe, _wall

    return _wall([*_hermes_exe(), "analyze", str(path)], repeat)


def _hta(path: Path, repeat: int) -> tuple[float, float, list[float]]:
    from analysis_speed import HTA_CHILD, _wall
    from hta_env import ensure_hta_venv

    return _wall([str(ensure_hta_venv()), "-c", HTA_CHILD, str(path)], repeat)


def real_files(repeat: int, hta_repeat: int, min_events: int = MIN_EVENTS,
               smoke: bool = False) -> list[dict[str, Any]]:
    """Item 4 (see the module doc); returns one record per file. ``smoke``: the smallest
    shared Kineto trace, Hermes only."""
    if smoke:
        p = SHARED / SMOKE_TRACE
        files = [(SMOKE_TRACE, p, count_events(p))]
    else:
        files = real_traces(min_events)
    print(f"\n4. real traces of >= {min_events:,} events (`hermes analyze FILE` vs HTA's load + "
          f"temporal breakdown + overlap; Hermes {repeat} run(s), HTA {hta_repeat}, medians)")
    print(f"  {'trace':<58} {'events':>8} | {'Hermes s':>8} {'GiB':>5} | {'HTA s':>7} "
          f"{'GiB':>5} | {'speed-up':>8} {'RSS ratio':>9}")
    rows = []
    for name, path, n in files:
        hs, hm, hruns = _hermes(path, repeat)
        ts = tm = float("nan")
        truns: list[float] = []
        if hta_repeat > 0:
            ts, tm, truns = _hta(path, hta_repeat)
        rows.append({"trace": name, "events": n, "hermes_s": hs, "hermes_gib": hm,
                     "hta_s": ts, "hta_gib": tm, "hermes_runs": hruns, "hta_runs": truns})
        short = name if len(name) <= 58 else "..." + name[-55:]
        print(f"  {short:<58} {n:>8,} | {hs:>8.2f} {hm:>5.2f} | {ts:>7.2f} {tm:>5.2f} | "
              f"{ts / hs:>7.1f}x {hm / tm:>9.3f}", flush=True)
    if hta_repeat > 0 and rows:
        sp = [r["hta_s"] / r["hermes_s"] for r in rows]
        mem = [r["hermes_gib"] / r["hta_gib"] for r in rows]
        print(f"  over {len(rows)} files: speed-up min {min(sp):.1f}x median "
              f"{statistics.median(sp):.1f}x; RSS ratio max {max(mem):.3f} median "
              f"{statistics.median(mem):.3f} (targets >= {REAL_SPEEDUP:.0f}x and <= "
              f"{REAL_RSS_SHARE} on every file: speed "
              f"{'met' if min(sp) >= REAL_SPEEDUP else 'NOT met'}, memory "
              f"{'met' if max(mem) <= REAL_RSS_SHARE else 'NOT met'})")
    return rows


def _shift_ids(e: dict[str, Any], k: int, off: dict[str, int]) -> dict[str, Any]:
    """A copy of event ``e`` for copy ``k``: ids advanced by ``k`` x their span."""
    e = dict(e)
    if "id" in e and isinstance(e["id"], int):
        e["id"] += k * off["id"]
    args = e.get("args")
    if isinstance(args, dict):
        hit = [a for a in ARG_IDS if isinstance(args.get(a), int) and args[a] >= 0]
        if hit:
            args = dict(args)
            for a in hit:
                args[a] += k * off[a]
            e["args"] = args
    return e


def repeat_steps(src: Path, out: Path, target_mb: float) -> int:
    """Write a Kineto JSON of about ``target_mb`` MB: ``src`` whole, then copies of its events
    from the first ``ProfilerStep#`` on (metadata once), each shifted by the span of what it
    copies in time and ids, its ``ProfilerStep#N`` renumbered after the last; returns the
    events written. A temporary file renamed into place (an interrupted run leaves none)."""
    with _open(src) as f:
        doc = json.load(f)
    ev = doc["traceEvents"]
    steps = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("ph") == "X"]
    if not steps:
        raise ValueError(f"{src}: no ProfilerStep# ranges to repeat")
    t0 = min(float(e["ts"]) for e in steps)
    timed = [e for e in ev if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
    unit = [e for e in timed if float(e["ts"]) >= t0]
    end = max(float(e["ts"]) + float(e.get("dur", 0) or 0) for e in unit)
    span = round(end - t0 + 1000.0)  # (1 ms apart: the copies' steps do not touch)
    off = {"id": 1 + max((e["id"] for e in ev if isinstance(e.get("id"), int)), default=0)}
    for a in ARG_IDS:
        vals = [e["args"][a] for e in ev if isinstance(e.get("args"), dict)
                and isinstance(e["args"].get(a), int)]
        off[a] = 1 + max(vals, default=0)
    numbers = [int(str(e["name"]).split("#", 1)[1]) for e in steps
               if str(e["name"]).split("#", 1)[1].isdigit()]
    n_steps = max(numbers) - min(numbers) + 1
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    tmp = out.with_name(out.name + ".tmp")
    n, written = 0, 0
    with open(tmp, "w") as f:
        f.write(json.dumps(head)[:-1] + (", " if head else "") + '"traceEvents": [\n')
        body = [json.dumps(e) for e in ev]
        f.write(",\n".join(body))
        written += sum(len(b) + 2 for b in body)
        n += len(body)
        sep = ",\n"
        k = 0
        while written < target_mb * 1e6 or k == 0:  # (one copy at least)
            k += 1
            parts = []
            for e in unit:
                c = _shift_ids(e, k, off)
                c["ts"] = float(e["ts"]) + k * span
                name = str(c.get("name", ""))
                if name.startswith("ProfilerStep#") and name[13:].isdigit():
                    c["name"] = f"ProfilerStep#{int(name[13:]) + k * n_steps}"
                parts.append(json.dumps(c))
            f.write(sep + ",\n".join(parts))
            written += sum(len(p) + 2 for p in parts)
            n += len(parts)
        f.write("\n]}\n")
    tmp.replace(out)
    return n


def big_real(mb: int, repeat: int, hta_repeat: int, smoke: bool = False) -> dict[str, Any]:
    """Item 5 (see the module doc)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    src = SHARED / (SMOKE_SOURCE if smoke else BIG_SOURCE)
    out = CACHE / f"real_steps_{src.name.split('.')[0]}_{mb}MB.json"
    if not out.exists():  # in a child: the source's objects would stay in this process
        code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                f"from pathlib import Path; import real_speed; "
                f"real_speed.repeat_steps(Path({str(src)!r}), Path({str(out)!r}), {mb})")
        subprocess.run([sys.executable, "-c", code], check=True)
    events = count_events(out)
    print(f"\n5. ~{mb} MB of repeated real steps ({src.relative_to(SHARED)}): {out.name} "
          f"({out.stat().st_size / 1e6:,.0f} MB, {events:,} events)")
    hs, hm, hruns = _hermes(out, repeat)
    print(f"  hermes analyze  {len(hruns)} run(s): median {hs:7.2f} s  peak RSS {hm:6.2f} GiB  "
          f"runs {' '.join(f'{s:.2f}' for s in hruns)}")
    rec = {"events": events, "hermes_s": hs, "hermes_gib": hm}
    if hta_repeat <= 0:
        return rec
    ts, tm, truns = _hta(out, hta_repeat)
    print(f"  HTA 0.5         {len(truns)} run(s): median {ts:7.2f} s  peak RSS {tm:6.2f} GiB  "
          f"runs {' '.join(f'{s:.2f}' for s in truns)}")
    print(f"  speed-up HTA/Hermes {ts / hs:.1f}x, peak RSS Hermes/HTA {hm / tm:.3f} (targets: "
          f">= {BIG_SPEEDUP:.0f}x, <= {BIG_RSS_SHARE}, <= {BIG_S:.0f} s: speed "
          f"{'met' if ts / hs >= BIG_SPEEDUP else 'NOT met'}, memory "
          f"{'met' if hm / tm <= BIG_RSS_SHARE else 'NOT met'}, time "
          f"{'met' if hs <= BIG_S else 'NOT met'})")
    rec.update({"hta_s": ts, "hta_gib": tm})
    return rec
