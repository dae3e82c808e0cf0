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
