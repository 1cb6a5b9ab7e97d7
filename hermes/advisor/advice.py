"""The advisor's work: ``advise`` (every finding's recommendations, best first), ``recommend``
(one finding's), ``evaluate`` (one rule), ``context`` (the names a rule sees); the package
docstring (:mod:`hermes.advisor`) describes estimates and kinds of run."""

from __future__ import annotations

import math
import string
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hermes.analyzers.common.runkind import CPU_ONLY, NOT_CAPTURED
from hermes.analyzers.engine.result import Analysis
from hermes.errors import HermesError
from hermes.findings import Finding, Recommendation
from hermes.rules import TABLE, Rule, RuleTable
from hermes.rules.expr import Unavailable
from hermes.rules.preconditions import evaluate as check_requires
from hermes.rules.preconditions import precision_plan, verify_text

#: Device kind and vendor of traces whose metadata names no known device, by trace source.
SOURCE_DEVICE = {"ascend": ("npu", "huawei"), "kineto": ("gpu", "nvidia")}


@dataclass(frozen=True)
class Advice:
    """The advisor's output: recommendations per finding id, best first."""

    recommendations: Mapping[str, tuple[Recommendation, ...]] = field(default_factory=dict)
    table: str = ""

    def for_finding(self, fid: str) -> tuple[Recommendation, ...]:
        return tuple(self.recommendations.get(fid, ()))

    def attach(self, analysis: Analysis) -> Analysis:
        """``analysis`` whose findings carry these recommendations (what renderers show)."""
        return analysis.with_findings([replace(f, recommendations=self.for_finding(f.id))
                                       for f in analysis.findings])


def advise(analysis: Analysis, table: RuleTable | None = None, trace: Any = None) -> Advice:
    """Recommendations for every finding of ``analysis`` from ``table`` (default: the shipped
    rule table, ``rules/rules.toml``). With the ``trace`` (a :class:`hermes.Trace`, its path, or
    its events), a recommendation whose optimization has a what-if transform gets its
    ``estimated_speedup`` from replaying the step graph (``estimate = "replay"``,
    :mod:`hermes.advisor.replayed`); the others keep the rule's formula."""
    table = table or TABLE
    facts = machine_facts(analysis)
    recs = {f.id: recommend(f, analysis.meta, table, facts) for f in analysis.findings}
    # replaying needs the device's times: a run whose device was not captured has none
    if trace is not None and getattr(analysis, "run_kind", "accelerator") != NOT_CAPTURED:
        from hermes.advisor.replayed import with_replay

        recs = with_replay(recs, trace, analysis, table.max_speedup)
    return Advice({k: tuple(v) for k, v in recs.items()}, table.path)


def machine_facts(analysis: Any) -> dict[str, Any] | None:
    """What the trace shows of the device, the matmul dtypes and the parallelism
    (``Analysis.machine``), with the device's capability checks: the facts rule preconditions
    (``requires``) are evaluated on. None for an analysis that has none."""
    from hermes.devices.identify import Identified

    m = getattr(analysis, "machine", None)
    if not isinstance(m, Mapping):
        return None
    ident = Identified.from_dict(m.get("device") or {})
    facts = {**m, "supports": ident.supports, "speedup": ident.speedup,
             "matmul_device_share": float((m.get("matmul_mix") or {}).get("device_share")
                                          or 0.0)}
    facts["plan"] = precision_plan(facts)
    facts["run_kind"] = str(getattr(analysis, "run_kind", "accelerator") or "accelerator")
    return facts


#: Words of each vendor's own stack, for ``{smi_clock}``, ``{smi_name}``, ``{torch_device}``.
STACK = {
    "nvidia": {"smi_clock": "nvidia-smi -q -d PERFORMANCE,CLOCK (throttle reasons)",
               "smi_name": "nvidia-smi --query-gpu=name,compute_cap --format=csv",
               "torch_device": "cuda"},
    "amd": {"smi_clock": "rocm-smi --showclocks --showpower --showtemp",
            "smi_name": "rocm-smi --showproductname", "torch_device": "cuda"},
    "huawei": {"smi_clock": "npu-smi info -t power -i 0; npu-smi info -t temp -i 0",
               "smi_name": "npu-smi info", "torch_device": "npu"},
    "intel": {"smi_clock": "hl-smi -q -d CLOCK,POWER,TEMPERATURE", "smi_name": "hl-smi",
              "torch_device": "hpu"},
}
#: Where the trace does not say whose device it is: no tool named.
NO_STACK = {"smi_clock": "the vendor's device-management tool (clocks, power, temperature)",
            "smi_name": "the device's model", "torch_device": "cuda"}


def _precision_names(facts: Mapping[str, Any] | None) -> dict[str, Any]:
    if not facts:
        return {}
    plan, dev = facts.get("plan") or {}, facts.get("device") or {}
    mix = facts.get("matmul_mix") or {}
    vendor = str(dev.get("vendor") or "")
    out: dict[str, Any] = {
        "precision_current": plan.get("current") or "", "precision_target":
            plan.get("target") or "", "precision_ratio": float(plan.get("ratio") or 0.0),
        "matmul_share": float(mix.get("device_share") or 0.0),
        "matmul_dtype_unknown": float(mix.get("unknown_share") or 0.0),
        "device_arch": str(dev.get("arch") or ""), "device_name": str(dev.get("name") or ""),
        "device_source": str(dev.get("source") or "unknown"), "device_vendor": vendor,
        **STACK.get(vendor, NO_STACK)}
    r, cur, tgt = out["precision_ratio"], out["precision_current"], out["precision_target"]
    if r > 1 and tgt:
        out["precision_gain"] = (f"device table: {tgt} {r:.1f}x the {cur} matrix peak; matmuls "
                                 f"are {100 * out['matmul_share']:.0f}% of device time")
    supports = facts.get("supports")
    for d in ("bf16", "fp8", "tf32"):  # 1 yes, 0 no, -1 unknown
        got = supports(d) if callable(supports) else None
        out[f"device_has_{d}"] = -1 if got is None else int(bool(got))
    return out


def _scalar(v: Any) -> bool:
    return isinstance(v, (int, float, str, bool)) or (
        isinstance(v, (list, tuple)) and all(isinstance(x, (int, float, str)) for x in v))


def _flatten(d: Mapping[str, Any], prefix: str = "", depth: int = 3) -> dict[str, Any]:
    """Scalars of a (nested) mapping as identifiers: ``{"a": {"b": 1}}`` -> ``{"a_b": 1}``
    (``evidence.causes.ai_cpu.share`` -> ``causes_ai_cpu_share``)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if not key.isidentifier():
            continue
        if isinstance(v, Mapping):
            if depth > 1:
                out.update(_flatten(v, key + "_", depth - 1))
        elif _scalar(v) and v is not None:
            out[key] = tuple(v) if isinstance(v, list) else v
    return out


def is_emulated(meta: Any) -> bool:
    return str(getattr(meta, "source", "") or "").startswith("emulator")


def _extra(meta: Any) -> dict[str, Any]:
    return dict(getattr(meta, "extra", {}) or {})


def recorded_config(meta: Any) -> dict[str, Any]:
    """Configuration the trace recorded about its run (``extra.settings``/``environment``/
    ``env``); an emulated run records every setting it used."""
    out: dict[str, Any] = {}
    extra = _extra(meta)
    for key in ("settings", "environment", "env"):
        rec = extra.get(key)
        if isinstance(rec, dict):
            out.update(rec)
    return _flatten(out, depth=1)


def _loader_workers(evidence: Mapping[str, Any], config: Mapping[str, Any], default: Any) -> Any:
    """Data-loader workers the run used: the evidence's, the recorded configuration's (capped
    by a taskset binding), else the table default."""
    if isinstance(evidence.get("num_workers"), (int, float)):
        return evidence["num_workers"]
    workers = config.get("num_workers")
    if isinstance(workers, (int, float)) and not isinstance(workers, bool):
        cores = config.get("taskset_cores")
        return min(workers, cores) if isinstance(cores, int) and cores > 0 else workers
    return default


def context(finding: Any, meta: Any, table: RuleTable = TABLE,
            facts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The names a rule's expressions see for ``finding`` (docs/rules.md lists them)."""
    evidence = dict(getattr(finding, "evidence", {}) or {})
    device = dict(getattr(meta, "device", {}) or {})
    config = recorded_config(meta)
    ns: dict[str, Any] = dict(table.defaults)
    ns.update(config)
    ns.update(_flatten(evidence))
    ns.update(_flatten(device, "device_"))
    kind, vendor = SOURCE_DEVICE.get(str(getattr(meta, "source", "")), ("", ""))
    ns["device_kind"] = str(device.get("kind") or kind)
    ns["vendor"] = str(device.get("vendor") or vendor)
    ns["emulated"] = is_emulated(meta)
    ns["ranks"] = len(getattr(meta, "ranks", ()) or ()) or max(1, len(finding.ranks))
    ns["num_workers"] = _loader_workers(evidence, config, table.defaults.get("num_workers", 1))
    ns["share"] = float(finding.time_share)
    ns.update(_precision_names(facts))
    ns["run_kind"] = str((facts or {}).get("run_kind") or "accelerator")
    if ns["run_kind"] == CPU_ONLY:  # no accelerator: CPU wording, no vendor's device stack
        ns.update(device_kind="cpu", vendor="", device_vendor="")
    if facts and ns.get("device_vendor"):  # the identified device's vendor over a guess
        ns["vendor"] = ns["device_vendor"]
    if not ns.get("device_vendor"):
        ns["device_vendor"] = ns["vendor"]
    ns.setdefault("smi_clock", NO_STACK["smi_clock"])
    ns.setdefault("smi_name", NO_STACK["smi_name"])
    ns.setdefault("torch_device", NO_STACK["torch_device"])
    return ns


class _Fmt(string.Formatter):
    def format_field(self, value: Any, spec: str) -> str:
        if isinstance(value, float) and not spec and value.is_integer():
            value = int(value)
        if isinstance(value, float) and not spec:
            return f"{value:.3g}"
        if isinstance(value, (list, tuple)) and not spec:
            return ", ".join(str(v) for v in value)
        return super().format_field(value, spec)


def _fill(template: str, values: Mapping[str, Any]) -> str:
    try:
        return _Fmt().vformat(template, (), values)
    except (KeyError, IndexError, AttributeError) as exc:
        raise Unavailable(f"no value for {exc}") from None


def _opt_spec(name: str, value: Any) -> str:
    if value is True:
        return name
    if value is False:
        return f"{name}=off"
    if isinstance(value, (list, tuple)):
        return f"{name}=" + ",".join(f"{p}{v}" for p, v in zip(("dp", "tp", "pp"), value,
                                                               strict=False))
    return f"{name}={value}"


def _emulator_state(meta: Any, spec: str) -> str:
    """``"ok"``, ``"applied"`` (the run already had this option with this value) or
    ``"invalid"`` (the emulator recorded that the option cannot be planned with this run:
    ``extra.opts_rejected``, written by the emulator at plan time)."""
    from hermes.npu import opts  # imported on use: only emulated runs name emulator options

    extra = _extra(meta)
    try:
        name, value = opts.parse(spec)
    except HermesError:
        return "invalid"
    had = extra.get("opts") or {}
    if name in had:
        try:
            if opts.parse(_opt_spec(name, had[name]))[1] == value:
                return "applied"
        except HermesError:
            pass
    rejected = extra.get("opts_rejected") or {}
    return "invalid" if isinstance(rejected, Mapping) and name in rejected else "ok"


def speedup(recovered_share: float, cap: float) -> float:
    """Step time before / after when ``recovered_share`` of the step goes away, capped."""
    s = min(max(recovered_share, 0.0), 1.0 - 1.0 / cap)
    return round(min(cap, 1.0 / (1.0 - s)), 2)


def evaluate(rule: Rule, ns: Mapping[str, Any]) -> tuple[float, dict[str, Any]] | None:
    """(recovered fraction of the finding's time, parameters) or None when the rule does not
    apply (parameters not evaluable, ``when`` false or not evaluable, no recover figure).
    Parameters are evaluated first, in table order, so ``when`` and ``recover`` can use them."""
    values = dict(ns)
    params: dict[str, Any] = {}
    for name, e in rule.params:  # first: ``when`` and ``recover`` may use them
        try:
            params[name] = values[name] = e.eval(values)
        except Unavailable:
            return None
    if rule.when is not None:
        try:
            if not rule.when.eval(values):
                return None
        except Unavailable:
            return None
    try:
        r = float(rule.recover.eval(values))
    except (Unavailable, TypeError, ValueError):
        if rule.fallback is None:
            return None
        r = rule.fallback
    if math.isnan(r):
        if rule.fallback is None:
            return None
        r = rule.fallback
    return min(max(r, 0.0), 1.0), params


def recommend(finding: Finding, meta: Any = None, table: RuleTable | None = None,
              facts: Mapping[str, Any] | None = None) -> list[Recommendation]:
    """Recommendations for one finding, sorted by estimated speedup (descending). With
    ``facts`` (:func:`machine_facts`) a rule whose ``requires`` fails is left out, and one whose
    preconditions are unknown is shown as conditional: its ``how`` starts with what to check."""
    table = table or TABLE
    ns = context(finding, meta, table, facts)
    emulated = ns["emulated"]
    out: list[tuple[float, int, Recommendation]] = []
    for order, rule in enumerate(table.for_cause(finding.id)):
        state, unknown = check_requires(rule.requires, facts) if facts and rule.requires \
            else (True, [])
        if state is False:
            continue  # advice this run cannot apply (a capability or parallelism it lacks)
        got = evaluate(rule, ns)
        if got is None:
            continue
        recover, params = got
        values = {**ns, **params}
        try:
            how = _fill(rule.how_by_kind.get(ns["device_kind"], rule.how), values)
            opt = _fill(rule.emulator_opt, values) if rule.emulator_opt else None
        except Unavailable:
            continue
        if state is None:
            try:
                check = _fill(verify_text(unknown, str(ns.get("device_vendor") or "")), values)
            except Unavailable:
                check = verify_text(unknown, "")
            how = f"Conditional: the trace cannot tell; check {check} first. {how}"
        if opt is not None:
            if not emulated:
                opt = None
            else:
                state = _emulator_state(meta, opt)
                if state == "applied":
                    continue  # the run already has it: recommending it again is no advice
                if state == "invalid":
                    opt = None
        est = speedup(ns["share"] * recover, table.max_speedup)
        out.append((est, order, Recommendation(rule.id, rule.optimization, how, est, opt)))
    out.sort(key=lambda t: (-t[0], t[1]))
    return [r for _, _, r in out]


