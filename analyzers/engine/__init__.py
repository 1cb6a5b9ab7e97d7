"""How analyses run: the analyzer registry and contexts (``base``), the map over ranks and the
reduce over the cluster (``run.analyze(trace) -> Analysis``), executors (embedded processes or
Dask), reading a rank's files (``rankfiles``), merging findings (``fold``), the verdict
(``verdict``), the result and its JSON document (``result``) and the result checks
(``invariants``).

Entry point: :func:`hermes.analyzers.engine.run.analyze`. Owns no analysis.
"""
