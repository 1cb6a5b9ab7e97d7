"""The one error type of Hermes.

Every error a user can cause (bad input file, bad option, unwritable output) is a
:class:`HermesError` whose message quotes the bad value, names where it was found and says
what to do. The CLI prints it as one line on stderr and exits with code 2.
"""

from __future__ import annotations


class HermesError(Exception):
    """A user-facing error: one line, what/where/what to do. Exit code 2 in the CLI."""

    exit_code = 2

    def __init__(self, message: str, *, path: object | None = None, where: str | None = None,
                 hint: str | None = None) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.where = where
        self.hint = hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        parts = []
        if self.path:
            parts.append(f"{self.path}" + (f" ({self.where})" if self.where else "") + ":")
        elif self.where:
            parts.append(f"{self.where}:")
        parts.append(self.message)
        text = " ".join(parts)
        if self.hint:
            text += f" — {self.hint}"
        return text.replace("\n", " ")


class TraceFormatError(HermesError):
    """A file is not a valid Hermes trace (wrong schema, version, types, values)."""


class ImportFormatError(HermesError):
    """A source file for an importer is malformed (not JSON, truncated, not a trace)."""


class UsageError(HermesError):
    """A bad option, name or combination of options."""


class OutputError(HermesError):
    """An output cannot be written (missing directory, permissions)."""
