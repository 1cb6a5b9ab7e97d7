"""The compiled parts of Hermes (C, no dependencies beyond Python's headers):
``hermes.trace._columns`` (the Kineto import's column passes) and ``hermes.analyzers.critical_path._lanes``
(the critical path's and the replay's shortest distances). Everything else is in pyproject.toml.

Both are optional: where no C compiler is found the install goes on without them and the same
work runs in Python/numpy (slower, the same results)."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("hermes.trace._columns", ["hermes/trace/_columns.c"], optional=True),
    Extension("hermes.analyzers.critical_path._lanes", ["analyzers/critical_path/_lanes.c"], optional=True),
])
