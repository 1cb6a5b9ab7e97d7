"""The release's version: the one place it is written (pyproject reads it as its dynamic version).

A constant rather than ``importlib.metadata.version(...)``: importing importlib.metadata costs
~10-40 ms, paid by every trace written (``TraceMeta.created_by``) and ``hermes --version``.
"""

__version__ = "0.1.0"
