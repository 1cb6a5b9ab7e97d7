"""One registry helper: things looked up by name, an unknown name answered with the valid ones.

Importers, analyzers, workloads, device profiles and renderers each keep a :class:`Registry`;
the CLI's choices come from :meth:`Registry.names`, and :meth:`Registry.get` raises a
:class:`~hermes.errors.UsageError` that lists what is valid (STYLE.md: registries, not chains).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from hermes.errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> item, in registration order. ``what`` names the kind in errors ("importer")."""

    def __init__(self, what: str, *, normalize: Callable[[str], str] | None = None) -> None:
        self.what = what
        self._items: dict[str, T] = {}
        self._norm = normalize or (lambda s: s)

    def add(self, name: str, item: T) -> T:
        self._items[self._norm(name)] = item
        return item

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""
        return lambda item: self.add(name, item)

    def get(self, name: str, *, flag: str | None = None) -> T:
        """The item called ``name``; an unknown name raises a UsageError listing the valid ones
        (``flag`` names the option it came from, e.g. ``--format``)."""
        try:
            return self._items[self._norm(name)]
        except (KeyError, TypeError, AttributeError):
            where = f" for {flag}" if flag else ""
            raise UsageError(f"unknown {self.what} {name!r}{where}",
                             hint=f"valid: {', '.join(self.names()) or 'none'}") from None

    def names(self) -> list[str]:
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())

    def values(self) -> list[T]:
        return list(self._items.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._norm(name) in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
