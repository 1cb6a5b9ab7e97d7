"""Optimizations users apply with ``--opt NAME[=VALUE]``: a registry of knob setters.

Boolean optimizations take no value (or ``on``/``off`` to compare both ways); the others take
an integer, a number, a log level or a parallel layout (``parallel=dp4,tp2,pp1``).
Optimizations are applied after injected causes, so ``--inject X --opt Y`` asks "what if Y".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hermes.errors import UsageError
from hermes.npu.settings import LOG_COST_S, Settings
from hermes.registry import Registry


@dataclass(frozen=True)
class Opt:
    name: str
    what: str
    parse: Callable[[str | None], Any]
    apply: Callable[[Settings, Any], Settings]
    example: str


def _bool(raw: str | None) -> bool:
    if raw is None or raw.lower() in ("on", "true", "1", "yes"):
        return True
    if raw.lower() in ("off", "false", "0", "no"):
        return False
    raise ValueError("expected no value, on or off")


def _int(raw: str | None) -> int:
    if raw is None:
        raise ValueError("needs a value")
    v = int(raw)
    if v < 0:
        raise ValueError("must be >= 0")
    return v


def _pos(raw: str | None) -> float:
    if raw is None:
        raise ValueError("needs a value")
    v = float(raw)
    if not v > 0:
        raise ValueError("must be > 0")
    return v


def _level(raw: str | None) -> str:
    if raw is None or raw.lower() not in LOG_COST_S:
        raise ValueError(f"one of {', '.join(LOG_COST_S)}")
    return raw.lower()


def _layout(raw: str | None) -> tuple[int, int, int]:
    parts = dict.fromkeys(("dp", "tp", "pp"), 1)
    for tok in (raw or "").split(","):
        m = re.fullmatch(r"(dp|tp|pp)(\d+)", tok.strip())
        if not m or int(m.group(2)) < 1:
            raise ValueError("like dp4,tp2,pp1")
        parts[m.group(1)] = int(m.group(2))
    return parts["dp"], parts["tp"], parts["pp"]


def _flag(field: str, value_when_on: Any = True, value_when_off: Any = None) -> Callable:
    def apply(s: Settings, on: bool) -> Settings:
        off = getattr(Settings(), field) if value_when_off is None else value_when_off
        return s.with_(**{field: value_when_on if on else off})
    return apply


OPTS: Registry[Opt] = Registry("optimization")
for _o in [
    Opt("tiling_cache", "cache tiling results by op signature and shape", _bool,
        _flag("tiling_cache", True, False), "tiling_cache"),
    Opt("pipeline", "3-stage host pipeline (MAX_RUNTIME_CORE_NUMBER=3)", _bool,
        _flag("pipeline", True, False), "pipeline"),
    Opt("host_small_ops", "compute small-shape operators on the host", _bool,
        _flag("host_small_ops", True, False), "host_small_ops"),
    Opt("fusion", "fuse elementwise operators into their producers", _bool,
        lambda s, on: s.with_(fusion=on, memory_scale=1.0 if on else s.memory_scale),
        "fusion"),
    Opt("sink", "sink (model offload) scheduling of a static graph", _bool,
        _flag("sink", True, False), "sink"),
    Opt("num_workers", "data-loader worker processes", _int,
        lambda s, v: s.with_(num_workers=max(v, 1)), "num_workers=12"),
    Opt("pin_memory", "page-locked host buffers for H2D copies", _bool,
        _flag("pin_memory", True, False), "pin_memory"),
    Opt("prefetch", "batches prefetched to the device", _int,
        lambda s, v: s.with_(prefetch=v), "prefetch=2"),
    Opt("local_storage", "read from local instead of remote storage", _bool,
        lambda s, on: s.with_(remote_storage=not on, storage_Bps=0.0 if on else s.storage_Bps),
        "local_storage"),
    Opt("uncompressed", "read uncompressed samples (no zip/tar)", _bool,
        lambda s, on: s.with_(compressed=not on), "uncompressed"),
    Opt("no_taskset", "drop taskset core binding of loader workers", _bool,
        lambda s, on: s.with_(taskset_cores=0 if on else 2), "no_taskset"),
    Opt("gc_threshold", "young-generation GC threshold (allocations)", _int,
        lambda s, v: s.with_(gc_threshold=max(v, 1), gc_full_every=max(s.gc_full_every, 100)),
        "gc_threshold=50000"),
    Opt("gc_freeze", "gc.freeze() after setup: long-lived objects not traversed", _bool,
        _flag("gc_freeze", True, False), "gc_freeze"),
    Opt("log_level", "host log level", _level,
        lambda s, v: s.with_(log_level=v, log_scale=s.log_scale if v == s.log_level else 1.0),
        "log_level=error"),
    Opt("static_shapes", "pad to static shapes, JIT off: no recompilation", _bool,
        lambda s, on: s.with_(dynamic_shapes=False, jit=False) if on else s, "static_shapes"),
    Opt("remove_syncs", "remove .item()-style host syncs inside the step", _bool,
        lambda s, on: s.with_(extra_syncs=0) if on else s, "remove_syncs"),
    Opt("affinity_api", "affinity APIs: Cube-aligned shapes, no AI CPU fallbacks", _bool,
        lambda s, on: s.with_(aligned=True, aicpu_fallback=False) if on else s, "affinity_api"),
    Opt("no_private_format", "forbid private formats (no TransData)", _bool,
        lambda s, on: s.with_(private_format=not on), "no_private_format"),
    Opt("grad_bucket_mb", "gradient fusion bucket size in MB", _pos,
        lambda s, v: s.with_(grad_bucket_mb=v), "grad_bucket_mb=100"),
    Opt("align_sizes", "pad messages to multiples of 512 B", _bool,
        lambda s, on: s.with_(align_sizes=on, misaligned=s.misaligned and not on),
        "align_sizes"),
    Opt("hccl_env", "correct HCCL environment variables", _bool,
        lambda s, on: s.with_(net_bw_factor=1.0) if on else s, "hccl_env"),
    Opt("reschedule_comm", "overlap gradient communication with backward, one at a time", _bool,
        lambda s, on: s.with_(overlap_comm=True, contention=0.0, grad_syncs=1) if on else s,
        "reschedule_comm"),
    Opt("isolate_slow_node", "replace the slow node / straggler", _bool,
        lambda s, on: s.with_(slow_rank=-1, slow_factor=1.0, late_rank=-1, late_s=0.0)
        if on else s, "isolate_slow_node"),
    Opt("parallel", "parallel layout dpN,tpN,ppN (product = ranks)", _layout,
        lambda s, v: s.with_(layout=v),
        "parallel=dp2,tp2,pp2"),
    Opt("stop_competing", "stop competing host processes", _bool,
        lambda s, on: s.with_(host_slowdown=1.0, other_cpu_pct=0.0) if on else s,
        "stop_competing"),
]:
    OPTS.add(_o.name, _o)


def parse(spec: str) -> tuple[str, Any]:
    """``NAME[=VALUE]`` -> (name, parsed value); errors name the valid optimizations."""
    name, eq, raw = spec.partition("=")
    name = name.strip()
    opt = OPTS.get(name, flag="--opt")
    try:
        return name, opt.parse(raw if eq else None)
    except ValueError as exc:
        raise UsageError(f"bad value {raw!r} for --opt {name}: {exc}",
                         hint=f"e.g. --opt {opt.example}") from None


def apply(settings: Settings, opts: list[tuple[str, Any]]) -> Settings:
    seen: dict[str, Any] = {}
    for name, value in opts:
        if name in seen and seen[name] != value:
            raise UsageError(f"--opt {name} given twice with different values "
                             f"({seen[name]!r} and {value!r})", hint="keep one")
        seen[name] = value
        settings = OPTS.get(name).apply(settings, value)
    return settings
