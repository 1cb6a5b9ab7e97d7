"""What each host event is doing, for the ``cpu`` analyzer: classes of host work by cause.

``classes(events) -> {class: mask}`` (one boolean per event). A host event belongs to every class
it matches; the ``cpu`` analyzer claims device-idle time class by class in ``CLAIM_ORDER``, so
the more specific class wins where two overlap (a host op that *contains* a sync loses that time
to the sync). The classes (patterns below, formulas in ``docs/analysis/cpu.md``):

* ``io``: data waits (``DataLoader.__next__``, ``data_*`` events) **and every host event nested
  in one on the same thread** -- a single-process loader runs dataset ``__getitem__``, transforms
  and collate inside ``__next__``: that is data processing, not operator dispatch;
* ``garbage_collection``: ``gc`` events / GC names;
* ``operator_compilation``: ``compile`` events, JIT / torch.compile / CANN compile names;
* ``host_device_sync``: ``sync`` events, ``*Synchronize``, ``.item()``, synchronous copies
  (``cudaMemcpy``, ``hipMemcpy``, ``hipMemcpyWithStream``, ``cuMemcpyDtoH``) and the host calls
  that issued a device-to-host copy into *pageable* memory (the call returns only when the copy
  is done: it blocks like a synchronize);
* ``initialization``: one-off runtime start-up (context creation, library handles, module
  loading, the first launch of a kernel that loads its module);
* ``memory_allocation``: device allocator calls (``cudaMalloc``/``cudaFree``, ``hipMalloc``/
  ``hipFree``, ``aclrtMalloc``/``aclrtFree``, ...): with PyTorch's caching allocator working they
  are rare; many of them mean caching is off or thrashing;
* ``environment_configuration``: logging calls;
* ``operator_dispatch``: every other host work event.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from hermes.analyzers.common.names import WS_ASCII, is_, name_matches, rows_matching
from hermes.analyzers.common.spans import data_wait_mask
from hermes.trace.args import args_of, has_args
from hermes.trace.schema import COMM_KINDS, NOT_WORK_KINDS

#: Order in which the classes claim device-idle time (first match wins).
CLAIM_ORDER = ("io", "garbage_collection", "operator_compilation", "host_device_sync",
               "initialization", "memory_allocation", "environment_configuration",
               "operator_dispatch")

GC_NAME = r"(?i)(^|[^a-z])gc([^a-z]|$)|garbage.?collect"
#: run-time compilation: CANN's operator compiler, TorchScript JIT, and torch.compile's phases
#: (PyTorch wraps them in record_function ranges named "<phase> (dynamo_timed)", e.g.
#: "compile_inner (dynamo_timed)"; torch 2.13 calls the outer one "entire_frame_compile"; Triton
#: autotuning benchmarks configs in CachingAutotuner)
COMPILE_NAME = (r"(?i)aclopCompile|jit.?compil|compile_fx|torch_compile|dynamo.*compile|"
                r"\(dynamo_timed\)|entire_frame_compile|GraphLowering\.compile|"
                r"Scheduler\.codegen|CachingAutotuner")
#: Calls that block the host until the device is done: explicit synchronization, scalar reads,
#: and the synchronous copy calls of CUDA (runtime and driver), HIP and CANN (HIP's
#: hipMemcpyWithStream is the blocking copy PyTorch's ROCm build uses for .item() / .cpu()).
SYNC_NAME = (r"(?i)synchroniz|^aten::item$|_local_scalar_dense|aclrtSynchronize|"
             r"^(cuda|hip)Memcpy(2D|3D|ToSymbol|FromSymbol|WithStream)?$|"
             r"^cuMemcpy(DtoH|HtoD|DtoD)?(_v2)?$|^aclrtMemcpy$")
LOG_NAME = r"(?i)^(?!aten::)(.*(logging|dlog|slog|log_write|write_log|printf?\b)|log)\b"
#: Device allocator calls (runtime and driver API of CUDA and HIP, CANN's ACL).
ALLOC_NAME = (r"^(cuda|hip)(Malloc|Free)(Async|Host|Managed|Pitch|3D|Array)?$|"
              r"^(cuda|hip)HostAlloc$|^hipHost(Malloc|Free)$|^hipExtMallocWithFlags$|"
              r"^cuMem(Alloc|Free)(Async|Host|Managed|Pitch)?(_v2)?$|^cuMemCreate$|"
              r"^cuMemRelease$|^aclrt(Malloc|Free)(Host|Cached)?$")
#: One-off start-up calls of the device runtime (context creation, the first call that creates it
#: lazily, library handles, module loading): paid once per run, not per step.
INIT_NAME = (r"(?i)^(cu|hip)Init$|DevicePrimaryCtx|^(cu|hip)CtxCreate|"
             r"^cudaDeviceGetStreamPriorityRange$|^(cuda|hip)GetDeviceCount$|"
             r"^(cuda|hip)GetDeviceProperties|^(cu|hip)ModuleLoad|^cuLibraryLoad|"
             r"^(cuda|hip)StreamCreate|^Lazy Function Loading$|^Runtime Triggered Module Loading$|"
             r"^(cudnn|miopen|cublas|cublasLt|hipblas|hipblasLt|rocblas)Create(Handle)?$|"
             r"^nccl\w*CommInit|^acl(Init|rtSetDevice|rtCreateContext)$")
#: Device-to-host copies into pageable host memory (Kineto: "Memcpy DtoH (Device -> Pageable)").
PAGEABLE_D2H = r"(?i)DtoH.*Pageable|D2H.*Pageable"
#: A launch that takes this long and this many times its name's median, the first launch of its
#: kernel in the trace, is lazy module loading (the kernel's code is loaded on first use): start-up.
FIRST_LAUNCH_MIN_NS = 1_000_000
FIRST_LAUNCH_FACTOR = 50.0


def _codes(names: pd.Series) -> np.ndarray:
    cat = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    return cat.array.codes


def first_kernel_launches(ev: pd.DataFrame, launch: np.ndarray) -> np.ndarray:
    """The launches (of ``launch``) that launch a kernel name for the first time in the trace."""
    out = np.zeros(len(ev), bool)
    if "corr_id" not in ev.columns or not launch.any():
        return out
    has_corr = ev["corr_id"].notna().to_numpy()
    dev = ~is_(ev, "lane_kind", "host") & is_(ev, "kind", "kernel") & has_corr
    if not dev.any():
        return out
    # kernel names as integer codes (no per-event strings on big traces), first by start time
    code = _codes(ev["name"])[dev]
    ts = ev["ts_ns"].to_numpy(np.int64)[dev]
    corr = ev["corr_id"].to_numpy()[dev].astype(np.int64)
    o = np.argsort(ts, kind="stable")
    _, first = np.unique(code[o], return_index=True)
    first_corr = corr[o][first]
    idx = np.flatnonzero(launch & has_corr)
    out[idx[np.isin(ev["corr_id"].to_numpy()[idx].astype(np.int64), first_corr)]] = True
    return out


def _first_launch_outliers(ev: pd.DataFrame, host: np.ndarray) -> np.ndarray:
    """Launches ``FIRST_LAUNCH_FACTOR`` x slower than their name's median (and at least
    ``FIRST_LAUNCH_MIN_NS``) that launch a kernel name for the first time in the trace: the
    runtime loaded the kernel's module on that call (lazy loading), a one-off cost."""
    out = np.zeros(len(ev), bool)
    launch = host & is_(ev, "kind", "launch")
    if "corr_id" not in ev.columns or not launch.any():
        return out
    dur = ev["dur_ns"].to_numpy(np.int64)
    slow = launch & (dur >= FIRST_LAUNCH_MIN_NS)
    if not slow.any():
        return out
    names = ev["name"].astype(str) if not isinstance(ev["name"].dtype, pd.CategoricalDtype) \
        else ev["name"]
    med = pd.Series(dur[launch]).groupby(names[launch].to_numpy(), observed=True).median()
    slow &= dur >= FIRST_LAUNCH_FACTOR * names.map(med).to_numpy(np.float64, na_value=np.inf)
    if not slow.any():
        return out
    return first_kernel_launches(ev, slow)


def nested_in(ev: pd.DataFrame, outer: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Mask of the ``candidates`` that start inside an ``outer`` event of their own lane
    (vectorized: one sorted int64 key per (lane, time))."""
    out = np.zeros(len(ev), bool)
    if not outer.any() or not candidates.any():
        return out
    lane = _codes(ev["lane"]).astype(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    t0 = int(ts.min())
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    span = int(end.max()) - t0 + 1
    key_s = lane * span + (ts - t0)
    key_e = lane * span + (end - t0)
    from hermes.analyzers.common import intervals as iv

    us, ue = iv.union(key_s[outer], key_e[outer])
    k = np.searchsorted(us, key_s, side="right") - 1
    inside = (k >= 0) & (key_s < ue[np.maximum(k, 0)])
    out[candidates & inside] = True
    return out


def blocking_copy_calls(ev: pd.DataFrame, host: np.ndarray) -> np.ndarray:
    """Host calls (by correlation id) that issued a device-to-host copy into pageable memory:
    the runtime stages it through a bounce buffer and returns when it is done -- a sync."""
    out = np.zeros(len(ev), bool)
    if "corr_id" not in ev.columns:
        return out
    d2h = ~host & is_(ev, "kind", "memcpy_d2h")
    if not d2h.any():
        return out
    text = ev["name"][d2h].astype(str)
    if has_args(ev):
        text = text + " " + args_of(ev, d2h).astype(str).fillna("")
    pageable = np.flatnonzero(d2h)[rows_matching(text, PAGEABLE_D2H + r'|"pinned"\s*:\s*false',
                                                 PAGEABLE_D2H + r'|"pinned"' + WS_ASCII
                                                 + r'*:' + WS_ASCII + r'*false')]
    if pageable.size == 0:
        return out
    corr = pd.to_numeric(ev["corr_id"], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    wanted = corr[pageable]
    out[host & np.isin(corr, wanted[~np.isnan(wanted)])] = True
    return out


def classes(ev: pd.DataFrame, helper: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """One mask per class of ``CLAIM_ORDER`` (see the module docstring); ``helper``:
    :func:`helper_lanes` of ``ev`` when the caller has it."""
    host = is_(ev, "lane_kind", "host")
    helper = helper_lanes(ev) if helper is None else helper
    # a host-lane collective (Gloo) is communication, not dispatch (overlap counts it so)
    work = host & ~is_(ev, "kind", *NOT_WORK_KINDS, *COMM_KINDS) & ~helper
    names = ev["name"]
    waits = data_wait_mask(ev) | (host & is_(ev, "kind", "data_read", "data_process",
                                              "data_fetch"))
    io = waits | nested_in(ev, waits, work)
    init = work & (name_matches(names, INIT_NAME) | _first_launch_outliers(ev, host))
    return {
        "io": io,
        "garbage_collection": work & (is_(ev, "kind", "gc") | name_matches(names, GC_NAME)),
        "operator_compilation": work & (is_(ev, "kind", "compile")
                                        | name_matches(names, COMPILE_NAME)),
        "host_device_sync": work & (is_(ev, "kind", "sync", "memcpy_d2h")
                                    | name_matches(names, SYNC_NAME)
                                    | blocking_copy_calls(ev, host)),
        "initialization": init,
        "memory_allocation": work & name_matches(names, ALLOC_NAME),
        "environment_configuration": work & name_matches(names, LOG_NAME),
        "operator_dispatch": work,
    }


#: Device runtime by the names of its host API calls (first match of each name wins).
RUNTIMES = (("hip", r"^hip[A-Z]"), ("cuda", r"^(cuda[A-Z]|cu[A-Z][a-z])"),
            ("acl", r"^(acl[a-z]|AscendCL@)"), ("mtia", r"(?i)mtia"))


def runtime_of(ev: pd.DataFrame) -> str:
    """The device runtime the host calls name most often (``cuda``, ``hip``, ``acl``, ``mtia``;
    ``""`` when none): advice is worded for it (HIP names on ROCm, CANN names on Ascend)."""
    host = is_(ev, "lane_kind", "host")
    if not host.any():
        return ""
    names = ev["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):  # calls per category, by their codes
        cats = names.dtype.categories
        code = names.array.codes[host]
        counts = pd.Series(np.bincount(code[code >= 0], minlength=len(cats)), index=cats)
    else:
        counts = names[host].value_counts()
    best, best_n = "", 0
    texts, calls = [str(c) for c in counts.index], counts.to_numpy()  # (each name once)
    for rt, pattern in RUNTIMES:
        rx = re.compile(pattern)
        n = int(calls[np.array([bool(rx.search(t)) for t in texts], bool)].sum())
        if n > best_n:
            best, best_n = rt, n
    return best


#: Event kinds by which a host thread drives the device or the training loop: launching and
#: runtime calls, syncs, copies, data loading (a pin-memory thread), the host-scheduling stages
#: (InferShape, tiling, allocation -- pipelined on their own threads), compilation and GC.
DRIVING_KINDS = ("launch", "runtime", "sync", "data_wait", "data_read", "data_process",
                 "data_fetch", "infer_shape", "tiling", "alloc", "compile", "gc", "memcpy_h2d",
                 "memcpy_d2h", "memcpy_d2d", "memset", "collective")


def helper_lanes(ev: pd.DataFrame) -> np.ndarray:
    """Mask of the events on *helper* host threads: threads with no driving event (see
    ``DRIVING_KINDS``) in a trace where some thread has one -- a Python thread blocked in
    ``threading`` waits (tqdm's monitor, a usage reporter), the profiler's own thread. They are
    not host work of the training loop: a thread the loop waits on shows as a wait on the loop's
    own thread. In a trace where no thread drives anything (CPU-only) no lane is a helper."""
    host = is_(ev, "lane_kind", "host")
    driving = host & is_(ev, "kind", *DRIVING_KINDS)
    if not driving.any():
        return np.zeros(len(ev), bool)
    codes = _codes(ev["lane"]).astype(np.int64)
    drives = np.zeros(int(codes.max(initial=0)) + 2, bool)
    drives[codes[driving]] = True
    return host & ~drives[codes]


#: Framework by its host operator names: PyTorch's ``aten::`` operators, MindSpore's full-scope
#: names (``Default/network-...``) or its module names.
FRAMEWORKS = (("pytorch", r"^aten::|^ProfilerStep#"), ("mindspore", r"(?i)mindspore|^Default/"))


def framework_of(ev: pd.DataFrame) -> str:
    """``pytorch`` / ``mindspore`` when the host events say so, else ``""``: advice names one
    framework's API only when the trace shows which it is."""
    host = is_(ev, "lane_kind", "host")
    if not host.any():
        return ""
    col = ev["name"]
    if isinstance(col.dtype, pd.CategoricalDtype):  # the host rows' distinct names, by code
        code = np.unique(col.array.codes[host])
        names = pd.Series([str(c) for c in col.dtype.categories[code[code >= 0]]], dtype=object)
    else:
        names = pd.Series(col[host].unique().astype(str))
    hits = [fw for fw, pattern in FRAMEWORKS if name_matches(names, pattern).any()]
    return hits[0] if len(hits) == 1 else ""
