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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hermes.findings import Finding

#: Smallest share of step time the io findings must explain for an ``io`` verdict (XProf calls a
#: step "input-bound" from 5 % of step time spent waiting for input).
IO_MIN_SHARE = 0.05


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

    def to_dict(self) -> dict[str, Any]:
        return {"bound": self.bound, "device": round(self.device, 6),
                "communication": round(self.communication, 6), "idle": round(self.idle, 6),
                "io": round(self.io, 6), "cpu": round(self.cpu, 6), "reason": self.reason}


def _mean(rows: Sequence[Mapping[str, Any]], key: str) -> float:
    vals = [float(r.get(key) or 0.0) for r in rows]
    return sum(vals) / len(vals) / 100.0 if vals else 0.0


def _category_total(findings: Iterable[Finding], category: str) -> float:
    return min(1.0, sum(f.time_share for f in findings if f.category == category))


def verdict(breakdown: Sequence[Mapping[str, Any]], findings: Sequence[Finding],
            unplaced: Mapping[str, Any] | None = None) -> Verdict:
    """Apply the rule of the module docstring. ``breakdown``: one dict of ``*_pct`` per rank.
    ``unplaced``: ``{"pct", "top"}``, the share of device time in kernels the computation
    analysis could not place on the roofline (no FLOPs/bytes, no known family) and the largest
    of them; a device verdict without computation findings says so instead of guessing a bound."""
    io = _category_total(findings, "io")
    cpu = _category_total(findings, "cpu")
    has_parts = any("computation_only_pct" in r for r in breakdown)
    device = _mean(breakdown, "computation_only_pct") + _mean(breakdown, "overlapped_pct")
    comm = _mean(breakdown, "communication_only_pct")
    idle = _mean(breakdown, "host_bound_pct") + _mean(breakdown, "free_pct")
    if has_parts and comm > max(device, idle):
        reason = f"non-overlapped communication is {100 * comm:.1f}% of step time"
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
    if io >= IO_MIN_SHARE and io >= cpu:
        idle_text = ("no device work is recorded (a CPU-only run, or the profiler did not "
                     "capture the device)" if no_device else
                     f"the device is idle {100 * idle:.1f}% of step time")
        return Verdict("io", device, comm, idle, io, cpu,
                       f"{idle_text}; waiting for data explains {100 * io:.1f}%")
    reason = (f"the device is idle {100 * idle:.1f}% of step time; host causes explain "
              f"{100 * cpu:.1f}%, data waits {100 * io:.1f}%")
    if no_device:
        reason = ("no device work is recorded (a CPU-only run, or the profiler did not capture "
                  f"the device); host causes explain {100 * cpu:.1f}% of step time, data waits "
                  f"{100 * io:.1f}%")
    free = _mean(breakdown, "free_pct")
    if has_parts and free > idle - free:
        # most of the idle time has no recorded host work either: say so, not just "host"
        reason += (f"; {100 * free:.1f}% of step time is unattributed: nothing is recorded on "
                   "the host either (code the profiler did not capture: Python without "
                   "with_stack, sleeps, file or network I/O, another process) -- capture it "
                   "with torch.profiler.profile(with_stack=True) or `hermes profile`")
    return Verdict("host", device, comm, idle, io, cpu, reason)
