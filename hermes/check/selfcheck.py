"""One self-check of an analysis: ``self_check(doc) -> list[Violation]``.

``doc`` is the ``hermes analyze --format json`` document (``Analysis.to_dict()`` after the advisor
attached its recommendations, or the same read back from a file with :func:`load_document`); the
result lists every broken check, empty when the analysis is consistent. Like pyinstrument's
``Frame.self_check`` it is one function run after every analysis in the tests and by
``hermes validate --analysis FILE``. The checks (``CHECKS``, documented in
``docs/analysis/selfcheck.md``):

* ``breakdown_sum``: the five parts of each rank's breakdown sum to 100 % (``SUM_TOL_PCT``);
* ``no_device_work``: the verdict does not say "no device work" beside device work (kernel rows in
  ``computation.top_kernels``, or device time in a rank's breakdown), nor ``run_kind`` say
  ``cpu_only`` / ``device_not_captured`` beside kernel rows or kernel time;
* ``share_within_category``: no finding's ``time_share`` above the share of step time its category
  occupies in the breakdown (``category_share``), per rank where the evidence has
  ``per_rank_share``, and against the largest rank's share otherwise;
* ``speedup_within_share``: no recommendation's ``estimated_speedup`` above ``1 / (1 - time_share)``
  of its finding (removing all of a cost of share s shortens the step by at most s), unless it
  says what it claims (``claims``): findings of the document with those shares, its own among
  them, and a ``saved_share`` of the run's step time within their sum (a replayed change that
  removes several findings' time, or whose median step saves more than the average one);
* ``names_events``: every finding names the events it rests on (a non-empty value of one of
  ``EVENT_KEYS`` in its evidence) or says why it cannot (``evidence.no_events_reason``);
* ``explained``: ``verdict.explained`` is reported and adds up (``check_explained``), with the
  remainder decomposed when the findings explain less than ``EXPLAINED_MIN`` %, and ``run_kind``
  is one of ``RUN_KINDS``. Both keys are new (issue 32); a document without them is a violation
  only with ``require_explained=True``.

Stage 4 (beside the CI gate): it reads what analysis and advice returned, nothing else.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes.errors import HermesError

SCHEMA = "hermes.analysis/1"
PARTS = ("computation_only_pct", "communication_only_pct", "overlapped_pct", "host_bound_pct",
         "free_pct")
#: Keys every document has (DESIGN.md's output contract); a file without them is not an analysis.
REQUIRED = ("schema", "ranks", "bound", "breakdown", "findings")
RUN_KINDS = ("accelerator", "cpu_only", "device_not_captured")
#: Evidence keys that name the events a finding rests on (operators, kernels, collectives, steps,
#: Python functions).
EVENT_KEYS = ("top_ops", "operators", "top_kernels", "inflated_ops", "spike_steps",
              "top_function")

#: The parts sum to 100 within float rounding of sums of integer ns (the analyzers' own
#: invariant is 1e-3 %).
SUM_TOL_PCT = 1e-3
#: ``time_share`` is written rounded to 6 decimals, the breakdown parts unrounded: a finding may
#: exceed its category's share by this much (0.01 percentage point) and no more.
SHARE_TOL = 1e-4
#: ``estimated_speedup`` is written rounded to 2 decimals by the advisor (4 by the document).
SPEEDUP_TOL = 0.005
#: The explained parts are written rounded to 3 decimals: each may be off by this much.
PARTS_TOL_PCT = 1e-3
#: Below this share explained (percent of the verdict's share) the remainder must be decomposed
#: (issue 32: "explained >= 80 % or the remainder decomposed").
EXPLAINED_MIN = 80.0
UNEXPLAINED, UNATTRIBUTED = "unexplained", "unattributed"
#: Verdicts whose share is device-idle time: time nothing records (on the host either) is a part
#: of their decomposition, ``unattributed``; a communication or device share is time inside
#: recorded collectives or kernels, which always splits (transfer, wait, idle; roofline classes).
IDLE_BOUNDS = ("host", "io")
#: "no device work" in the verdict's reason: what the verdict says when it saw none.
NO_DEVICE_TEXT = "no device work"


@dataclass(frozen=True)
class Violation:
    """One broken check: which (``check``), where in the document, and what, with the figures."""

    check: str
    where: str
    what: str

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check, "where": self.where, "what": self.what}

    def __str__(self) -> str:
        return f"{self.check}: {self.where}: {self.what}"


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    f = float(x)
    return None if math.isnan(f) else f


def _pct(row: Mapping[str, Any], key: str) -> float:
    return _num(row.get(key)) or 0.0


def _rank_where(i: int, row: Mapping[str, Any]) -> str:
    r = row.get("rank")
    return f"breakdown.per_rank[{i}] (rank {r})" if r is not None else f"breakdown.per_rank[{i}]"


def _finding_where(i: int, f: Mapping[str, Any]) -> str:
    reason = (f.get("evidence") or {}).get("reason")
    return f"findings[{i}] {f.get('id')}" + (f" ({reason})" if reason else "")


def _rows(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    rows = (doc.get("breakdown") or {}).get("per_rank") or []
    return [r for r in rows if isinstance(r, Mapping) and any(p in r for p in PARTS)]


def _findings(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [f for f in doc.get("findings") or [] if isinstance(f, Mapping)]


def category_share(finding: Mapping[str, Any], row: Mapping[str, Any]) -> tuple[float, str]:
    """The share of step time (0-1) that bounds ``finding`` in one rank's breakdown ``row``, and
    the parts it adds up (for the message). What each category's time is made of
    (``docs/analysis/overlap.md``, ``verdict.py``):

    * ``computation``: the device computes -- computation_only + overlapped (a class's share is a
      union of its kernels' intervals in the steps);
    * ``communication``: the device communicates -- communication_only + overlapped (waiting and
      transfer happen inside the collective, hidden or not);
    * ``parallel``: communication that could be hidden but is not -- communication_only;
    * ``cpu``: the device idles -- host_bound + free (the verdict's idle share: host causes
      claim device-idle time only);
    * ``io``: the device idles -- host_bound + free; ``io.slow_data_fetching`` adds
      computation_only (exposed pageable H2D copies are device copies, counted as computation);
    * a step spike nothing recorded explains (``evidence.reason == "step_spike"``, filed as
      ``computation.slow_node``) is by definition time no part holds: bounded by the step (1).
    """
    cat = finding.get("category")
    ev = finding.get("evidence") or {}
    if ev.get("reason") == "step_spike":
        return 1.0, "the whole step (an unexplained spike)"
    parts: tuple[str, ...]
    if cat == "computation":
        parts = ("computation_only_pct", "overlapped_pct")
    elif cat == "communication":
        parts = ("communication_only_pct", "overlapped_pct")
    elif cat == "parallel":
        parts = ("communication_only_pct",)
    elif cat == "io" and finding.get("cause") == "slow_data_fetching":
        parts = ("host_bound_pct", "free_pct", "computation_only_pct")
    elif cat in ("cpu", "io"):
        parts = ("host_bound_pct", "free_pct")
    else:
        return 1.0, "the whole step (unknown category)"
    return sum(_pct(row, p) for p in parts) / 100.0, " + ".join(p[:-4] for p in parts)


def check_breakdown_sum(doc: Mapping[str, Any]) -> list[Violation]:
    out = []
    for i, row in enumerate(_rows(doc)):
        missing = [p for p in PARTS if _num(row.get(p)) is None]
        if missing:
            out.append(Violation("breakdown_sum", _rank_where(i, row),
                                 f"parts missing or not numbers: {', '.join(missing)}"))
            continue
        s = sum(_pct(row, p) for p in PARTS)
        neg = [p for p in PARTS if _pct(row, p) < -SUM_TOL_PCT]
        if abs(s - 100.0) > SUM_TOL_PCT or neg:
            out.append(Violation("breakdown_sum", _rank_where(i, row),
                                 f"the five parts sum to {s:.4f} %, not 100"
                                 + (f" (negative: {', '.join(neg)})" if neg else "")))
    return out


def check_no_device_work(doc: Mapping[str, Any]) -> list[Violation]:
    reason = str((doc.get("verdict") or {}).get("reason") or "")
    kind, _ = _run_kind(doc)
    kernels = [k for k in ((doc.get("computation") or {}).get("top_kernels")) or []
               if isinstance(k, Mapping)]
    rows = _rows(doc)
    comp = max((_pct(r, "computation_only_pct") + _pct(r, "overlapped_pct") for r in rows),
               default=0.0)
    comm = max((_pct(r, "communication_only_pct") for r in rows), default=0.0)
    n = sum(int(_num(k.get("count")) or 0) for k in kernels)
    kernel_text = f"{len(kernels)} kernel rows in computation.top_kernels ({n:,} calls)"
    out = []
    if NO_DEVICE_TEXT in reason and (kernels or comp + comm > 0.0):
        what = [kernel_text] if kernels else []
        if comp + comm > 0.0:
            what.append(f"device time in the breakdown (computation {comp:.2f} %, "
                        f"communication {comm:.2f} % of step time)")
        out.append(Violation("no_device_work", "verdict.reason",
                             f"says {NO_DEVICE_TEXT!r} beside {' and '.join(what)}"))
    if kind in ("cpu_only", "device_not_captured") and (kernels or comp > 0.0):
        what = [kernel_text] if kernels else []
        if comp > 0.0:
            what.append(f"kernel time {comp:.2f} % of step time in the breakdown")
        out.append(Violation("no_device_work", "run_kind",
                             f"{kind!r} beside {' and '.join(what)}"))
    return out


def _per_rank_share(ev: Mapping[str, Any]) -> dict[str, float]:
    prs = ev.get("per_rank_share")
    if not isinstance(prs, Mapping):
        return {}
    return {str(k): v for k, val in prs.items() if (v := _num(val)) is not None}


def check_share_within_category(doc: Mapping[str, Any]) -> list[Violation]:
    rows = _rows(doc)
    if not rows:
        return []
    by_rank = {str(r.get("rank")): r for r in rows}
    out = []
    for i, f in enumerate(_findings(doc)):
        share = _num(f.get("time_share"))
        if share is None:
            out.append(Violation("share_within_category", _finding_where(i, f),
                                 "time_share missing or not a number"))
            continue
        bounds = [(category_share(f, r), r.get("rank")) for r in rows]
        (top, parts), top_rank = max(bounds, key=lambda b: b[0][0])
        if share > top + SHARE_TOL:
            out.append(Violation(
                "share_within_category", _finding_where(i, f),
                f"time_share {share:.4f} above its category's share {top:.4f} ({parts}) on every "
                f"rank (largest: rank {top_rank})"))
            continue
        for rank, s in sorted(_per_rank_share(f.get("evidence") or {}).items()):
            row = by_rank.get(rank)
            if row is None:
                continue
            cap, parts = category_share(f, row)
            if s > cap + SHARE_TOL:
                out.append(Violation(
                    "share_within_category", _finding_where(i, f),
                    f"rank {rank}'s share {s:.4f} above its category's share {cap:.4f} "
                    f"({parts}) on that rank"))
    return out


def speedup_bound(share: float) -> float:
    """Most a step can gain by removing a cost of ``share`` of it: ``1 / (1 - share)``."""
    return math.inf if share >= 1.0 else 1.0 / (1.0 - share)


def _claims_hold(claims: Any, fid: Any, shares: Mapping[Any, float]) -> str | None:
    """Why a recommendation's ``claims`` do not bound it (None: they do)."""
    if not isinstance(claims, Mapping) or not isinstance(claims.get("findings"), Mapping):
        return "no claims"
    named = claims["findings"]
    if fid not in named:
        return f"claims {sorted(named)} leave out its own finding {fid}"
    for k, v in named.items():
        got, want = _num(v), shares.get(k)
        if got is None or want is None or abs(got - want) > 1e-4:
            return f"claims {k} at {v}, the document's share is {want}"
    saved, total = _num(claims.get("saved_share")), sum(float(v) for v in named.values())
    if saved is None or saved > total + 1e-4:
        return f"claims saved_share {claims.get('saved_share')} above its findings' {total:.4f}"
    return None


def check_speedup_within_share(doc: Mapping[str, Any]) -> list[Violation]:
    out = []
    fs = _findings(doc)
    shares = {f.get("id"): v for f in fs if (v := _num(f.get("time_share"))) is not None}
    for i, f in enumerate(fs):
        share = _num(f.get("time_share"))
        if share is None:
            continue  # reported by share_within_category
        cap = speedup_bound(share)
        for rec in f.get("recommendations") or []:
            if not isinstance(rec, Mapping):
                continue
            sp = _num(rec.get("estimated_speedup"))
            if sp is not None and sp > cap + SPEEDUP_TOL:
                why = _claims_hold(rec.get("claims"), f.get("id"), shares) \
                    if rec.get("claims") is not None else ""
                if why is None:
                    continue
                out.append(Violation(
                    "speedup_within_share", f"{_finding_where(i, f)} rule {rec.get('rule')}",
                    f"estimated_speedup {sp:.4f}x ({rec.get('estimate', 'formula')}) above "
                    f"1 / (1 - {share:.4f}) = {cap:.4f}x" + (f" ({why})" if why else "")))
    return out


def _names(v: Any) -> bool:
    """A non-empty list/mapping of names, or a non-empty string."""
    if isinstance(v, str):
        return bool(v.strip())
    if isinstance(v, (list, tuple, Mapping)):
        return len(v) > 0
    return False


def check_names_events(doc: Mapping[str, Any]) -> list[Violation]:
    out = []
    for i, f in enumerate(_findings(doc)):
        ev = f.get("evidence") or {}
        if not isinstance(ev, Mapping):
            ev = {}
        if any(_names(ev.get(k)) for k in EVENT_KEYS) or _names(ev.get("no_events_reason")):
            continue
        have = [k for k in EVENT_KEYS if k in ev]
        out.append(Violation(
            "names_events", _finding_where(i, f),
            "the evidence names no event (" + (f"{', '.join(have)} empty" if have else
                                               f"none of {', '.join(EVENT_KEYS)}")
            + ") and gives no no_events_reason"))
    return out


def _run_kind(doc: Mapping[str, Any]) -> tuple[Any, list[Violation]]:
    """The run's kind, from the top level or the verdict (they must agree)."""
    verdict = doc.get("verdict") if isinstance(doc.get("verdict"), Mapping) else {}
    top, inner = doc.get("run_kind"), verdict.get("run_kind")
    out = []
    if top is not None and inner is not None and top != inner:
        out.append(Violation("explained", "run_kind",
                             f"top level says {top!r}, verdict.run_kind {inner!r}"))
    kind = top if top is not None else inner
    if kind is not None and kind not in RUN_KINDS:
        out.append(Violation("explained", "run_kind",
                             f"{kind!r} is not one of {', '.join(RUN_KINDS)}"))
    return kind, out


def _part_pcts(parts: Any, where: str, out: list[Violation]) -> list[tuple[str, float]]:
    """``(name, pct)`` of each part of an ``explained`` list; a malformed one is a violation."""
    if not isinstance(parts, list):
        out.append(Violation("explained", where, f"is {type(parts).__name__}, not a list"))
        return []
    got = []
    for j, p in enumerate(parts):
        pct = _num(p.get("pct")) if isinstance(p, Mapping) else None
        if pct is None or not isinstance(p.get("name"), str):
            out.append(Violation("explained", f"{where}[{j}]",
                                 "not an object with a name and a numeric pct"))
        elif pct < -SUM_TOL_PCT:
            out.append(Violation("explained", f"{where}[{j}] {p['name']}",
                                 f"negative pct {pct}"))
        else:
            got.append((p["name"], pct))
    return got


def check_explained(doc: Mapping[str, Any], require: bool = False) -> list[Violation]:
    """``verdict.explained`` = ``{"pct", "share_pct", "parts": [{"name", "pct", ...}]}``: ``pct``
    of the verdict's share the findings explain; ``parts`` the findings and, last, the
    ``unexplained`` remainder with its own ``parts``, all in percent of the share. Checked: pct in
    0..100; the parts sum to 100 (when the share is positive); the unexplained part is
    100 - pct and its parts sum to it; below ``EXPLAINED_MIN`` % the remainder is decomposed (a
    part; for a communication or device verdict one other than ``unattributed``, see
    ``IDLE_BOUNDS``); ``run_kind`` is one of ``RUN_KINDS``."""
    verdict = doc.get("verdict")
    exp = verdict.get("explained") if isinstance(verdict, Mapping) else None
    kind, out = _run_kind(doc)
    if kind is None and require:
        out.append(Violation("explained", "run_kind", "missing"))
    if exp is None:
        if require:
            out.append(Violation("explained", "verdict.explained",
                                 "missing: the share of the verdict the findings explain is "
                                 "not reported"))
        return out
    if not isinstance(exp, Mapping):
        return out + [Violation("explained", "verdict.explained",
                                f"is {type(exp).__name__}, not an object with pct and parts")]
    pct = _num(exp.get("pct"))
    if pct is None or not -SUM_TOL_PCT <= pct <= 100.0 + SUM_TOL_PCT:
        return out + [Violation("explained", "verdict.explained.pct",
                                f"{exp.get('pct')!r} is not a percentage in 0..100")]
    parts = _part_pcts(exp.get("parts"), "verdict.explained.parts", out)
    share = _num(exp.get("share_pct"))
    if share is not None and share <= 0.0:
        return out  # nothing to explain: a verdict share of 0
    total = sum(p for _, p in parts)
    tol = PARTS_TOL_PCT * (len(parts) + 1)
    if parts and abs(total - 100.0) > tol:
        out.append(Violation("explained", "verdict.explained.parts",
                             f"sum to {total:.3f} % of the verdict's share, not 100"))
    rest = next((p for p in exp.get("parts") or [] if isinstance(p, Mapping)
                 and p.get("name") == UNEXPLAINED), None)
    rest_pct = _num(rest.get("pct")) if rest is not None else 0.0
    if rest_pct is not None and abs(rest_pct + pct - 100.0) > tol:
        out.append(Violation("explained", "verdict.explained",
                             f"explained {pct:.3f} % and unexplained {rest_pct:.3f} % do not "
                             "add up to 100"))
    if rest is not None:
        sub = _part_pcts(rest.get("parts") or [], "verdict.explained.unexplained.parts", out)
        if sub and rest_pct is not None and \
                abs(sum(p for _, p in sub) - rest_pct) > PARTS_TOL_PCT * (len(sub) + 1):
            out.append(Violation("explained", "verdict.explained.unexplained.parts",
                                 f"sum to {sum(p for _, p in sub):.3f} %, not the unexplained "
                                 f"{rest_pct:.3f} %"))
        bound = verdict.get("bound", doc.get("bound")) if isinstance(verdict, Mapping) else None
        named = [n for n, p in sub if p > 0 and (n != UNATTRIBUTED or bound in IDLE_BOUNDS)]
        if pct < EXPLAINED_MIN and not named:
            out.append(Violation("explained", "verdict.explained",
                                 f"explained {pct:.1f} % (< {EXPLAINED_MIN:.0f} %) and the "
                                 f"remainder ({rest_pct:.1f} %) is not decomposed"
                                 + (" (all unattributed)" if sub else "")))
    elif pct < EXPLAINED_MIN:
        out.append(Violation("explained", "verdict.explained",
                             f"explained {pct:.1f} % (< {EXPLAINED_MIN:.0f} %) with no "
                             f"{UNEXPLAINED!r} part"))
    return out


#: Every check by name, in the order they run and are listed.
CHECKS: dict[str, Callable[[Mapping[str, Any]], list[Violation]]] = {
    "breakdown_sum": check_breakdown_sum,
    "no_device_work": check_no_device_work,
    "share_within_category": check_share_within_category,
    "speedup_within_share": check_speedup_within_share,
    "names_events": check_names_events,
    "explained": check_explained,
}


def self_check(doc: Mapping[str, Any], require_explained: bool = False,
               only: Iterable[str] | None = None) -> list[Violation]:
    """Every violated check of the analysis document ``doc`` (empty: consistent). ``only``: the
    names of the checks to run (default: all of ``CHECKS``)."""
    names = list(CHECKS) if only is None else list(only)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise HermesError(f"unknown self-check {', '.join(unknown)}",
                          hint=f"checks: {', '.join(CHECKS)}")
    out: list[Violation] = []
    for name in names:
        if name == "explained":
            out += check_explained(doc, require=require_explained)
        else:
            out += CHECKS[name](doc)
    return out


def malformed(doc: Any) -> str | None:
    """Why ``doc`` is not an analysis document (None when it is one): not an object, another
    schema, a required key missing or of the wrong type."""
    if not isinstance(doc, Mapping):
        return f"the JSON is a {type(doc).__name__}, not an object"
    if doc.get("schema") != SCHEMA:
        return f"schema is {doc.get('schema')!r}, not {SCHEMA!r}"
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        return f"key(s) missing: {', '.join(missing)}"
    if not isinstance(doc["findings"], list):
        return f"findings is a {type(doc['findings']).__name__}, not a list"
    if not isinstance(doc["breakdown"], Mapping) or \
            not isinstance(doc["breakdown"].get("per_rank", []), list):
        return "breakdown is not an object with a per_rank list"
    return None


def load_document(path: str | Path) -> dict[str, Any]:
    """The analysis document in ``path`` (``hermes analyze --format json`` output); a
    :class:`HermesError` (exit 2) when it cannot be read or is not one."""
    p = Path(path)
    hint = "give the output of `hermes analyze TRACE --format json --out FILE`"
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HermesError("no such file", path=p, hint=hint) from None
    except IsADirectoryError:
        raise HermesError("is a directory, not an analysis JSON file", path=p,
                          hint=hint) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HermesError(f"cannot be read ({type(exc).__name__}: {exc})", path=p,
                          hint=hint) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HermesError(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
                          path=p, hint=hint) from None
    why = malformed(doc)
    if why:
        raise HermesError(f"not a Hermes analysis: {why}", path=p, hint=hint)
    return doc  # type: ignore[no-any-return]
