"""The store's interval functions: a median's distribution-free 95 % interval and a rate's
Wilson 95 % interval, for the dashboards, `dnscamp report` and researchers' SQL.

They are the SQL copies of ``vantage_agent.stats.median_ci_rank`` and ``wilson`` (the
definitions; tests/local/test_stats_postgres.py holds the two equal):

- ``dnscamp_median_ci_rank(n)``: the 1-based rank j of the interval's lower bound, whose upper
  bound is rank n + 1 - j (NULL below n = 6);
- ``dnscamp_median_ci_q_lo(n)`` / ``_q_hi(n)``: the same ranks as the fractions that make
  ``percentile_disc(q) WITHIN GROUP (ORDER BY x)`` return exactly those order statistics;
- ``dnscamp_hist_rank(buckets, counts, rank)``: the rank-th smallest value of a rollup's
  histogram (the interval of a median read from rollups);
- ``dnscamp_wilson_lo(k, n)`` / ``_hi(k, n)``.

And ``v_contexts`` (the reader's): per campaign, kind, vantage, provider, region and network
profile, the runs, records, failures and first/last record, from the contexts and the rollup
ingest_daily; the dashboards' variables and time windows read it instead of the records.

Revision ID: 0028_interval_functions
Revises: 0027_run_completeness
"""

from alembic import op

from db.migrations.views import create_view, drop_view

revision = "0028_interval_functions"
down_revision = "0027_run_completeness"
branch_labels = None
depends_on = None

FUNCTIONS_SQL = """
-- Exact (binomial pmf by recurrence from 2^-n) up to n = 1000, the normal approximation with the
-- continuity correction beyond (never narrower than exact, at most one rank wider).
CREATE FUNCTION dnscamp_median_ci_rank(n bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    pmf float8;
    cdf float8 := 0;
    j bigint := 0;
BEGIN
    IF n < 6 THEN
        RETURN NULL;
    END IF;
    IF n > 1000 THEN
        RETURN greatest(1, floor((n + 1 - 1.959963984540054::float8 * sqrt(n::float8)) / 2)::bigint);
    END IF;
    pmf := power(0.5::float8, n::float8);
    FOR k IN 0..n LOOP
        cdf := cdf + pmf;
        EXIT WHEN cdf > 0.025;
        j := k + 1;
        pmf := pmf * (n - k) / (k + 1);
    END LOOP;
    RETURN CASE WHEN j >= 1 THEN j END;
END
$$;
CREATE FUNCTION dnscamp_median_ci_q_lo(n bigint) RETURNS float8 LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT (dnscamp_median_ci_rank(n) - 0.5)::float8 / n
$$;
CREATE FUNCTION dnscamp_median_ci_q_hi(n bigint) RETURNS float8 LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT (n + 1 - dnscamp_median_ci_rank(n) - 0.5)::float8 / n
$$;
CREATE FUNCTION dnscamp_hist_rank(buckets int[], counts numeric[], rank numeric) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT dnscamp_hist_value(b)
    FROM (SELECT b, sum(c) OVER (ORDER BY b) AS cum
          FROM (SELECT b, sum(c) AS c FROM unnest(buckets, counts) AS u(b, c) GROUP BY b) AS g) AS x
    WHERE cum >= rank
    ORDER BY b LIMIT 1
$$;
CREATE FUNCTION dnscamp_wilson_lo(k bigint, n bigint) RETURNS float8 LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN k = 0 AND n > 0 THEN 0::float8 WHEN n > 0 AND k BETWEEN 1 AND n THEN greatest(0::float8,
        (k::float8 / n + z * z / (2 * n) - z * sqrt((k::float8 / n) * (1 - k::float8 / n) / n + z * z / (4 * n::float8 * n)))
        / (1 + z * z / n)) END
    FROM (SELECT 1.959963984540054::float8 AS z) AS c
$$;
CREATE FUNCTION dnscamp_wilson_hi(k bigint, n bigint) RETURNS float8 LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN k = n AND n > 0 THEN 1::float8 WHEN n > 0 AND k BETWEEN 0 AND n - 1 THEN least(1::float8,
        (k::float8 / n + z * z / (2 * n) + z * sqrt((k::float8 / n) * (1 - k::float8 / n) / n + z * z / (4 * n::float8 * n)))
        / (1 + z * z / n)) END
    FROM (SELECT 1.959963984540054::float8 AS z) AS c
$$;
"""


def upgrade() -> None:
    op.execute(FUNCTIONS_SQL)
    create_view(op, revision, "v_contexts")


def downgrade() -> None:
    drop_view(op, "v_contexts")  # a new view: nothing earlier to restore
    op.execute("DROP FUNCTION dnscamp_wilson_hi(bigint, bigint), dnscamp_wilson_lo(bigint, bigint), "
               "dnscamp_hist_rank(int[], numeric[], numeric), dnscamp_median_ci_q_hi(bigint), "
               "dnscamp_median_ci_q_lo(bigint), dnscamp_median_ci_rank(bigint)")
