"""The rule table (cause -> optimization) as TOML data, its loader and schema check.

``rules.toml`` (next to this file) holds one ``[[rule]]`` per (cause id -> optimization) pair; it
is loaded and checked when this module is imported, so a broken table fails at once with a
:class:`RuleError` that names the rule and the field. One check waits: whether an
``emulator_opt`` names an option ``hermes emulate --opt`` knows needs the emulator's option
registry (importing the emulated runtime, which every ``hermes analyze`` would pay); the
shipped table gets it from the tests (``check_opts=True``), any other table when it is loaded.
Evaluating the table for a run's findings is the advisor's work (:mod:`hermes.advisor`), which
also documents how estimated speedups are computed.

docs/rules.md describes the table format.

The loader and schema check are in :mod:`.table` (``load_rules``, ``TABLE``); rule
expressions in :mod:`.expr`, preconditions in :mod:`.preconditions`; this package only
re-exports.
"""

from __future__ import annotations

from hermes.rules.table import (
    DEVICE_KINDS,
    RULES_PATH,
    SCHEMA_VERSION,
    TABLE,
    Rule,
    RuleError,
    RuleTable,
    load_rules,
)

__all__ = ["DEVICE_KINDS", "RULES_PATH", "SCHEMA_VERSION", "TABLE", "Rule", "RuleError",
           "RuleTable", "load_rules"]
