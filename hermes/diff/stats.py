"""The statistics of comparing two runs: bootstrap interval of a median ratio, Mann-Whitney U.

Step times are not normal (a GC pause or a data-loader stall makes a long right tail) and runs
are short, so everything here is rank-based or resampling-based: the Mann-Whitney U test makes no
assumption on the distribution, and a percentile bootstrap gives the interval of the median ratio
without one. Both are vectorized (one call for every operator of a diff; one resampling matrix).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

#: Bootstrap resamples. 2000 puts the Monte-Carlo error of a 95 % percentile bound well under
#: the width of the interval itself.
N_BOOT = 2000
#: The seed of every bootstrap: the same two runs always give the same interval (a CI gate
#: must not flip on a re-run of the check itself).
SEED = 20240613


@dataclass(frozen=True)
class RatioCI:
    """Median of ``new`` over median of ``base`` and its bootstrap interval (``level``)."""

    ratio: float
    lo: float
    hi: float
    level: float

    def to_dict(self) -> dict[str, float]:
        return {"ratio": self.ratio, "lo": self.lo, "hi": self.hi, "level": self.level}


def median_ratio_ci(base: np.ndarray, new: np.ndarray, level: float = 0.95,
                    n_boot: int = N_BOOT, seed: int = SEED) -> RatioCI:
    """Percentile bootstrap of median(new) / median(base), each run resampled on its own."""
    b = np.asarray(base, dtype=np.float64)
    n = np.asarray(new, dtype=np.float64)
    if b.size == 0 or n.size == 0 or np.median(b) <= 0:
        return RatioCI(math.nan, math.nan, math.nan, level)
    ratio = float(np.median(n) / np.median(b))
    rng = np.random.default_rng(seed)
    mb = np.median(b[rng.integers(0, b.size, (n_boot, b.size))], axis=1)
    mn = np.median(n[rng.integers(0, n.size, (n_boot, n.size))], axis=1)
    ratios = mn / np.where(mb > 0, mb, np.nan)
    tail = 100 * (1 - level) / 2
    lo, hi = np.nanpercentile(ratios, [tail, 100 - tail])
    return RatioCI(ratio, float(lo), float(hi), level)


def min_p(n1: int, n2: int, alternative: str = "two-sided") -> float:
    """The smallest p-value an exact Mann-Whitney U test can give with ``n1`` and ``n2``
    samples (all of one sample above all of the other): ``1 / C(n1 + n2, n1)``, doubled when
    two-sided. When it is above alpha the test cannot reject whatever the data (asv's guard)."""
    if n1 < 1 or n2 < 1:
        return 1.0
    p = 1.0 / math.comb(n1 + n2, n1)
    return min(1.0, 2 * p if alternative == "two-sided" else p)


def mann_whitney(base: np.ndarray, new: np.ndarray, alternative: str = "two-sided"
                 ) -> np.ndarray:
    """p-values of Mann-Whitney U, row by row (``base``/``new``: 2-D, one row per quantity,
    one column per sample; 1-D for one quantity). ``alternative="less"`` tests new > base
    (base stochastically less). Rows whose samples are all equal get p = 1."""
    from scipy.stats import mannwhitneyu

    b = np.atleast_2d(np.asarray(base, dtype=np.float64))
    n = np.atleast_2d(np.asarray(new, dtype=np.float64))
    if b.shape[1] == 0 or n.shape[1] == 0:
        return np.ones(b.shape[0])
    with warnings.catch_warnings():  # constant rows: scipy warns and returns nan, we say p = 1
        warnings.simplefilter("ignore", RuntimeWarning)
        p = mannwhitneyu(b, n, alternative=alternative, axis=1).pvalue
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    return np.where(np.isnan(p), 1.0, p)
