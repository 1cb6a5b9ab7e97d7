"""The rule table's loader and schema check: ``load_rules`` (a TOML table checked field by field,
:class:`RuleError` naming the rule and field) and ``TABLE``, the shipped ``rules.toml`` (next to
this file), loaded when this module is imported."""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes.errors import HermesError
from hermes.findings import CAUSE_IDS
from hermes.rules.expr import Expr, ExprError, compile_expr
from hermes.rules.preconditions import PRECONDITIONS

RULES_PATH = Path(__file__).with_name("rules.toml")
SCHEMA_VERSION = 1
#: device kinds with their own wording (``how_<kind>``); ``cpu``: a CPU-only run
DEVICE_KINDS = ("npu", "gpu", "cpu")

_ID = re.compile(r"[a-z0-9_.\-]+")
_REQUIRED = ("id", "cause", "optimization", "how", "recover", "basis")
_OPTIONAL = ("how_npu", "how_gpu", "how_cpu", "emulator_opt", "when", "fallback", "params",
             "requires")


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
    #: preconditions (hermes.rules.preconditions) that must hold for the advice to apply
    requires: tuple[str, ...] = ()


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


def _rule(i: int, raw: Any, path: str, check_opts: bool = True) -> Rule:
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
    for f in ("id", "cause", "optimization", "how", "basis", "how_npu", "how_gpu", "how_cpu",
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
    for f in ("how", "how_npu", "how_gpu", "how_cpu", "emulator_opt"):
        if f in raw:
            try:
                _template_fields(raw[f])
            except ValueError as exc:
                raise err(f, f"bad {{placeholder}}: {exc}", "write literal braces as {{ }}") \
                    from None
    requires = raw.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise err("requires", "must be a list of precondition names")
    bad = [r for r in requires if r not in PRECONDITIONS]
    if bad:
        raise err("requires", f"unknown precondition {bad[0]!r}",
                  f"valid: {', '.join(PRECONDITIONS)}")
    if "emulator_opt" in raw and check_opts:
        _check_opt(raw["emulator_opt"], err)
    return Rule(id=raw["id"], cause=raw["cause"], optimization=raw["optimization"].strip(),
                how=raw["how"].strip(), recover=recover, basis=raw["basis"].strip(),
                how_by_kind={k: raw[f"how_{k}"].strip() for k in DEVICE_KINDS
                             if f"how_{k}" in raw},
                emulator_opt=raw.get("emulator_opt"),
                when=expr("when", raw["when"]) if "when" in raw else None,
                fallback=None if fallback is None else float(fallback), params=tuple(params),
                requires=tuple(requires))


def load_rules(path: str | Path = RULES_PATH, *, require_all: bool | None = None,
               check_opts: bool = True) -> RuleTable:
    """Load and check a rule table. ``require_all`` (default: for the shipped table) also
    demands at least one rule for every cause id of the vocabulary; ``check_opts`` checks each
    ``emulator_opt`` against the emulator's options (imports ``hermes.npu``)."""
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
    rules = [_rule(i, r, p, check_opts) for i, r in enumerate(raw_rules)]
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


#: The shipped table, checked except for its emulator options (tests/advisor checks those)
TABLE: RuleTable = load_rules(check_opts=False)


__all__ = ["DEVICE_KINDS", "RULES_PATH", "SCHEMA_VERSION", "TABLE", "Rule", "RuleError",
           "RuleTable", "load_rules"]
