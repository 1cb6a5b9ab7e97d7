"""Analyses: each a pure function of one rank's events (or of per-rank results)."""
