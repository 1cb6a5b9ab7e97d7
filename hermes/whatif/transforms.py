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

from hermes.whatif.replay import Change, StepGraph

#: host-side kinds whose time is the framework's dispatch cost per operator
DISPATCH_KINDS = ("host_op", "python", "infer_shape", "tiling", "launch", "runtime", "alloc")
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


def _kind(sg: StepGraph) -> np.ndarray:
    return sg.info["kind"].astype(str).to_numpy()


def remove_gc(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """GC pauses take no time."""
    ch.scale[_kind(sg) == "gc"] = 0.0


def remove_compile(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Run-time compilation takes no time (static shapes: compiled once, before the steps)."""
    ch.scale[_kind(sg) == "compile"] = 0.0


def _into(sg: StepGraph, events: np.ndarray) -> np.ndarray:
    """Mask of the cross edges whose target is the end node of one of ``events``."""
    is_end = np.zeros(sg.g.n, bool)
    is_end[sg.g.event_end[events]] = True
    return is_end[sg.g.cv]


def remove_syncs(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
    """Host syncs return at once: their time goes to zero and the awaited task's edge into
    them is dropped, so the host runs ahead (its later launches queue behind the device)."""
    sync = np.flatnonzero((_kind(sg) == "sync") & sg.info["host"].to_numpy(bool))
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
    kind = _kind(sg)
    feed = sg.info["loader"].to_numpy(bool) | np.isin(kind, ("data_read", "data_process",
                                                              "data_fetch"))
    ch.scale[feed] *= 1.0 / k
    ch.early[feed] = True
    wait = np.flatnonzero((_kind(sg) == "data_wait") & sg.info["host"].to_numpy(bool))
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


def scale_dispatch(factor: float) -> Callable[[StepGraph, Change, Mapping[str, Any]], None]:
    def apply(sg: StepGraph, ch: Change, params: Mapping[str, Any]) -> None:
        f = float(params.get("factor", factor))
        host = sg.info["host"].to_numpy(bool) & ~sg.info["loader"].to_numpy(bool)
        sel = host & np.isin(_kind(sg), DISPATCH_KINDS)
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
    add(Transform("remove_syncs", "remove host-device syncs", remove_syncs, "sync"),
        "cpu.sync_remove")
    add(Transform("data", "hide data waits behind compute", hide_data_waits, "io"),
        "num_workers", "prefetch", "pin_memory", "local_storage", "uncompressed",
        "io.processing_more_workers", "io.fetch_prefetch", "io.fetch_pin_memory",
        "io.read_local_storage", "io.read_uncompressed")
    for opt, f in DISPATCH_FACTOR.items():
        # (the option "fusion" also answers memory-bound kernels, a device-side change with
        # no transform yet: only the dispatch rule's id names this one)
        aliases = (f"cpu.dispatch_{opt}",) if opt == "fusion" else (opt, f"cpu.dispatch_{opt}")
        add(Transform(f"dispatch_{opt}", f"host dispatch cost x {f}", scale_dispatch(f),
                      "host"), *aliases)
    add(Transform(STRAGGLER, "scale the slowest rank to the next slowest", _noop, "rank"),
        "computation.isolate_slow_node", "communication.fix_straggler")
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
    return t, params
