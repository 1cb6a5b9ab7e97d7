"""The run's verdict ``bound``: what holds it back — ``host``, ``device``, ``io`` or
``communication``.

``verdict(breakdown, findings) -> Verdict`` from the overlap breakdown of every rank (the five
parts of step wall time, in %) and the merged findings. The rule (documented in
``docs/analysis/index.md``):

1. Average the five parts over ranks and group them into three shares of step time:
   ``device`` = computation_only + overlapped (the device computes; communication, if any, is
   hidden), ``communication`` = communication_only (the device only communicates),
   ``idle`` = host_bound + free (the device does nothing).
2. If ``communication`` is the largest of the three, the run is ``communication``-bound; if
   ``device`` is the largest (ties go to the device), it is ``device``-bound.
3. Otherwise the device mostly waits for the host. It waits for *data* — ``io``-bound — when the
   ``io.*`` findings explain at least ``IO_MIN_SHARE`` of step time and at least as much as the
   ``cpu.*`` findings (both summed over causes); else the run is ``host``-bound.

Without an overlap breakdown (no device events) the verdict falls back to the findings: ``io`` when
the io findings lead the cpu findings, else ``host``. Time with nothing recorded on the host or the
device is named *unattributed* in the reason, with the way to capture it -- never a guessed cause.

The run's kind (``analyzers/common/runkind.py``) shapes the reason: a ``cpu_only`` run is
described in CPU terms (no device is said to wait), a ``device_not_captured`` run says that the
device was not recorded and how to record it.

**Explained.** ``Verdict.explained`` accounts for the verdict's share ``S`` of step time (the
share the rule compared: ``communication`` for a communication verdict, ``device`` for a device
verdict, ``idle`` for host and io verdicts): ``pct`` = 100 x min(1, F / S), F the summed
``time_share`` of the findings of the verdict's categories (:data:`CATEGORIES`, and the slow
node that others wait for, :data:`ALSO`); ``parts`` lists
those findings (percent of ``S``, scaled down to 100 % together where they overlap) and, last,
the remainder ``S - F`` as its own part ``unexplained``, decomposed where the ranks' metrics have
the parts (:func:`remainder_inputs`): communication into transfer, waiting for peers and idle
inside collectives; host into the host causes no finding reports, data waits and unattributed
time; io into reading, processing and fetching; device into the kernels' roofline classes.
What the parts do not cover is ``unattributed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hermes.analyzers.common.runkind import (
    ACCELERATOR,
    CPU_ONLY,
    HOW_TO_CAPTURE,
    NEEDS_DEVICE,
    NOT_CAPTURED,
)
from hermes.findings import Finding

#: Smallest share of step time the io findings must explain for an ``io`` verdict (XProf calls a
#: step "input-bound" from 5 % of step time spent waiting for input).
IO_MIN_SHARE = 0.05
#: The finding categories that explain each verdict.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "communication": ("communication", "parallel"), "host": ("cpu",), "io": ("io",),
    "device": ("computation",)}
#: Findings of other categories that explain a verdict: a slow node explains the other ranks'
#: waits at collectives (``fold.fold_symptoms`` folds their wait into it).
ALSO: dict[str, tuple[str, ...]] = {"communication": ("computation.slow_node",)}
#: Which remainder part a finding covers, by verdict: finding class (its reason, else its
#: cause) -> part of :func:`remainder_inputs`. A finding not listed covers the largest part.
COVERS: dict[str, dict[str, str]] = {
    "communication": {"synchronization_wait": "waiting_for_peers", "slow_node": "waiting_for_peers",
                      **{c: "transfer" for c in ("bandwidth_contention", "rdma_retransmission",
                                                  "small_packet", "byte_alignment",
                                                  "network_configuration")}},
    "io": {"slow_data_reading": "reading", "slow_data_processing": "processing",
           "slow_data_fetching": "fetching"},
    "device": {"compute_bound": "compute_bound", "memory_bound": "memory_bound",
               "underutilization": "underutilized"},
    # host parts are named by the cpu causes themselves; a CPU-only run's operator time is the
    # dispatch claim
    "host": {"cpu_operators": "operator_dispatch"},
}
#: The cpu analyzer's causes (its ``{cause}_share`` metrics), the host verdict's parts.
HOST_CAUSES = ("garbage_collection", "operator_compilation", "host_device_sync", "initialization",
               "memory_allocation", "environment_configuration", "operator_dispatch", "python",
               "resource_contention")


@dataclass(frozen=True)
class Verdict:
    bound: str
    #: the three shares of step time (fractions) the rule compared, and the io/cpu finding totals
    device: float
    communication: float
    idle: float
    io: float
    cpu: float
    reason: str
    #: ``{"pct", "share_pct", "parts": [...]}``: how much of the verdict's share the findings
    #: explain (module docstring)
    explained: Mapping[str, Any] = field(default_factory=dict, hash=False)
    run_kind: str = ACCELERATOR

    @property
    def explained_pct(self) -> float:
        return float(self.explained.get("pct") or 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"bound": self.bound, "device": round(self.device, 6),
                "communication": round(self.communication, 6), "idle": round(self.idle, 6),
                "io": round(self.io, 6), "cpu": round(self.cpu, 6), "reason": self.reason,
                "run_kind": self.run_kind, "explained": dict(self.explained)}


def _mean(rows: Sequence[Mapping[str, Any]], key: str) -> float:
    vals = [float(r.get(key) or 0.0) for r in rows]
    return sum(vals) / len(vals) / 100.0 if vals else 0.0


def _category_total(findings: Iterable[Finding], category: str) -> float:
    return min(1.0, sum(f.time_share for f in findings if f.category == category))


def _mean_of(values: Iterable[float]) -> float:
    v = list(values)
    return sum(v) / len(v) if v else 0.0


def remainder_inputs(per_rank: Mapping[int, Mapping[str, Any]],
                     cluster: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """The parts each verdict's share splits into, as fractions of step time (mean over ranks),
    from the analyzers' metrics (``per_rank``: rank -> analyzer name -> result; ``cluster``:
    cluster results):

    * ``communication``: each rank's non-overlapped communication share split as its collectives'
      time splits: ``waiting_for_peers`` (the matched arrivals' wait, ``communication_cluster``'s
      ``wait_ns_per_rank``, or the wait an importer recorded), ``idle_in_collective`` (the idle
      time an importer recorded, Ascend's ``Idle Time``, else the time inside a collective that
      is neither wait nor transit, where an importer recorded both) and
      ``transfer`` (the rest); ``transfer_or_waiting`` where neither a match across ranks nor
      a recorded wait tells them apart (one rank's trace);
    * ``host``: the cpu analyzer's cause shares, ``data_waits`` and ``unattributed``; where the
      device was not captured the causes measured against it are ``withheld_<cause>`` (host
      time whose cost to the step is not known);
    * ``io``: the io analyzer's ``reading`` / ``processing`` / ``fetching`` shares, the host
      causes (``host_causes``) and ``unattributed``;
    * ``device``: device time by roofline class (``compute_bound``, ``memory_bound``,
      ``underutilized``, ``bound_unknown``) times the rank's device share.
    """
    cc = cluster.get("communication_cluster")
    waits = (getattr(cc, "metrics", {}) or {}).get("wait_ns_per_rank") or {}
    matched = bool((getattr(cc, "metrics", {}) or {}).get("matched"))
    comm: list[dict[str, float]] = []
    host: list[dict[str, float]] = []
    io: list[dict[str, float]] = []
    dev: list[dict[str, float]] = []
    for r, rr in per_rank.items():
        ov = rr["overlap"].metrics if "overlap" in rr else {}
        if "communication" in rr:
            m = rr["communication"].metrics
            coll = float(m.get("comm_ns") or 0)
            step = float(m.get("step_total_ns") or 0)
            only = float(ov.get("communication_only_pct") or 0.0) / 100.0
            t = rr["communication"].tables.get("collectives")
            wait = float(m.get("wait_ns") or 0) if m.get("explicit_wait") else \
                float(waits.get(int(r), waits.get(str(r), 0)) or 0)
            # an importer's own idle time (Ascend communication.json "Idle Time"), else what
            # of a collective with recorded wait and transit is neither
            idle_in = float(m.get("idle_ns") or 0)
            if not idle_in and m.get("explicit_wait") and t is not None and len(t):
                rest = (t["dur_ns"].astype("float64") - t["wait_ns"].astype("float64")
                        - t["transit_ns"].astype("float64").fillna(0.0)).clip(lower=0.0)
                idle_in = float(rest.sum())
            if coll > 0 and step > 0:
                w = min(1.0, wait / coll)
                i = min(1.0 - w, idle_in / coll)
                row = {"waiting_for_peers": only * w, "idle_in_collective": only * i,
                       "transfer": only * (1.0 - w - i)}
                if not (matched or m.get("explicit_wait")):
                    # no collective matched across ranks, no recorded wait: one part
                    row = {"idle_in_collective": only * i, "transfer_or_waiting": only * (1 - i)}
                comm.append(row)
            else:  # a rank without collectives: none of its time (the mean is over ranks)
                comm.append({})
        if "cpu" in rr:
            m = rr["cpu"].metrics
            step = float(m.get("step_total_ns") or 0)
            row = {c: float(m.get(f"{c}_share") or 0.0) for c in HOST_CAUSES}
            if m.get("run_kind") == NOT_CAPTURED:  # host time whose cost is not known
                row = {(f"withheld_{c}" if c in NEEDS_DEVICE else c): v for c, v in row.items()}
            row["data_waits"] = min(1.0, float(m.get("io_wait_ns") or 0) / step) if step else 0.0
            row["unattributed"] = float(m.get("unattributed_share") or 0.0)
            host.append(row)
            io_row = {"host_causes": min(1.0, sum(v for c, v in row.items()
                                                  if c not in ("data_waits", "unattributed"))),
                      "unattributed": row["unattributed"]}
            if "io" in rr:
                im = rr["io"].metrics
                io_row.update({k: float(im.get(f"{k}_share") or 0.0)
                               for k in ("reading", "processing", "fetching")})
            io.append(io_row)
        if "computation" in rr:
            m = rr["computation"].metrics
            share = (float(ov.get("computation_only_pct") or 0.0)
                     + float(ov.get("overlapped_pct") or 0.0)) / 100.0
            dev.append({"compute_bound": share * float(m.get("compute_bound_pct") or 0) / 100,
                        "memory_bound": share * float(m.get("memory_bound_pct") or 0) / 100,
                        "underutilized": share * float(m.get("underutilized_pct") or 0) / 100,
                        "bound_unknown": share * float(m.get("no_data_pct") or 0) / 100})
    out: dict[str, dict[str, float]] = {}
    for name, rows in (("communication", comm), ("host", host), ("io", io), ("device", dev)):
        keys = list(dict.fromkeys(k for row in rows for k in row))
        out[name] = {k: _mean_of(row.get(k, 0.0) for row in rows) for k in keys}
    return out


def _cls(f: Finding) -> str:
    return str((f.evidence or {}).get("reason") or f.cause)


def explain(bound: str, share: float, findings: Sequence[Finding],
            inputs: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, Any]:
    """``Verdict.explained`` for a ``bound`` verdict whose share of step time is ``share``
    (module docstring). Percentages are of ``share`` (``pct``) and of step time (``step_pct``)."""
    mine = sorted((f for f in findings if f.category in CATEGORIES.get(bound, ())
                   or f.id in ALSO.get(bound, ())),
                  key=lambda f: -f.time_share)
    total = sum(f.time_share for f in mine)
    out: dict[str, Any] = {"pct": 0.0, "share_pct": round(100.0 * share, 3), "parts": []}
    if share <= 0.0:
        return out
    scale = min(1.0, share / total) if total > 0 else 1.0
    explained = min(share, total)
    parts: list[dict[str, Any]] = [
        {"name": f.id, "reason": _cls(f) if _cls(f) != f.cause else None,
         "pct": round(100.0 * f.time_share * scale / share, 3),
         "step_pct": round(100.0 * f.time_share * scale, 3)} for f in mine]
    rem = share - explained
    if rem > 1e-9:
        buckets = dict((inputs or {}).get(bound) or {})
        covers = COVERS.get(bound, {})
        left = dict(buckets)
        for f in mine:  # what each finding explains comes off the part it belongs to
            key = covers.get(_cls(f), _cls(f))
            if key not in left and left:
                key = max(left, key=lambda k: left[k])
            if key in left:
                left[key] = max(0.0, left[key] - f.time_share)
        left = {k: v for k, v in left.items() if v > 1e-9}
        known = sum(left.values())
        if known > rem:
            left = {k: v * rem / known for k, v in left.items()}
        other = rem - sum(left.values())
        if other > 1e-9:  # what no part covers (joins a part of that name)
            left["unattributed"] = left.get("unattributed", 0.0) + other
        sub = [{"name": k, "pct": round(100.0 * v / share, 3), "step_pct": round(100.0 * v, 3)}
               for k, v in sorted(left.items(), key=lambda kv: -kv[1])]
        parts.append({"name": "unexplained", "pct": round(100.0 * rem / share, 3),
                      "step_pct": round(100.0 * rem, 3), "parts": sub})
    out.update(pct=round(100.0 * explained / share, 3), parts=parts)
    return out


def verdict(breakdown: Sequence[Mapping[str, Any]], findings: Sequence[Finding],
            unplaced: Mapping[str, Any] | None = None, run_kind: str = ACCELERATOR,
            inputs: Mapping[str, Mapping[str, float]] | None = None) -> Verdict:
    """Apply the rule of the module docstring. ``breakdown``: one dict of ``*_pct`` per rank.
    ``unplaced``: ``{"pct", "top"}``, the share of device time in kernels the computation
    analysis could not place on the roofline (no FLOPs/bytes, no known family) and the largest
    of them; a device verdict without computation findings says so instead of guessing a bound.
    ``run_kind``: the run's kind (``analyzers/common/runkind.py``); ``inputs``: the remainder's
    parts (:func:`remainder_inputs`)."""
    v = _rule(breakdown, findings, unplaced, run_kind)
    share = {"communication": v.communication, "device": v.device}.get(v.bound, v.idle)
    if not any("computation_only_pct" in r for r in breakdown) and v.bound in ("host", "io"):
        share = 1.0  # nothing recorded on a device: the whole step is the host's
    return Verdict(v.bound, v.device, v.communication, v.idle, v.io, v.cpu, v.reason,
                   explain(v.bound, share, findings, inputs), run_kind)


def _rule(breakdown: Sequence[Mapping[str, Any]], findings: Sequence[Finding],
          unplaced: Mapping[str, Any] | None, run_kind: str) -> Verdict:
    io = _category_total(findings, "io")
    cpu = _category_total(findings, "cpu")
    has_parts = any("computation_only_pct" in r for r in breakdown)
    device = _mean(breakdown, "computation_only_pct") + _mean(breakdown, "overlapped_pct")
    comm = _mean(breakdown, "communication_only_pct")
    idle = _mean(breakdown, "host_bound_pct") + _mean(breakdown, "free_pct")
    if has_parts and comm > max(device, idle):
        reason = f"non-overlapped communication is {100 * comm:.1f}% of step time"
        if run_kind == CPU_ONLY:
            reason = f"communication between ranks (on the CPU) is {100 * comm:.1f}% of step time"
        if len(breakdown) <= 1 and \
                not any(f.category in ("communication", "parallel") for f in findings):
            # nothing tells waiting from transmission: say how to find out, guess no cause
            reason += ("; no cause is attributed: waiting for slower ranks cannot be told from "
                       "transmission without the other ranks' traces -- analyze every rank's "
                       "trace together (a directory of per-rank files)")
        return Verdict("communication", device, comm, idle, io, cpu, reason)
    if has_parts and device >= max(comm, idle):
        reason = f"the device computes {100 * device:.1f}% of step time"
        pct = float((unplaced or {}).get("pct") or 0.0)
        if pct >= 50.0 and not any(f.category == "computation" for f in findings):
            top = ", ".join((unplaced or {}).get("top") or [])
            reason += (f"; {pct:.0f}% of device time is in kernels whose bound is not known (no "
                       f"FLOPs or bytes, no known kernel family{': ' + top if top else ''}) -- "
                       "record with record_shapes=True and with_flops=True to measure it")
        return Verdict("device", device, comm, idle, io, cpu, reason)
    no_device = has_parts and device == 0.0 and comm == 0.0
    idle_text = f"the device is idle {100 * idle:.1f}% of step time"
    if run_kind == CPU_ONLY:
        idle_text = "a CPU-only run (no accelerator in the trace)"
    elif run_kind == NOT_CAPTURED:
        idle_text = ("the device was not captured: the host launches device work but the "
                     "trace records no device activity, so device times are unknown -- "
                     + HOW_TO_CAPTURE)
    elif no_device:
        idle_text = ("no device work is recorded (a CPU-only run, or the profiler did not "
                     "capture the device)")
    if io >= IO_MIN_SHARE and io >= cpu:
        waits = "the training loop waits for data" if run_kind != ACCELERATOR else \
            "waiting for data explains"
        return Verdict("io", device, comm, idle, io, cpu,
                       f"{idle_text}; {waits} {100 * io:.1f}%"
                       + (" of step time" if run_kind != ACCELERATOR else ""))
    if run_kind == CPU_ONLY:
        reason = (f"{idle_text}; the CPU's own work (operators, Python, runtime) and its causes "
                  f"explain {100 * cpu:.1f}% of step time, data waits {100 * io:.1f}%")
    elif run_kind == NOT_CAPTURED or no_device:
        reason = (f"{idle_text}; host causes explain {100 * cpu:.1f}% of step time, data waits "
                  f"{100 * io:.1f}%")
    else:
        reason = (f"{idle_text}; host causes explain {100 * cpu:.1f}%, data waits "
                  f"{100 * io:.1f}%")
    free = _mean(breakdown, "free_pct")
    if has_parts and free > idle - free:
        # most of the idle time has no recorded host work either: say so, not just "host"
        reason += (f"; {100 * free:.1f}% of step time is unattributed: nothing is recorded on "
                   "the host either (code the profiler did not capture: Python without "
                   "with_stack, sleeps, file or network I/O, another process) -- capture it "
                   "with torch.profiler.profile(with_stack=True) or `hermes profile`")
    return Verdict("host", device, comm, idle, io, cpu, reason)
