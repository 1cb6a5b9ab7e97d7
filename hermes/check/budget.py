"""Performance budgets for ``hermes check --budget FILE.toml``: the file, its checks, its errors.

```toml
max_step_ms = 120.0            # median step time
max_host_bound_pct = 30.0      # worst rank's host-bound share of step time
max_exposed_comm_pct = 10.0    # worst rank's communication not hidden under computation
min_mfu = 0.35                 # model FLOP utilization (0-1), worst rank
no_new_high_findings = true    # no finding of severity high the baselines did not have
require = ["mfu"]              # fail, rather than skip, a budget whose figure is not measured

[finding."cpu.operator_dispatch"]
max_share = 0.2                # this cause may cost at most 20 % of step time
```

Every key is optional. A file that does not parse, an unknown key, a value of the wrong type or
out of range is a :class:`BudgetError` naming the file, the key and the reason (exit 2): a CI gate
that silently ignores a misspelt limit would pass builds it was written to fail.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes.errors import HermesError
from hermes.findings import CAUSE_IDS


class BudgetError(HermesError):
    """A budget file that cannot be used: bad TOML, unknown key, wrong type or range."""


#: Limits on a measured figure: key -> (figure it limits, "max"/"min", lowest, highest allowed).
LIMITS: dict[str, tuple[str, str, float, float]] = {
    "max_step_ms": ("step_ms", "max", 0.0, math.inf),
    "max_host_bound_pct": ("host_bound_pct", "max", 0.0, 100.0),
    "max_exposed_comm_pct": ("exposed_comm_pct", "max", 0.0, 100.0),
    "min_mfu": ("mfu", "min", 0.0, 1.0),
}
#: Figures ``require`` may name.
FIGURES = tuple(v[0] for v in LIMITS.values())
_OTHER_KEYS = ("no_new_high_findings", "require", "finding")
_FINDING_KEYS = ("max_share",)


@dataclass(frozen=True)
class Budget:
    path: Path
    limits: dict[str, float] = field(default_factory=dict)
    no_new_high_findings: bool = False
    require: tuple[str, ...] = ()
    #: finding id -> the largest share of step time it may cost
    finding_caps: dict[str, float] = field(default_factory=dict)


def _number(path: Path, key: str, value: Any, lo: float, hi: float) -> float:
    # bool is an int in Python; `max_step_ms = true` is a mistake, not 1 ms
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BudgetError(f"expected a number, got {type(value).__name__} {value!r}",
                          path=path, where=key)
    v = float(value)
    if not (lo <= v <= hi) or math.isnan(v):
        rng = f"{lo:g} to {hi:g}" if math.isfinite(hi) else f">= {lo:g}"
        raise BudgetError(f"{v:g} is out of range ({rng})", path=path, where=key)
    return v


def _unknown(path: Path, key: str, valid: tuple[str, ...] | list[str]) -> BudgetError:
    return BudgetError(f"unknown key {key!r}", path=path, where=key,
                       hint=f"valid: {', '.join(valid)}")


def _findings(path: Path, table: Any) -> dict[str, float]:
    if not isinstance(table, dict):
        raise BudgetError(f"expected a table of finding ids, got {type(table).__name__}",
                          path=path, where="finding")
    caps: dict[str, float] = {}
    for fid, spec in table.items():
        where = f'finding."{fid}"'
        if fid not in CAUSE_IDS:
            raise BudgetError(f"unknown finding id {fid!r}", path=path, where=where,
                              hint="ids are category.cause, e.g. cpu.operator_dispatch")
        if not isinstance(spec, dict):
            raise BudgetError(f"expected a table with max_share, got {type(spec).__name__}",
                              path=path, where=where)
        for k in spec:
            if k not in _FINDING_KEYS:
                raise _unknown(path, f"{where}.{k}", _FINDING_KEYS)
        if "max_share" not in spec:
            raise BudgetError("missing max_share", path=path, where=where)
        caps[fid] = _number(path, f"{where}.max_share", spec["max_share"], 0.0, 1.0)
    return caps


def parse_budget(doc: dict[str, Any], path: Path) -> Budget:
    """Check a parsed budget document (see the module docstring) and build the Budget."""
    limits: dict[str, float] = {}
    for key, value in doc.items():
        if key in LIMITS:
            _, _, lo, hi = LIMITS[key]
            limits[key] = _number(path, key, value, lo, hi)
        elif key not in _OTHER_KEYS:
            raise _unknown(path, key, [*LIMITS, *_OTHER_KEYS])
    flag = doc.get("no_new_high_findings", False)
    if not isinstance(flag, bool):
        raise BudgetError(f"expected true or false, got {flag!r}", path=path,
                          where="no_new_high_findings")
    req = doc.get("require", [])
    if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
        raise BudgetError(f"expected a list of figure names, got {req!r}", path=path,
                          where="require", hint=f"figures: {', '.join(FIGURES)}")
    bad = [r for r in req if r not in FIGURES]
    if bad:
        raise BudgetError(f"unknown figure {bad[0]!r}", path=path, where="require",
                          hint=f"figures: {', '.join(FIGURES)}")
    return Budget(path=path, limits=limits, no_new_high_findings=flag, require=tuple(req),
                  finding_caps=_findings(path, doc.get("finding", {})))


def load_budget(path: str | Path) -> Budget:
    """Read and check a budget file; any problem is a :class:`BudgetError` (exit 2)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BudgetError("no such file", path=p, where="--budget") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BudgetError(f"cannot read ({exc.__class__.__name__})", path=p,
                          where="--budget") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message names the line and column; there is no key to name yet
        raise BudgetError(f"not valid TOML: {exc}", path=p) from None
    return parse_budget(doc, p)
