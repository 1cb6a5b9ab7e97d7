from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes.analyzers.common import intervals as iv


def brute(intervals, lo=0, hi=200):
    cover = np.zeros(hi - lo, bool)
    for s, e in intervals:
        cover[max(s, lo) - lo:max(min(e, hi), lo) - lo] = True
    return cover


def as_cover(u, lo=0, hi=200):
    return brute(list(zip(u[0].tolist(), u[1].tolist(), strict=True)), lo, hi)


ivs = st.lists(st.tuples(st.integers(0, 190), st.integers(0, 10))
               .map(lambda t: (t[0], t[0] + t[1])), max_size=30)


def arrays(a):
    return (np.array([x[0] for x in a], dtype=np.int64),
            np.array([x[1] for x in a], dtype=np.int64))


def test_union_by_hand():
    s, e = iv.union(np.array([5, 0, 12, 3]), np.array([9, 4, 15, 6]))
    assert s.tolist() == [0, 12] and e.tolist() == [9, 15]
    assert iv.total((s, e)) == 12


@settings(max_examples=200, deadline=None)
@given(ivs, ivs)
def test_set_operations_match_brute_force(a, b):
    ua = iv.union(*arrays(a))
    ub = iv.union(*arrays(b))
    ca, cb = brute(a), brute(b)
    assert (as_cover(ua) == ca).all()
    assert (as_cover(iv.intersect(ua, ub)) == (ca & cb)).all()
    assert (as_cover(iv.subtract(ua, ub)) == (ca & ~cb)).all()
    assert iv.total(ua) == ca.sum()
    # disjoint, sorted, non-touching
    assert (ua[0][1:] > ua[1][:-1]).all()
    if a:
        s, e = arrays(a)
        got = iv.overlap_per_interval(s, e, ub)
        want = [int((cb[x0:x1]).sum()) for x0, x1 in a]
        assert got.tolist() == want


@settings(max_examples=200, deadline=None)
@given(ivs, ivs)
def test_set_operations_of_raw_intervals_match_brute_force(a, b):
    # pairs of arrays that are not unions (overlapping, unsorted): the boundary sweep
    ra, rb = arrays(a), arrays(b)
    ca, cb = brute(a), brute(b)
    if a and b:
        for got, want in ((iv.intersect(ra, rb), ca & cb), (iv.subtract(ra, rb), ca & ~cb)):
            assert (as_cover(got) == want).all()
            assert (got[0][1:] > got[1][:-1]).all() and (got[1] > got[0]).all()


@settings(max_examples=200, deadline=None)
@given(ivs, ivs)
def test_set_operations_of_unions_are_unions(a, b):
    ua, ub = iv.union(*arrays(a)), iv.union(*arrays(b))
    for got in (iv.intersect(ua, ub), iv.subtract(ua, ub)):
        assert got[0].dtype == np.int64 and got[1].dtype == np.int64
        # sorted, disjoint, non-touching, no empty interval: the one form of a set
        assert (got[0][1:] > got[1][:-1]).all() and (got[1] > got[0]).all()
        assert (iv.union(*got)[0] == got[0]).all() and (iv.union(*got)[1] == got[1]).all()


@pytest.mark.parametrize("seed", range(5))
def test_union_of_unions_is_the_union_of_all(seed):
    # (cpu._claim merges two classes' unions instead of their events): overlapping, touching,
    # nested and zero-length intervals, in no order
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 1000, 300)
    e = s + rng.integers(0, 30, 300)
    a, b = rng.random(300) < 0.5, rng.random(300) < 0.3
    ua, ub = iv.union(s[a], e[a]), iv.union(s[b], e[b])
    got = iv.union(np.concatenate([ua[0], ub[0]]), np.concatenate([ua[1], ub[1]]))
    want = iv.union(s[a | b], e[a | b])
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
