"""Published Graph-Engine host-scheduling phenomena, reproduced on the emulated NPU.

Run: python benchmarks/host_scheduling.py [--smoke]   (--smoke: the same run, seconds)
Prints, for each phenomenon, the figures before and after and the ratio:
1. the tiling cache cuts host tiling time by >= 50 % on a dynamic-shape LLM (PanGu-1.3B);
2. the 3-stage host pipeline (MAX_RUNTIME_CORE_NUMBER=3) reduces host dispatch time per step
   of a host-bound workload;
3. keeping LLaMA2-7B's ~650 small-shape operators on the host gains about 5 % throughput;
4. sink scheduling: a per-iteration header overhead and far less host time per step;
5. one knob moves a workload from host-bound to device-bound.
"""

from __future__ import annotations

import argparse

from emulator_common import busy_share, run, step_ms

from hermes.npu.settings import Settings


def tiling_cache() -> None:
    dyn = Settings(dynamic_shapes=True, shape_variants=4, jit=False)
    r0, t0 = run("pangu-1.3b", opt=["tiling_cache=off"], base=dyn, steps=10)
    r1, t1 = run("pangu-1.3b", opt=["tiling_cache"], base=dyn, steps=10)
    a, b = t0.per_step_ms("tiling"), t1.per_step_ms("tiling")
    print(f"1. tiling cache, pangu-1.3b with 4 dynamic shapes: host tiling {a:.2f} -> {b:.2f} "
          f"ms/step ({100 * (1 - b / a):.0f} % less; target >= 50 %); "
          f"step {step_ms(r0):.1f} -> {step_ms(r1):.1f} ms")


def host_pipeline() -> None:
    inj = ["cpu.operator_dispatch"]
    r0, t0 = run("mobilenetv1-ssd", inject=inj)
    r1, t1 = run("mobilenetv1-ssd", inject=inj, opt=["pipeline"])
    d0, d1 = (t.steps for t in (t0, t1))
    span0 = host_span(t0)
    span1 = host_span(t1)
    print(f"2. 3-stage host pipeline, host-bound mobilenetv1-ssd: host dispatch span "
          f"{span0:.2f} -> {span1:.2f} ms/step ({span0 / span1:.2f}x); step {step_ms(r0):.2f} -> "
          f"{step_ms(r1):.2f} ms ({step_ms(r0) / step_ms(r1):.2f}x)")
    del d0, d1


def host_span(t) -> float:
    """Host dispatch time per step: the step minus the host's waits (syncs, data)."""
    steps = [s for s in t.steps if s.rank == 0 and s.step >= 1]
    wall = sum(s.end_ns - s.start_ns for s in steps) / len(steps) / 1e6
    return wall - t.per_step_ms("sync") - t.per_step_ms("data_wait")


def small_ops() -> None:
    r0, _ = run("llama2-7b", steps=4)
    r1, _ = run("llama2-7b", opt=["host_small_ops"], steps=4)
    gain = step_ms(r0) / step_ms(r1) - 1
    print(f"3. llama2-7b small-shape ops on the host: step {step_ms(r0):.1f} -> "
          f"{step_ms(r1):.1f} ms, throughput +{100 * gain:.1f} % (published: about 5 %)")


def sink() -> None:
    r0, t0 = run("resnet50")
    r1, t1 = run("resnet50", opt=["sink"])
    h0 = float(r0.host_ns[1:, 0].mean()) / 1e6
    h1 = float(r1.host_ns[1:, 0].mean()) / 1e6
    header = t1.name_per_step_ms("model_execute_header")
    print(f"4. sink scheduling, resnet50 (static graph): host time {h0:.2f} -> {h1:.3f} ms/step "
          f"({h0 / h1:.0f}x less); per-iteration model-execute header {header * 1e3:.1f} us; "
          f"step {step_ms(r0):.2f} -> {step_ms(r1):.2f} ms")


def one_knob() -> None:
    """resnet50 with slow per-operator dispatch; the analyzer's verdict before and after."""
    inj = ["cpu.operator_dispatch=2"]
    for label, opt in (("before", []), ("after --opt tiling_cache", ["tiling_cache"])):
        r, _ = run("resnet50", inject=inj, opt=opt)
        print(f"5. one knob, resnet50 with slow dispatch, {label}: device busy "
              f"{100 * busy_share(r):.0f} % of the step, verdict {verdict(inj, opt)} "
              f"(step {step_ms(r):.1f} ms)")


def verdict(inject: list[str], opt: list[str]) -> str:
    """``hermes.analyze``'s bound for the emulated trace (written to a temp file)."""
    import tempfile
    from pathlib import Path

    from hermes.analyzers.engine.run import analyze
    from hermes.commands.emulate import trace_collector
    from hermes.npu.emulate import emulate, plan

    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "t.parquet"
        p = plan("resnet50", inject_specs=inject, opt_specs=opt)
        emulate(p, trace_collector(p, out), 8)
        return f"{analyze(out).bound}-bound"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true",
                    help="the same run (it takes seconds): for the test suite")
    ap.parse_args()
    tiling_cache()
    host_pipeline()
    small_ops()
    sink()
    one_knob()
