"""``hermes demo``: emulate a job with a visible bottleneck, analyze it, say where things are."""

from __future__ import annotations

from pathlib import Path

import typer

from hermes.errors import OutputError

#: The demo job: ResNet50 with one data-loader worker (I/O-bound, as in the published case),
#: and the fix printed when the analysis has no applicable recommendation.
DEMO_WORKLOAD = "resnet50"
DEMO_INJECT = ("io.slow_data_processing",)
DEMO_FIX = "num_workers=12"


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo_cmd(
        out: Path = typer.Option(Path("hermes-demo"), "--out", "-o",
                                 help="Directory for the trace and the reports."),
        steps: int = typer.Option(20, "--steps", help="Steps to emulate."),
        seed: int = typer.Option(0, "--seed", help="Random seed."),
    ) -> int:
        """Emulate ResNet50 with one data-loader worker on an Ascend 910B, analyze the trace
        and print where the trace and reports are. No hardware needed.

        Example: hermes demo --out ./hermes-demo
        """
        from hermes.commands._util import write_text_atomic
        from hermes.commands.emulate import trace_collector
        from hermes.npu.emulate import emulate, plan

        if out.exists() and not out.is_dir():
            raise OutputError("exists and is not a directory", path=out,
                              hint="choose another --out")
        if not out.parent.is_dir():
            raise OutputError("parent directory does not exist", path=out.parent)
        out.mkdir(exist_ok=True)
        trace = out / "trace.parquet"
        p = plan(DEMO_WORKLOAD, inject_specs=list(DEMO_INJECT), seed=seed)
        res = emulate(p, trace_collector(p, trace), steps)
        typer.echo(f"emulated {DEMO_WORKLOAD} with {', '.join(DEMO_INJECT)} "
                   f"(num_workers=1): median step {res.median_step_ms:.1f} ms")
        typer.echo(f"  trace:    {trace}")
        wrote = [trace]
        fix = DEMO_FIX  # the top finding's best applicable recommendation, once analyzed
        from hermes.pipeline import analyze_and_advise
        from hermes.report import RENDERERS
        from hermes.report.timeline import columns
        from hermes.trace import load

        analysis, advice = analyze_and_advise(trace)
        events = load(trace, columns=columns())  # the HTML report's timeline draws them
        for fmt in RENDERERS.names():
            r = RENDERERS.get(fmt)
            path = out / r.filename
            write_text_atomic(path, r(analysis, advice, 10, trace=events))
            wrote.append(path)
            typer.echo(f"  {fmt + ':':<9} {path}")
        typer.echo("")
        typer.echo(RENDERERS.get("text")(analysis, advice, 3))
        fix = next((r.emulator_opt for f in analysis.findings[:1]
                    for r in advice.for_finding(f.id) if r.emulator_opt), fix)
        typer.echo(f"open {out / RENDERERS.get('html').filename} in a browser for the figures")
        typer.echo(f"next: hermes emulate {DEMO_WORKLOAD} --out {out / 'fixed.parquet'} "
                   + " ".join(f"--inject {c}" for c in DEMO_INJECT) + f" --opt {fix}")
        return 0
