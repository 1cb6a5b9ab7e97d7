"""The one compiled part of Hermes: ``hermes.trace._columns`` (C, no dependencies beyond
Python's headers). Everything else is in pyproject.toml.

The extension is optional: where no C compiler is found the install goes on without it and
``hermes.trace.columns`` runs the same passes in Python (slower, the same results)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("hermes.trace._columns", ["hermes/trace/_columns.c"],
                             optional=True)])
