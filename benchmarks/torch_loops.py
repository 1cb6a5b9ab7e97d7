"""Real PyTorch CPU training loops for ``collector_overhead.py --torch``.

Each loop runs ``steps`` optimizer steps under one variant (``none``: no Hermes; ``monitor``,
``fine``, ``auto``: a ``hermes.profile`` session of that mode, started in this process as
``hermes profile`` starts one in a script's) and returns the step wall times in ns, measured
by the loop itself from one optimizer step's end to the next (the collector's work at a step
boundary counts, as it does in a job), never by the collector.

* ``cnn``: a small convolutional net on 3x32x32 images from a DataLoader (in-process loading);
* ``transformer``: a 2-layer encoder (d_model 128, 4 heads, 64 tokens, batch 8);
* ``ddp``: an MLP in 2 processes over Gloo (DistributedDataParallel), both ranks profiled;
  the ranks are started once and run every round, rank 0's step times are returned.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

VARIANTS = ("none", "monitor", "fine", "auto")


def _session(variant: str, out: Path, rank: int = 0, world: int = 1) -> Any:
    """A profiling session as ``hermes profile`` starts it (PyTorch support attached)."""
    import contextlib

    if variant == "none":
        return contextlib.nullcontext()
    import hermes
    from hermes.collectors import torch_profiler

    session = hermes.profile(out=out, mode=variant, handle_signals=False,
                             trigger_signal=None, rank=rank, world_size=world)
    torch_profiler.watch(session)
    return session


Times = tuple[list[int], list[int]]


def _timed(step: Callable[[], None], steps: int) -> Times:
    """(wall ns, process CPU ns) of each step: the CPU time counts every thread of the
    process (the collector's, the PyTorch profiler's) and barely moves when other processes
    load the machine, the wall time is what the job feels."""
    marks = [time.perf_counter_ns()]
    cpu = [time.process_time_ns()]
    for _ in range(steps):
        step()
        marks.append(time.perf_counter_ns())
        cpu.append(time.process_time_ns())
    return ([b - a for a, b in zip(marks[:-1], marks[1:], strict=True)],
            [b - a for a, b in zip(cpu[:-1], cpu[1:], strict=True)])


def cnn(variant: str, steps: int, out: Path) -> Times:
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(32 * steps, 3, 32, 32), torch.randint(0, 10, (32 * steps,)))
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with _session(variant, out / f"cnn-{variant}.parquet"):
        it = iter(DataLoader(data, batch_size=32, num_workers=0))

        def step() -> None:
            x, y = next(it)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

        return _timed(step, steps)


def transformer(variant: str, steps: int, out: Path) -> Times:
    import torch
    from torch import nn

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(8, 64, 128)
    with _session(variant, out / f"transformer-{variant}.parquet"):
        def step() -> None:
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

        return _timed(step, steps)


def _ddp_rank(rank: int, init: str, plan: list[tuple[str, int]], out: str, queue: Any) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import torch.distributed as dist
    from torch import nn

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                      nn.Linear(512, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    for i, (variant, steps) in enumerate(plan):
        dist.barrier()
        with _session(variant, Path(out) / f"ddp-{i}-{variant}", rank=rank, world=2):
            def step() -> None:
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()

            times = _timed(step, steps)
        if rank == 0:
            queue.put((i, times))
    dist.barrier()
    dist.destroy_process_group()


def ddp_rounds(plan: list[tuple[str, int]], out: Path) -> list[Times]:
    """Run every (variant, steps) of ``plan`` in order on 2 Gloo ranks; rank 0's step times."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="hermes-ddp-") as tmp:
        init = f"file://{tmp}/store"
        procs = [ctx.Process(target=_ddp_rank, args=(r, init, plan, str(out), queue))
                 for r in (0, 1)]
        for p in procs:
            p.start()
        results = dict(queue.get(timeout=600) for _ in plan)
        for p in procs:
            p.join(timeout=120)
        if any(p.exitcode != 0 for p in procs):
            raise RuntimeError(f"a DDP rank failed: exit codes {[p.exitcode for p in procs]}")
    return [results[i] for i in range(len(plan))]


LOOPS: dict[str, Callable[[str, int, Path], Times]] = {"cnn": cnn,
                                                           "transformer": transformer}
