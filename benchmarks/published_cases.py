"""Published optimization cases (Hermes, USENIX ATC '25), reproduced on the emulated NPU.

Run: python benchmarks/published_cases.py [--smoke]   (--smoke: the same run, seconds)
Each case prints the emulated figures next to the published ones; what must hold is the
direction and the rough size of the change, not the absolute milliseconds.
"""

from __future__ import annotations

import argparse

from emulator_common import run, step_ms


def resnet50() -> None:
    inj = ["io.slow_data_processing"]
    r1, t1 = run("resnet50", inject=inj, steps=12)
    r12, t12 = run("resnet50", inject=inj, opt=["num_workers=12"], steps=12)
    print(f"ResNet50, num_workers 1 -> 12: step {step_ms(r1):.2f} -> {step_ms(r12):.2f} ms "
          f"({step_ms(r1) / step_ms(r12):.2f}x); data wait {t1.per_step_ms('data_wait'):.2f} -> "
          f"{t12.per_step_ms('data_wait'):.2f} ms/step   "
          f"[published: 90 -> 18.07 ms, data preparation 72.8 -> 0.25 ms, 5.34x]")


def vgg16() -> None:
    rows = []
    for mb in (4, 64):
        r, t = run("vgg16", ranks=8, opt=[f"grad_bucket_mb={mb}"], steps=8)
        rows.append((mb, step_ms(r), t.name_per_step_ms("wait grad_allreduce"),
                     t.kind_n["collective"] / len(t.counted_steps)))
    (mb0, s0, n0, c0), (mb1, s1, n1, c1) = rows
    print(f"VGG16 on 8 NPUs, gradient buckets {mb0} -> {mb1} MB: non-overlapped communication "
          f"{n0:.2f} -> {n1:.2f} ms/step, collectives {c0:.0f} -> {c1:.0f} per step, step "
          f"{s0:.2f} -> {s1:.2f} ms ({s0 / s1:.2f}x)   "
          f"[published: 21.76 -> 3.59 ms non-overlapped, 76.49 -> 56.64 ms, 1.35x]")


def mobilenet_ssd() -> None:
    inj = ["cpu.operator_compilation", "cpu.host_device_sync"]
    r0, t0 = run("mobilenetv1-ssd", inject=inj)
    r1, _ = run("mobilenetv1-ssd", inject=inj, opt=["static_shapes"])
    r2, _ = run("mobilenetv1-ssd", inject=inj, opt=["static_shapes", "remove_syncs"])
    print(f"MobileNetV1-SSD: step {step_ms(r0):.2f} ms (compiling {t0.per_step_ms('compile'):.1f}"
          f" ms/step) -> JIT off {step_ms(r1):.2f} ms -> syncs removed {step_ms(r2):.2f} ms   "
          f"[published: 73.24 (57.9 ms compiling) -> 64.87 -> 54.82 ms]")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true",
                    help="the same run (it takes seconds): for the test suite")
    ap.parse_args()
    resnet50()
    vgg16()
    mobilenet_ssd()
