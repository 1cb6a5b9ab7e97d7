"""Your own training loop on the emulated NPU's Python API, traced by Hermes.

    python examples/emulated_training.py --out loop.parquet              # real clock
    python examples/emulated_training.py --out loop.parquet --item-every 2
    hermes analyze loop.parquet

Each step runs a small transformer block stack: forward, backward and optimizer operators
go through the emulated host stack (InferShape -> tiling -> allocation -> launch; on the real
clock these really run in Python and are timed) and the device follows the cost model of an
Ascend 910B. ``--item-every N`` reads a loss value (``.item()``, a host sync) every N layers,
the classic host-device-sync bottleneck: compare the step times with and without it.
"""

from __future__ import annotations

import argparse
import statistics

from hermes.collectors.fine import FineCollector
from hermes.npu.real import Session
from hermes.trace.meta import TraceMeta


def block(npu: Session, i: int, tokens: int, h: int, phase: str) -> None:
    npu.eltwise(f"layer{i}.ln.{phase}", tokens * h)
    npu.matmul(f"layer{i}.qkv.{phase}", tokens, h, 3 * h)
    npu.matmul(f"layer{i}.proj.{phase}", tokens, h, h)
    npu.matmul(f"layer{i}.fc1.{phase}", tokens, h, 4 * h)
    npu.eltwise(f"layer{i}.gelu.{phase}", tokens * 4 * h)
    npu.matmul(f"layer{i}.fc2.{phase}", tokens, 4 * h, h)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="loop.parquet", help="trace path")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--item-every", type=int, default=0, help="a .item() sync every N layers")
    ap.add_argument("--clock", choices=("real", "virtual"), default="real")
    args = ap.parse_args()

    collector = FineCollector(args.out, TraceMeta(source="emulator", extra={
        "workload": "examples/emulated_training.py", "item_every": args.item_every}))
    npu = Session("ascend910b", clock=args.clock, collector=collector)
    for _ in range(args.steps):
        with npu.step(tokens=args.tokens):
            for i in range(args.layers):
                block(npu, i, args.tokens, args.hidden, "fwd")
                if args.item_every and (i + 1) % args.item_every == 0:
                    npu.item("loss.item")
            for i in reversed(range(args.layers)):
                block(npu, i, args.tokens, args.hidden, "bwd")
            npu.eltwise("adam", 12 * args.layers * args.hidden ** 2)
    collector.close({"device": npu.profile.to_meta()})
    ms = [t / 1e6 for t in npu.steps_ns[1:]] or [npu.steps_ns[0] / 1e6]
    print(f"{args.steps} steps, median {statistics.median(ms):.2f} ms/step "
          f"({args.clock} clock); trace: {args.out}")


if __name__ == "__main__":
    main()
