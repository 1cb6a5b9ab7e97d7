"""What every table's rows need to become events: which process is which rank, thread and
stream lane names, the steps' windows, and which correlation ids reach the host.

Nsight serializes thread ids as ``globalTid`` (hardware, VM, pid and tid in one 64-bit
integer: the pid in bits 24..47, the tid in bits 0..23) and processes as ``globalPid`` (the
same with the tid bits zero). One process that ran device work is one rank (one process per
GPU, PyTorch's rule); ranks follow the processes' first device id, then their pid, so the
process on GPU 0 is rank 0. A process driving several GPUs is one rank whose stream lanes
name the device (``gpu 1 stream 7``). When no process ran device work (an NVTX-only
capture), every process with NVTX ranges or runtime calls is a rank, in pid order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from hermes.collectors.importers.nsys.operators import OpIndex
from hermes.collectors.importers.nsys.sql import Export, quote

TID_BITS = 24
PID_MASK = ~np.int64((1 << TID_BITS) - 1)
#: shift that puts a rank above any correlation id in one int64 key (ids are 32-bit in CUPTI)
KEY_SHIFT = 40

#: device activity tables whose rows name their process (``globalPid``) and device
DEVICE_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                 "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                 "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "CUPTI_ACTIVITY_KIND_CUDA_EVENT")
#: host tables whose rows name their thread (``globalTid``)
HOST_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API")

#: NVTX ranges that are training steps: PyTorch's ``ProfilerStep#N`` and common user markers
#: (``step 3``, ``Step#3``, ``train_step_3``, ``iteration 12``, ``iter:5``)
STEP_PATTERNS: tuple[str, ...] = (
    r"^ProfilerStep#(\d+)$",
    r"^(?:train[ _]?)?(?:step|iteration|iter)[ _#:=-]*(\d+)$",
)
STEP_RE = re.compile("|".join(f"(?:{p})" for p in STEP_PATTERNS), re.IGNORECASE)


def step_number(text: str | None) -> int | None:
    m = STEP_RE.match(text or "")
    if m is None:
        return None
    return int(next(g for g in m.groups() if g is not None))


@dataclass
class Context:
    """One export's processes, ranks, lanes and steps."""

    #: sorted globalPids that are ranks, and their ranks
    pids: np.ndarray
    ranks: np.ndarray
    #: rank -> its process's devices (several: lanes name the device)
    devices: dict[int, list[int]]
    #: rank -> (pid, process name)
    processes: dict[int, tuple[int, str]]
    #: globalTid -> thread name
    thread_names: dict[int, str]
    #: step windows: rank, start, end, step number (sorted by rank, start)
    step_rank: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    step_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    step_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    step_no: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    #: sorted (rank << KEY_SHIFT | correlationId) of the runtime calls, and their steps (-1)
    host_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    host_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    #: the runtime calls' keys and steps as the runtime table is read (then sorted)
    host_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    #: and each call's operator (external id, -1: none)
    host_ext: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: emit_nvtx operator ranges, for the runtime calls' external ids
    ops: OpIndex = field(default_factory=OpIndex)
    #: rows left out because their process is not a rank, per table
    skipped: dict[str, int] = field(default_factory=dict)
    rank_base: int = 0

    # -- ranks ---------------------------------------------------------------------------
    def rank_of_pid(self, gpid: np.ndarray) -> np.ndarray:
        """The rank of each globalPid; -1 for a process that is not a rank."""
        if not len(self.pids):
            return np.full(len(gpid), -1, np.int32)
        pos = np.minimum(np.searchsorted(self.pids, gpid), len(self.pids) - 1)
        return np.where(self.pids[pos] == gpid, self.ranks[pos], -1).astype(np.int32)

    def rank_of_tid(self, gtid: np.ndarray) -> np.ndarray:
        return self.rank_of_pid(gtid & PID_MASK)

    def all_ranks(self) -> list[int]:
        return sorted(int(r) for r in self.ranks)

    # -- lanes ---------------------------------------------------------------------------
    def thread_lane(self, gtid: int) -> str:
        tid = int(gtid) & ((1 << TID_BITS) - 1)
        name = self.thread_names.get(int(gtid))
        return f"thread {tid} ({name})" if name else f"thread {tid}"

    def stream_lane(self, rank: int, device: int, stream: int) -> str:
        if len(self.devices.get(rank, ())) > 1:
            return f"gpu {device} stream {stream}"
        return f"stream {stream}"

    # -- steps ---------------------------------------------------------------------------
    def step_at(self, rank: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """The step whose window holds ``ts`` on ``rank``; -1 outside every step."""
        out = np.full(len(ts), -1, np.int32)
        if not len(self.step_start) or not len(ts):
            return out
        # windows sorted by (rank, start): one key puts a rank's windows together
        wkey = (self.step_rank.astype(np.int64) << 42) + self.step_start
        key = (rank.astype(np.int64) << 42) + ts
        i = np.searchsorted(wkey, key, side="right") - 1
        ok = i >= 0
        j = np.maximum(i, 0)
        ok &= (self.step_rank[j] == rank) & (ts < self.step_end[j])
        out[ok] = self.step_no[j[ok]]
        return out

    def add_host(self, keys: np.ndarray, steps: np.ndarray, ext: np.ndarray) -> None:
        self.host_parts.append((keys, steps, ext))

    def seal_host(self) -> None:
        """Sort the runtime calls' keys (once the runtime table is read)."""
        if self.host_parts:
            k = np.concatenate([p[0] for p in self.host_parts] + [self.host_keys])
            s = np.concatenate([p[1] for p in self.host_parts] + [self.host_steps])
            x = np.concatenate([p[2] for p in self.host_parts] + [self.host_ext])
            order = np.argsort(k, kind="stable")
            self.host_keys, self.host_steps = k[order], s[order].astype(np.int32)
            self.host_ext = x[order]
            self.host_parts = []

    def launch_step(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per device row key: whether its runtime call is in the export, that call's step
        and its operator's external id (-1 where none)."""
        none = np.full(len(keys), -1, np.int64)
        if not len(self.host_keys):
            return np.zeros(len(keys), bool), none.astype(np.int32), none
        pos = np.minimum(np.searchsorted(self.host_keys, keys), len(self.host_keys) - 1)
        found = self.host_keys[pos] == keys
        return (found, np.where(found, self.host_steps[pos], -1).astype(np.int32),
                np.where(found, self.host_ext[pos], -1))


def correlation_keys(rank: np.ndarray, corr: np.ndarray) -> np.ndarray:
    return (rank.astype(np.int64) << KEY_SHIFT) | (corr & ((1 << KEY_SHIFT) - 1))


def build(export: Export, rank_base: int = 0) -> Context:
    """Ranks, devices, processes and thread names of an export."""
    per_pid: dict[int, set[int]] = {}
    for table in DEVICE_TABLES:
        if export.has(table, "globalPid", "deviceId"):
            for gpid, dev in export.rows(f"SELECT DISTINCT globalPid, deviceId FROM "
                                         f"{quote(table)} WHERE globalPid IS NOT NULL"):
                per_pid.setdefault(int(gpid), set()).add(int(dev))
    if not per_pid:  # no device work: every process with host events is a rank
        for table in HOST_TABLES:
            if export.has(table, "globalTid"):
                for (gtid,) in export.rows(f"SELECT DISTINCT globalTid FROM {quote(table)} "
                                           "WHERE globalTid IS NOT NULL"):
                    per_pid.setdefault(int(gtid) & int(PID_MASK), set())
    order = sorted(per_pid, key=lambda p: (min(per_pid[p], default=0), p))
    rank_of = {p: rank_base + i for i, p in enumerate(order)}
    pids = np.array(sorted(rank_of), np.int64)
    ranks = np.array([rank_of[p] for p in pids.tolist()], np.int32)
    names: dict[int, tuple[int, str]] = {}
    if export.has("PROCESSES", "globalPid", "pid", "name"):
        for gpid, pid, name in export.rows("SELECT globalPid, pid, name FROM PROCESSES"):
            if gpid is not None and int(gpid) in rank_of:
                names[rank_of[int(gpid)]] = (int(pid or 0), str(name or ""))
    threads: dict[int, str] = {}
    if export.has("ThreadNames", "nameId", "globalTid"):
        for name_id, gtid in export.rows("SELECT nameId, globalTid FROM ThreadNames"):
            name = export.string(name_id)
            if gtid is not None and name:
                threads[int(gtid)] = name
    return Context(pids=pids, ranks=ranks,
                   devices={rank_of[p]: sorted(d) for p, d in per_pid.items()},
                   processes=names, thread_names=threads, rank_base=rank_base)
