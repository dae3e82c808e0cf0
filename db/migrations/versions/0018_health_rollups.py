"""Rollups for the Campaign health dashboard and the Atlas credits at 10 M records (
docs/store.md "Rollups", docs/dashboards.md "Campaign health"), maintained by every writer:

- ``ingest_daily``: records per context (campaign x run x vantage x kind), ingest batch and UTC
  day of started_at: n, failed (status other than ok), the first and last started_at, and a
  histogram (0013's log buckets, ``dnscamp_hist_bucket16``) of the ingest lag in seconds
  (the batch's ingested_at - started_at; a negative lag counts in bucket 0, read as 0). The
  batch gives ingested_at (last ingest; the greatest lag of a row is ingested_at - its first
  started_at, exact). Read through v_ingest_daily and v_ingest_lag_hist.
- ``unit_daily``: per UTC day x campaign x vantage x region x kind, the planner units run
  (``units``, ascending in the C collation, NULL for records without one) and their records
  (``unit_counts``): distinct units per vantage over days (v_unit_daily: one row per unit).
  One array row per vantage and day: a row per unit was ~190 bytes of heap and as much of
  unique index (six text columns), 31 bytes per dns_query record at 1 M; a unit array per
  ingest_daily row would repeat a run's ~40 unit names in every row.
- ``atlas_credit_sums``: raw Atlas results per campaign label, measurement and type: the
  count, the sum of each result's own credits (v_atlas_credits' cost model from the result:
  ping sent x (size / 1500 + 1), DNS 10 or 20 by protocol; ``dnscamp_atlas_unit_credits``),
  the first and last timestamp. v_atlas_credits now reads it (same columns and rows); the
  measurement's role, one-off factor and charged flag stay joined at read time from
  atlas_measurements, so a measurement registered after its results still prices right.

How they are kept: ingest sums each batch's new records in Python (db/writer/rollups.py
``add_rollups``: groups per context and day, the lag buckets against the batch's ingested_at)
and upserts the sums; the ``results`` view's INSTEAD OF triggers ``results_tally_health_insert``
(after results_insert: the row's context and batch exist) and ``results_count_health_delete``
(before results_delete: the record is still there) add or subtract the row (a key left with no
records loses its row; a deleted record at a row's first or last started_at makes them be
recomputed from the records left); statement-level triggers with transition tables keep
``atlas_credit_sums`` for inserts (Atlas ingest's blocks), updates and deletes of
atlas_results_raw. The upgrade fills the three from what is stored, set-based, one month
partition at a time.

Revision ID: 0018_health_rollups
Revises: 0017_dashboard_rollups
"""

from alembic import op

from db.migrations.views import create_view, drop_view, restore_view

revision = "0018_health_rollups"
down_revision = "0017_dashboard_rollups"
branch_labels = None
depends_on = None

WRITER = "dnscamp_writer"
NEW_VIEWS = ("v_ingest_daily", "v_ingest_lag_hist", "v_unit_daily")
TABLES = ("ingest_daily", "unit_daily", "atlas_credit_sums")

TABLES_SQL = """
CREATE TABLE ingest_daily (
    day timestamptz NOT NULL, ctx_id int NOT NULL, batch_id int NOT NULL,
    n int NOT NULL, failed int NOT NULL, first_started timestamptz NOT NULL, last_started timestamptz NOT NULL,
    lag_buckets smallint[] NOT NULL, lag_counts int[] NOT NULL,
    CONSTRAINT pk_ingest_daily PRIMARY KEY (day, ctx_id, batch_id)
);
CREATE TABLE unit_daily (
    day timestamptz NOT NULL, campaign text NOT NULL, vantage_id text NOT NULL, region text, kind text NOT NULL,
    units text[] NOT NULL, unit_counts int[] NOT NULL,
    CONSTRAINT uq_unit_daily UNIQUE NULLS NOT DISTINCT (day, campaign, vantage_id, region, kind)
);
CREATE TABLE atlas_credit_sums (
    campaign text, msm_id bigint NOT NULL, type text NOT NULL,
    results bigint NOT NULL, unit_credits numeric NOT NULL,
    first_result timestamptz NOT NULL, last_result timestamptz NOT NULL,
    CONSTRAINT uq_atlas_credit_sums UNIQUE NULLS NOT DISTINCT (campaign, msm_id, type)
);
"""

# The upserts every writer shares: a key's sums added (a negative n / results subtracts).
INGEST_DAILY_CONFLICT = """ON CONFLICT ON CONSTRAINT pk_ingest_daily DO UPDATE SET
    n = h.n + EXCLUDED.n, failed = h.failed + EXCLUDED.failed,
    first_started = least(h.first_started, EXCLUDED.first_started),
    last_started = greatest(h.last_started, EXCLUDED.last_started),
    (lag_buckets, lag_counts) = (SELECT * FROM dnscamp_hist_sum(h.lag_buckets, h.lag_counts,
                                                                EXCLUDED.lag_buckets, EXCLUDED.lag_counts))"""
UNIT_DAILY_CONFLICT = """ON CONFLICT ON CONSTRAINT uq_unit_daily DO UPDATE SET
    (units, unit_counts) = (SELECT * FROM dnscamp_units_sum(u.units, u.unit_counts, EXCLUDED.units, EXCLUDED.unit_counts))"""

# v_atlas_credits' cost model of one raw result (0011's expression, unchanged); two unit lists
# with their counts merged (as dnscamp_hist_sum merges histograms: inlined into the upserts).
FUNCTIONS_SQL = """
CREATE FUNCTION dnscamp_units_sum(u1 text[], c1 int[], u2 text[], c2 int[])
RETURNS TABLE (units text[], counts int[]) LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT COALESCE(array_agg(u ORDER BY u COLLATE "C"), '{}'), COALESCE(array_agg(c ORDER BY u COLLATE "C"), '{}')
    FROM (SELECT u, sum(c)::int AS c
          FROM (SELECT * FROM unnest(u1, c1) UNION ALL SELECT * FROM unnest(u2, c2)) AS x(u, c)
          GROUP BY u HAVING sum(c) <> 0) AS s
$$;
CREATE FUNCTION dnscamp_atlas_unit_credits(type text, raw jsonb) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE type
               WHEN 'ping' THEN COALESCE(JSON_VALUE(raw, '$.sent' RETURNING int), 0)::numeric
                                * (COALESCE(JSON_VALUE(raw, '$.size' RETURNING int), 48) / 1500 + 1)
               WHEN 'dns' THEN CASE WHEN upper(raw ->> 'proto') = 'TCP' THEN 20 ELSE 10 END
               ELSE 0
           END
$$;
"""

# Rows inserted into or deleted from the results view. Trigger names order them among 0012's
# (results_insert, results_delete), 0013's and 0017's: INSTEAD OF triggers fire by name.
TRIGGERS_SQL = f"""
CREATE FUNCTION dnscamp_results_health() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r results%ROWTYPE;
    sign int := CASE TG_OP WHEN 'INSERT' THEN 1 ELSE -1 END;
    d timestamptz;
    ctx int;
    batch int;
    b smallint;
BEGIN
    IF TG_OP = 'INSERT' THEN r := NEW; ELSE r := OLD; END IF;
    d := date_trunc('day', r.started_at, 'UTC');
    SELECT x.ctx_id, x.batch_id, dnscamp_hist_bucket16(extract(epoch FROM i.ingested_at - r.started_at)::float8)
    INTO ctx, batch, b
    FROM (SELECT ctx_id, batch_id FROM dns_queries WHERE id = r.id AND started_at = r.started_at
          UNION ALL
          SELECT ctx_id, batch_id FROM generic_results WHERE id = r.id AND started_at = r.started_at) x
    JOIN ingest_batches i ON i.id = x.batch_id;
    INSERT INTO ingest_daily AS h (day, ctx_id, batch_id, n, failed, first_started, last_started, lag_buckets, lag_counts)
    VALUES (d, ctx, batch, sign, sign * (r.status <> 'ok')::int, r.started_at, r.started_at, ARRAY[b], ARRAY[sign])
    {INGEST_DAILY_CONFLICT};
    IF sign < 0 THEN
        DELETE FROM ingest_daily WHERE day = d AND ctx_id = ctx AND batch_id = batch AND n = 0;
        -- the deleted record was the first or last of its row: both again from the others
        UPDATE ingest_daily h SET (first_started, last_started) = (
            SELECT min(x.started_at), max(x.started_at)
            FROM (SELECT id, started_at FROM dns_queries
                  WHERE ctx_id = ctx AND batch_id = batch AND started_at BETWEEN h.first_started AND h.last_started
                  UNION ALL
                  SELECT id, started_at FROM generic_results
                  WHERE ctx_id = ctx AND batch_id = batch AND started_at BETWEEN h.first_started AND h.last_started) x
            WHERE x.id <> r.id)
        WHERE h.day = d AND h.ctx_id = ctx AND h.batch_id = batch
          AND (h.first_started = r.started_at OR h.last_started = r.started_at);
    END IF;
    INSERT INTO unit_daily AS u (day, campaign, vantage_id, region, kind, units, unit_counts)
    VALUES (d, r.campaign, r.vantage_id, r.region, r.kind, ARRAY[r.unit], ARRAY[sign])
    {UNIT_DAILY_CONFLICT};
    IF sign < 0 THEN
        DELETE FROM unit_daily WHERE day = d AND campaign = r.campaign AND vantage_id = r.vantage_id
            AND region IS NOT DISTINCT FROM r.region AND kind = r.kind AND cardinality(units) = 0;
    END IF;
    RETURN r;
END $$;
CREATE TRIGGER results_tally_health_insert INSTEAD OF INSERT ON results FOR EACH ROW
    EXECUTE FUNCTION dnscamp_results_health();
CREATE TRIGGER results_count_health_delete INSTEAD OF DELETE ON results FOR EACH ROW
    EXECUTE FUNCTION dnscamp_results_health();

-- atlas_results_raw, once per statement (Atlas ingest inserts blocks of 2,000 results; rows
-- its ON CONFLICT DO NOTHING skipped are not in new_results). Deleted or updated-away rows
-- subtract; a key whose first or last result went has both recomputed from the results left.
CREATE FUNCTION dnscamp_atlas_credit_sums() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE atlas_credit_sums s SET results = s.results - o.results, unit_credits = s.unit_credits - o.unit_credits
        FROM (SELECT campaign, msm_id, type, count(*) AS results, sum(dnscamp_atlas_unit_credits(type, raw)) AS unit_credits
              FROM old_results GROUP BY 1, 2, 3) o
        WHERE s.campaign IS NOT DISTINCT FROM o.campaign AND s.msm_id = o.msm_id AND s.type = o.type;
        DELETE FROM atlas_credit_sums WHERE results = 0;
        UPDATE atlas_credit_sums s SET (first_result, last_result) = (
            SELECT min(x."timestamp"), max(x."timestamp") FROM atlas_results_raw x
            WHERE x.msm_id = s.msm_id AND x.type = s.type AND x.campaign IS NOT DISTINCT FROM s.campaign)
        WHERE EXISTS (SELECT FROM old_results o
                      WHERE o.msm_id = s.msm_id AND o.type = s.type AND o.campaign IS NOT DISTINCT FROM s.campaign
                        AND (o."timestamp" <= s.first_result OR o."timestamp" >= s.last_result));
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO atlas_credit_sums AS s (campaign, msm_id, type, results, unit_credits, first_result, last_result)
        SELECT campaign, msm_id, type, count(*), sum(dnscamp_atlas_unit_credits(type, raw)), min("timestamp"), max("timestamp")
        FROM new_results GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT ON CONSTRAINT uq_atlas_credit_sums DO UPDATE SET
            results = s.results + EXCLUDED.results, unit_credits = s.unit_credits + EXCLUDED.unit_credits,
            first_result = least(s.first_result, EXCLUDED.first_result),
            last_result = greatest(s.last_result, EXCLUDED.last_result);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER atlas_credit_sums_insert AFTER INSERT ON atlas_results_raw REFERENCING NEW TABLE AS new_results
    FOR EACH STATEMENT EXECUTE FUNCTION dnscamp_atlas_credit_sums();
CREATE TRIGGER atlas_credit_sums_update AFTER UPDATE ON atlas_results_raw
    REFERENCING OLD TABLE AS old_results NEW TABLE AS new_results
    FOR EACH STATEMENT EXECUTE FUNCTION dnscamp_atlas_credit_sums();
CREATE TRIGGER atlas_credit_sums_delete AFTER DELETE ON atlas_results_raw REFERENCING OLD TABLE AS old_results
    FOR EACH STATEMENT EXECUTE FUNCTION dnscamp_atlas_credit_sums();
"""

# What is stored, one month partition at a time (a dns_query that did not fit the typed
# columns is in generic_results with the same context: the upserts merge).
BACKFILL_SQL = f"""
WITH k AS (
    SELECT date_trunc('day', x.started_at, 'UTC') AS day, x.ctx_id, x.batch_id,
           dnscamp_hist_bucket16(extract(epoch FROM i.ingested_at - x.started_at)::float8) AS bucket,
           count(*) AS n, count(*) FILTER (WHERE x.status <> 'ok') AS f,
           min(x.started_at) AS lo, max(x.started_at) AS hi
    FROM {{table}} x JOIN ingest_batches i ON i.id = x.batch_id
    GROUP BY 1, 2, 3, 4
)
INSERT INTO ingest_daily AS h (day, ctx_id, batch_id, n, failed, first_started, last_started, lag_buckets, lag_counts)
SELECT day, ctx_id, batch_id, sum(n), sum(f), min(lo), max(hi), array_agg(bucket ORDER BY bucket), array_agg(n ORDER BY bucket)
FROM k GROUP BY 1, 2, 3
{INGEST_DAILY_CONFLICT};
INSERT INTO unit_daily AS u (day, campaign, vantage_id, region, kind, units, unit_counts)
SELECT day, campaign, vantage_id, region, kind, array_agg(unit ORDER BY unit COLLATE "C"), array_agg(n ORDER BY unit COLLATE "C")
FROM (SELECT date_trunc('day', x.started_at, 'UTC') AS day, c.campaign, c.vantage_id, c.region, c.kind, x.unit, count(*)::int AS n
      FROM {{table}} x JOIN contexts c ON c.id = x.ctx_id
      GROUP BY 1, 2, 3, 4, 5, 6) k
GROUP BY 1, 2, 3, 4, 5
{UNIT_DAILY_CONFLICT};
"""
BACKFILL_ATLAS_SQL = """
INSERT INTO atlas_credit_sums (campaign, msm_id, type, results, unit_credits, first_result, last_result)
SELECT campaign, msm_id, type, count(*), sum(dnscamp_atlas_unit_credits(type, raw)), min("timestamp"), max("timestamp")
FROM atlas_results_raw GROUP BY 1, 2, 3;
"""


def _partitions(conn, parent: str) -> list[str]:
    rows = conn.exec_driver_sql(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        f"WHERE i.inhparent = '{parent}'::regclass ORDER BY 1").fetchall()  # fmt: skip
    return [r[0] for r in rows] or [parent]


def upgrade() -> None:
    op.execute(TABLES_SQL)
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {', '.join(TABLES)} TO {WRITER}")
    op.execute(FUNCTIONS_SQL)
    conn = op.get_bind()
    for parent in ("dns_queries", "generic_results"):
        for part in _partitions(conn, parent):
            op.execute(BACKFILL_SQL.format(table=part))
    op.execute(BACKFILL_ATLAS_SQL)
    # statistics now: until autovacuum analyses the filled tables, the planner guesses (at 10 M
    # records, Top failing names took 4.1 s instead of 35 ms on unanalysed tables)
    op.execute(f"ANALYZE {', '.join(TABLES)}")
    op.execute(TRIGGERS_SQL)
    create_view(op, revision, "v_atlas_credits")  # CREATE OR REPLACE: same columns
    for v in NEW_VIEWS:
        create_view(op, revision, v)


def downgrade() -> None:
    for v in reversed(NEW_VIEWS):
        drop_view(op, v)
    restore_view(op, "0011_dashboard_views", "v_atlas_credits")
    for t in ("atlas_credit_sums_insert", "atlas_credit_sums_update", "atlas_credit_sums_delete"):
        op.execute(f"DROP TRIGGER {t} ON atlas_results_raw")
    op.execute("DROP TRIGGER results_tally_health_insert ON results")
    op.execute("DROP TRIGGER results_count_health_delete ON results")
    op.execute("DROP FUNCTION dnscamp_atlas_credit_sums(), dnscamp_results_health(), "
               "dnscamp_atlas_unit_credits(text, jsonb), dnscamp_units_sum(text[], int[], text[], int[])")  # fmt: skip
    op.execute(f"DROP TABLE {', '.join(TABLES)}")
