"""The server's memory of work done: an LRU of results keyed by content hash and options.

:meth:`Cache.get` computes a missing entry once however many callers ask for it at the same
time (the others wait for that one computation and share its result); a computation that raises
is not remembered, so the next call tries again. The heavy work itself runs one computation at a
time (:data:`WORK`): an analysis keeps a CPU busy, and taking them in turn keeps the analyzers
out of each other's way in one process. Cache hits never wait for it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

#: Held while one import, analysis, replay or render runs (never while waiting on the cache).
WORK = threading.Lock()


class Cache:
    """A thread-safe LRU of at most ``size`` entries with one computation per missing key."""

    def __init__(self, size: int = 16) -> None:
        self.size = max(1, int(size))
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._flights: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def _take(self, key: Hashable) -> tuple[bool, Any]:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return True, self._items[key]
        return False, None

    def peek(self, key: Hashable) -> Any | None:
        """The cached value for ``key`` (a hit), or None: nothing computed, nothing waited for."""
        return self._take(key)[1]

    def get(self, key: Hashable, compute: Callable[[], Any]) -> tuple[Any, bool]:
        """``(value, hit)``: the cached value for ``key``, or ``compute()``'s (run under
        :data:`WORK`, once for concurrent callers of the same key)."""
        found, value = self._take(key)
        if found:
            return value, True
        with self._lock:
            flight = self._flights.setdefault(key, threading.Lock())
        with flight:
            found, value = self._take(key)  # another caller computed it meanwhile
            if found:
                return value, True
            try:
                with WORK:
                    value = compute()
                with self._lock:
                    self._items[key] = value
                    self._items.move_to_end(key)
                    self.misses += 1
                    while len(self._items) > self.size:
                        self._items.popitem(last=False)
            finally:
                with self._lock:
                    if self._flights.get(key) is flight:
                        del self._flights[key]
        return value, False
