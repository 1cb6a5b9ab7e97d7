"""names.search_each: the same answers as Python's re.search, however it gets them (pyarrow's
RE2 for plain ASCII texts, Python's re for the rest and for patterns RE2 reads otherwise)."""

from __future__ import annotations

import random
import re
import zlib

import numpy as np
import pandas as pd
import pytest

from hermes.analyzers import cpu, fluctuation, io
from hermes.analyzers.common import cpuwork, hostcalls, names, pytime, runkind

PROJECT = [cpu.BLOCKING_NAME, cpu.OTHER_CPU_NAME, hostcalls.GC_NAME, hostcalls.COMPILE_NAME,
           hostcalls.SYNC_NAME, hostcalls.LOG_NAME, hostcalls.ALLOC_NAME, hostcalls.INIT_NAME,
           cpuwork.COMPILED_NAME, cpuwork.ONEDNN_NAME, runkind.DEVICE_API, pytime.OWN_NAME,
           fluctuation.CHECKPOINT_NAME, io.READ_NAME, io.FETCH_NAME,
           r"DataLoader.*__next__|_next_data\b", r"(?i)mindspore|^Default/"]
# spellings whose meaning differs between the two engines, or that RE2 rejects
HOSTILE = [r"a\sb", r"\S+x", r"(?i)log$", r"(a)\1", r"x{,2}y", r"[[:alpha:]]+", r"end\Z",
           r"(?<=a)b", r"(?i)k", r"(?i)s", r"[\b]", r"a{1, 2}", r"(?P<n>ab)(?P=n)", r"^$",
           r"(?i)I", r"(?i)ab(?!x)|k", r"(?<!a)b|y(?=z)", r"ab(?=c){2}", r"a(?!(b))", r"x(?!\))"]
WORDS = ["aten::item", "cudaStreamSynchronize", "gc", "log", "Kernel", "DataLoader.__next__",
         "aten::mm", "read", "ab", "x", "y", "end", "Default/", "[hermes] f", "cpu other"]
CHARS = "abkKsSiIxyz:_./#[] ()\n\v\x1c\t" + "\u017f\u212a\u0131\u00e9\u0130"


def _texts(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        parts = [rng.choice(WORDS) if rng.random() < 0.5 else
                 "".join(rng.choice(CHARS) for _ in range(rng.randint(0, 6)))
                 for _ in range(rng.randint(1, 3))]
        out.append(rng.choice(["", " ", "\n", "_"]).join(parts))
    # the cases each engine would answer differently, by hand
    return out + ["aten::item\n", "\u017fynchronize", "gc\n", "log\n", "a\vb", "a\x1cb",
                  "\u212a", "\u0130", "x\n", ""]


@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")
@pytest.mark.parametrize("pattern", PROJECT + HOSTILE)
def test_search_each_answers_as_python_re(pattern: str) -> None:
    rng = random.Random(zlib.crc32(pattern.encode()))
    texts = _texts(rng, 3000)
    rx = re.compile(pattern)
    want = np.array([rx.search(t) is not None for t in texts])
    got = names.search_each(texts, pattern)
    assert got.dtype == bool and got.shape == want.shape
    bad = [texts[i] for i in np.flatnonzero(got != want)[:5]]
    assert not bad, bad
    # and name_matches over a categorical column of them (missing rows never match)
    col = pd.Series(pd.Categorical(texts + [None]))
    assert (names.name_matches(col, pattern) == np.append(want, False)).all()


def _spy_searches(monkeypatch) -> list[str]:
    """The texts Python's ``re`` is asked to search from now on (names' compiled patterns)."""
    seen: list[str] = []
    real = re.compile

    class Spy:
        def __init__(self, rx: re.Pattern) -> None:
            self.rx = rx

        def search(self, t: str) -> re.Match | None:
            seen.append(t)
            return self.rx.search(t)

    monkeypatch.setattr(names.re, "compile", lambda p, *a: Spy(real(p, *a)))
    return seen


def test_plain_ascii_texts_take_the_re2_path(monkeypatch) -> None:
    # the answer for plain ASCII texts comes from pyarrow (a pattern Python's re never sees
    # for them): only the non-plain texts are searched one by one
    texts = ["cudaStreamSynchronize"] * 100 + ["aten::item\n", "\u017fynchronize"]
    seen = _spy_searches(monkeypatch)
    got = names.search_each(texts, hostcalls.SYNC_NAME)
    assert got.tolist() == [True] * 100 + [True, True]
    assert seen == ["aten::item\n", "\u017fynchronize"]


def test_a_lookaround_pattern_is_decided_by_python_only_where_its_superset_matches(
        monkeypatch) -> None:
    # RE2 has no lookarounds: it searches the pattern less them (a superset) and Python's re
    # decides on those hits alone
    texts = ["kernel"] * 100 + ["convert_x", "conv2d", "gemm"]
    seen = _spy_searches(monkeypatch)
    got = names.search_each(texts, r"conv(?!ert)")
    assert got.tolist() == [False] * 100 + [False, True, False]
    assert seen == ["convert_x", "conv2d"]
