"""The compiled parts of Hermes (C): ``hermes.trace._columns`` (the Kineto import's column
passes), ``hermes.analyzers.critical_path._lanes`` (the critical path's and the replay's
shortest distances), both needing only Python's headers, and
``hermes.collectors.importers.nsys._scan`` (an Nsight Systems export's rows read in C), which
needs SQLite's (Debian: libsqlite3-dev, which Python's own build needs too). Everything else is
in pyproject.toml.

All are optional: where no C compiler (or header) is found the install goes on without them
and the same work runs in Python/numpy or through ADBC (slower, the same results)."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("hermes.trace._columns", ["hermes/trace/_columns.c"], optional=True),
    Extension("hermes.analyzers.critical_path._lanes", ["analyzers/critical_path/_lanes.c"], optional=True),
    Extension("hermes.collectors.importers.nsys._scan", ["collectors/importers/nsys/_scan.c"],
              libraries=["sqlite3"], optional=True),
])
