"""Operator costs of many distinct signatures (dynamic shapes): ``opcost.one_cost`` per signature
against ``opvec.costs`` over all at once, in the same run; prints both, the ratio and whether the
numbers are identical.

    python benchmarks/opcost_speed.py --n 100000
    python benchmarks/opcost_speed.py --smoke      # 2,000 signatures, once
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import numpy as np

from hermes.analyzers.computation import opcost, opvec

OPS = [("aten::add", 2), ("aten::mm", 2), ("aten::sum", 1), ("aten::addmm", 3),
       ("aten::layer_norm", 3), ("aten::_softmax", 1), ("aten::copy_", 2), ("aten::mul", 2)]


def signatures(n: int, seed: int = 0) -> list[tuple[str, str, str, str]]:
    """Kineto-like signatures, every one distinct (random sizes, like ragged batches)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        name, k = OPS[i % len(OPS)]
        m, d = rng.randint(1, 8192), rng.choice([1024, 2048, 4096])
        dims = [[m, d], [d, rng.randint(1, 4096)], [d]][:k] if "mm" in name else \
            [[m, d]] + [[d]] * (k - 1)
        out.append((name, json.dumps(dims), json.dumps(["c10::BFloat16"] * k),
                    json.dumps([""] * k)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="distinct signatures")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="2,000 signatures, once (seconds)")
    args = ap.parse_args()
    if args.smoke:
        args.n, args.repeat = 2_000, 1
    sigs = signatures(args.n)
    cols = [np.array(c, dtype=object) for c in zip(*sigs, strict=True)]
    t_one, t_vec = [], []
    for _ in range(args.repeat):  # alternated, medians
        opcost.one_cost.cache_clear()
        t = time.process_time()
        want = np.array([opcost.one_cost(*s)[:3] for s in sigs], np.float64)
        t_one.append(time.process_time() - t)
        t = time.process_time()
        got = opvec.costs(*cols).to_numpy(np.float64)
        t_vec.append(time.process_time() - t)
    one, vec = statistics.median(t_one), statistics.median(t_vec)
    same = bool(np.array_equal(want, got, equal_nan=True))
    print(f"{args.n:,} distinct signatures, CPU s, median of {args.repeat}:")
    print(f"  opcost.one_cost per signature {one:8.3f} s  ({1e6 * one / args.n:.1f} us each)")
    print(f"  opvec.costs all at once       {vec:8.3f} s  ({1e6 * vec / args.n:.2f} us each)")
    print(f"  ratio {one / vec:.1f}x, identical numbers: {same}")


if __name__ == "__main__":
    main()
