"""Analysis family ``computation``: what the device's kernels cost and how well they use it.

Signature: ``computation(ctx: RankContext) -> AnalyzerResult`` (registered as ``computation``),
in :mod:`.analysis`. Owns operator costs (``opcost``, vectorized in ``opvec``), kernel tables
(``kernelstats``), kernel families (``families`` with ``families.toml``), the roofline
(``roofline``) and the device work per operator (``devicework``). Formulas:
docs/analysis/computation.md.
"""
