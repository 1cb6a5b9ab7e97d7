"""Analysis family ``critical_path``: the longest dependency chain of every step.

Signature: ``analyze(ctx: RankContext) -> AnalyzerResult`` (registered as ``critical_path``,
needs nothing), in :mod:`.analysis`. Owns the step graph (``stepgraph``: nodes and edges of a
rank's events, ``stepkeep``: keeping one built graph for the what-if replay), its cross-lane
edges (``edges``: launches, waits, syncs), the graph type and the shortest-distance solve
(``graph``, ``lanes`` and the compiled pass ``_lanes.c``), and the per-step passes
(``solve``). Formulas: docs/analysis/critical_path.md.
"""
