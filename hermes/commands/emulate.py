"""``hermes emulate WORKLOAD --out PATH``: run a workload on the emulated NPU, write a trace."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from hermes.errors import UsageError

if TYPE_CHECKING:
    from hermes.collectors.fine import FineCollector
    from hermes.npu.emulate import Plan


def trace_collector(p: Plan, out: Path) -> FineCollector:
    """The fine-grained collector that writes an emulated run's trace to ``out`` (one file or
    a per-rank directory, row groups bounded for many ranks)."""
    from hermes.collectors.fine import FineCollector
    from hermes.npu.emulate import row_group_rows
    from hermes.trace.meta import TraceMeta

    return FineCollector(Path(out), TraceMeta(source="emulator"),
                         row_group_rows=row_group_rows(p.ranks))


#: Bounds of an emulated run: beyond them it would run for days or exhaust memory.
MAX_STEPS = 1_000_000
MAX_RANKS = 65_536


def _check_strengths(specs: list[str]) -> None:
    """A NAME=VALUE whose value reads as a number must be a finite one (``nan``, ``inf`` and
    ``1e400`` would propagate into every emulated duration)."""
    import math

    for spec in specs:
        _, sep, value = spec.partition("=")
        if not sep:
            continue
        try:
            number = float(value)
        except ValueError:
            continue  # not a number: the option's own parser names what it expects
        if not math.isfinite(number):
            raise UsageError(f"{spec!r}: the value must be a finite number",
                             where="--inject/--opt")


def listing() -> str:
    """Workloads, devices, injectable causes and optimizations, one per line."""
    from hermes.devices import profiles
    from hermes.npu.inject import CAUSES
    from hermes.npu.opts import OPTS
    from hermes.npu.workloads import WORKLOADS

    lines = ["workloads:"]
    lines += [f"  {n:<16} {w.description}" for n, w in WORKLOADS.items()]
    lines.append("devices:")
    lines += [f"  {n:<16} {p.display_name}" for n, p in profiles().items()]
    lines.append("causes (--inject CAUSE_ID[=STRENGTH]):")
    lines += [f"  {c.id:<38} {c.effect}" for c in CAUSES.values()]
    lines.append("optimizations (--opt NAME[=VALUE]):")
    lines += [f"  {o.example:<26} {o.what}" for o in OPTS.values()]
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    @app.command("emulate")
    def emulate_cmd(
        workload: str = typer.Argument(None, help="Workload name (see --list)."),
        out: Path = typer.Option(None, "--out", "-o",
                                 help="Trace path: *.parquet = one file, else a directory."),
        steps: int = typer.Option(10, "--steps", help="Training steps to emulate."),
        ranks: int = typer.Option(1, "--ranks", help="Number of ranks (devices)."),
        device: str = typer.Option("ascend910b", "--device", help="Device profile."),
        inject: list[str] = typer.Option(None, "--inject",
                                         help="Inject a cause: CAUSE_ID[=STRENGTH]."),
        opt: list[str] = typer.Option(None, "--opt", help="Apply an optimization: NAME[=VALUE]."),
        clock: str = typer.Option("virtual", "--clock", help="virtual or real."),
        seed: int = typer.Option(0, "--seed", help="Random seed (virtual clock)."),
        list_: bool = typer.Option(False, "--list", help="List workloads, devices, causes, "
                                                         "optimizations."),
        force: bool = typer.Option(False, "--force",
                                   help="Replace a non-empty --out directory that is not a "
                                        "Hermes trace."),
    ) -> int:
        """Emulate WORKLOAD on the emulated NPU and write its trace, with causes injected
        (--inject) and optimizations applied (--opt).

        Example: hermes emulate resnet50 --out run.parquet --inject io.slow_data_processing
        """
        if list_:
            typer.echo(listing())
            return 0
        from hermes.commands._util import check_output_path, progress, shown
        from hermes.npu.emulate import emulate, plan

        if not workload:
            raise UsageError("missing WORKLOAD", hint="see hermes emulate --list")
        if out is None:
            raise UsageError("missing --out PATH", hint="e.g. --out run.parquet")
        if not 1 <= ranks <= MAX_RANKS:
            raise UsageError(f"--ranks must be 1 to {MAX_RANKS:,}, got {ranks}")
        _check_strengths([*(inject or []), *(opt or [])])
        p = plan(workload, ranks=ranks, device=device, inject_specs=inject or [],
                 opt_specs=opt or [], clock=clock, seed=seed)
        if not 1 <= steps <= MAX_STEPS:
            raise UsageError(f"--steps must be 1 to {MAX_STEPS:,}, got {steps}")
        from hermes.trace.writer import check_trace_destination

        check_output_path(out, file_only=out.suffix == ".parquet")
        check_trace_destination(out, force)
        with progress(f"emulating {p.workload}", total=steps) as bar:
            res = emulate(p, trace_collector(p, out), steps,
                          progress=lambda done, total: bar.update(completed=done))
        causes = ", ".join(c for c, _ in p.causes) or "none"
        typer.echo(f"emulated {p.workload} on {p.device}: {ranks} rank(s), {steps} steps, "
                   f"layout dp{res.layout[0]},tp{res.layout[1]},pp{res.layout[2]}")
        typer.echo(f"  median step {res.median_step_ms:.3f} ms; injected: {causes}")
        typer.echo(f"  trace: {shown(out)}")
        return 0
