"""A small PyTorch CPU training loop: an MLP on synthetic data with a DataLoader.

Runs as is (``python examples/train_torch_cpu.py --steps 20``) and unchanged under Hermes::

    hermes profile --mode fine --out trace_dir -- python examples/train_torch_cpu.py --steps 20

Hermes finds the steps from the optimizer, times the DataLoader and merges the PyTorch
profiler's operators into its trace. Prints one line per completed step (flushed), so a
caller can tell how far it got.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps to run")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--sleep", type=float, default=0.0, help="extra seconds per step")
    ap.add_argument("--exit-code", type=int, default=0, help="exit with this code at the end")
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    n = args.steps * args.batch
    data = TensorDataset(torch.randn(n, 64), torch.randint(0, 10, (n,)))
    loader = DataLoader(data, batch_size=args.batch, shuffle=True)
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    for step, (x, y) in enumerate(loader):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if args.sleep:
            time.sleep(args.sleep)
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main())
