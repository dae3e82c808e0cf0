"""The one percentile definition of the platform (stdlib only, imported by the agent, the CLI,
testbed, atlas and the benchmarks).

It is PostgreSQL's ``percentile_cont`` -- the definition of every ``p50``/``p90`` in the SQL views
and `dnscamp report` -- so a figure printed by a command and the same figure read from the store
agree: linear interpolation between the closest ranks, i.e. numpy's default ``'linear'`` method and
``statistics.quantiles(method='inclusive')``. The median of [10, 20] is 15, not 10 or 20.
tests/local/test_stats_postgres.py compares it with Postgres on random samples.
"""

from __future__ import annotations

import math
from typing import Iterable


def percentile(values: Iterable[float | None], p: float) -> float | None:
    """The ``p``-th percentile of ``values``, ``p`` in percent (0..100, e.g. 50 for the median;
    ``percentile_cont(p / 100)`` in SQL). ``None`` values are ignored, as SQL ignores NULLs (a
    failed measurement has no time); no value left gives ``None``. The input need not be sorted.

    Raises ValueError for ``p`` outside 0..100 (a fraction such as 0.5 is a valid ``p`` and means
    the 0.5th percentile, so the range cannot catch that mistake: callers pass percents) and for
    a NaN value (Postgres would sort it above every number and return a figure that hides it).
    """
    if not 0 <= p <= 100 or math.isnan(p):
        raise ValueError(f"percentile: p must be in 0..100 (percent), not {p!r}")
    v = sorted(x for x in values if x is not None)
    if any(math.isnan(x) for x in v):
        raise ValueError("percentile: NaN among the values")
    if not v:
        return None
    # the same arithmetic as PostgreSQL's percentile_cont_final_common/float8_lerp, so that the
    # results agree to the last bits, not only to a tolerance
    pos = (p / 100) * (len(v) - 1)
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return float(v[lo]) + (float(v[hi]) - float(v[lo])) * (pos - lo)


def median(values: Iterable[float | None]) -> float | None:
    """``percentile(values, 50)``."""
    return percentile(values, 50)


def binomial_interval(n: int, p: float, level: float = 0.99) -> tuple[int, int]:
    """Central acceptance interval [lo, hi] of the lost count under Binomial(n, p):
    P(X < lo) <= (1-level)/2 and P(X > hi) <= (1-level)/2. Exact (summed pmf), so it holds for
    small n and p where the normal approximation does not; the testbed's conformance check and
    linkem's selftest judge a configured loss rate by it."""
    if n <= 0:
        return 0, 0
    if p <= 0:
        return 0, 0
    if p >= 1:
        return n, n
    alpha = (1 - level) / 2
    logp, log1p = math.log(p), math.log1p(-p)
    lg_n = math.lgamma(n + 1)
    cdf = 0.0
    lo = hi = None
    for k in range(n + 1):
        pmf = math.exp(lg_n - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * logp + (n - k) * log1p)
        prev = cdf
        cdf += pmf
        if lo is None and cdf > alpha:
            lo = k
        if hi is None and cdf >= 1 - alpha:
            hi = k
            break
        if prev > 1:  # numerical guard
            break
    return lo if lo is not None else 0, hi if hi is not None else n


# --- Intervals: a median's distribution-free 95 % interval and a rate's Wilson interval. These
# are the platform's only definitions: dashboards and `dnscamp report` read the store's copies
# (SQL functions of migration 0028, ``dnscamp_median_ci_rank`` and ``dnscamp_wilson``), which
# tests/local/test_stats_postgres.py holds equal to these on every n up to a few thousand and on
# random (k, n) beyond; tests/unit/test_stats.py checks them against scipy and their coverage.

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile: two-sided 95 %
EXACT_RANKS_UP_TO = 1000  # beyond this n the binomial's normal approximation is exact to a rank


def median_ci_rank(n: int) -> int | None:
    """The 1-based rank j of the lower bound of the median's 95 % interval [X(j), X(n+1-j)] over a
    sample of n: the largest j with P(Binomial(n, 1/2) <= j-1) <= 2.5 %, so the interval covers
    the population median with probability >= 95 % whatever the distribution (order statistics;
    Conover, Practical Nonparametric Statistics, 3.2). None when n < 6: no pair of order
    statistics reaches 95 % (X(1)..X(n) covers with 1 - 2^(1-n)).

    Exact (summed pmf, by the recurrence pmf(k+1) = pmf(k) (n-k)/(k+1) from 2^-n) for n up to
    EXACT_RANKS_UP_TO; beyond, floor(n/2 - Z95 sqrt(n)/2) with the continuity correction, which
    the tests check against the exact rank at the boundary and against scipy's binomial."""
    if n < 6:
        return None
    if n > EXACT_RANKS_UP_TO:
        return max(1, math.floor((n + 1 - Z95 * math.sqrt(n)) / 2))
    alpha = 0.025
    pmf = 0.5**n
    cdf = 0.0
    j = 0
    for k in range(n + 1):  # cdf = P(B <= k); j-1 = k is allowed while cdf stays <= alpha
        cdf += pmf
        if cdf > alpha:
            break
        j = k + 1
        pmf = pmf * (n - k) / (k + 1)
    return j if j >= 1 else None


def median_interval(values: Iterable[float | None]) -> tuple[float, float] | None:
    """The median's distribution-free 95 % interval (X(j), X(n+1-j)) of ``values`` (None ignored,
    as SQL ignores NULLs); None when fewer than 6 values leave no such interval."""
    v = sorted(x for x in values if x is not None)
    j = median_ci_rank(len(v))
    if j is None:
        return None
    return float(v[j - 1]), float(v[len(v) - j])


def wilson(k: int, n: int) -> tuple[float, float] | None:
    """The Wilson score 95 % interval of a rate: k successes (failures, losses, ...) in n trials.
    None when n is 0 (no rate). Unlike the Wald interval it stays within [0, 1] and does not
    collapse to a point at k = 0 or k = n."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"wilson: k must be in 0..n, not k={k} n={n}")
    z2 = Z95 * Z95
    p = k / n
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # at k = 0 (k = n) the bound is 0 (1) exactly; rounding would leave it a few ulps off
    return (0.0 if k == 0 else max(0.0, centre - half)), (1.0 if k == n else min(1.0, centre + half))
