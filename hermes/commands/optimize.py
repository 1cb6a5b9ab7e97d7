"""``hermes optimize WORKLOAD [--inject CAUSE]... [--iterations N]``: the closed loop on the
emulator -- emulate, analyze, apply the top recommendation's ``emulator_opt``, emulate again.

Each iteration records the finding addressed, the step time the advisor predicted for the
option (replayed where a what-if transform exists, else the rule's formula) and the step time
the emulator then measured, and the cumulative speedup over the first run (the paper took
PanGu-alpha through three such rounds).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer


@dataclass
class Iteration:
    """One round: the run's measured step with the options so far, and what comes next."""

    opts: list[str]
    measured_ms: float
    finding: str = ""
    applied: str = ""
    estimate: str = ""
    predicted_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"opts": self.opts, "measured_ms": round(self.measured_ms, 4),
                "finding": self.finding, "applied": self.applied, "estimate": self.estimate,
                "predicted_ms": round(self.predicted_ms, 4)}


def emulate_and_advise(workload: str, inject: list[str], opts: list[str], steps: int,
                       ranks: int, device: str, seed: int, tmp: Path
                       ) -> tuple[float, Any]:
    """(median step ms, findings with recommendations) of one emulated run."""
    from hermes.commands.emulate import trace_collector
    from hermes.npu.emulate import emulate, plan
    from hermes.pipeline import analyze_and_advise

    p = plan(workload, ranks=ranks, device=device, inject_specs=inject, opt_specs=opts,
             seed=seed)
    out = tmp / f"run{len(opts)}{'.parquet' if ranks == 1 else ''}"
    res = emulate(p, trace_collector(p, out), steps)
    analysis, advice = analyze_and_advise(out)
    return res.median_step_ms, advice.attach(analysis).findings


def top_recommendation(findings: Any, applied: list[str]) -> tuple[Any, Any] | None:
    """(finding, recommendation): the recommendation with an emulator option not applied yet
    and the highest estimated speedup (findings in their order break ties)."""
    best = None
    for f in findings:
        for r in f.recommendations:
            if r.emulator_opt and r.emulator_opt.split("=")[0] not in \
                    {a.split("=")[0] for a in applied}:
                if best is None or r.estimated_speedup > best[1].estimated_speedup:
                    best = (f, r)
    return best


def loop(workload: str, inject: list[str], iterations: int, steps: int = 6, ranks: int = 1,
         device: str = "ascend910b", seed: int = 0) -> list[Iteration]:
    """The optimization loop: ``iterations`` rounds of emulate -> analyze -> apply."""
    rounds: list[Iteration] = []
    opts: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(iterations + 1):
            step, findings = emulate_and_advise(workload, inject, opts, steps, ranks, device,
                                                seed, Path(tmp))
            it = Iteration(list(opts), step)
            rounds.append(it)
            if len(rounds) > iterations:
                break
            pick = top_recommendation(findings, opts)
            if pick is None:
                break
            f, r = pick
            it.finding, it.applied, it.estimate = f.id, r.emulator_opt, r.estimate
            it.predicted_ms = step / r.estimated_speedup if r.estimated_speedup else step
            opts.append(r.emulator_opt)
    return rounds


def render(rounds: list[Iteration]) -> str:
    base = rounds[0].measured_ms if rounds else 0.0
    lines = [f"{'iter':>4}  {'finding addressed':<34} {'applied':<18} {'predicted':>10} "
             f"{'measured':>10} {'speedup':>8}"]
    for i, it in enumerate(rounds):
        prev = rounds[i - 1] if i else None
        finding = prev.finding if prev else "(as emulated)"
        applied = prev.applied if prev else ""
        pred = f"{prev.predicted_ms:.3f}" if prev else ""
        est = f" ({prev.estimate})" if prev else ""
        lines.append(f"{i:>4}  {finding:<34} {applied + est:<18} {pred:>10} "
                     f"{it.measured_ms:>10.3f} {base / it.measured_ms:>7.2f}x")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command("optimize")
    def optimize_cmd(
        workload: str = typer.Argument(..., help="Workload name (hermes emulate --list)."),
        inject: list[str] = typer.Option(None, "--inject", help="Inject a cause: "
                                                                "CAUSE_ID[=STRENGTH]."),
        iterations: int = typer.Option(3, "--iterations", "-n", help="Rounds to run."),
        steps: int = typer.Option(6, "--steps", help="Steps per emulated run."),
        ranks: int = typer.Option(1, "--ranks", help="Number of ranks."),
        device: str = typer.Option("ascend910b", "--device", help="Device profile."),
        seed: int = typer.Option(0, "--seed", help="Random seed."),
        fmt: str = typer.Option("text", "--format", "-f", help="text or json."),
    ) -> int:
        """Close the loop on the emulator: emulate WORKLOAD, analyze, apply the top
        recommendation's emulator option, emulate again; a table of the rounds.

        Example: hermes optimize resnet50 --inject cpu.garbage_collection --iterations 2
        """
        from hermes.commands._util import dumps
        from hermes.errors import UsageError

        if iterations < 1:
            raise UsageError(f"--iterations must be >= 1, got {iterations}")
        rounds = loop(workload, inject or [], iterations, steps, ranks, device, seed)
        if fmt == "json":
            base = rounds[0].measured_ms
            typer.echo(dumps({"workload": workload, "inject": inject or [],
                              "iterations": [r.to_dict() for r in rounds],
                              "speedup": round(base / rounds[-1].measured_ms, 4)}))
        else:
            typer.echo(render(rounds))
        return 0
