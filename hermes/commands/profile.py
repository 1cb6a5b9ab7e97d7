"""``hermes profile``: run a Python training script unchanged and record a Hermes trace."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from hermes.errors import UsageError

#: The most steps one detailed capture may span (each holds every event in memory).
MAX_WINDOW = 100_000


def register(app: typer.Typer) -> None:
    @app.command(
        "profile",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        options_metavar="[OPTIONS] -- python SCRIPT [ARGS]... | -- LAUNCHER [ARGS] SCRIPT ...",
    )
    def profile(
        ctx: typer.Context,
        mode: str = typer.Option("auto", "--mode", help="monitor | fine | auto (coarse-to-fine)."),
        out: Path = typer.Option(Path("hermes-trace"), "--out",
                                 help="Trace directory (one rank-N.parquet per rank), or a "
                                      "FILE.parquet for a single process."),
        window: int = typer.Option(3, "--window", "-k",
                                   help="Steps captured in detail after a trigger (auto)."),
        trigger_file: Path | None = typer.Option(
            None, "--trigger-file",
            help="auto: when this file appears, capture the next K steps (file may hold K)."),
        device: str | None = typer.Option(None, "--device",
                                          help="Device profile for MFU (h100, ascend910b...)."),
        flush_every: float = typer.Option(
            1.0, "--flush-every",
            help="Seconds between saves of the completed steps as segments (0: after every "
                 "step; longer, up to 10x, where saves would cost over 0.2% of the job's "
                 "time); each step in between is journaled: a job killed by SIGKILL or abort "
                 "keeps every completed step."),
    ) -> int:
        """Run `python SCRIPT ARGS...` (or `python -m MODULE`, `python -c CODE`) unchanged
        with Hermes profiling: argv, stdio, signals and the exit code are the script's own.
        A launcher (torchrun, python -m torch.distributed.run, accelerate launch, deepspeed)
        runs unchanged too: each worker it starts is profiled and writes its rank's file
        into the one --out directory; the exit code is the launcher's. Steps come from
        hermes.step(), the emulated NPU runtime or PyTorch optimizer steps. In auto mode,
        SIGUSR1 or the --trigger-file captures the next K steps in detail; fine mode also
        samples the Python stack of the training loop.

        Example: hermes profile --mode auto --out trace_dir -- python train.py --epochs 1

        Example: hermes profile --mode fine --out job -- torchrun --nproc-per-node 2 train.py
        """
        from hermes.collectors import api, launcher

        if mode not in api.MODES:
            raise UsageError(f"unknown --mode {mode!r}", hint=f"valid: {', '.join(api.MODES)}")
        if not 1 <= window <= MAX_WINDOW:
            raise UsageError(f"--window must be 1 to {MAX_WINDOW:,} steps, got {window}")
        if not 0 <= flush_every <= 86400:  # also refuses nan
            raise UsageError(f"--flush-every must be 0 to 86400 seconds, got {flush_every}")
        options = {"out": str(out), "mode": mode, "window": window,
                   "flush_seconds": flush_every}
        if trigger_file is not None:
            options["trigger_file"] = str(trigger_file.resolve())
        if device is not None:
            from hermes import devices

            devices.get(device)  # an unknown name fails here, before the script starts
            options["device"] = device
        argv, env = launcher.prepare(list(ctx.args), options, _epilogue(out, ranks=True))
        argv = _with_epilogue(argv, out)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execvpe(argv[0], argv, env)
        return 0  # not reached: exec replaced this process


def _with_epilogue(argv: list[str], out: Path) -> list[str]:
    """``argv`` whose bootstrap code first registers an exit handler that prints, on stderr,
    where the trace is and the next command. Registered before the recording starts, it runs
    after the recording's own exit handler (atexit is last-in, first-out): the trace is
    published by then. The process stays the script's (exec), so this is the one way to speak
    after it."""
    from hermes.collectors.launcher import BOOTSTRAP

    msg = _epilogue(out)
    where = str(out.resolve())
    # said only when the trace exists (a script that failed to start wrote none)
    epilogue = (f"import atexit, os, sys; atexit.register(lambda: os.path.exists({where!r}) "
                f"and sys.stderr.write({msg!r})); ")
    return [epilogue + a if a == BOOTSTRAP else a for a in argv]


def _epilogue(out: Path, ranks: bool = False) -> str:
    """Where the trace is and the next command (``ranks``: said by rank 0 of a launcher's job,
    whose other ranks write their own files beside its)."""
    what = "rank 0's trace written to" if ranks else "trace written to"
    also = " (each rank writes its own rank-N.parquet there)" if ranks else ""
    return (f"\nhermes: {what} {out}{also}\n"
            f"next: hermes analyze {out}   (or: hermes report {out} --open)\n")
