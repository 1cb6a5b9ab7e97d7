"""Benchmarks that cannot rot (issue 37 item 4): every command under ``benchmarks/`` runs its
``--smoke`` (tiny input, real code path, its usual table) in a subprocess and exits 0.

A script is a command when it has a ``__main__`` block; the others are helper modules imported
by the commands (they may not run anything on import). A new command fails here until it takes
``--smoke`` and its table's shape is listed in ``SHAPES``. No timing is asserted: the patterns
are the lines each command prints, with the figures that do not depend on the machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import REPO, SHARED_TRACES

BENCH = REPO / "benchmarks"
SCRIPTS = sorted(BENCH.glob("*.py"))
MAIN = re.compile(r'^if __name__ == "__main__":', re.M)
COMMANDS = [p.name for p in SCRIPTS if MAIN.search(p.read_text())]
HELPERS = [p.name for p in SCRIPTS if p.name not in COMMANDS]
#: seconds one smoke run may take (they take 0.2-6 s on the 2-core machine, alone)
TIMEOUT = 90

#: per command, regular expressions its smoke output must match (multi-line mode)
SHAPES: dict[str, list[str]] = {
    "analysis_speed.py": [r"^1\. ~1 MB Kineto trace, end to end: .* 10,004 events",
                          r"^2\. small Kineto trace, end to end: .* 2,000 events",
                          r"^  without the forked import", r"^3\. 6,032 events, one rank",
                          r"^hermes analyze, 6,032 events: median",
                          r"^4\. real traces of >= 100,000 events",
                          r"^  kineto-h100-dist/ddp_gloo_balanced_rank0\.pt\.trace\.json\.gz"
                          r" +5,279 \| ",
                          r"^5\. ~2 MB of repeated real steps \(kineto-h100/gpt_balanced.*"
                          r"49,\d{3} events\)", r"^  hermes analyze  1 run\(s\): median"],
    "bad_input_bounds.py": [r"^bomb +on disk +inflated +exit",
                            r"^whitespace +[\d.]+MB +0\.125GiB +2 ",
                            r"^huge-name +[\d.]+MB +0\.125GiB +2 ", r"more than 64 MiB"],
    "check_power.py": [r"^pair  0: re-run (pass|fail) \(ratio [\d.]+",
                       r"^false-failure rate .*/1 = ", r"^catch rate .*/1 = "],
    "collector_overhead.py": [r"^variant +median step \(ms\) +ratio +paired",
                              r"^none +[\d.]+ +1\.0000 +1\.0000", r"^monitor +[\d.]+ ",
                              r"^fine +[\d.]+ ", r"^producer-detail +[\d.]+ "],
    "crossrank.py": [r'^kineto-h100-dist straggler: \{"collectives_per_rank": \[20, 20\], '
                     r'"matched": 20'],
    "diagnosis.py": [r"^Confusion .*, 2 runs \(resnet50; seeds 0; 8 steps\)",
                     r"^  none +top1 \d/1", r"^top-1 accuracy: \d/2",
                     r"^self-check: \d/2 runs consistent"],
    "emulator_calibration.py": [r"^figure +emulated +measured +ratio",
                                r"^matmul_bf16_TFLOPs +[\d.]+ +[\d.]+ +[\d.]+$",
                                r"^h2d_pageable_GBps +[\d.]+"],
    "emulator_speed.py": [r"^llama2-7b x 1 rank\(s\), 2 steps, no trace .*median of 1",
                          r"^gpt3-13b x 8 rank\(s\), 1 steps, fine-grained trace",
                          r"^8 ranks x 1 steps of gpt3-13b .* 25,864 device tasks"],
    "fuzz_campaign.py": [r"^family +seed +cases +ok +clean +DEFECT", r"^kineto +1 +1 ",
                         r"^defects: 0 "],
    "host_scheduling.py": [r"^1\. tiling cache", r"^2\. 3-stage host pipeline",
                           r"^3\. llama2-7b", r"^4\. sink scheduling", r"^5\. one knob.*after"],
    "hta_env.py": [r"HTA 0\.5\.0 pandas 2\.|^smoke run: HTA environment not created"],
    "hta_parity.py": [r"^smoke run: HTA side skipped", r"^trace +rank +idle",
                      r"^hta/\S+ +\d+ +[\d.]+ +- ", r"^0 rank\(s\) compared"],
    "import_identity.py": [r"^1 sources, 0 differ"],
    "import_speed.py": [r"^smoke run: the MTIA trace and HTA skipped",
                        r"\(3 MB of JSON, 10,004 source events\)", r"^  hermes +1 +[\d.]+ +[\d,]+",
                        r"^  target >= 500k events/s"],
    "mcp_cache.py": [r"^  first analyze call +[\d.]+ ms",
                     r"^  second call +[\d.]+ ms +\(cache hit: True\)",
                     r"^  identical copy .*cache hit: True"],
    "memory_split.py": [r"big_matmul\.pt\.trace\.json\.gz: per stage",
                        r"^  rank: computation +\| +[\d.]+", r"^  report rendered",
                        r"^  whole-run peak RSS"],
    "nsys_import.py": [r"^export: 20,000 kernels", r"^import: [\d,]+ events in",
                       r"^peak RSS: \d+ MiB",
                       r"^baseline, the same rows read and dropped: 60,210 rows in .*"
                       r"import / read-only: [\d.]+x$"],
    "opcost_speed.py": [r"^2,000 distinct signatures", r"identical numbers: True"],
    "published_cases.py": [r"^ResNet50, num_workers 1 -> 12", r"^VGG16 on 8 NPUs",
                           r"^MobileNetV1-SSD"],
    "real_traces.py": [r"^hta/\S+ +\d+ steps busy +[\d.]+% dl +[\d.]+% comm"],
    "report_speed.py": [r"^events: 6,032$", r"^hermes report: [\d.]+ s",
                        r"^report\.html: [\d.]+ MB", r"^smoke run: targets not judged"],
    "rule_calibration.py": [r"^rule +opt +share +before +after +est +meas",
                            r"^io\.\w+ +\w+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+"],
    "scale.py": [r"^wrote 2 ranks x 3 steps \(synthetic", r"^replica +4 ranks' results",
                 r"^embedded +2 ranks analyzed \(0 missing\)", r"^dask +2 ranks analyzed",
                 r"^embedded vs dask: analysis documents identical"],
    "shared_traces_json.py": [r"^ok  \S+: bound=", r"^1 files, 0 differ"],
    "synth.py": [r"^wrote 164 events .* as parquet", r"^wrote 164 events .* as kineto",
                 r"^read back: ranks \[0, 1\], 164 events"],
    "tricks.py": [r"^trick +file +on s +off s +gain",
                  *(rf"^{t} +big_matmul\.pt\.trace\.json\.gz +[\d.]+ +[\d.]+ +[-+][\d.]+%"
                    for t in ("solver_threads", "packed_sort_key", "release_memory",
                              "quick_exit", "no_numpy_ma", "hold_gc"))],
    "whatif.py": [r"^  emulated resnet50 x1 +measured", r"^replay error over 2 traces",
                  r"^  resnet50 +io\.slow_data_reading +\w+", r"^speedup error over 1 cases",
                  r"^iter +finding addressed", r"^ +1 +cpu\.garbage_collection"],
}
#: commands whose smoke input is a trace (or figures) under ../shared/traces
NEEDS_SHARED = {"crossrank.py", "emulator_calibration.py", "hta_parity.py", "import_identity.py",
                "real_traces.py", "shared_traces_json.py", "whatif.py"}


def test_every_script_is_a_command_or_an_imported_helper() -> None:
    """A script without a ``__main__`` block is exempt from ``--smoke`` only as a module
    another benchmark imports (a command's top-level code would otherwise run unchecked)."""
    assert {"analysis_speed.py", "collector_overhead.py", "scale.py"} <= set(COMMANDS)
    texts = "\n".join(p.read_text() for p in SCRIPTS)
    for name in HELPERS:
        mod = name.removesuffix(".py")
        assert re.search(rf"^\s*(from {mod} import|import {mod}\b)", texts, re.M), \
            f"benchmarks/{name} has no __main__ block and no benchmark imports it"


def test_every_command_has_a_smoke_run_and_a_shape() -> None:
    lacking = [n for n in COMMANDS if '"--smoke"' not in (BENCH / n).read_text()]
    assert not lacking, f"benchmarks without --smoke: {lacking}"
    assert sorted(SHAPES) == COMMANDS, "list each command's smoke table shape in SHAPES"


def _smoke(name: str) -> subprocess.CompletedProcess[str] | str:
    """``python benchmarks/NAME --smoke``'s result, or why it did not finish."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    try:
        return subprocess.run([sys.executable, str(BENCH / name), "--smoke"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"benchmarks/{name} --smoke ran past {TIMEOUT} s"


@pytest.fixture(scope="module")
def smoke_runs(request: pytest.FixtureRequest
               ) -> dict[str, subprocess.CompletedProcess[str] | str]:
    """Every selected, runnable smoke, two at a time (many wait on child processes or a real
    clock)."""
    chosen = {item.callspec.params["name"] for item in request.session.items
              if getattr(item, "originalname", "") == "test_smoke_run"
              and hasattr(item, "callspec")}
    names = [n for n in COMMANDS if n in chosen and '"--smoke"' in (BENCH / n).read_text()
             and (n not in NEEDS_SHARED or SHARED_TRACES.is_dir())]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(names, pool.map(_smoke, names), strict=True))


@pytest.mark.parametrize("name", COMMANDS)
def test_smoke_run(name: str, smoke_runs: dict[str, subprocess.CompletedProcess[str] | str]
                   ) -> None:
    if '"--smoke"' not in (BENCH / name).read_text():
        pytest.fail(f"benchmarks/{name} takes no --smoke (without it the full benchmark runs)")
    if name in NEEDS_SHARED and not SHARED_TRACES.is_dir():
        pytest.skip(f"shared traces not found at {SHARED_TRACES}")
    r = smoke_runs[name]
    assert not isinstance(r, str), r
    tail = f"\n--- stdout ---\n{r.stdout[-3000:]}\n--- stderr ---\n{r.stderr[-3000:]}"
    assert r.returncode == 0, f"benchmarks/{name} --smoke exited {r.returncode}{tail}"
    assert "Traceback (most recent call last)" not in r.stderr, tail
    missing = [p for p in SHAPES.get(name, []) if not re.search(p, r.stdout, re.M)]
    assert not missing, f"benchmarks/{name} --smoke printed none of {missing}{tail}"
