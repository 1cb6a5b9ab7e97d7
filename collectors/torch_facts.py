"""What a PyTorch job runs with, read from the live process for the trace's metadata.

When ``hermes profile`` runs a job that imports torch, :class:`Facts` records, at almost no
cost, the settings an analysis or a rule needs to know for certain instead of guessing:

* torch version; device type and name (``cuda`` via ``torch.cuda.get_device_name``, ``npu``
  via ``torch.npu`` where torch_npu is loaded, ``xpu``/``mps``, else ``cpu``: none);
* each DataLoader iterated: ``num_workers``, ``pin_memory``, ``prefetch_factor``,
  ``persistent_workers`` (read off the loader as the script built it, when its iterator is
  made; the loader that yielded the most batches is the job's);
* autocast: the device type and dtype of the first ``torch.autocast`` region entered;
* ``torch.compile``: whether it was called (and its ``backend``/``mode``);
* DDP: ``bucket_cap_mb`` (``bucket_bytes_cap``) of the first ``DistributedDataParallel``;
* world size and backend of the default process group (read at the first step and at the
  end, while it still exists).

Patched calls record into one small dict each; nothing is done per operator. :meth:`meta`
returns ``{"framework": {...}, "settings": {...}}`` for ``TraceMeta.extra``: ``settings``
holds the flat names the rules read (``num_workers``, ``pin_memory``, ``device_type``,
``backend``, ``world_size``, ``framework``...), as the emulator's ``extra.settings`` does.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from types import ModuleType
from typing import Any

_LOADER_KEYS = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
#: the facts of the session running now: the patches (installed once per process) record here
_current: Facts | None = None


def current() -> Facts | None:
    return _current


class Facts:
    """The settings of one PyTorch job (see the module docstring)."""

    def __init__(self, torch: ModuleType) -> None:
        self.torch = torch
        self.loaders: Counter[str] = Counter()  # loader settings (JSON) -> batches yielded
        self.autocast: dict[str, Any] | None = None
        self.compile: dict[str, Any] | None = None
        self.ddp: dict[str, Any] | None = None
        self.dist: dict[str, Any] = {}
        global _current
        _current = self
        _patch(torch)

    # -- recording ----------------------------------------------------------------------
    def _on_autocast(self, ac: Any, *args: Any, **kwargs: Any) -> None:
        if self.autocast is None and getattr(ac, "_enabled", True):
            self.autocast = {"device_type": str(getattr(ac, "device", "")),
                             "dtype": str(getattr(ac, "fast_dtype", "")).replace("torch.", "")}

    def _on_compile(self, *args: Any, **kwargs: Any) -> None:
        if self.compile is None:
            self.compile = {"backend": str(kwargs.get("backend", "inductor")),
                            "mode": str(kwargs.get("mode") or "default")}

    def _on_ddp(self, ddp: Any, *args: Any, **kwargs: Any) -> None:
        if self.ddp is None:
            cap = getattr(ddp, "bucket_bytes_cap", None)
            self.ddp = {"bucket_cap_mb": round(cap / 2**20, 3) if isinstance(cap, int) else None,
                        "gradient_as_bucket_view": bool(getattr(ddp, "gradient_as_bucket_view",
                                                                False)),
                        "static_graph": bool(getattr(ddp, "static_graph", False))}
        self.read_dist()

    def loader_batch(self, settings: str | None) -> None:
        """One batch yielded by a loader with these settings (JSON of :func:`loader_settings`)."""
        if settings:
            self.loaders[settings] += 1

    def read_dist(self) -> None:
        """World size and backend of the default process group, if there is one now."""
        try:
            dist = self.torch.distributed
            if dist.is_available() and dist.is_initialized():
                self.dist = {"world_size": int(dist.get_world_size()),
                             "backend": str(dist.get_backend())}
        except Exception:  # noqa: BLE001 - a half-torn-down group: keep what was read before
            pass

    # -- the result ---------------------------------------------------------------------
    def device(self) -> dict[str, Any]:
        """Device type and name: the accelerator the job could use (none: ``cpu``)."""
        torch = self.torch
        try:
            if torch.cuda.is_available():
                kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
                return {"device_type": kind, "device_name": torch.cuda.get_device_name(0),
                        "device_count": int(torch.cuda.device_count())}
            npu = getattr(torch, "npu", None)
            if npu is not None and npu.is_available():
                name = npu.get_device_name(0) if hasattr(npu, "get_device_name") else "npu"
                return {"device_type": "npu", "device_name": str(name),
                        "device_count": int(npu.device_count())}
            for kind in ("xpu", "mps"):
                mod = getattr(torch, kind, None)
                if mod is not None and mod.is_available():
                    return {"device_type": kind, "device_name": kind}
        except Exception:  # noqa: BLE001 - a broken driver: say nothing rather than guess
            return {}
        return {"device_type": "cpu", "device_name": None}

    def meta(self) -> dict[str, Any]:
        """``{"framework": ..., "settings": ...}`` for ``TraceMeta.extra``."""
        self.read_dist()
        fw: dict[str, Any] = {"name": "pytorch", "torch_version": str(self.torch.__version__),
                              **self.device()}
        settings: dict[str, Any] = {"framework": "pytorch"}
        if self.loaders:
            loader = json.loads(self.loaders.most_common(1)[0][0])
            fw["dataloader"] = loader
            fw["dataloaders"] = len(self.loaders)
            settings.update({k: loader[k] for k in _LOADER_KEYS if k in loader})
        fw["autocast"] = self.autocast
        fw["compile"] = self.compile is not None
        if self.compile is not None:
            fw["compile_options"] = self.compile
        if self.ddp is not None:
            fw["ddp"] = self.ddp
        fw.update(self.dist)
        for key in ("device_type", "world_size", "backend"):
            if fw.get(key) is not None:
                settings[key] = fw[key]
        if self.autocast is not None:
            settings["autocast_dtype"] = self.autocast["dtype"]
        settings["compile"] = fw["compile"]
        return {"framework": fw, "settings": settings}


def _patch(torch: ModuleType) -> None:
    """Wrap autocast entry, ``torch.compile`` and DDP's constructor (once per process) to
    record into the current :class:`Facts`."""
    amp = getattr(getattr(torch, "amp", None), "autocast_mode", None)
    if amp is not None and not getattr(amp.autocast.__enter__, "_hermes", False):
        amp.autocast.__enter__ = _after(amp.autocast.__enter__, "_on_autocast")
    if callable(getattr(torch, "compile", None)) and not getattr(torch.compile, "_hermes", False):
        torch.compile = _before(torch.compile, "_on_compile")
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP
    except ImportError:
        return
    if not getattr(DDP.__init__, "_hermes", False):
        DDP.__init__ = _after(DDP.__init__, "_on_ddp")


def loader_settings(loader: Any) -> str:
    """A DataLoader's settings as the script built it, as JSON (booleans and integers only)."""
    conf = {k: getattr(loader, k, None) for k in _LOADER_KEYS}
    return json.dumps({k: v for k, v in conf.items()
                       if isinstance(v, (bool, int)) and not isinstance(v, float)},
                      sort_keys=True)


def _after(fn: Any, hook: str) -> Any:
    """``fn`` that calls the current facts' ``hook(self, *args, **kwargs)`` after it (never
    failing the call)."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = fn(self, *args, **kwargs)
        if _current is not None:
            try:
                getattr(_current, hook)(self, *args, **kwargs)
            except Exception:  # noqa: BLE001 - recording a fact never breaks the job
                pass
        return out

    wrapper._hermes = True  # type: ignore[attr-defined]
    return wrapper


def _before(fn: Any, hook: str) -> Any:
    """``fn`` that calls the current facts' ``hook(*args, **kwargs)`` first."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _current is not None:
            try:
                getattr(_current, hook)(*args, **kwargs)
            except Exception:  # noqa: BLE001 - recording a fact never breaks the job
                pass
        return fn(*args, **kwargs)

    wrapper._hermes = True  # type: ignore[attr-defined]
    return wrapper
