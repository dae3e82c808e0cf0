"""Rollups maintained at ingest: ``dns_hourly`` (dns_query records per hour x
campaign x vantage x network profile x resolver x transport: count, failures, a histogram of
total_ms over fixed log buckets) and ``result_counts`` (records per context and status). New
views v_dns_hourly and v_dns_hourly_hist read the first; v_failures reads the second (same
columns and rows as before, without scanning the records). Both are filled here from the
stored records; ingest adds each batch's new records in the batch's transaction
(db/writer/rollups.py `add_rollups`), and rows inserted into or deleted from the ``results``
view are counted by its triggers.

Histogram buckets (docs/store.md "Rollups"): bucket 0 holds total_ms < 0.001, bucket b >= 1
holds [0.001 * 1.02^(b-1), 0.001 * 1.02^b); a percentile read from it (its bucket's geometric
middle) is within 0.995 % of the exact percentile_disc.

Revision ID: 0013_rollups
Revises: 0012_compact_store
"""

from alembic import op

from db.migrations.frozen.m0013 import TRIGGERS_SQL
from db.migrations.views import create_view, drop_view, restore_view

revision = "0013_rollups"
down_revision = "0012_compact_store"
branch_labels = None
depends_on = None

WRITER = "dnscamp_writer"
NEW_VIEWS = ("v_dns_hourly", "v_dns_hourly_hist")

FUNCTIONS_SQL = """
CREATE FUNCTION dnscamp_hist_bucket(ms float8) RETURNS int LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN ms >= 0.001 THEN floor(ln(ms / 0.001) / ln(1.02::float8))::int + 1 ELSE 0 END
$$;
CREATE FUNCTION dnscamp_hist_value(bucket int) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN bucket > 0 THEN 0.001 * power(1.02::float8, bucket - 0.5) ELSE 0 END
$$;
CREATE FUNCTION dnscamp_hist_merge(b1 smallint[], c1 int[], b2 smallint[], c2 int[],
                                   OUT buckets smallint[], OUT counts int[])
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT COALESCE(array_agg(b ORDER BY b), '{}'), COALESCE(array_agg(c ORDER BY b), '{}')
    FROM (SELECT b, sum(c)::int AS c
          FROM (SELECT * FROM unnest(b1, c1) UNION ALL SELECT * FROM unnest(b2, c2)) AS u(b, c)
          GROUP BY b HAVING sum(c) <> 0) AS s
$$;
-- The q-quantile (nearest rank, as percentile_disc) of a histogram given as buckets and counts
-- (numeric: what sum() of counts gives; integer arrays are cast to it).
CREATE FUNCTION dnscamp_hist_quantile(buckets int[], counts numeric[], q float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT dnscamp_hist_value(b)
    FROM (SELECT b, sum(c) OVER (ORDER BY b) AS cum, sum(c) OVER () AS total
          FROM (SELECT b, sum(c) AS c FROM unnest(buckets, counts) AS u(b, c) GROUP BY b) AS g) AS x
    WHERE cum >= greatest(ceil(q * total), 1)
    ORDER BY b LIMIT 1
$$;
"""

TABLES_SQL = """
CREATE TABLE dns_hourly (
    hour timestamptz NOT NULL, campaign text NOT NULL, vantage_id text NOT NULL, network_profile text,
    resolver text, transport text,
    n bigint NOT NULL, failures bigint NOT NULL, buckets smallint[] NOT NULL, counts int[] NOT NULL,
    CONSTRAINT uq_dns_hourly UNIQUE NULLS NOT DISTINCT (hour, campaign, vantage_id, network_profile, resolver, transport)
);
CREATE TABLE result_counts (
    ctx_id int NOT NULL, status text NOT NULL, n bigint NOT NULL,
    CONSTRAINT pk_result_counts PRIMARY KEY (ctx_id, status)
);
"""

# What ingest computes (collectors.parse.rollup) from the stored rows: a dns_query body whose
# t_start and t_response are JSON integers, ok status -> a histogram bucket of total_ms.
BACKFILL_SQL = """
INSERT INTO result_counts (ctx_id, status, n)
SELECT ctx_id, status, count(*) FROM (SELECT ctx_id, status FROM dns_queries
                                      UNION ALL SELECT ctx_id, status FROM generic_results) AS x
GROUP BY 1, 2;
WITH r AS (
    SELECT date_trunc('hour', q.started_at, 'UTC') AS hour, c.campaign, c.vantage_id, c.network_profile,
           s.resolver, s.transport, q.status,
           CASE WHEN q.status = 'ok' AND q.t_start IS NOT NULL AND q.t_response IS NOT NULL
                THEN dnscamp_hist_bucket((q.t_response::numeric - q.t_start)::float8 / 1e6) END AS b
    FROM dns_queries q JOIN contexts c ON c.id = q.ctx_id JOIN dns_shapes s ON s.id = q.shape_id
    UNION ALL
    SELECT date_trunc('hour', g.started_at, 'UTC'), c.campaign, c.vantage_id, c.network_profile,
           g.body ->> 'resolver', g.body ->> 'transport', g.status,
           CASE WHEN g.status = 'ok' AND jsonb_typeof(g.body -> 't_start') = 'number'
                     AND jsonb_typeof(g.body -> 't_response') = 'number'
                     AND JSON_VALUE(g.body, '$.t_start' RETURNING bigint) IS NOT NULL
                     AND JSON_VALUE(g.body, '$.t_response' RETURNING bigint) IS NOT NULL
                THEN dnscamp_hist_bucket((JSON_VALUE(g.body, '$.t_response' RETURNING bigint)::numeric
                                          - JSON_VALUE(g.body, '$.t_start' RETURNING bigint))::float8 / 1e6) END
    FROM generic_results g JOIN contexts c ON c.id = g.ctx_id
    WHERE g.kind = 'dns_query'
), k AS (
    SELECT hour, campaign, vantage_id, network_profile, resolver, transport, b,
           count(*) AS n, count(*) FILTER (WHERE status <> 'ok') AS f
    FROM r GROUP BY 1, 2, 3, 4, 5, 6, 7
)
INSERT INTO dns_hourly (hour, campaign, vantage_id, network_profile, resolver, transport, n, failures, buckets, counts)
SELECT hour, campaign, vantage_id, network_profile, resolver, transport, sum(n), sum(f),
       COALESCE(array_agg(b ORDER BY b) FILTER (WHERE b IS NOT NULL), '{}'),
       COALESCE(array_agg(n ORDER BY b) FILTER (WHERE b IS NOT NULL), '{}')
FROM k GROUP BY 1, 2, 3, 4, 5, 6;
"""


def upgrade() -> None:
    op.execute(FUNCTIONS_SQL)
    op.execute(TABLES_SQL)
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON dns_hourly, result_counts TO {WRITER}")
    op.execute(BACKFILL_SQL)
    op.execute(TRIGGERS_SQL)
    create_view(op, revision, "v_failures")  # CREATE OR REPLACE: same columns
    for v in NEW_VIEWS:
        create_view(op, revision, v)


def downgrade() -> None:
    for v in reversed(NEW_VIEWS):
        drop_view(op, v)
    restore_view(op, "0012_compact_store", "v_failures")
    op.execute("DROP TRIGGER results_tally_insert ON results")
    op.execute("DROP TRIGGER results_count_delete ON results")
    op.execute("DROP FUNCTION dnscamp_results_rollups()")
    op.execute("DROP TABLE result_counts, dns_hourly")
    op.execute("DROP FUNCTION dnscamp_hist_quantile(int[], numeric[], float8), "
               "dnscamp_hist_merge(smallint[], int[], smallint[], int[]), dnscamp_hist_value(int), "
               "dnscamp_hist_bucket(float8)")  # fmt: skip
