"""Queue-based I/O analyzer: tiny traces, the expected split computed by hand beside each trace."""

from __future__ import annotations

import numpy as np
import pytest

from hermes.analyzers.engine.base import RankContext
from hermes.analyzers.engine.invariants import check_result
from hermes.analyzers.io import classify_by_queues, io
from hermes.analyzers.overlap import analyze as overlap
from hermes.trace.meta import TraceMeta
from tests.tracegen import ev, frame


def run(*rows):
    df = frame(*rows)
    ctx = RankContext(rank=0, events=df, meta=TraceMeta())
    ctx.results["overlap"] = check_result(overlap(ctx))
    return check_result(io(ctx))


def shares(res) -> dict[str, float]:
    return {f.cause: round(f.time_share, 6) for f in res.findings}


# step [0, 1000): the loop waits for data [0, 400) (DataLoader __next__), then launches at 400 and
# the kernel runs [500, 900). Device idle = [0, 500) + [900, 1000); E = idle ∩ wait = [0, 400).
SINGLE_PROCESS = (
    ev("step", "ProfilerStep#1", 0, 1000),
    ev("python", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 400),
    ev("host_op", "aten::stack", 100, 50),          # collate inside the wait: processing
    ev("launch", "cudaLaunchKernel", 400, 20, corr_id=1),
    ev("kernel", "gemm", 500, 400, corr_id=1, stream=7),
)


def test_single_process_loader_wait_is_processing():
    res = run(*SINGLE_PROCESS)
    # nothing but the wait (and collate ops) recorded: all 400 ns of E are processing
    assert shares(res) == {"slow_data_processing": 0.4}
    f = res.findings[0]
    assert f.evidence["data_wait_ms"] == pytest.approx(400 / 1e6)
    assert f.evidence["top_ops"][0]["name"].endswith("__next__")
    assert res.metrics["method"] == "events"
    assert res.tables["per_step"]["processing_ns"].tolist() == [400]
    # the iterator's class says the training process loads: num_workers=0
    assert (f.evidence["loader"], f.evidence["num_workers"]) == ("single-process", 0)


def test_loader_workers_from_the_waits_args():
    # `hermes profile` records the DataLoader's configuration on its waits
    res = run(ev("step", "ProfilerStep#1", 0, 1000),
              ev("data_wait", "DataLoader.__next__", 0, 400,
                 args='{"num_workers": 4, "pin_memory": true}'),
              ev("kernel", "gemm", 500, 400, stream=7))
    f = res.findings[0]
    assert (f.evidence["loader"], f.evidence["num_workers"]) == ("multi-process", 4)


def test_wait_covered_by_device_work_explains_nothing():
    # the kernel runs during the whole wait: the device is not starved
    res = run(ev("step", "ProfilerStep#1", 0, 1000), ev("data_wait", "next", 0, 400),
              ev("kernel", "gemm", 0, 1000, stream=7))
    assert res.findings == [] and res.metrics["explained_ns"] == 0


def test_loader_lanes_split_reading_and_processing():
    # E = [0, 600). Loader 0 reads [0, 300), loader 1 processes [200, 600):
    # overlaps 300 (read) and 400 (process) -> 600 split 3:4 -> read 257.14, process 342.86
    res = run(ev("step", "s#1", 0, 1000), ev("data_wait", "next", 0, 600),
              ev("data_read", "read", 0, 300, lane="loader 0", lane_kind="loader"),
              ev("data_process", "decode", 200, 400, lane="loader 1", lane_kind="loader"),
              ev("kernel", "k", 600, 400, stream=7))
    assert shares(res) == pytest.approx({"slow_data_reading": 600 * 3 / 7 / 1000,
                                         "slow_data_processing": 600 * 4 / 7 / 1000})
    assert res.findings[0].cause == "slow_data_processing"


def test_exposed_pageable_h2d_copy_is_fetching():
    # pageable H2D copy [100, 300) not overlapped by the kernel [300, 1000): 200 ns of fetching
    res = run(ev("step", "s#1", 0, 1000),
              ev("memcpy_h2d", "Memcpy HtoD (Pageable -> Device)", 100, 200, lane="stream 7"),
              ev("kernel", "k", 300, 700, stream=7))
    assert shares(res) == {"slow_data_fetching": 0.2}
    assert res.findings[0].evidence["h2d_pageable"] == 1
    # the same copy from pinned memory is not a fetching problem
    res = run(ev("step", "s#1", 0, 1000),
              ev("memcpy_h2d", "Memcpy HtoD (Pinned -> Device)", 100, 200, lane="stream 7"),
              ev("kernel", "k", 300, 700, stream=7))
    assert res.findings == []


def counter(name: str, ts: int, value: float):
    return ev("counter", name, ts, 0, lane=name, lane_kind="counter", value=value)


def test_queue_rule_four_branches():
    # wait [0, 800) with device idle all along; queue states change every 200 ns:
    # [0,200) device 1 -> none; [200,400) host 2 -> fetching; [400,600) data 3 -> processing;
    # [600,800) all empty -> reading
    res = run(ev("step", "s#1", 0, 1000), ev("data_wait", "next", 0, 800),
              ev("kernel", "k", 800, 200, stream=7),
              counter("device_queue", 0, 1), counter("device_queue", 200, 0),
              counter("host_queue", 0, 0), counter("host_queue", 200, 2),
              counter("host_queue", 400, 0),
              counter("data_queue", 0, 0), counter("data_queue", 400, 3),
              counter("data_queue", 600, 0))
    assert res.metrics["method"] == "queues"
    assert shares(res) == {"slow_data_fetching": 0.2, "slow_data_processing": 0.2,
                           "slow_data_reading": 0.2}
    assert res.metrics["no_bottleneck_ns"] == 200


def test_device_queue_empty_periods_stand_in_for_waits():
    # no data-wait events: the device queue is empty [300, 1000); the device idles [0, 500);
    # E = [300, 500), data queue empty -> reading 200 ns
    res = run(ev("step", "s#1", 0, 1000), ev("kernel", "k", 500, 500, stream=7),
              counter("device_queue", 0, 2), counter("device_queue", 300, 0))
    assert shares(res) == {"slow_data_reading": 0.2}


def test_classify_by_queues_splits_inside_one_interval():
    e = (np.array([0]), np.array([100]))
    q = {"device_queue": (np.array([0, 50]), np.array([1.0, 0.0]))}
    out = classify_by_queues(e, q)
    assert (out["none"][0].tolist(), out["none"][1].tolist()) == ([0], [50])
    assert (out["reading"][0].tolist(), out["reading"][1].tolist()) == ([50], [100])


@pytest.mark.parametrize("rows", [(), (ev("kernel", "k", 0, 10, stream=7),)])
def test_empty_and_one_event(rows):
    res = run(*rows)
    assert res.findings == []


def test_one_wait_event_is_the_whole_trace():
    # no step markers: the window is the wait itself, the device idles all of it
    res = run(ev("data_wait", "next", 0, 10))
    assert shares(res) == {"slow_data_processing": 1.0}


def test_top_names_sums_per_name_by_hand():
    import pandas as pd

    from hermes.analyzers.common.spans import top_names

    names = pd.Categorical(["read", "open", "read", "x", None, "open"])
    ev_ = pd.DataFrame({"name": names, "dur_ns": np.array([5, 7, 4, 100, 3, 2], np.int64)})
    mask = np.array([True, True, True, False, True, True])
    # read 5+4=9 (2), open 7+2=9 (2): a tie kept in name order; a missing name is left out
    want = [{"name": "open", "time_ns": 9, "count": 2}, {"name": "read", "time_ns": 9, "count": 2}]
    assert top_names(ev_, mask) == want
    assert top_names(ev_.assign(name=ev_["name"].astype(str)), mask) == want
    w = np.array([1, 1, 6, 50, 10, 1], np.int64)  # weights (self time) instead of durations
    assert top_names(ev_, mask, weights=w) == [{"name": "read", "time_ns": 7, "count": 2},
                                               {"name": "open", "time_ns": 2, "count": 2}]
    assert top_names(ev_, np.array([False, False, False, False, True, False])) == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_top_names_of_categories_as_of_the_strings(seed):
    # 40 names (the sort past numpy's small-array insertion sort), sums with many ties (few
    # distinct durations), unused categories: the categorical path (per code, no frame) gives
    # the string path's groupby and descending sort, ties included
    import pandas as pd

    from hermes.analyzers.common.spans import top_names

    rng = np.random.default_rng(seed)
    cats = [f"op{i:02d}" for i in range(50)]
    names = pd.Categorical(rng.choice(cats[:40], 400), categories=cats[::-1])
    ev_ = pd.DataFrame({"name": names, "dur_ns": rng.choice([1, 2, 3], 400).astype(np.int64)})
    mask = rng.random(400) < 0.7
    want = top_names(ev_.assign(name=ev_["name"].astype(object)), mask, n=25)
    assert len(want) == 25
    assert top_names(ev_, mask, n=25) == want


def test_warm_up_step_split_as_the_steady_steps_and_kept_in_the_denominator():
    # 4 steps of 1000 ns. Steps 2-4 (s = 1000, 2000, 3000): wait [s, s + 300), the loader
    # processes [s, s + 200) and reads [s + 200, s + 300), the kernel runs [s + 300, s + 1000):
    # E = 300 a step, 900 in all, split 2:1 -> processing 600, reading 300. Step 1 (warm-up,
    # queues start empty): wait [0, 100), a read [0, 100), kernel [100, 1000): its E of 100 ns is
    # split as the steady steps' (2:1), not as its own read. Device idle over the 4 steps:
    # 100 + 3 x 300 = 1000 of 4000 ns = 0.25 -- the shares sum to it, never above (with the
    # warm-up step left out of the denominator they were 0.2 + 0.1 = 0.3 > 0.25).
    rows = [ev("step", "s#1", 0, 1000), ev("data_wait", "next", 0, 100),
            ev("data_read", "read", 0, 100, lane="loader 0", lane_kind="loader"),
            ev("kernel", "k", 100, 900, stream=7)]
    for i, s in enumerate((1000, 2000, 3000), start=2):
        rows += [ev("step", f"s#{i}", s, 1000), ev("data_wait", "next", s, 300),
                 ev("data_process", "decode", s, 200, lane="loader 0", lane_kind="loader"),
                 ev("data_read", "read", s + 200, 100, lane="loader 0", lane_kind="loader"),
                 ev("kernel", "k", s + 300, 700, stream=7)]
    res = run(*rows)
    assert shares(res) == {"slow_data_processing": round((600 + 200 / 3) / 4000, 6),
                           "slow_data_reading": round((300 + 100 / 3) / 4000, 6)}
    assert sum(f.time_share for f in res.findings) == pytest.approx(0.25)
    assert (res.metrics["step_total_ns"], res.metrics["explained_ns"],
            res.metrics["warmup_explained_ns"], res.metrics["data_wait_ns"]) == \
        (4000, 1000, 100, 1000)
    t = res.tables["per_step"]
    assert t["step"].tolist() == [1, 2, 3, 4]
    assert t["explained_ns"].tolist() == [100, 300, 300, 300]
    assert t["processing_ns"].tolist() == [67, 200, 200, 200]
    assert t["reading_ns"].tolist() == [33, 100, 100, 100]


def test_rows_matching_is_pythons_search_row_by_row() -> None:
    # the vectorized row test (ASCII rows by pyarrow's regex, the rest by Python's re) reads
    # every row as re.search does, for the pageable H2D and D2H patterns: case, \s incl. \v and
    # \x1c-\x1f, '.' not crossing a newline, missing rows, non-ASCII text (long s, dotless i)
    import random
    import re

    import pandas as pd

    from hermes.analyzers.common import hostcalls
    from hermes.analyzers.common.names import WS_ASCII, rows_matching
    from hermes.analyzers.io import PAGEABLE, PAGEABLE_ASCII

    d2h = (hostcalls.PAGEABLE_D2H + r'|"pinned"\s*:\s*false',
           hostcalls.PAGEABLE_D2H + r'|"pinned"' + WS_ASCII + r'*:' + WS_ASCII + r'*false')
    fixed = ["Memcpy HtoD (Pageable -> Device)", 'x {"pinned": false}', '{"PINNED"\v:\x1cFALSE}',
             '{"pinned":true}', '{"pınned": false}', '{"pinned": falſe}', None, "",
             '"pinned"', ": false", "Memcpy DtoH (Device -> Pageable)", "DtoH\nPageable"]
    atoms = ["pageable", "PAGE", "able", '"pinned"', '"Pinned"', ":", " ", "\t", "\v", "\x1d",
             "\n", "false", "FaLsE", "ſ", "ı", "é", "{", "}", "x", "DtoH", "d2h",
             "Pageable"]
    rng = random.Random(7)
    rows = fixed + ["".join(rng.choice(atoms) for _ in range(rng.randint(0, 7)))
                    for _ in range(3000)]
    for pattern, ascii_pattern in ((PAGEABLE, PAGEABLE_ASCII), d2h):
        rx = re.compile(pattern)
        got = rows_matching(pd.Series(rows, dtype="str"), pattern, ascii_pattern)
        assert got.tolist() == [v is not None and rx.search(v) is not None for v in rows]
    got = rows_matching(pd.Series(fixed, dtype="str"), PAGEABLE, PAGEABLE_ASCII)
    # (Python folds the dotless i and the long s to i and s: the non-ASCII rows decide so too)
    assert got[:6].tolist() == [True, True, True, False, True, True]
    assert not got[6:10].any()
    got = rows_matching(pd.Series(fixed, dtype="str"), *d2h)
    assert got[10] and not got[11]
