"""The one table of communication-kernel name patterns, and its loader.

Collectives of NCCL run as kernels named ``ncclKernel_*`` / ``ncclDevKernel_*``, but other
libraries (RCCL, NVSHMEM-based all-to-all such as DeepEP, MSCCL++, custom all-reduce kernels)
name theirs differently. Which names mean "communication" is data (``comm_patterns.toml``), read
here at the ground floor so importers (which mark such kernels kind ``collective``) and analyzers
agree; users extend it with a file of the same shape (``hermes import --comm-patterns FILE``).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from hermes.errors import UsageError

DEFAULT_FILE = Path(__file__).with_name("comm_patterns.toml")


@dataclass(frozen=True)
class CommPatterns:
    """Library name -> its patterns; ``match`` tells communication kernels by name."""

    libraries: dict[str, tuple[str, ...]]
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _cache: dict[str, bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        joined = "|".join(f"(?:{p})" for pats in self.libraries.values() for p in pats)
        object.__setattr__(self, "_regex", re.compile(joined or r"(?!)", re.IGNORECASE))
        object.__setattr__(self, "_cache", {})

    def is_comm(self, name: str) -> bool:
        hit = self._cache.get(name)
        if hit is None:
            hit = self._cache[name] = bool(self._regex.search(name))
        return hit

    def match(self, names: Iterable[str]) -> list[bool]:
        """One flag per name (meant for distinct names: callers spread it over rows)."""
        return [self.is_comm(n) for n in names]

    def library(self, name: str) -> str | None:
        """The library whose pattern matches ``name`` first (table order)."""
        for lib, pats in self.libraries.items():
            if any(re.search(p, name, re.IGNORECASE) for p in pats):
                return lib
        return None

    def extended(self, other: CommPatterns) -> CommPatterns:
        libs = dict(self.libraries)
        for lib, pats in other.libraries.items():
            libs[lib] = tuple(dict.fromkeys((*libs.get(lib, ()), *pats)))
        return CommPatterns(libs)


def _parse(path: Path) -> CommPatterns:
    hint = ('expected [[library]] tables with name = "..." and patterns = ["regex", ...] '
            f"(see {DEFAULT_FILE.name} in hermes/trace)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read communication patterns: {exc.strerror}", path=path,
                         where="--comm-patterns") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"malformed TOML: {exc}", path=path, hint=hint) from None
    libs = data.get("library")
    if not isinstance(libs, list) or not libs:
        raise UsageError("no [[library]] table", path=path, hint=hint)
    out: dict[str, tuple[str, ...]] = {}
    for i, lib in enumerate(libs):
        where = f"library {i + 1}"
        name, pats = (lib.get("name"), lib.get("patterns")) if isinstance(lib, dict) else \
            (None, None)
        if not isinstance(name, str) or not name or not isinstance(pats, list) or \
                not pats or not all(isinstance(p, str) and p for p in pats):
            raise UsageError("a library needs a name and a non-empty list of patterns",
                             path=path, where=where, hint=hint)
        for p in pats:
            try:
                re.compile(p)
            except re.error as exc:
                raise UsageError(f"bad regular expression {p!r}: {exc}", path=path,
                                 where=where, hint="patterns are Python regular expressions"
                                 ) from None
        out[name] = tuple(dict.fromkeys((*out.get(name, ()), *pats)))
    return CommPatterns(out)


@lru_cache(maxsize=1)
def default() -> CommPatterns:
    """The shipped table."""
    return _parse(DEFAULT_FILE)


def load(extra: Path | str | None = None) -> CommPatterns:
    """The shipped table, extended by the user's file ``extra`` when given."""
    base = default()
    return base if extra is None else base.extended(_parse(Path(extra)))
