"""One call from names to a run: what ``hermes emulate`` and ``hermes demo`` run.

``plan`` turns cause and optimization specs into :class:`Settings` and rejects contradictory
combinations; ``emulate`` runs the plan on the clock it names and hands everything to the
collector its caller built (the emulator knows nothing of files), recording the ground truth
(injected causes, optimizations, seed, every setting, the optimizations this run cannot take)
in the trace metadata's ``extra``: what the advisor knows of an emulated run, without
importing the emulator.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hermes.devices import DeviceProfile
from hermes.devices import get as get_device
from hermes.errors import HermesError, UsageError
from hermes.hooks import Collector
from hermes.npu import inject, opts
from hermes.npu.real import RealRuntime
from hermes.npu.reference import StepRef, step_ref
from hermes.npu.result import RunResult
from hermes.npu.runtime import Runtime
from hermes.npu.settings import Settings
from hermes.npu.workloads import Workload
from hermes.npu.workloads import get as get_workload

CLOCKS = ("virtual", "real")
#: Parsed option specs, in the order given: (name, value).
OptList = list[tuple[str, Any]]


@dataclass(frozen=True)
class Plan:
    """A checked emulation request."""

    workload: str
    ranks: int
    device: str
    causes: tuple[tuple[str, float], ...]
    opts: tuple[tuple[str, Any], ...]
    settings: Settings
    clock: str
    seed: int
    ref: StepRef | None = None          # the healthy step the causes were scaled against
    #: (optimization, why not) for every optimization the run has not taken and cannot take
    opts_rejected: tuple[tuple[str, str], ...] = ()

    def truth(self) -> dict[str, Any]:
        """What the trace's ``extra`` records so tests and analyses can check ground truth."""
        return {"injected": [{"id": c, "strength": k} for c, k in self.causes],
                "injected_ids": [c for c, _ in self.causes],
                "opts": {n: (list(v) if isinstance(v, tuple) else v) for n, v in self.opts},
                "opts_rejected": dict(self.opts_rejected),
                "clock": self.clock, "device_name": self.device,
                **({"reference": self.ref.to_meta()} if self.ref else {})}


def plan(workload: str, *, ranks: int = 1, device: str = "ascend910b",
         inject_specs: list[str] | tuple[str, ...] = (),
         opt_specs: list[str] | tuple[str, ...] = (),
         clock: str = "virtual", seed: int = 0, base: Settings | None = None) -> Plan:
    w = get_workload(workload)
    prof = get_device(device)
    if clock not in CLOCKS:
        raise UsageError(f"unknown clock {clock!r}", hint=f"valid: {', '.join(CLOCKS)}")
    if ranks < 1:
        raise UsageError(f"--ranks must be >= 1, got {ranks}")
    if clock == "real" and ranks > 1:
        raise UsageError("--clock real emulates one rank (the host code really runs)",
                         hint="drop --ranks or use --clock virtual")
    causes = [inject.parse(x) for x in inject_specs]
    seen = {c for c, _ in causes}
    if len(seen) != len(causes):
        raise UsageError("a cause is injected twice", hint="give each --inject once")
    optl = [opts.parse(x) for x in opt_specs]
    if os.environ.get("MAX_RUNTIME_CORE_NUMBER", "").strip() == "3" and \
            "pipeline" not in dict(optl):
        optl.append(("pipeline", True))  # GE's switch for the 3-stage host pipeline
    s0 = base or Settings()
    ref = None
    if causes:  # injections are scaled to this workload's healthy step (reference.py)
        Runtime(prof, ranks=ranks, settings=s0).layout(w)  # a bad layout fails before the run
        ref = step_ref(w, prof, ranks, s0)
    injected = inject.apply(s0, causes, ranks, int(prof.fields.get("devices_per_node", 8)), ref)
    s = _with_opts(injected, optl, w, prof, ranks)
    return Plan(w.name, ranks, prof.name, tuple(causes), tuple(optl), s, clock, seed, ref,
                _rejected(injected, optl, w, prof, ranks))


def _with_opts(injected: Settings, optl: OptList, w: Workload, prof: DeviceProfile,
               ranks: int) -> Settings:
    """The injected settings with the optimizations applied, checked; raises a UsageError
    for a combination that cannot hold."""
    s = opts.apply(injected, optl)
    _check(s, dict(optl), ranks)
    Runtime(prof, ranks=ranks, settings=s).layout(w)  # validates parallel= against --ranks
    return s


def _rejected(injected: Settings, optl: OptList, w: Workload, prof: DeviceProfile,
              ranks: int) -> tuple[tuple[str, str], ...]:
    """(name, reason) of each optimization not already given whose example spelling ``plan``
    would refuse on top of this run. Optimizations apply after the causes, so this re-plans
    from the injected settings: no reference step re-measured, microseconds per option."""
    given = dict(optl)
    out = []
    for name, opt in opts.OPTS.items():
        if name in given:
            continue
        try:
            _with_opts(injected, [*optl, opts.parse(opt.example)], w, prof, ranks)
        except HermesError as exc:
            out.append((name, exc.one_line()))
    return tuple(out)


def _check(s: Settings, given: dict[str, Any], ranks: int) -> None:
    """Reject combinations that cannot both hold."""
    if s.sink and s.dynamic_shapes:
        raise UsageError("--opt sink needs a static graph, but shapes are dynamic",
                         hint="add --opt static_shapes or drop --opt sink")
    if s.sink and s.pipeline:
        raise UsageError("--opt sink and --opt pipeline exclude each other: sink scheduling has "
                         "no per-operator host stages to pipeline", hint="keep one of them")
    if s.sink and s.host_small_ops:
        raise UsageError("--opt host_small_ops needs host scheduling; a sunk graph runs every "
                         "operator on the device", hint="drop --opt sink or host_small_ops")
    if "parallel" in given and ranks == 1 and given["parallel"] != (1, 1, 1):
        raise UsageError("--opt parallel needs --ranks > 1")


def row_group_rows(ranks: int) -> int:
    """Rows buffered per rank file before a row group is written: a directory trace keeps one
    open writer per rank, so bound the total buffered rows (~4M) rather than each file's."""
    from hermes.trace.writer import DEFAULT_ROW_GROUP_ROWS

    return int(max(4096, min(DEFAULT_ROW_GROUP_ROWS, 2**22 // max(ranks, 1))))


def emulate(p: Plan, collector: Collector, steps: int,
            progress: Callable[[int, int], None] | None = None) -> RunResult:
    """Run the plan on its clock, reporting to ``collector`` (built by the caller, e.g. a
    ``hermes.collectors.fine.FineCollector`` writing the trace), and close the collector
    with the run's metadata; on failure the collector is aborted when it can be."""
    if not isinstance(collector, Collector):
        raise TypeError(f"emulate() takes a collector (hermes.hooks.Collector), got "
                        f"{type(collector).__name__}: build one, e.g. FineCollector(path)")
    rt: Runtime | RealRuntime
    if p.clock == "real":  # host code really runs, op by op (one rank, see real.py)
        rt = RealRuntime(p.device, settings=p.settings, collector=collector, seed=p.seed,
                         meta=p.truth())
    else:
        rt = Runtime(p.device, ranks=p.ranks, settings=p.settings, collector=collector,
                     seed=p.seed, meta=p.truth(), progress=progress)
    try:
        result = rt.run(p.workload, steps)
    except BaseException:
        abort = getattr(collector, "abort", None)
        if abort is not None:
            abort()
        raise
    rt.close(result)
    return result
