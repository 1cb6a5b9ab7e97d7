"""Analyses: each a pure function of one rank's events (or of per-rank results).

Layout (docs/architecture.md has the map): ``engine/`` runs the analyses (registry, executor,
folding, result, verdict); ``common/`` holds the frame helpers every analysis shares;
``critical_path/``, ``computation/`` and ``communication/`` are the large analysis families;
``overlap``, ``io``, ``cpu``, ``fluctuation``, ``memory`` and ``cluster`` are single modules. No
analysis imports another analysis's module: what one needs of another comes through the results
it declares in ``needs``.
"""
