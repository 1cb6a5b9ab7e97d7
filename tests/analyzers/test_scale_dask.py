"""The Dask executor: the same findings as the embedded one, and a worker killed mid-analysis
is retried once, then reported missing (exit code 1 unless --allow-missing)."""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

from hermes.analyzers.engine.executor import DaskExecutor, LocalExecutor
from hermes.analyzers.engine.run import analyze
from tests.conftest import emulated_run, run_cli  # noqa: E402


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskExecutor]:
    import cloudpickle

    # the kill wrapper below travels to the workers by value: they need not import tests/
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with DaskExecutor(None, workers=2) as ex:
        yield ex


@pytest.fixture(scope="module")
def ranks16(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emulated_run(tmp_path_factory.mktemp("scale") / "run", "deepfm", 16, 2)


def _kill(flag_dir: str, fn: Callable[[Any], Any], rank: int) -> Any:
    """Kills the worker process running ``rank`` while a ``kill-RANK`` flag file is there;
    ``once`` in it: the file goes first, so the retry succeeds."""
    flag = Path(flag_dir, f"kill-{rank}")
    if flag.exists():
        if flag.read_text() == "once":
            flag.unlink()
        os.kill(os.getpid(), signal.SIGKILL)
    return fn(rank)


class KillingExecutor:
    """The module's Dask cluster, with each rank job wrapped in :func:`_kill`."""

    def __init__(self, inner: DaskExecutor, flag_dir: Path) -> None:
        self.inner, self.flag_dir = inner, str(flag_dir)

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        return self.inner.map(functools.partial(_kill, self.flag_dir, fn), items)

    def close(self) -> None:
        """The module fixture closes the cluster."""


def test_embedded_and_local_cluster_give_the_same_analysis(ranks16: Path,
                                                           cluster: DaskExecutor) -> None:
    local = analyze(ranks16, executor=LocalExecutor(0))
    dask = analyze(ranks16, executor=cluster)
    assert local.ranks == dask.ranks == list(range(16)) and not dask.missing_ranks
    assert [f.to_dict() for f in local.findings] == [f.to_dict() for f in dask.findings]
    assert local.to_json() == dask.to_json()


def test_a_killed_worker_is_retried(ranks16: Path, cluster: DaskExecutor,
                                    tmp_path: Path) -> None:
    (tmp_path / "kill-3").write_text("once")
    res = analyze(ranks16, ranks=[2, 3], executor=KillingExecutor(cluster, tmp_path))
    assert not (tmp_path / "kill-3").exists()  # the first try ran and killed its worker
    assert res.ranks == [2, 3] and res.missing_ranks == []


def test_a_worker_killed_every_time_is_reported_missing(
        ranks16: Path, cluster: DaskExecutor, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kill-5").write_text("always")
    import hermes.analyzers.engine.executor as executor

    monkeypatch.setattr(executor, "make_executor",
                        lambda scheduler, workers: KillingExecutor(cluster, tmp_path))
    # six ranks: a task that shared the dead worker counts its death too (Dask's rule), so a
    # rank beside 5 may be missing as well (with two ranks, both could be, and the command then
    # fails as a whole: exit 2); rank 5 always is, and with six some are analyzed
    ranks = [2, 3, 4, 5, 6, 7]
    args = [a for r in ranks for a in ("--rank", str(r))]
    code, out, err = run_cli("analyze", str(ranks16), *args, "--scheduler", "local",
                             "--format", "json")
    assert code == 1 and "rank(s) not analyzed: " in err and " 5 (" in err
    doc = json.loads(out)
    missing = {m["rank"]: m["error"] for m in doc["missing_ranks"]}
    assert 5 in missing and 5 not in doc["ranks"] and "KilledWorker" in missing[5]
    assert doc["ranks"] and sorted([*doc["ranks"], *missing]) == ranks
    code, _, _ = run_cli("analyze", str(ranks16), *args, "--scheduler", "local",
                         "--allow-missing")
    assert code == 0


def test_an_unreadable_rank_file_on_the_cluster(tmp_path: Path, cluster: DaskExecutor) -> None:
    """A file whose footer is gone: the cluster's workers analyze the other ranks (each reads
    the directory's footers itself and leaves that file out), the driver names it missing."""
    src = emulated_run(tmp_path / "run", "deepfm", 3, 2)
    bad = src / "rank-00001.parquet"
    bad.write_bytes(bad.read_bytes()[:3000])
    local = analyze(src, executor=LocalExecutor(0))
    dask = analyze(src, executor=cluster)
    assert local.ranks == dask.ranks == [0, 2]
    assert [(m["rank"], m["file"]) for m in dask.missing_ranks] == [(None, bad.name)]
    assert local.to_json() == dask.to_json()
