"""The rule table (cause -> optimization) as TOML data, its loader and schema check.

``rules.toml`` (next to this file) holds one ``[[rule]]`` per (cause id -> optimization) pair; it
is loaded and checked when this module is imported, so a broken table fails at once with a
:class:`RuleError` that names the rule and the field. ``recommend(finding, meta)`` turns one
finding into its recommendations, best first::

    [{"rule", "optimization", "how", "estimated_speedup", "emulator_opt"}, ...]

**Estimated speedup.** A rule recovers a fraction ``r`` (0-1, its ``recover`` number or
expression) of the time its finding costs; the finding costs ``share`` of step time, so the step
shrinks by ``share * r`` and ``estimated_speedup = 1 / (1 - share * r)`` (step time before /
after), capped at the table's ``max_speedup`` and rounded to 2 decimals. ``emulator_opt`` is the
``hermes emulate --opt`` spelling that applies the rule, given only when the trace came from the
emulator (``meta.source == "emulator"``) and the option is valid for that run (re-planned with the
run's recorded workload, ranks, injected causes and options); a rule whose option the run already
used is not recommended again. docs/rules.md describes the table format.
"""

from __future__ import annotations

import math
import re
import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes.errors import HermesError
from hermes.findings import CAUSE_IDS
from hermes.rules.expr import Expr, ExprError, Unavailable, compile_expr

RULES_PATH = Path(__file__).with_name("rules.toml")
SCHEMA_VERSION = 1
DEVICE_KINDS = ("npu", "gpu")
#: Device kind and vendor of traces whose metadata names no known device, by trace source.
SOURCE_DEVICE = {"ascend": ("npu", "huawei"), "kineto": ("gpu", "nvidia")}

_ID = re.compile(r"[a-z0-9_.\-]+")
_REQUIRED = ("id", "cause", "optimization", "how", "recover", "basis")
_OPTIONAL = ("how_npu", "how_gpu", "emulator_opt", "when", "fallback", "params")


class RuleError(HermesError):
    """The rule table is malformed: names the file, the rule and the field."""


@dataclass(frozen=True)
class Rule:
    """One (cause -> optimization) entry of the table."""

    id: str
    cause: str
    optimization: str
    how: str
    recover: Expr
    basis: str
    how_by_kind: Mapping[str, str] = field(default_factory=dict)
    emulator_opt: str | None = None
    when: Expr | None = None
    fallback: float | None = None
    params: tuple[tuple[str, Expr], ...] = ()


@dataclass(frozen=True)
class RuleTable:
    rules: tuple[Rule, ...]
    defaults: Mapping[str, Any]
    max_speedup: float
    path: str = ""

    def for_cause(self, cause_id: str) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.cause == cause_id)


# --------------------------------------------------------------------------- loading

def _template_fields(text: str) -> set[str]:
    return {f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(text)
            if f is not None and f != ""}


def _check_opt(spec: str, err: Any) -> None:
    """An emulator option: its name must be one of ``hermes emulate --opt``'s; a spelling
    without placeholders must parse as it stands."""
    from hermes.npu import opts

    name = spec.partition("=")[0].strip()
    if name not in opts.OPTS:
        raise err("emulator_opt", f"unknown emulator optimization {name!r}",
                  f"valid: {', '.join(opts.OPTS)}")
    if not _template_fields(spec):
        try:
            opts.parse(spec)
        except HermesError as exc:
            raise err("emulator_opt", exc.message, exc.hint) from None


def _rule(i: int, raw: Any, path: str) -> Rule:
    rid = raw.get("id") if isinstance(raw, dict) else None
    label = f"rule #{i + 1}" + (f" ({rid})" if isinstance(rid, str) else "")

    def err(fld: str, msg: str, hint: str | None = None) -> RuleError:
        return RuleError(msg, path=path, where=f"{label}, field {fld!r}", hint=hint)

    if not isinstance(raw, dict):
        raise RuleError("a [[rule]] entry must be a table", path=path, where=label)
    unknown = sorted(set(raw) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise err(unknown[0], f"unknown field {unknown[0]!r}",
                  f"fields: {', '.join(_REQUIRED + _OPTIONAL)}")
    for f in _REQUIRED:
        if f not in raw:
            raise err(f, "missing")
    for f in ("id", "cause", "optimization", "how", "basis", "how_npu", "how_gpu",
              "emulator_opt", "when"):
        if f in raw and (not isinstance(raw[f], str) or not raw[f].strip()):
            raise err(f, f"must be a non-empty string, got {raw[f]!r}")
    if not _ID.fullmatch(raw["id"]):
        raise err("id", f"{raw['id']!r} is not a rule id", "lower-case letters, digits, _ . -")
    if raw["cause"] not in CAUSE_IDS:
        raise err("cause", f"unknown cause id {raw['cause']!r}", f"valid: {', '.join(CAUSE_IDS)}")

    def expr(fld: str, value: Any) -> Expr:
        try:
            return compile_expr(value)
        except ExprError as exc:
            raise err(fld, str(exc)) from None

    recover = expr("recover", raw["recover"])
    if not recover.names:
        v = recover.eval({})
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0.0 <= v <= 1.0:
            raise err("recover", f"a constant recover must be a fraction in [0, 1], got {v!r}")
    fallback = raw.get("fallback")
    if fallback is not None and (isinstance(fallback, bool) or not isinstance(
            fallback, (int, float)) or not 0.0 <= fallback <= 1.0):
        raise err("fallback", f"must be a fraction in [0, 1], got {fallback!r}")
    params_raw = raw.get("params", {})
    if not isinstance(params_raw, dict):
        raise err("params", "must be a table of name = expression")
    params = []
    for name, text in params_raw.items():
        if not name.isidentifier():
            raise err("params", f"parameter name {name!r} is not an identifier")
        params.append((name, expr(f"params.{name}", text)))
    for f in ("how", "how_npu", "how_gpu", "emulator_opt"):
        if f in raw:
            try:
                _template_fields(raw[f])
            except ValueError as exc:
                raise err(f, f"bad {{placeholder}}: {exc}", "write literal braces as {{ }}") \
                    from None
    if "emulator_opt" in raw:
        _check_opt(raw["emulator_opt"], err)
    return Rule(id=raw["id"], cause=raw["cause"], optimization=raw["optimization"].strip(),
                how=raw["how"].strip(), recover=recover, basis=raw["basis"].strip(),
                how_by_kind={k: raw[f"how_{k}"].strip() for k in DEVICE_KINDS
                             if f"how_{k}" in raw},
                emulator_opt=raw.get("emulator_opt"),
                when=expr("when", raw["when"]) if "when" in raw else None,
                fallback=None if fallback is None else float(fallback), params=tuple(params))


def load_rules(path: str | Path = RULES_PATH, *, require_all: bool | None = None) -> RuleTable:
    """Load and check a rule table. ``require_all`` (default: for the shipped table) also
    demands at least one rule for every cause id of the vocabulary."""
    path = Path(path)
    p = str(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RuleError("rule table not found", path=p) from None
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"not valid TOML: {exc}", path=p) from None
    unknown = sorted(set(doc) - {"version", "max_speedup", "defaults", "rule"})
    if unknown:
        raise RuleError(f"unknown top-level key {unknown[0]!r}", path=p,
                        hint="keys: version, max_speedup, defaults, [[rule]]")
    if doc.get("version") != SCHEMA_VERSION:
        raise RuleError(f"version must be {SCHEMA_VERSION}, got {doc.get('version')!r}", path=p)
    cap = doc.get("max_speedup", 10.0)
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not cap > 1.0:
        raise RuleError(f"max_speedup must be a number > 1, got {cap!r}", path=p)
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict) or any(
            not isinstance(v, (int, float, str, bool)) for v in defaults.values()):
        raise RuleError("[defaults] must map names to numbers, strings or booleans", path=p)
    raw_rules = doc.get("rule", [])
    if not isinstance(raw_rules, list) or not raw_rules:
        raise RuleError("no [[rule]] entries", path=p)
    rules = [_rule(i, r, p) for i, r in enumerate(raw_rules)]
    seen: set[str] = set()
    for i, r in enumerate(rules):
        if r.id in seen:
            raise RuleError(f"duplicate rule id {r.id!r}", path=p,
                            where=f"rule #{i + 1} ({r.id}), field 'id'")
        seen.add(r.id)
    if require_all if require_all is not None else path.resolve() == RULES_PATH.resolve():
        missing = [c for c in CAUSE_IDS if not any(r.cause == c for r in rules)]
        if missing:
            raise RuleError(f"no rule for cause id(s) {', '.join(missing)}", path=p,
                            hint="add a [[rule]] for each")
    return RuleTable(tuple(rules), dict(defaults), float(cap), p)


TABLE: RuleTable = load_rules()


# --------------------------------------------------------------------------- evaluation

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
    ``env``); for an emulated run, on top of the emulator's defaults (it records only the
    knobs that differ from them)."""
    out: dict[str, Any] = {}
    if is_emulated(meta):
        from dataclasses import fields

        from hermes.npu.settings import Settings

        base = Settings()
        out.update({f.name: getattr(base, f.name) for f in fields(base)})
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


def context(finding: Any, meta: Any, table: RuleTable = TABLE) -> dict[str, Any]:
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


def _emulator_check(meta: Any, spec: str) -> str:
    """``"ok"``, ``"applied"`` (the run already had this option with this value) or
    ``"invalid"`` (it contradicts the run's causes/options, or the run is not re-plannable)."""
    from hermes.npu import emulate, opts

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
    workload = extra.get("workload")
    if not workload:
        return "ok"  # nothing to re-plan against: the option itself parses
    others = [_opt_spec(n, v) for n, v in had.items() if n != name]
    injected = [f"{c['id']}={c.get('strength', 1.0)}" for c in extra.get("injected") or []
                if isinstance(c, dict) and "id" in c]
    try:
        emulate.plan(str(workload), ranks=int(extra.get("ranks") or 1),
                     device=str(extra.get("device_name") or "ascend910b"),
                     inject_specs=injected, opt_specs=[*others, spec],
                     clock=str(extra.get("clock") or "virtual"))
    except HermesError:
        return "invalid"
    return "ok"


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


def recommend(finding: Any, meta: Any = None, table: RuleTable | None = None
              ) -> list[dict[str, Any]]:
    """Recommendations for one finding, sorted by estimated speedup (descending)."""
    table = table or TABLE
    ns = context(finding, meta, table)
    emulated = ns["emulated"]
    out: list[tuple[float, int, dict[str, Any]]] = []
    for order, rule in enumerate(table.for_cause(finding.id)):
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
        if opt is not None:
            if not emulated:
                opt = None
            else:
                state = _emulator_check(meta, opt)
                if state == "applied":
                    continue  # the run already has it: recommending it again is no advice
                if state == "invalid":
                    opt = None
        est = speedup(ns["share"] * recover, table.max_speedup)
        out.append((est, order, {"rule": rule.id, "optimization": rule.optimization,
                                 "how": how, "estimated_speedup": est, "emulator_opt": opt}))
    out.sort(key=lambda t: (-t[0], t[1]))
    return [d for _, _, d in out]


__all__ = ["RULES_PATH", "TABLE", "Rule", "RuleError", "RuleTable", "context", "evaluate",
           "is_emulated", "load_rules", "recommend", "recorded_config", "speedup"]
