"""vantage_agent.stats.percentile against PostgreSQL's percentile_cont (the definition of the SQL
views and `dnscamp report`) on random samples in the session's embedded Postgres."""

from __future__ import annotations

import math

import psycopg
import pytest
from hypothesis import given, settings, strategies as st

from vantage_agent.stats import percentile

pytestmark = pytest.mark.local

SQL = "SELECT percentile_cont(%s) WITHIN GROUP (ORDER BY x) FROM unnest(%s::float8[]) x"

# Timings in ms and byte counts as they occur, plus awkward magnitudes, ties and NULLs (failed
# measurements, ignored by both sides); an all-NULL or empty sample is NULL / None.
values = st.lists(
    st.one_of(
        st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False),
        st.integers(min_value=0, max_value=10_000).map(float),
        st.sampled_from([0.0, 10.0, 20.0, 1e-9]),
        st.none(),
    ),
    max_size=60,
)
ranks = st.one_of(st.sampled_from([0, 1, 5, 25, 50, 75, 90, 95, 99, 100]), st.floats(min_value=0, max_value=100))


@pytest.fixture(scope="module")
def conn(db_url):
    with psycopg.connect(db_url, autocommit=True) as c:
        yield c


# derandomized (the same 200 examples on every run), no example database in the work tree, no
# deadline (a round trip to Postgres under a loaded CI machine), as the fuzz suite's profile
@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(xs=values, p=ranks)
def test_same_as_postgres_percentile_cont(conn, xs, p):
    (want,) = conn.execute(SQL, (p / 100, xs)).fetchone()
    got = percentile(xs, p)
    if want is None:
        assert got is None, (xs, p, got)
    else:
        assert got is not None and math.isclose(got, want, rel_tol=1e-9, abs_tol=0), (xs, p, got, want)


def test_pageload_case_10_20(conn):
    """The case `dnscamp pageload` got wrong (it printed 10)."""
    assert conn.execute(SQL, (0.5, [10.0, 20.0])).fetchone()[0] == percentile([10, 20], 50) == 15


# --- the store's interval functions (migration 0028) are vantage_agent.stats' intervals

def test_median_ci_rank_is_the_pythons_on_every_n_to_3000_and_beyond(conn):
    from vantage_agent.stats import median_ci_rank

    got = conn.execute("SELECT n, dnscamp_median_ci_rank(n) FROM generate_series(0, 3000) n ORDER BY n").fetchall()
    assert got == [(n, median_ci_rank(n)) for n in range(3001)]
    big = [10**4, 123_457, 10**6, 10**8 + 1, 2**40]
    got = conn.execute("SELECT dnscamp_median_ci_rank(n) FROM unnest(%s::bigint[]) n", (big,)).fetchall()
    assert [g for (g,) in got] == [median_ci_rank(n) for n in big]


@settings(max_examples=150, derandomize=True, database=None, deadline=None)
@given(xs=st.lists(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False), min_size=0, max_size=80))
def test_percentile_disc_at_the_q_fractions_picks_the_interval(conn, xs):
    """percentile_disc(dnscamp_median_ci_q_lo(n)) / _q_hi(n): exactly X(j) and X(n+1-j)."""
    from vantage_agent.stats import median_interval

    row = conn.execute(
        "WITH s AS (SELECT x FROM unnest(%s::float8[]) x), c AS (SELECT count(*) AS n FROM s) "
        "SELECT percentile_disc(dnscamp_median_ci_q_lo(c.n)) WITHIN GROUP (ORDER BY x), "
        "       percentile_disc(dnscamp_median_ci_q_hi(c.n)) WITHIN GROUP (ORDER BY x) FROM s, c GROUP BY c.n",
        (xs,)).fetchone()
    want = median_interval(xs)
    if want is None:
        assert row is None or row == (None, None), (xs, row)
    else:
        assert row == want, (xs, row, want)


def test_hist_rank_reads_the_order_statistic_of_a_rollup_histogram(conn):
    # buckets 10, 20, 30 with counts 2, 3, 1: ranks 1-2 are bucket 10, 3-5 bucket 20, 6 bucket 30
    got = conn.execute("SELECT r, dnscamp_hist_rank('{30,10,20}', '{1,2,3}', r) = dnscamp_hist_value("
                       "CASE WHEN r <= 2 THEN 10 WHEN r <= 5 THEN 20 ELSE 30 END) FROM generate_series(1, 6) r").fetchall()
    assert all(ok for _, ok in got), got
    assert conn.execute("SELECT dnscamp_hist_rank('{10}', '{2}', 3)").fetchone()[0] is None  # past the end: unknown


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(n=st.integers(0, 10**12), data=st.data())
def test_wilson_is_the_pythons(conn, n, data):
    from vantage_agent.stats import wilson

    k = data.draw(st.integers(0, max(n, 0)))
    lo, hi = conn.execute("SELECT dnscamp_wilson_lo(%s, %s), dnscamp_wilson_hi(%s, %s)", (k, n, k, n)).fetchone()
    want = wilson(k, n)
    if want is None:
        assert (lo, hi) == (None, None)
    else:
        assert math.isclose(lo, want[0], rel_tol=1e-12, abs_tol=1e-15) and math.isclose(hi, want[1], rel_tol=1e-12, abs_tol=1e-15)
