"""vantage_agent.stats' intervals against scipy: the median's order-statistic ranks equal the
exact binomial ranks (scipy.stats.binom) where they are exact and are never narrower beyond;
their coverage on simulated samples from skewed, heavy-tailed and symmetric distributions is at
least 95 %; the Wilson interval equals scipy's (binomtest(...).proportion_ci(method="wilson"))."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from vantage_agent.stats import EXACT_RANKS_UP_TO, median_ci_rank, median_interval, wilson

pytestmark = pytest.mark.unit


def exact_rank(n: np.ndarray) -> np.ndarray:
    """The largest j with P(Binomial(n, 1/2) <= j - 1) <= 2.5 %, by scipy."""
    k = sps.binom.ppf(0.025, n, 0.5).astype(np.int64)  # the smallest k with cdf(k) >= 2.5 %
    k = np.where(sps.binom.cdf(k, n, 0.5) <= 0.025, k, k - 1)
    return k + 1


def test_no_interval_below_six():
    assert [median_ci_rank(n) for n in range(7)] == [None] * 6 + [1]
    assert median_interval([3.0, None, 1.0, 2.0, 5.0, 4.0]) is None  # five values: None is ignored
    assert median_interval([6, 1, 5, 2, 4, 3]) == (1.0, 6.0)


def test_exact_ranks_are_scipys():
    n = np.arange(6, EXACT_RANKS_UP_TO + 1)
    assert [median_ci_rank(int(x)) for x in n] == exact_rank(n).tolist()


def test_approximate_ranks_never_narrower_and_at_most_one_wider():
    n = np.arange(EXACT_RANKS_UP_TO + 1, 60_001)
    got = np.array([median_ci_rank(int(x)) for x in n])
    d = exact_rank(n) - got
    assert d.min() == 0 and d.max() <= 1 and (d == 0).mean() > 0.99


@pytest.mark.parametrize("n", [6, 7, 10, 31, 100, 1500])
@pytest.mark.parametrize("draw,true_median", [
    (lambda g, n, k: g.lognormal(0.0, 1.5, (k, n)), 1.0),  # page-load-like: skewed
    (lambda g, n, k: g.standard_cauchy((k, n)), 0.0),  # heavy tails: no mean at all
    (lambda g, n, k: g.exponential(20.0, (k, n)), 20.0 * np.log(2)),
    (lambda g, n, k: g.uniform(-1, 1, (k, n)), 0.0),
], ids=["lognormal", "cauchy", "exponential", "uniform"])
def test_median_interval_covers_at_least_95_percent(n, draw, true_median):
    g = np.random.default_rng(20261127 + n)
    trials = 4000
    x = np.sort(draw(g, n, trials), axis=1)
    j = median_ci_rank(n)
    covered = (x[:, j - 1] <= true_median) & (true_median <= x[:, n - j])
    # the nominal coverage is >= 95 % by construction; 4,000 trials leave a standard error of 0.35 %
    assert covered.mean() >= 0.94, covered.mean()
    # and it is not a trivially wide interval: at most 99.5 % for n >= 31 (where ranks are fine)
    if n >= 31:
        assert covered.mean() <= 0.995


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(n=st.integers(1, 10**9), data=st.data())
def test_wilson_is_scipys(n, data):
    k = data.draw(st.integers(0, n))
    lo, hi = wilson(k, n)
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert lo == pytest.approx(ci.low, abs=1e-12) and hi == pytest.approx(ci.high, abs=1e-12)
    assert 0 <= lo <= k / n <= hi <= 1


def test_wilson_edges():
    assert wilson(0, 0) is None
    lo, hi = wilson(0, 20)
    assert lo == 0 and 0.1 < hi < 0.2  # not collapsed to a point, as Wald's would be
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_duckdbs_macro_is_the_definition():
    """An archive's DuckDB (dnscamp.opendata.duck) has dnscamp_median_ci_rank too: the same ranks."""
    import duckdb

    from dnscamp.opendata.duck import MACROS

    con = duckdb.connect()
    for m in MACROS:
        con.execute(m)
    ns = list(range(3001)) + [10**4, 123_457, 10**6, 10**8 + 1, 2**40]
    got = [r for (r,) in con.execute("SELECT dnscamp_median_ci_rank(n) FROM unnest(?::BIGINT[]) t(n) ORDER BY n", [ns]).fetchall()]
    assert got == [median_ci_rank(n) for n in ns]
