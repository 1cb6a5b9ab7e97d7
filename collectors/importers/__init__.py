"""Importers of other profilers' output into the Hermes trace format."""
