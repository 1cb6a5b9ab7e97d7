"""A plain-Python training loop on the emulated NPU (real clock): no framework, no device.

Each step issues a small MLP's forward, backward and optimizer operators through the emulated
host stack (InferShape -> tiling -> allocation -> launch, really run and timed in Python); the
device follows the cost model and ``item()`` blocks until the modelled device time.

Runs as is (``python examples/train_emulated.py --steps 30``) and unchanged under Hermes::

    hermes profile --mode auto --out trace_dir -- python examples/train_emulated.py --slow-step 12

Under ``hermes profile`` the loop reports into the profiling session (steps, device busy time,
FLOPs, and in detailed steps every host stage and device task); alone it reports nowhere.
``--slow-step N`` adds a straggler operator to step N, which auto mode answers by capturing
the next K steps in detail. ``--clock virtual`` models host costs instead of timing them
(deterministic step times).
"""

from __future__ import annotations

import argparse
import sys

import hermes
from hermes.collectors.api import collector
from hermes.npu.real import Session


def train(npu: Session, steps: int, batch: int, width: int, layers: int,
          slow_step: int | None) -> None:
    for step in range(steps):
        with npu.step(samples=batch):
            with hermes.region("forward"):
                for i in range(layers):
                    npu.matmul(f"fc{i}.fwd", batch, width, width)
                    npu.eltwise(f"relu{i}.fwd", batch * width)
            with hermes.region("backward"):
                for i in reversed(range(layers)):
                    npu.eltwise(f"relu{i}.bwd", batch * width)
                    npu.matmul(f"fc{i}.dgrad", batch, width, width)
                    npu.matmul(f"fc{i}.wgrad", width, batch, width)
            with hermes.region("optimizer"):
                for i in range(layers):
                    npu.eltwise(f"sgd{i}", width * width)
            if step == slow_step:
                # A straggler: one huge operator (~0.25 s on a 910B-class cube unit).
                npu.matmul("straggler", 32768, 32768, 32768)
            npu.item("loss.item")
        print(f"step {step} done", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--width", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--device", default="ascend910b")
    ap.add_argument("--clock", choices=("real", "virtual"), default="real")
    ap.add_argument("--slow-step", type=int, default=None, help="make this step slow")
    args = ap.parse_args(argv)
    npu = Session(args.device, clock=args.clock, collector=collector())
    train(npu, args.steps, args.batch, args.width, args.layers, args.slow_step)
    return 0


if __name__ == "__main__":
    sys.exit(main())
