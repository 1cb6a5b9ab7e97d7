"""A seeded mutation fuzzer for the ``hermes`` CLI (a script, not a test: pytest never collects
it). Each case mutates a seed input, runs ``hermes.cli.main([...])`` in process with stdout and
stderr captured and a time limit, and sorts the outcome:

* ``ok``: exit 0 (or 1 from ``check``: a regression or budget verdict);
* ``clean``: exit 2 with exactly one ``hermes: error:`` line, no traceback;
* ``DEFECT``: ``hermes.cli.unexpected`` reached (recorded with its traceback), another exit
  code, a traceback or several error lines, a timeout, an input file changed, or an output
  of a successful run that does not read back (:func:`unreadable_output`).

Families: ``kineto`` (JSON-level mutations; import and analyze), ``kbytes`` (byte-level:
truncate, flip, insert, gzip corruption), ``ascend-csv``, ``ascend-json``, ``parquet`` (columns
and metadata; analyze, report, diff, check), ``pdir`` (per-rank Parquet directories analyzed
with ``--workers 1`` and ``--workers 2``, validated; its own checks in ``fuzz_pdir.py``).
Each defect's input, argv and traceback go to ``--out DIR/<family>-<n>/``; ``--minimize``
shrinks a JSON defect's event list first. The mutations live in ``fuzz_mutate.py``, the
families' seeds and case builders in ``fuzz_families.py``; same ``--seed``, same cases.

    nice -n 10 .venv/bin/python tests/bad_inputs/fuzz.py --seed 1 --iterations 2000 \\
        --family kineto --out /tmp/fuzz
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bad_inputs.fuzz_families import FAMILIES as _SINGLE  # noqa: E402
from tests.bad_inputs.fuzz_pdir import PDir  # noqa: E402

FAMILIES = {**_SINGLE, PDir.name: PDir}

#: The importers' last resort (``_guarded_run``): an exception no check foresaw, reported as
#: "malformed value (TypeError: ...)" without the field or line: a defect like unexpected().
#: Likewise an analysis crash that ``hermes analyze`` reports per rank.
MASKED = re.compile(r"malformed value \((\w+Error|\w*Exception): .{0,60}|no rank could be "
                    r"analyzed: (rank -?\d+: (?!hermes\.errors\.)\w+(Error|Exception)\b.{0,60}"
                    r"|$)", re.MULTILINE)


class _Timeout(BaseException):  # noqa: N818 - a signal, not an error class
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _digest(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in d.rglob("*") if p.is_file()}


def run_cli(argv: list[str], inputs: Path, limit: int) -> tuple[str, int | None, str, str]:
    """(outcome, code, stderr, detail) of one in-process run; ``inputs`` must not change."""
    outcome, code, _, err, detail = run_cli_out(argv, inputs, limit)
    return outcome, code, err, detail


#: Commands whose exit 1 is a verdict, not a defect: a regression or budget (check), an
#: invalid trace (validate), ranks not analyzed (analyze: the pdir family checks them).
EXIT_1 = frozenset({"check", "validate", "analyze"})


def run_cli_out(argv: list[str], inputs: Path, limit: int
                ) -> tuple[str, int | None, str, str, str]:
    """(outcome, code, stdout, stderr, detail) of one in-process run."""
    import hermes.cli as cli

    caught: list[str] = []
    original = cli.unexpected

    def spy(exc: BaseException) -> int:
        caught.append("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        return original(exc)

    before = _digest(inputs)
    out, err = io.StringIO(), io.StringIO()
    cli.unexpected = spy
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    code: int | None = None
    detail = ""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
    except _Timeout:
        detail = f"timeout after {limit} s"
    except BaseException as exc:  # noqa: BLE001 - anything escaping main is the finding
        detail = "escaped main: " + "".join(traceback.format_exception(exc))
    finally:
        signal.alarm(0)
        cli.unexpected = original
    text = err.getvalue()
    lines = [ln for ln in text.splitlines() if ln.startswith("hermes: error:")]
    changed = [k for k, v in before.items() if _digest(inputs).get(k) != v]
    if caught:
        detail = caught[0]
    elif changed:
        detail = f"input changed: {changed}"
    elif "Traceback" in text + out.getvalue():
        detail = "traceback printed"
    elif MASKED.search(text):
        detail = f"internal error masked as bad input: {MASKED.search(text).group(0)}"
    elif "Warning:" in text:
        detail = "a warning printed: " + text[text.index("Warning:") - 40:][:160]
    elif code == 2 and len(lines) != 1:
        detail = f"{len(lines)} error lines"
    elif code not in (0, 2) and not (code == 1 and argv[0] in EXIT_1) and not detail:
        detail = f"exit {code}"
    elif code in (0, 1):
        detail = unreadable_output(argv, out.getvalue())
    if detail:
        return "DEFECT", code, out.getvalue(), text, detail
    return ("ok" if code in (0, 1) else "clean"), code, out.getvalue(), text, ""


def _strict_json(text: str) -> Any:
    def no(c: str) -> None:
        raise ValueError(f"non-finite JSON constant {c}")
    return json.loads(text, parse_constant=no)


def unreadable_output(argv: list[str], stdout: str) -> str:
    """Why what a successful run wrote does not read back with a standard reader ('' if it
    does): a Parquet ``--out`` decoded value by value by pyarrow, every args value a JSON
    object or null; a ``-f json`` report strict JSON (no NaN/Infinity); an HTML report valid
    UTF-8 (issue 38: every file Hermes writes reads back)."""
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    try:
        if out is not None and out.suffix == ".parquet" and out.is_file():
            import pyarrow.parquet as pq

            for a in pq.read_table(out, columns=["name", "lane", "args"]).column(
                    "args").to_pylist():
                if a is not None and not isinstance(json.loads(a), dict):
                    return f"unreadable output: args {a[:60]!r} is not a JSON object"
        fmt = argv[argv.index("-f") + 1] if "-f" in argv else None
        if fmt == "json":
            _strict_json(stdout)
        if out is not None and out.suffix == ".html" and out.is_file():
            out.read_bytes().decode("utf-8")
    except (ValueError, UnicodeDecodeError, OSError) as exc:
        return f"unreadable output: {type(exc).__name__}: {str(exc)[:120]}"
    except Exception as exc:  # noqa: BLE001 - pyarrow's own errors: the file does not read
        return f"unreadable output: {type(exc).__name__}: {str(exc)[:120]}"
    return ""


def _special(folder: str, names: list[str]) -> list[str]:
    """Names not to copy into a defect's folder: FIFOs (opening one blocks) and the like."""
    return [n for n in names if not (os.path.isdir(os.path.join(folder, n)) or os.path.isfile(
        os.path.join(folder, n)) or os.path.islink(os.path.join(folder, n)))]


def signature(detail: str) -> str:
    """A defect's identity: the exception line and the innermost hermes frame."""
    if not detail.startswith("Traceback"):
        return detail[:110]
    lines = [ln.strip() for ln in detail.strip().splitlines()]
    where = [ln for ln in lines if ln.startswith("File ") and "/hermes" in ln.replace(
        "/collectors", "/hermes").replace("/analyzers", "/hermes")]
    exc = lines[-1].split(":")[0] if lines else ""
    return f"{exc} @ {where[-1] if where else '?'}"[:300]


def ensure_stdlib_streams() -> None:
    os.environ["HERMES_NO_PROGRESS"] = "1"
    os.environ.pop("HERMES_DEBUG", None)


def minimize_events(argv: list[str], path: Path, inputs: Path, sig: str, limit: int) -> None:
    """Greedily drop events (then top-level keys) while the same defect reproduces."""
    raw = path.read_bytes()
    gz = path.suffix == ".gz"
    try:
        doc = json.loads(gzip.decompress(raw) if gz else raw)
    except ValueError:
        return
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        return

    def still(cand: Any) -> bool:
        data = json.dumps(cand).encode("utf-8", "surrogatepass")
        path.write_bytes(gzip.compress(data) if gz else data)
        outcome, _, _, detail = run_cli(argv, inputs, limit)
        return outcome == "DEFECT" and signature(detail) == sig

    chunk = max(1, len(events) // 2)
    while chunk >= 1:
        i = 0
        while i < len(events):
            trial = events[:i] + events[i + chunk:]
            if isinstance(doc, dict):
                cand = {**doc, "traceEvents": trial}
            else:
                cand = trial
            if trial and still(cand):
                events = trial
                doc = cand
            else:
                i += chunk
        chunk //= 2
    if isinstance(doc, dict):
        for key in [k for k in doc if k != "traceEvents"]:
            cand = {k: v for k, v in doc.items() if k != key}
            if still(cand):
                doc = cand
    data = json.dumps(doc).encode("utf-8", "surrogatepass")
    path.write_bytes(gzip.compress(data) if gz else data)


def campaign(family: str, seed: int, iterations: int, out: Path, limit: int,
             minimize: bool) -> Counter[str]:
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    seen: dict[str, int] = {}
    msgs: Counter[str] = Counter()
    modes: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="hermes-fuzz-") as tmp:
        work = Path(tmp)
        fam = FAMILIES[family](rng, work)
        for n in range(iterations):
            d = work / f"c{n}"
            d.mkdir()
            argv, inputs = fam.build(d)
            if hasattr(fam, "run"):  # a family with checks of its own (pdir)
                outcome, code, err, detail = fam.run(argv, inputs, limit, run_cli_out)
            else:
                outcome, code, err, detail = run_cli(argv, inputs, limit)
            counts[outcome] += 1
            if getattr(fam, "mode", ""):
                modes[f"{fam.mode} {outcome}"] += 1
            if outcome == "clean":
                msgs[re.sub(r"/tmp/\S+/", "", err.strip())[:70]] += 1
            if outcome == "DEFECT":
                sig = signature(detail)
                seen[sig] = seen.get(sig, 0) + 1
                if seen[sig] <= 2:
                    dest = out / f"{family}-s{seed}-{n}"
                    if minimize and argv[0] in ("import", "analyze") and family != "kbytes":
                        src = Path(argv[1])
                        if src.suffix in (".json", ".gz"):
                            minimize_events(argv, src, inputs, sig, limit)
                    shutil.copytree(inputs, dest / "in", symlinks=True, ignore=_special)
                    if hasattr(fam, "case"):
                        (dest / "ops.txt").write_text("\n".join(fam.case.ops) + "\n")
                    (dest / "argv.txt").write_text(" ".join(argv) + "\n")
                    (dest / "detail.txt").write_text(f"exit {code}\n{err}\n{detail}\n")
                    print(f"[{family} {n}] DEFECT {sig} -> {dest}", flush=True)
            shutil.rmtree(d, ignore_errors=True)
    for sig, k in sorted(seen.items(), key=lambda kv: -kv[1]):
        print(f"  {k:5d}  {sig}")
    for mode, k in sorted(modes.items()):
        print(f"  mode {mode}: {k}")
    for msg, k in msgs.most_common(12):
        print(f"  clean {k:5d}  {msg}")
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--family", choices=sorted(FAMILIES), action="append")
    p.add_argument("--out", type=Path, default=Path("fuzz-out"))
    p.add_argument("--limit", type=int, default=30, help="seconds per case")
    p.add_argument("--minimize", action="store_true")
    a = p.parse_args(argv)
    ensure_stdlib_streams()
    a.out.mkdir(parents=True, exist_ok=True)
    total = 0
    for family in a.family or sorted(FAMILIES):
        counts = campaign(family, a.seed, a.iterations, a.out, a.limit, a.minimize)
        print(f"{family}: {a.iterations} cases: " + ", ".join(
            f"{k} {counts[k]}" for k in ("ok", "clean", "DEFECT")), flush=True)
        total += counts["DEFECT"]
    return 1 if total else 0


if __name__ == "__main__":
    raise SystemExit(main())
