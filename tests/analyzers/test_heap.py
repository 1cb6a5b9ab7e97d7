"""analyzers.heap.warm_heap: memory faulted in before an analysis is reused by its arrays."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hermes.analyzers.heap import warm_heap

# in a fresh interpreter: minor page faults of writing 32 one-MiB arrays (kept alive), after
# warm_heap(64 MiB) or not
PROBE = """
import resource, sys
import numpy as np
from hermes.analyzers.heap import warm_heap
if sys.argv[1] == "warm" and not warm_heap(64 << 20):
    print(-1); raise SystemExit
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
keep = [np.ones(1 << 17) for _ in range(32)]
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip())


def test_arrays_after_a_warm_heap_fault_no_fresh_pages():
    warm = _faults("warm")
    if warm < 0:
        pytest.skip("not glibc: warm_heap is a no-op")
    # 32 MiB of fresh pages: 8,192 faults of 4 KiB; from the warm heap, (almost) none
    assert _faults("cold") > 4000
    assert warm < 500


def test_nothing_to_warm_is_fine():
    assert warm_heap(0) in (True, False)
