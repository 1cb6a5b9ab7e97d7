"""Where per-rank work runs: one interface, an embedded executor and a Dask one.

``Executor.map(fn, items)`` yields ``(item, result)`` or ``(item, Failure)`` for every item, in
completion order. Each item is tried at most twice (``RETRIES`` = 1 retry): a rank whose file does
not load, whose analysis raises, or whose worker process dies is run once more, then reported as a
:class:`Failure` — the caller decides what a missing item means (:mod:`hermes.analyzers.engine.run` lists
it in ``Analysis.missing_ranks``); nothing is dropped silently.

* :class:`LocalExecutor` — in this process (``workers`` <= 1), or a spawn process pool bounded by
  the cores and the memory available (``WORKER_BUDGET_BYTES`` per worker).
* :class:`DaskExecutor` — a ``dask.distributed`` client of ``--scheduler tcp://HOST:PORT`` or of
  ``DASK_SCHEDULER_ADDRESS``, else of a ``LocalCluster`` it starts (``pip install
  'hermes-profiler[cluster]'``). Dask is imported only here, when one is made.

``fn`` and the items travel to the workers (pickled), so they must be small: a path and a rank,
never events — workers read their rank's files themselves and send back only its results.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any, Protocol

from hermes.errors import HermesError, UsageError

#: Retries of an item after its first failure (a raised error or a dead worker).
RETRIES = 1
#: Memory one pool worker is budgeted (a rank's events and its analysis); with the cores, it
#: bounds the embedded pool so that many workers on a small machine do not swap.
WORKER_BUDGET_BYTES = 2 << 30
ENV_SCHEDULER = "DASK_SCHEDULER_ADDRESS"


@dataclass(frozen=True)
class Failure:
    """An item that failed on every try: the last error, one line, and the number of tries."""

    error: str
    attempts: int


class Executor(Protocol):
    """Runs ``fn`` over items, yielding each item with its result or its :class:`Failure`."""

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]
            ) -> Iterator[tuple[Any, Any]]: ...

    def close(self) -> None: ...


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, HermesError):  # a problem of the input: its own line, no class name
        return exc.one_line()
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return last.splitlines()[0] if last else type(exc).__name__


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask on Linux, else every core)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def pool_size(workers: int) -> int:
    """Processes for ``workers`` requested: at most the cores, and at most the available memory
    over ``WORKER_BUDGET_BYTES`` (at least one)."""
    cores = os.cpu_count() or 1
    try:
        import psutil

        by_memory = int(psutil.virtual_memory().available // WORKER_BUDGET_BYTES)
    except (ImportError, OSError):  # no psutil or no /proc: cores alone bound the pool
        by_memory = cores
    return max(1, min(workers, cores, by_memory))


class LocalExecutor:
    """The embedded executor: in this process, or a process pool of :func:`pool_size` workers."""

    def __init__(self, workers: int = 0) -> None:
        self.workers = pool_size(workers) if workers > 1 else 1

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]
            ) -> Iterator[tuple[Any, Any]]:
        todo = list(items)
        if self.workers <= 1 or len(todo) <= 1:
            yield from self._serial(fn, todo)
        else:
            yield from self._pooled(fn, todo)

    def _serial(self, fn: Callable[[Any], Any], todo: list[Any]) -> Iterator[tuple[Any, Any]]:
        for item in todo:
            for attempt in range(1, RETRIES + 2):
                try:
                    result = fn(item)
                except Exception as exc:  # noqa: BLE001 - any failure of one item is reported
                    if attempt > RETRIES:
                        yield item, Failure(_one_line(exc), attempt)
                    continue
                yield item, result
                break

    def _pooled(self, fn: Callable[[Any], Any], todo: list[Any]) -> Iterator[tuple[Any, Any]]:
        """Every item in a pool; failed items go to a fresh pool (a dead worker breaks the whole
        pool, failing every pending item with it), until each has had RETRIES + 1 tries."""
        from concurrent.futures import ProcessPoolExecutor  # (multiprocessing: only for a pool)
        from concurrent.futures.process import BrokenProcessPool
        from multiprocessing import get_context

        attempts = dict.fromkeys(range(len(todo)), 0)
        pending = list(range(len(todo)))
        while pending:
            failed: list[tuple[int, str]] = []
            with ProcessPoolExecutor(min(self.workers, len(pending)),
                                     mp_context=get_context("spawn")) as pool:
                futures: dict[Future[Any], int] = {pool.submit(fn, todo[i]): i for i in pending}
                while futures:
                    done, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for fut in done:
                        i = futures.pop(fut)
                        attempts[i] += 1
                        try:
                            result = fut.result()
                        except BrokenProcessPool as exc:
                            failed.append((i, f"worker process died ({_one_line(exc)})"))
                        except Exception as exc:  # noqa: BLE001 - reported, never dropped
                            failed.append((i, _one_line(exc)))
                        else:
                            yield todo[i], result
            pending = []
            for i, error in sorted(failed):
                if attempts[i] > RETRIES:
                    yield todo[i], Failure(error, attempts[i])
                else:
                    pending.append(i)

    def close(self) -> None:
        """Nothing to release: each map's pool ends with it."""


class DaskExecutor:
    """Runs items as Dask tasks on the scheduler at ``address``, or without one on a
    ``LocalCluster`` of ``workers`` single-threaded processes started here."""

    def __init__(self, address: str | None = None, workers: int = 0) -> None:
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError as exc:
            raise UsageError("the Dask executor needs dask and distributed",
                             hint="pip install 'hermes-profiler[cluster]'") from exc
        self._cluster: Any = None
        if address:
            self.client = Client(address)
        else:
            # A task whose worker dies is rescheduled; after RETRIES such deaths the scheduler
            # gives up on it (KilledWorker) instead of the default 3, so a rank that kills its
            # worker is tried as often as one that raises.
            with dask.config.set({"distributed.scheduler.allowed-failures": RETRIES}):
                self._cluster = LocalCluster(n_workers=max(1, workers or os.cpu_count() or 1),
                                             threads_per_worker=1, processes=True,
                                             dashboard_address=None)
            self.client = Client(self._cluster)

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]
            ) -> Iterator[tuple[Any, Any]]:
        from distributed import as_completed

        todo = list(items)
        # pure=False: identical arguments are distinct jobs (a retry must run again, not reuse)
        futures = self.client.map(fn, todo, retries=RETRIES, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        for fut in as_completed(futures):
            i = index[fut.key]
            try:
                result = fut.result()
            except Exception as exc:  # noqa: BLE001 - KilledWorker or the job's own error
                yield todo[i], Failure(_one_line(exc), RETRIES + 1)
            else:
                yield todo[i], result
            fut.release()  # the driver holds each result once, not the cluster's copy too

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_executor(scheduler: str | None = None, workers: int = 0) -> Executor:
    """``--scheduler``/``DASK_SCHEDULER_ADDRESS`` -> :class:`DaskExecutor` (``local``: a
    ``LocalCluster`` of ``workers``); otherwise the embedded :class:`LocalExecutor`."""
    if scheduler == "local":
        return DaskExecutor(None, workers)
    address = scheduler or os.environ.get(ENV_SCHEDULER)
    if address:
        return DaskExecutor(address, workers)
    return LocalExecutor(workers)
