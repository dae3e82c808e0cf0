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
