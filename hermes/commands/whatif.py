"""``hermes whatif TRACE [--apply OPT]...``: predicted step time after optimizations, by replaying
the trace's step graph (``hermes.whatif``)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import typer

from hermes.errors import UsageError


def load_any(path: Path) -> Any:
    """A Hermes trace, or any profiler output an importer detects, or a directory of such files
    (one per rank; imported to a temporary Parquet file first)."""
    from hermes.trace.reader import load

    if path.suffix == ".parquet" or (path.is_dir() and any(path.glob("*.parquet"))):
        return load(path)
    from hermes.collectors import importers
    from hermes.commands.import_ import expand_sources, pick_importer

    # a directory no importer claims stands for its trace files (one per rank), as in import
    files = expand_sources([path]) if path.is_dir() else [path]
    if importers.detect(files[0]) is None:
        raise UsageError(f"{path}: not a Hermes trace and no importer recognizes it",
                         hint="see hermes import --help")
    imp = pick_importer(files, None)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trace.parquet"
        imp.run(files, out, {})
        trace = load(out)
        _ = len(trace.events)  # (in memory before the file goes away)
        return trace


def render_text(d: dict[str, Any]) -> str:
    """The prediction as text: overall, per rank, the breakdown before and after."""
    lines = [f"measured step {d['measured_ms']:.3f} ms (median, slowest rank); replay as is "
             f"{d['replay_ms']:.3f} ms ({d['replay_error_pct']:+.2f} %)"]
    if d["applied"]:
        lines.append(f"with {', '.join(d['applied'])}: predicted {d['predicted_ms']:.3f} ms "
                     f"({d['speedup']:.2f}x)")
    for spec in d["unknown"]:
        why = (d.get("reasons") or {}).get(spec) or \
            "no transform, or collectives not matched across ranks"
        lines.append(f"  {spec}: not replayed on this trace ({why}), not applied")
    lines += [f"  note: {o}" for o in d["overlaps"]]
    lines.append("per rank (ms):  measured   replay  predicted")
    for r, v in d["per_rank"].items():
        lines.append(f"  rank {r:>4}  {v['measured_ms']:>10.3f} {v['replay_ms']:>8.3f} "
                     f"{v['predicted_ms']:>10.3f}")
    bd = d.get("breakdown") or {}
    if bd:
        lines.append("own time per step (ms), slowest rank:  before    after")
        for c, before in bd["before"].items():
            lines.append(f"  {c:<14} {before:>30.3f} {bd['after'][c]:>8.3f}")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command("whatif")
    def whatif_cmd(
        trace: Path = typer.Argument(..., help="Trace (.parquet, per-rank directory) or a "
                                               "profiler file Hermes imports."),
        apply: list[str] = typer.Option(None, "--apply", "-a",
                                        help="Optimization to apply: a rule id or an emulator "
                                             "option NAME[=VALUE] (repeatable)."),
        fmt: str = typer.Option("text", "--format", "-f", help="text or json."),
    ) -> int:
        """Predict the step time after one or several optimizations by replaying the trace's
        dependency graph; with no --apply, replay it as is beside the measured step time.

        Example: hermes whatif run.parquet --apply gc_freeze --apply remove_syncs
        """
        from hermes.commands._util import dumps
        from hermes.whatif import graphs, predict
        from hermes.whatif.transforms import TRANSFORMS

        if fmt not in ("text", "json"):
            raise UsageError(f"--format must be text or json, got {fmt!r}")
        if not trace.exists():
            raise UsageError(f"{trace}: no such file or directory")
        tr = load_any(trace)
        p = predict(graphs(tr.events), apply or [], tr.meta)
        if p.unknown and not p.applied and apply:
            why = "; ".join(f"{s}: {r}" for s, r in p.reasons.items())
            raise UsageError(f"cannot replay {', '.join(p.unknown)} on this trace ("
                             + (why or "no what-if transform, or a slow rank whose collectives "
                                "could not be matched across the trace's ranks") + ")",
                             hint="transforms: " + ", ".join(sorted(TRANSFORMS)))
        d = p.to_dict()
        typer.echo(dumps(d) if fmt == "json" else render_text(d))
        return 0
