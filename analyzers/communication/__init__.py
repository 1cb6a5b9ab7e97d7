"""Analysis family ``communication``: collectives and point-to-point transfers.

Signatures: ``communication(ctx: RankContext) -> AnalyzerResult`` per rank (:mod:`.rank`,
registered as ``communication``) and ``communication_cluster(ctx: ClusterContext) ->
AnalyzerResult`` over the per-rank results (:mod:`.cluster`, registered as
``communication_cluster``). Owns the collective tables, transmission costs, the
communication matrix and the cross-rank communication findings. Formulas:
docs/analysis/communication.md.
"""
