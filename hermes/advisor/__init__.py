"""The advisor: ``advise(analysis, table) -> Advice`` — findings in, recommendations out.

The stage after analysis (DESIGN.md's data flow): for every finding it evaluates the rule table's
rules for that cause (:mod:`hermes.rules`) against what the run recorded — the finding's evidence,
the device profile, the recorded configuration — and returns the recommendations, best first.

**Estimated speedup.** A rule recovers a fraction ``r`` (0-1, its ``recover`` number or
expression) of the time its finding costs; the finding costs ``share`` of step time, so the step
shrinks by ``share * r`` and ``estimated_speedup = 1 / (1 - share * r)`` (step time before /
after), capped at the table's ``max_speedup`` and rounded to 2 decimals. ``emulator_opt`` is the
``hermes emulate --opt`` spelling that applies the rule, given only when the trace came from the
emulator (``meta.source == "emulator"``) and the emulator did not record the option as impossible
for that run (``extra.opts_rejected``); a rule whose option the run already used is not
recommended again. docs/rules.md describes the table format.

What the advisor knows of an emulated run comes from the trace's metadata alone (the emulator
records every setting it used), never from importing the emulator.

**Kinds of run.** The analysis' ``run_kind`` is a fact rule preconditions see (``cpu_only``)
and a name rule expressions see (``run_kind``); a CPU-only run is advised as ``device_kind``
``cpu`` (a rule's ``how_cpu`` wording, no GPU or NPU wording). A run whose device was not
captured gets no replayed estimate: the replay needs the device's times.

The work is in named modules: :mod:`.advice` (``advise``, ``recommend``, ``evaluate``,
``context``) and :mod:`.replayed` (replayed speed-ups); this package only re-exports.
"""

from __future__ import annotations

from hermes.advisor.advice import (
    SOURCE_DEVICE,
    Advice,
    advise,
    context,
    evaluate,
    is_emulated,
    machine_facts,
    recommend,
    recorded_config,
    speedup,
)

__all__ = ["Advice", "SOURCE_DEVICE", "advise", "context", "evaluate", "is_emulated",
           "machine_facts", "recommend", "recorded_config", "speedup"]
