"""What an export says about itself: its GPUs (for the trace's device profile), Nsight's
version and schema, the capture's start time, and the tables it has that Hermes does not
import.

GPUs are read from whichever table the export version has: ``TARGET_INFO_GPU`` (Nsight 2021+:
``name``, ``smCount``, ``totalMemory``, ``clockRate``, ``computeMajor``...),
``TARGET_INFO_CUDA_DEVICE`` (older: ``name``, ``numMultiprocessors``...) or the ``GpuInfo``
JSON of ``TARGET_INFO_SYSTEM_ENV``. The first GPU's name is matched against the shipped device
profiles (``hermes.devices.match``) as the Kineto importer matches ``deviceProperties``; where
the export names no GPU, ``--device`` names the profile.
"""

from __future__ import annotations

import json
from typing import Any

from hermes.collectors.importers.nsys.sql import Export, quote

GPU_TABLES = ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_DEVICE")
#: tables that describe the capture (read here or by the context) or hold enums/strings
_DESCRIPTIVE_PREFIXES = ("ENUM_", "TARGET_INFO_", "META_DATA_", "ANALYSIS_")
_DESCRIPTIVE = {"StringIds", "ThreadNames", "PROCESSES", "ProcessStreams",
                "NVTX_PAYLOAD_SCHEMAS", "NVTX_PAYLOAD_SCHEMA_ENTRIES", "EXPORT_META_DATA",
                "DIAGNOSTIC_EVENT", "PROFILER_OVERHEAD", "CUPTI_ACTIVITY_KIND_OVERHEAD",
                "SCHED_EVENTS", "COMPOSITE_EVENTS", "SAMPLING_CALLCHAINS", "CUDA_CALLCHAINS",
                "OSRT_CALLCHAINS", "UnwindMethodType"}


def gpus(export: Export) -> list[dict[str, Any]]:
    """One dict per GPU the export describes (its columns), in id order; [] when none."""
    # the known tables first, then any other TARGET_INFO_* table describing GPUs by name
    others = [t for t, cols in sorted(export.tables.items())
              if t.startswith("TARGET_INFO_") and t not in GPU_TABLES and "name" in cols
              and set(cols) & {"smCount", "numMultiprocessors", "computeMajor", "chipName"}]
    for table in (*GPU_TABLES, *others):
        cols = export.tables.get(table)
        if cols and "name" in cols:
            rows = export.rows(f"SELECT * FROM {quote(table)}")
            out = [{c: v for c, v in zip(cols, r, strict=True) if v is not None}
                   for r in rows]
            out = [g for g in out if g.get("name")]
            if out:
                return out
    if export.has("TARGET_INFO_SYSTEM_ENV", "name", "value"):
        for (value,) in export.rows("SELECT value FROM TARGET_INFO_SYSTEM_ENV "
                                    "WHERE name = 'GpuInfo'"):
            try:
                data = json.loads(value or "{}")
            except (TypeError, ValueError):
                continue
            items = data.get("items") if isinstance(data, dict) else None
            if isinstance(items, list):
                named = [g for g in items if isinstance(g, dict) and g.get("name")]
                if named:
                    return named
    return []


#: Kineto's deviceProperties keys -> the export's columns that hold them (by version)
PROPERTIES = {"name": ("name",), "numSms": ("smCount", "numMultiprocessors"),
              "totalGlobalMem": ("totalMemory", "totalGlobalMem", "globalMemorySize"),
              "computeMajor": ("computeMajor", "computeCapabilityMajor"),
              "computeMinor": ("computeMinor", "computeCapabilityMinor"),
              "clockRate": ("clockRate",), "l2CacheSize": ("l2CacheSize",)}


def properties(gpu: dict[str, Any]) -> dict[str, Any]:
    """A GPU's columns as Kineto's ``deviceProperties`` name them, so the analysis identifies
    the device by its numbers (SMs, memory, compute capability) as it does for Kineto."""
    out = {}
    for key, cols in PROPERTIES.items():
        v = next((gpu[c] for c in cols if gpu.get(c) is not None), None)
        if v is not None:
            out[key] = v
    return out


def device_meta(export: Export, fallback: str | None) -> tuple[dict[str, Any], str | None]:
    """The trace's device metadata, and a note when the export names no GPU Hermes knows."""
    from hermes import devices

    found = gpus(export)
    if not found:
        note = None if fallback else (
            f"{export.path.name}: the export describes no GPU (no TARGET_INFO_GPU or "
            "TARGET_INFO_CUDA_DEVICE rows): pass --device NAME (e.g. --device h100) to name "
            "its device profile")
        return (devices.get(fallback).to_meta() if fallback else {}), note
    name = str(found[0]["name"])
    profile = devices.match(name) or (devices.get(fallback) if fallback else None)
    meta: dict[str, Any] = dict(profile.to_meta()) if profile is not None else {}
    meta.update({"name": name, "count": len(found),
                 "deviceProperties": [properties(g) for g in found],
                 "nsys": {k: v for k, v in found[0].items() if isinstance(v, int | float | str)}})
    note = None if profile is not None else (
        f"{export.path.name}: GPU {name!r} matches no shipped device profile: pass --device")
    return meta, note


def export_info(export: Export) -> dict[str, Any]:
    """Nsight's version and schema, and the capture's start (UTC ns) where the export has
    them."""
    out: dict[str, Any] = {}
    if export.has("META_DATA_EXPORT", "name", "value"):
        kv = dict(export.rows("SELECT name, value FROM META_DATA_EXPORT WHERE name IN "
                              "('EXPORT_PRODUCT_VERSION', 'EXPORT_SCHEMA_VERSION')"))
        out.update({k.lower().removeprefix("export_"): v for k, v in kv.items()})
    if export.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        rows = export.rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
        if rows and rows[0][0] is not None:
            out["session_start_utc_ns"] = int(rows[0][0])
    return out


def unread_tables(export: Export, read: set[str]) -> dict[str, int]:
    """Tables holding events that this importer does not read, with their row counts."""
    out: dict[str, int] = {}
    for table in export.tables:
        if table in read or table in _DESCRIPTIVE or table.startswith(_DESCRIPTIVE_PREFIXES):
            continue
        n = export.count(table)
        if n:
            out[table] = n
    return out
