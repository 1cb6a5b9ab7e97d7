"""What-if: predict a step's time after optimizations by replaying its dependency graph.

Stage 3 (beside the advisor): takes a trace's events, builds each rank's step graph
(:mod:`hermes.analyzers.critical_path.stepgraph`, the critical path's graph), applies the transforms of the
named optimizations (:mod:`hermes.whatif.transforms`) and replays it (:mod:`.replay`).
Figures are medians over steps; the run's step time is its slowest rank's (synchronous training
goes at the pace of the slowest rank). ``graphs(..., median_only=True)`` replays only each
rank's median step (ranks of over a million events always: big traces stay fast).

Ranks whose collectives match (:mod:`.cluster`) are replayed together: a collective ends at its
last participant's arrival plus the transmission, so the straggler transform shrinks the others'
waits. Left out: CUDA graph launches are one task each; precision / tiling changes have no
transform yet. A transform that needs what a trace does not record says why
(``Prediction.reasons``) and is not applied.

The work is in named modules: :mod:`.prediction` (``graphs``, ``predict``, ``speedups``),
:mod:`.replay`, :mod:`.cluster`, :mod:`.transforms`; this package only re-exports.
"""

from __future__ import annotations

from hermes.whatif.prediction import (
    FACTS,
    TRANSFORMS,
    Prediction,
    graphs,
    predict,
    speedups,
)

__all__ = ["FACTS", "TRANSFORMS", "Prediction", "graphs", "predict", "speedups"]
