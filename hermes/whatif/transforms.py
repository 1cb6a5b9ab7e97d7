"""What an optimization does to a step graph: one transform per optimization, keyed by the rule
id and by the emulator option (``hermes emulate --opt`` name) that apply it.

A transform edits a :class:`~hermes.whatif.replay.Change` (scale an event's own time, drop a
dependency) the way Daydream's graph primitives do (Zhu et al., ATC'20: remove / shrink tasks,
drop dependencies, then re-simulate); the replay then tells what the rest of the step does with
the freed time. Every transform only removes or shrinks work (the replay's solver needs that).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hermes.whatif import commsize, hostpace
from hermes.whatif.comm import reschedule_comm, shrink_waits
from hermes.whatif.facts import args_at, duration, kinds, number
from hermes.whatif.fusion import DISPATCH_KINDS, fuse_elementwise
from hermes.whatif.replay import Change, StepGraph

#: factor on dispatch cost per option: sink / graph replay runs the whole step as one launch
#: (host cost per op ~ gone); fusion halves the operators; a 3-stage host pipeline spreads
#: the stages over three cores; a tiling cache skips the tiling stage on hits
DISPATCH_FACTOR = {"sink": 0.05, "fusion": 0.5, "pipeline": 0.4, "tiling_cache": 0.7,
                   "host_small_ops": 0.8}


@dataclass(frozen=True)
class Transform:
    """``apply(sg, change, params)`` edits ``change`` for one rank's graph ``sg``."""

    name: str
    what: str
    apply: Callable[[StepGraph, Change, Mapping[str, Any]], None]
    #: the component of the breakdown it shrinks (to say when two transforms overlap)
    touches: str
    #: ``missing(sg, params)``: why the trace cannot say what this transform does (None: it
    #: can); a transform that cannot is not applied and the rule's formula stands
    missing: Callable[[StepGraph, Mapping[str, Any]], str | None] | None = None
    #: finding causes (``Finding.cause``) whose time it removes, beyond the recommendation's
    #: own finding: the advisor bounds its gain by their shares together (docs/rules.md)
    removes: tuple[str, ...] = ()


def remove_gc(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """GC pauses take no time."""
    ch.scale[kinds(sg) == "gc"] = 0.0


def remove_compile(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Run-time compilation takes no time (static shapes: compiled once, before the steps)."""
    ch.scale[kinds(sg) == "compile"] = 0.0


def _into(sg: StepGraph, events: np.ndarray) -> np.ndarray:
    """Mask of the cross edges whose target is the end node of one of ``events``."""
    is_end = np.zeros(sg.g.n, bool)
    is_end[sg.g.event_end[events]] = True
    return is_end[sg.g.cv]


def remove_syncs(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Host syncs return at once: their time goes to zero and the awaited task's edge into
    them is dropped, so the host runs ahead (its later launches queue behind the device)."""
    sync = np.flatnonzero((kinds(sg) == "sync") & sg.info["host"].to_numpy(bool))
    ch.scale[sync] = 0.0
    ch.drop |= _into(sg, sync)


def hide_data_waits(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """More loader throughput (workers, prefetch, faster reads): a batch takes the loader
    ``P = wait + C`` per step (``C``: the step's time outside data waits, which the loader
    overlaps); ``k`` times the throughput makes the wait ``max(0, P / k - C)``: it hides up
    to the compute time (Daydream's data-loading what-if). ``params["speedup"]``: ``k``."""
    k = float(params.get("speedup", 2.0))
    # the loader's own work (read, decode, collate/pin) goes k times faster: what waits on
    # it through other lanes (a pinned copy the loop syncs on) moves up with it
    kind = kinds(sg)
    feed = sg.info["loader"].to_numpy(bool) | np.isin(kind, ("data_read", "data_process",
                                                              "data_fetch"))
    ch.scale[feed] *= 1.0 / k
    ch.early[feed] = True
    # a helper thread woken by the loader (pinning a batch after a read) waited a measured
    # gap that was the loader's work: that hold goes with it
    g = sg.g
    n_ev = np.flatnonzero(feed)
    starts, ends = np.zeros(g.n, bool), np.zeros(g.n, bool)
    starts[g.event_start[n_ev]], ends[g.event_end[n_ev]] = True, True
    inside = (g.cu < g.n) & (g.cv < g.n)
    ch.drop[inside] |= starts[g.cv[inside]] & ends[g.cu[inside]]
    wait = np.flatnonzero((kinds(sg) == "data_wait") & sg.info["host"].to_numpy(bool))
    if wait.size == 0:
        return
    win = sg.info["win"].to_numpy(np.int64)
    dur = (sg.info["end"] - sg.info["start"]).to_numpy(np.int64)
    nw = len(sg.windows)
    waited = np.bincount(win[wait], weights=dur[wait], minlength=nw)
    step = (sg.windows["end_ns"] - sg.windows["start_ns"]).to_numpy(np.float64)
    busy = np.maximum(step - waited, 0)
    left = np.maximum((waited + busy) / k - busy, 0.0)
    frac = np.where(waited > 0, np.minimum(left / np.maximum(waited, 1), 1.0), 1.0)
    ch.scale[wait] = frac[win[wait]]
    ch.full[wait] = True
    ch.drop |= _into(sg, wait)


#: where a local storage bandwidth may be recorded: the device profile, the run's settings
LOCAL_BW_KEYS = ("local_storage_Bps", "storage_local_Bps")


def _local_bw(params: Mapping[str, Any]) -> float:
    for src in (params.get("device") or {}, params.get("settings") or {}):
        for k in LOCAL_BW_KEYS:
            v = src.get(k)
            if isinstance(v, (int, float)) and v > 0:
                return float(v)
    return 0.0


def _reads(sg: StepGraph) -> np.ndarray:
    """Storage reads that move bytes: ``data_read`` events other than the extraction of
    archive members (named so, :data:`DECODE_NAME`), which reads from local storage keep."""
    return (kinds(sg) == "data_read") & ~_named_decode(sg)


def local_reads_missing(sg: StepGraph, params: Mapping[str, Any]) -> str | None:
    """What reading from local storage needs: the bytes each read moved (``bytes`` of the
    ``data_read`` events) and the local storage bandwidth (device profile or settings)."""
    reads = _reads(sg)
    if not reads.any():
        return "the trace records no storage reads"
    if not (number(sg, "bytes")[reads] > 0).all():
        return "the trace records no bytes per storage read"
    if not _local_bw(params):
        return "the trace records no local storage bandwidth"
    return None


def local_reads(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Reads from local storage: each read's transfer takes ``bytes / local bandwidth`` (not
    more than it took); what else the loader does with what it read (extracting archive
    members, processing) keeps its time. The loader's pace is its storage stage's (reads share
    the storage's bandwidth, and a batch's archive is extracted as it is read): its throughput
    grows by the ratio of the storage stage's time (every ``data_read`` event, transfers and
    extractions) before / after, which hides the data waits as :func:`hide_data_waits` does."""
    reads = _reads(sg)
    stage = _storage_stage(sg)
    dur = np.maximum(duration(sg), 1.0)
    new = np.minimum(number(sg, "bytes") / _local_bw(params) * 1e9, dur)
    before = dur[stage].sum()
    after = before - (dur[reads] - new[reads]).sum()
    hide_data_waits(sg, ch, {"speedup": before / max(after, 1.0)} if after < before else
                    {"speedup": 1.0})
    ch.scale[reads] = np.minimum(ch.scale[reads], new[reads] / dur[reads])


#: loader events that decompress / extract archive members (by name)
DECODE_NAME = r"decompress|unzip|untar|inflate|extract|unpack|gunzip|zstd|lz4"


def _named(sg: StepGraph, pattern: str) -> np.ndarray:
    """Per event: its name matches ``pattern`` (case-insensitive; once per distinct name)."""
    codes, uniq = pd.factorize(sg.info["name"].astype(str), use_na_sentinel=False)
    hit = pd.Series(np.asarray(uniq, dtype=object), dtype=object).astype(str).str.contains(
        pattern, case=False, regex=True).to_numpy(bool)
    return hit[codes] if len(codes) else np.zeros(0, bool)


def _named_decode(sg: StepGraph) -> np.ndarray:
    return _named(sg, DECODE_NAME)


def _decodes(sg: StepGraph) -> np.ndarray:
    return sg.info["loader"].to_numpy(bool) & _named_decode(sg)


def _storage_stage(sg: StepGraph) -> np.ndarray:
    """The loader's storage stage: its reads and the extraction of what they read."""
    return (kinds(sg) == "data_read") | _decodes(sg)


def decode_missing(sg: StepGraph, params: Mapping[str, Any]) -> str | None:
    return None if _decodes(sg).any() else \
        "the trace records no decompression apart from the reads"


def no_decode(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Uncompressed samples: the loader's decompression events take no time; its throughput
    grows by the ratio of its storage stage's time (reads and extractions, as in
    :func:`local_reads`) before / after (data waits hidden as :func:`hide_data_waits` does)."""
    dec = _decodes(sg)
    dur = duration(sg)
    before = dur[_storage_stage(sg)].sum()
    after = before - dur[dec].sum()
    hide_data_waits(sg, ch, {"speedup": before / after if after > 0 else 2.0})
    ch.scale[dec] = 0.0


#: what a faster loader removes: every loader event and data wait, whichever of these the
#: analysis classified them as (more workers also read faster, faster reads also process sooner)
LOADER_CAUSES = ("slow_data_reading", "slow_data_processing", "slow_data_fetching")

#: what a host that gets ahead of the device removes (syncs gone, host calls back at their pace):
#: the device-idle time the analysis gives host dispatch is then hidden behind queued kernels
HOST_AHEAD = ("operator_dispatch",)

#: a host-to-device copy from pageable memory (its name or args say so; Kineto, Hermes)
PAGEABLE = r"pageable|\"pinned\"\s*:\s*false"


def _pageable(sg: StepGraph) -> np.ndarray:
    out = (kinds(sg) == "memcpy_h2d") & ~sg.info["host"].to_numpy(bool)
    rows = np.flatnonzero(out)  # (the text of the device copies only)
    text = sg.info["name"].iloc[rows].astype(str)
    args = args_at(sg, rows)
    if args is not None:
        text = text + " " + args.astype(str)
    out[rows] = text.str.contains(PAGEABLE, case=False, regex=True).to_numpy(bool)
    return out


def pinned_missing(sg: StepGraph, params: Mapping[str, Any]) -> str | None:
    copies = _pageable(sg)
    if not copies.any():
        return "the trace records no host-to-device copies from pageable memory"
    if not (number(sg, "bytes")[copies] > 0).all():
        return "the trace records no bytes per pageable copy"
    if not float((params.get("device") or {}).get("h2d_pinned_Bps") or 0) > 0:
        return "the device profile gives no pinned host-to-device bandwidth"
    return None


def pin_memory(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Page-locked batches: each host-to-device copy from pageable memory takes ``bytes /
    pinned bandwidth`` (device profile), not more than it took; what waits for the copy (the
    loop's data wait, kernels reading the batch) moves up with it. (Pinning, a host memcpy on
    the pin-memory thread, runs ahead of the copy, off the step's chain.)"""
    copies = _pageable(sg)
    bw = float((params.get("device") or {}).get("h2d_pinned_Bps") or 0)
    dur = np.maximum(duration(sg), 1.0)
    new = number(sg, "bytes") / bw * 1e9
    ch.scale[copies] *= np.clip(new[copies] / dur[copies], 0.0, 1.0)
    host = sg.info["host"].to_numpy(bool)
    shrink_waits(sg, ch, copies, np.isin(kinds(sg), ("data_wait", "sync")) & host)


def scale_dispatch(factor: float) -> Callable[[StepGraph, Change, Mapping[str, Any]], None]:
    def apply(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
        f = float(params.get("factor", factor))
        host = sg.info["host"].to_numpy(bool) & ~sg.info["loader"].to_numpy(bool)
        sel = host & np.isin(kinds(sg), DISPATCH_KINDS)
        ch.scale[sel] *= f
    apply.__doc__ = f"Host dispatch time per operator x {factor} (graph replay / fusion)."
    return apply


#: rank-level transform: handled by ``hermes.whatif.predict`` on the ranks replayed together
#: (the slowest rank's own pace brought to the slowest other rank's), not per graph
STRAGGLER = "isolate_slow_node"


def _noop(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Nothing per graph: the slow rank's stalls and durations are scaled by ``predict``."""


def _registry() -> dict[str, Transform]:
    out: dict[str, Transform] = {}

    def add(t: Transform, *aliases: str) -> None:
        for a in (t.name, *aliases):
            out[a] = t

    add(Transform("gc", "remove GC pauses", remove_gc, "host"),
        "gc_freeze", "gc_threshold", "cpu.gc_freeze", "cpu.gc_threshold")
    add(Transform("compile", "remove run-time compilation", remove_compile, "host"),
        "static_shapes", "cpu.compile_static_shapes")
    add(Transform("remove_syncs", "remove host-device syncs", remove_syncs, "sync",
                  removes=HOST_AHEAD),
        "cpu.sync_remove")
    add(Transform("data", "hide data waits behind compute", hide_data_waits, "io",
                  removes=LOADER_CAUSES),
        "num_workers", "prefetch", "io.processing_more_workers", "io.fetch_prefetch")
    add(Transform("pin_memory", "host-to-device copies from page-locked memory", pin_memory,
                  "io", pinned_missing), "io.fetch_pin_memory")
    add(Transform("uncompressed", "read uncompressed samples", no_decode, "io",
                  decode_missing, LOADER_CAUSES), "io.read_uncompressed")
    add(Transform("local_storage", "read from local storage", local_reads, "io",
                  local_reads_missing, LOADER_CAUSES), "io.read_local_storage")
    for opt, f in DISPATCH_FACTOR.items():
        # (the option "fusion" also answers memory-bound kernels, a device-side change with
        # no transform yet: only the dispatch rule's id names this one)
        aliases = (f"cpu.dispatch_{opt}",) if opt == "fusion" else (opt, f"cpu.dispatch_{opt}")
        add(Transform(f"dispatch_{opt}", f"host dispatch cost x {f}", scale_dispatch(f),
                      "host"), *aliases)
    add(Transform("fuse_elementwise", "fold memory-bound kernels into their producers",
                  fuse_elementwise, "computation"),
        "fusion", "computation.memory_fusion", "computation.bigger_kernels")
    add(Transform("reschedule_comm", "gradient collectives once per step, each alone",
                  reschedule_comm, "communication"),
        "parallel.overlap_grad_comm", "communication.reschedule")
    add(Transform(STRAGGLER, "scale the slowest rank to the next slowest", _noop, "rank"),
        "computation.isolate_slow_node", "communication.fix_straggler")
    add(Transform("uncontended", "host CPU work at the device profile's launch pace",
                  hostpace.uncontended, "host", hostpace.missing,
                  ("garbage_collection", "operator_compilation", *HOST_AHEAD)),
        "stop_competing", "cpu.contention_stop")
    add(Transform("quiet_logging", "no log line per host call", hostpace.quiet_logging,
                  "host", hostpace.missing, HOST_AHEAD), "log_level", "cpu.env_log_level")
    add(Transform("grad_bucket_mb", "gradient collectives merged into bigger buckets",
                  commsize.bigger_buckets, "communication", commsize.missing),
        "communication.bigger_buckets")
    add(Transform("align_sizes", "message sizes padded to the link's alignment",
                  commsize.align_sizes, "communication", commsize.align_missing),
        "communication.align_512")
    add(Transform("hccl_env", "collectives at the link's bandwidth (environment corrected)",
                  commsize.fix_network, "communication", commsize.missing),
        "communication.network_env")
    return out


TRANSFORMS: dict[str, Transform] = _registry()


def lookup(spec: str) -> tuple[Transform, dict[str, Any]] | None:
    """The transform for a rule id or an emulator option ``NAME[=VALUE]`` (None: no transform
    yet, the formula stands) and its parameters."""
    name, _, value = spec.partition("=")
    t = TRANSFORMS.get(name.strip())
    if t is None:
        return None
    params: dict[str, Any] = {}
    if value and t.name == "data":
        try:
            params["workers"] = float(value)
        except ValueError:
            pass
    if value and t.name == "grad_bucket_mb":
        try:
            params["bucket_mb"] = float(value)
        except ValueError:
            pass
    return t, params
