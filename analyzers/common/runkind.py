"""What kind of run a rank's events record: ``accelerator``, ``cpu_only`` or
``device_not_captured``.

``rank_kind(events) -> str`` (one rank), ``combine(kinds) -> str`` (the run). Definitions
(``docs/analysis/index.md``, *Kinds of run*):

* ``accelerator``: the rank records device activity — a kernel, copy, memset or collective on a
  device lane (stream, copy engine, link) — or a vendor's step summary of its device time
  (:func:`device_summary`: Ascend ``step_trace_time.csv`` rows, ``computing_ns`` in a step's args).
* ``device_not_captured``: no device activity, but the host records that it drove a device:
  launches (kind ``launch``: ``cudaLaunchKernel``, ``aclrtLaunchKernel``, ``aclnn*``, async
  copies) or device API calls named like them (:data:`DEVICE_API`). The profiler ran without
  its device activity (``ProfilerActivity.CUDA``; Ascend: ``profiler_level`` / NPU activity),
  so nothing that needs device times can be measured.
* ``cpu_only``: neither: the run computes on the CPU (collectives on host lanes — Gloo over CPU
  tensors — are CPU work too).

A run is ``accelerator`` when any rank is, else ``device_not_captured`` when any rank is, else
``cpu_only``.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from hermes.analyzers.common.names import is_, name_matches
from hermes.analyzers.common.steps import summary_rows
from hermes.trace.args import args_of, has_args
from hermes.trace.schema import COMM_KINDS, COMPUTE_KINDS, DEVICE_LANES

ACCELERATOR = "accelerator"
CPU_ONLY = "cpu_only"
NOT_CAPTURED = "device_not_captured"
#: The run kinds, the strongest evidence first (what :func:`combine` picks).
KINDS = (ACCELERATOR, NOT_CAPTURED, CPU_ONLY)
#: Host calls that drive a device, by name, whatever kind an importer gave them: CUDA/HIP
#: launches, async copies and memsets, graph launches; Ascend ACL launches and aclnn operators
#: (their ``GetWorkspaceSize`` half only plans), model execution.
DEVICE_API = (r"^(cu|cuda|hip)(LaunchKernel|LaunchCooperativeKernel|GraphLaunch|"
              r"Memcpy\w*Async|Memset\w*Async|ModuleLaunch|LaunchKernelEx)|"
              r"^aclrt(Launch|Memcpy\w*Async|Memset\w*Async)|^acl(op|md)Execute|"
              r"^aclnn(?!.*GetWorkspaceSize)[A-Za-z0-9_]+$")
#: The ``cpu`` causes whose cost is measured against the device (host time while the device
#: waits, or waiting for the device): withheld where the device was not captured.
NEEDS_DEVICE = ("operator_dispatch", "python", "resource_contention", "memory_allocation",
                "host_device_sync")
#: What to do to capture the device, per device family (said by the verdict and the reports).
HOW_TO_CAPTURE = ("record the device too: torch.profiler.profile(activities=[ProfilerActivity"
                  ".CPU, ProfilerActivity.CUDA]); on Ascend, torch_npu.profiler.profile("
                  "activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]) with "
                  "experimental_config profiler_level=Level1 or higher")


def device_activity(events: pd.DataFrame) -> int:
    """Events of device activity: kernels, copies, memsets and collectives on device lanes."""
    if not len(events):
        return 0
    return int((is_(events, "lane_kind", *DEVICE_LANES)
                & is_(events, "kind", *COMPUTE_KINDS, *COMM_KINDS)).sum())


def device_calls(events: pd.DataFrame) -> int:
    """Host events that drive a device: launches, and device API calls by name."""
    if not len(events):
        return 0
    host = ~is_(events, "lane_kind", *DEVICE_LANES)
    return int((host & (is_(events, "kind", "launch")
                        | name_matches(events["name"], DEVICE_API))).sum())


def device_summary(events: pd.DataFrame) -> bool:
    """A step event carries a vendor's summary of the device's time (``computing_ns``: the
    Ascend importer's ``step_trace_time`` rows), though no device event may be recorded."""
    if not len(events) or not has_args(events):
        return False
    rows = summary_rows(events)  # (by lane: no args read on a trace without them)
    if not rows.size:
        return False
    return bool(args_of(events, rows).astype(str).str.contains('"computing_ns"',
                                                               regex=False).any())


def rank_kind(events: pd.DataFrame) -> str:
    """The run kind one rank's events show (module docstring)."""
    if device_activity(events) or device_summary(events):
        return ACCELERATOR
    return NOT_CAPTURED if device_calls(events) else CPU_ONLY


def combine(kinds: Iterable[str | None]) -> str:
    """The run's kind from its ranks': the strongest evidence any rank shows (``accelerator``
    over ``device_not_captured`` over ``cpu_only``); no rank known: ``accelerator`` (what
    every analysis assumed before run kinds were told apart)."""
    seen = {k for k in kinds if k}
    return next((k for k in KINDS if k in seen), ACCELERATOR)
