"""Rollups (migration 0013): dns_hourly and result_counts as ingest maintains them
equal what the base views give for the same records (also after re-ingest, and after rows
inserted into / deleted from the ``results`` view); the histogram's percentile is within 1 %
of the exact one (hypothesis); Python's bucket (ingest) is SQL's (backfill, triggers)."""

from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.ingest import ingest
from db.writer.encode import HIST_GAMMA, HIST_MIN_MS, hist_bucket

pytestmark = pytest.mark.local
ROOT = Path(__file__).resolve().parents[2]
V1 = ROOT / "tests" / "fixtures" / "results" / "v1"

# dns_hourly as the base view gives it: per key, n, failures and the buckets of ok total_ms
FROM_BASE = """
WITH r AS (
    SELECT date_trunc('hour', started_at, 'UTC') AS hour, campaign, vantage_id, network_profile, resolver, transport,
           status, CASE WHEN status = 'ok' AND t_start IS NOT NULL AND t_response IS NOT NULL
                        THEN dnscamp_hist_bucket(total_ms) END AS b
    FROM v_dns_query
), k AS (
    SELECT hour, campaign, vantage_id, network_profile, resolver, transport, b, count(*) AS n,
           count(*) FILTER (WHERE status <> 'ok') AS f FROM r GROUP BY 1, 2, 3, 4, 5, 6, 7
)
SELECT hour, campaign, vantage_id, network_profile, resolver, transport, sum(n)::bigint, sum(f)::bigint,
       COALESCE(array_agg(b ORDER BY b) FILTER (WHERE b IS NOT NULL), '{}'),
       COALESCE(array_agg(n::int ORDER BY b) FILTER (WHERE b IS NOT NULL), '{}')
FROM k GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
"""
ROLLUP = """
SELECT hour, campaign, vantage_id, network_profile, resolver, transport, n, failures, buckets::int[], counts
FROM dns_hourly h JOIN dns_hourly_keys k ON k.id = h.key_id ORDER BY 1, 2, 3, 4, 5, 6
"""
COUNTS_FROM_BASE = "SELECT campaign, kind, vantage_id, network_profile, status, count(*) FROM v_results GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5"
COUNTS = "SELECT campaign, kind, vantage_id, network_profile, status, n FROM v_failures ORDER BY 1, 2, 3, 4, 5"


def _check(url: str) -> int:
    with psycopg.connect(url) as c:
        base, rollup = c.execute(FROM_BASE).fetchall(), c.execute(ROLLUP).fetchall()
        assert rollup == base
        assert c.execute(COUNTS).fetchall() == c.execute(COUNTS_FROM_BASE).fetchall()
        return sum(r[6] for r in rollup)


def test_rollups_equal_the_base_views(empty_db, tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    from ingest_bench import generate_dns

    generate_dns(tmp_path / "dns.jsonl", 3000, days=1, vantages=2, resolvers=1, seed=5)
    shutil.copytree(V1, tmp_path / "v1", ignore=shutil.ignore_patterns("invalid"))
    first = ingest([tmp_path], empty_db)
    n = _check(empty_db)
    assert n == 3000 + 13 and first.ingested > n
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT sum(failures) FROM dns_hourly").fetchone()[0] > 30
        assert c.execute("SELECT count(*) FROM dns_hourly WHERE cardinality(buckets) > 3").fetchone()[0] > 10
    # the documented percentile query (docs/store.md "Rollups") against the exact one
    with psycopg.connect(empty_db) as c:
        approx = dict(c.execute(
            "SELECT transport, dnscamp_hist_quantile(array_agg(bucket ORDER BY bucket), array_agg(n ORDER BY bucket), 0.5) "
            "FROM (SELECT transport, bucket, sum(n) AS n FROM v_dns_hourly_hist GROUP BY 1, 2) h GROUP BY transport"))
        exact = dict(c.execute("SELECT transport, percentile_disc(0.5) WITHIN GROUP (ORDER BY total_ms) FROM v_dns_query "
                               "WHERE status = 'ok' AND total_ms IS NOT NULL GROUP BY 1"))
    assert set(approx) == set(exact) and len(exact) == 6
    assert all(abs(approx[t] - exact[t]) <= 0.01 * exact[t] for t in exact), (approx, exact)
    # duplicates add nothing
    assert ingest([tmp_path], empty_db).duplicates == first.ingested
    assert _check(empty_db) == n
    # rows written through the results view (its triggers) are counted, deleted ones uncounted
    with psycopg.connect(empty_db) as c:
        ids = [r[0] for r in c.execute("SELECT id FROM v_dns_query ORDER BY id LIMIT 500")]
        c.execute("INSERT INTO results (id, schema, kind, campaign, run, unit, vantage_id, provider, region, "
                  "network_profile, started_at, status, error, env, body) SELECT gen_random_uuid(), schema, kind, "
                  "'copied', run, unit, vantage_id, provider, region, network_profile, started_at, status, error, env, "
                  "body FROM results WHERE id = ANY(%s)", (ids[:200],))  # fmt: skip
        c.execute("DELETE FROM results WHERE id = ANY(%s)", (ids[200:],))
    assert _check(empty_db) == n + 200 - 300


def test_hist_bucket_python_equals_sql(db_url):
    """Ingest buckets in Python, the backfill and the triggers in SQL: the same for any value."""
    values = [0.0, 5e-324, 0.0009999999, HIST_MIN_MS, 0.00102, 0.001 * HIST_GAMMA**10, 1.0, 14.8, 1e3, 9.2e12]
    values += [10 ** (k / 97) for k in range(-400, 1300)]  # dense over 1e-4 .. 1e13 ms
    values += [HIST_MIN_MS * HIST_GAMMA**b * f for b in range(0, 1900, 7) for f in (1 - 1e-15, 1, 1 + 1e-15)]
    with psycopg.connect(db_url) as c:
        sql = c.execute("SELECT dnscamp_hist_bucket(v) FROM unnest(%s::float8[]) WITH ORDINALITY AS u(v, i) ORDER BY i",
                        (values,)).fetchall()  # fmt: skip
    assert [r[0] for r in sql] == [hist_bucket(v) for v in values]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(
        st.one_of(st.floats(0.001, 1e7), st.floats(0.0, 0.01), st.sampled_from([0.0, 1.0, 20.5, 20.5, 3e3])),
        min_size=1, max_size=300,
    ),
    q=st.one_of(st.sampled_from([0.0, 0.01, 0.5, 0.9, 0.95, 0.99, 1.0]), st.floats(0.0, 1.0)),
)  # fmt: skip
def test_histogram_percentile_within_one_percent_of_exact(db_url, values, q):
    hist: dict[int, int] = {}
    for v in values:
        hist[hist_bucket(v)] = hist.get(hist_bucket(v), 0) + 1
    with psycopg.connect(db_url) as c:
        approx, exact = c.execute(
            "SELECT dnscamp_hist_quantile(%s::int[], %s::bigint[], %s), "
            "(SELECT percentile_disc(%s) WITHIN GROUP (ORDER BY v) FROM unnest(%s::float8[]) AS v)",
            (list(hist), list(hist.values()), q, q, values),
        ).fetchone()  # fmt: skip
    rank = max(math.ceil(q * len(values)), 1)
    assert exact == sorted(values)[rank - 1]  # percentile_disc is the nearest rank
    if exact >= HIST_MIN_MS:
        assert abs(approx - exact) <= 0.01 * exact, (approx, exact)
    else:
        assert approx == 0  # below the first bucket's edge: read as 0 (absolute error < 0.001 ms)
