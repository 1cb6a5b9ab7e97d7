"""What a workload of the zoo is: a graph builder and what a step consumes.

A leaf module: ``models.py`` builds :class:`Workload` values and the package face
(``workloads/__init__.py``) registers them, so neither imports the other's importer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hermes.npu.graph import Graph


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    build: Callable[[int, int, int], Graph]   # (tp, pp, stage) -> one microbatch's step graph
    samples_per_step: int                     # samples per rank per step (all microbatches)
    tokens_per_step: int | None               # tokens per rank per step (LLMs)
    sample_storage_B: float                   # bytes read from storage per sample
    sample_device_B: float                    # bytes copied host->device per sample
    process_s: float                          # CPU seconds of decode/augment per sample
    microbatches: int = 1                     # pipeline-parallel microbatches per step
    max_tp: int = 1                           # default tensor-parallel degree on many ranks
    max_pp: int = 1                           # default pipeline-parallel degree on many ranks
    expert_parallel: bool = False             # all-to-all over the data-parallel group

    def default_layout(self, ranks: int) -> tuple[int, int, int]:
        """(dp, tp, pp) for ``ranks`` when the user gives no ``parallel=`` option."""
        tp = 1
        while tp * 2 <= self.max_tp and ranks % (tp * 2) == 0:
            tp *= 2
        pp = 1
        while pp * 2 <= self.max_pp and ranks % (tp * pp * 2) == 0:
            pp *= 2
        return ranks // (tp * pp), tp, pp
