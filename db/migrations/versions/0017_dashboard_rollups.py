"""Rollups for the dashboards at 10 M records (docs/dashboards.md "Query times",
"What would meet the targets at 10 M"), maintained at ingest like 0013's ``dns_hourly``:

- ``dns_hourly_status``: failed dns_query records per dns_hourly key and status
  (v_dns_hourly_status): the failure-status stacks read it instead of every record;
- ``dns_conn_daily``: dns_query records per UTC day x campaign x vantage x network profile x
  resolver x transport x connection (fresh / reuse / resume): n, failures, the sum of
  total_packets and histograms (0013's log buckets) of the ok records' total_ms, handshake_ms,
  exchange_ms, total_rtt_multiple and total_ip_bytes (v_dns_conn_daily, v_dns_conn_daily_hist);
- ``page_load_daily``: page loads per UTC day x campaign x vantage x profile x browser x
  dns_mode x dns_transport x http x status: n, least and greatest plt_ms and its histogram
  (v_page_load_daily, v_page_load_daily_hist);
- ``atlas_ping_latest``: the latest successful ping per campaign, measurement, probe and
  destination, kept by a trigger on atlas_ping (every writer: Atlas ingest, archive restore,
  hand inserts); v_quicsocks_savings reads it (same columns and rows) instead of ranking
  every ping.

How the DNS and page-load rollups are kept: ingest COPYs each batch's new records into the
session's temporary tables ``dnscamp_dns_in`` / ``dnscamp_pl_in`` (``dnscamp_rollup_temp()``
makes them) and calls ``dnscamp_rollup_dns(1, summed)`` / ``dnscamp_rollup_page_load(1)``, which
add them and empty the tables. A dns_query row carries its shape's sha256 and its typed columns
(the measures are computed here from the shape's columns, with v_dns_query's expressions) or,
when it does not fit them, its body (read as v_dns_query's generic branch reads it); a page load
carries the part of its body the rollup reads. When every record of a batch is new, ingest's
parser processes have summed its typed queries' dns_conn_daily rows already (the same
arithmetic in Python, collectors/parse.py ``_conn``): those sums go through ``dnscamp_conn_in``
and ``dnscamp_rollup_conn()``, and ``dnscamp_rollup_dns(1, true)`` skips the rows they counted
(``counted``). The results view's INSTEAD OF triggers add (or, for a deleted row, subtract:
sign -1) the row through the same functions; the upgrade fills the tables from what is stored,
the same way.

Revision ID: 0017_dashboard_rollups
Revises: 0016_page_load_warm
"""

from alembic import op

from db.migrations.frozen.m0017 import ROLLUP_CONN_SQL, ROLLUP_DNS_SQL, ROLLUP_PAGE_LOAD_SQL
from db.migrations.frozen.m0017 import partitions as _partitions
from db.migrations.views import create_view, drop_view, restore_view

revision = "0017_dashboard_rollups"
down_revision = "0016_page_load_warm"
branch_labels = None
depends_on = None

WRITER = "dnscamp_writer"
NEW_VIEWS = ("v_dns_hourly_status", "v_dns_conn_daily", "v_dns_conn_daily_hist", "v_page_load_daily",
             "v_page_load_daily_hist")  # fmt: skip
TABLES = ("dns_hourly_status", "dns_conn_daily", "page_load_daily", "atlas_ping_latest")
# the five histograms of dns_conn_daily: column prefix, v_dns_conn_daily_hist's measure
MEASURES = (("total", "total_ms"), ("handshake", "handshake_ms"), ("exchange", "exchange_ms"),
            ("rtt", "total_rtt_multiple"), ("ip_bytes", "total_ip_bytes"))  # fmt: skip
_HISTS = ",\n    ".join(f"{p}_buckets smallint[] NOT NULL, {p}_counts int[] NOT NULL" for p, _ in MEASURES)

TABLES_SQL = f"""
CREATE TABLE dns_hourly_status (
    hour timestamptz NOT NULL, campaign text NOT NULL, vantage_id text NOT NULL, network_profile text,
    resolver text, transport text, status text NOT NULL, n bigint NOT NULL,
    CONSTRAINT uq_dns_hourly_status UNIQUE NULLS NOT DISTINCT
        (hour, campaign, vantage_id, network_profile, resolver, transport, status)
);
CREATE TABLE dns_conn_daily (
    day timestamptz NOT NULL, campaign text NOT NULL, vantage_id text NOT NULL, network_profile text,
    resolver text, transport text, connection text NOT NULL,
    n bigint NOT NULL, failures bigint NOT NULL, total_packets bigint NOT NULL,
    {_HISTS},
    CONSTRAINT uq_dns_conn_daily UNIQUE NULLS NOT DISTINCT
        (day, campaign, vantage_id, network_profile, resolver, transport, connection)
);
CREATE TABLE page_load_daily (
    day timestamptz NOT NULL, campaign text NOT NULL, vantage_id text NOT NULL, network_profile text,
    browser text, dns_mode text, dns_transport text, http text, status text NOT NULL,
    n bigint NOT NULL, min_plt_ms float8, max_plt_ms float8, buckets smallint[] NOT NULL, counts int[] NOT NULL,
    CONSTRAINT uq_page_load_daily UNIQUE NULLS NOT DISTINCT
        (day, campaign, vantage_id, network_profile, browser, dns_mode, dns_transport, http, status)
);
CREATE TABLE atlas_ping_latest (
    campaign text, msm_id bigint NOT NULL, prb_id int NOT NULL, dst_addr text,
    raw_id bigint NOT NULL, "timestamp" timestamptz NOT NULL, avg_ms float8 NOT NULL,
    CONSTRAINT uq_atlas_ping_latest UNIQUE NULLS NOT DISTINCT (campaign, msm_id, prb_id, dst_addr)
);
"""

# A bucket as a smallint (0013's dnscamp_hist_bucket; NULL for no value; a value beyond
# 0.001 * 1.02^32766, ~1e279, is counted in the last bucket).
FUNCTIONS_SQL = """
CREATE FUNCTION dnscamp_hist_bucket16(v float8) RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (CASE WHEN v >= 0.001 THEN least(floor(ln(least(v, 1e280::float8) / 0.001) / ln(1.02::float8))::int + 1, 32767)
                 WHEN v IS NOT NULL THEN 0 END)::smallint
$$;
-- 0013's dnscamp_hist_merge as a set-returning function of one row, which the planner inlines
-- into the upserts below (a call of the scalar one cost ~40 us, five per dns_conn_daily row).
CREATE FUNCTION dnscamp_hist_sum(b1 smallint[], c1 int[], b2 smallint[], c2 int[])
RETURNS TABLE (buckets smallint[], counts int[]) LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT COALESCE(array_agg(b ORDER BY b), '{}'), COALESCE(array_agg(c ORDER BY b), '{}')
    FROM (SELECT b, sum(c)::int AS c
          FROM (SELECT * FROM unnest(b1, c1) UNION ALL SELECT * FROM unnest(b2, c2)) AS u(b, c)
          GROUP BY b HAVING sum(c) <> 0) AS s
$$;
CREATE FUNCTION dnscamp_rollup_temp() RETURNS void LANGUAGE plpgsql
SET client_min_messages = warning  -- no NOTICE when they exist
AS $$
BEGIN
    CREATE TEMPORARY TABLE IF NOT EXISTS dnscamp_dns_in (
        hour timestamptz, campaign text, vantage_id text, network_profile text, resolver text, transport text,
        status text, bucket int, counted boolean, shape bytea, body jsonb,
        t_start bigint, t_connected bigint, t_tls_done bigint, t_query_sent bigint, t_response bigint,
        handshake_bytes_sent bigint, handshake_bytes_received bigint, query_bytes_sent bigint,
        query_bytes_received bigint, sequence int, response_size int, handshake_packets_sent int,
        handshake_packets_received int, query_packets_sent int, query_packets_received int, answers bytea
    ) ON COMMIT DELETE ROWS;
    CREATE TEMPORARY TABLE IF NOT EXISTS dnscamp_conn_in (
        day timestamptz, campaign text, vantage_id text, network_profile text, resolver text, transport text,
        connection text, n bigint, failures bigint, total_packets bigint, total_buckets text, total_counts text,
        handshake_buckets text, handshake_counts text, exchange_buckets text, exchange_counts text,
        rtt_buckets text, rtt_counts text, ip_bytes_buckets text, ip_bytes_counts text
    ) ON COMMIT DELETE ROWS;
    CREATE TEMPORARY TABLE IF NOT EXISTS dnscamp_pl_in (
        day timestamptz, campaign text, vantage_id text, network_profile text, status text, body jsonb
    ) ON COMMIT DELETE ROWS;
END $$;
"""


# Rows inserted into or deleted from the results view: their contributions, from the row's own
# values (a deleted dns_query row's body is its shape plus its typed columns, read the same way).
# The delete trigger's name sorts after results_delete: the page-load extremes are recomputed
# from the records left.
TRIGGERS_SQL = """
CREATE FUNCTION dnscamp_results_daily_rollups() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r results%ROWTYPE;
    sign int := CASE TG_OP WHEN 'INSERT' THEN 1 ELSE -1 END;
BEGIN
    IF TG_OP = 'INSERT' THEN r := NEW; ELSE r := OLD; END IF;
    IF r.kind = 'dns_query' THEN
        PERFORM dnscamp_rollup_temp();
        INSERT INTO dnscamp_dns_in (hour, campaign, vantage_id, network_profile, resolver, transport, status, body)
        VALUES (date_trunc('hour', r.started_at, 'UTC'), r.campaign, r.vantage_id, r.network_profile,
                r.body ->> 'resolver', r.body ->> 'transport', r.status, r.body);
        PERFORM dnscamp_rollup_dns(sign, false);
    ELSIF r.kind = 'page_load' THEN
        PERFORM dnscamp_rollup_temp();
        INSERT INTO dnscamp_pl_in (day, campaign, vantage_id, network_profile, status, body)
        VALUES (date_trunc('day', r.started_at, 'UTC'), r.campaign, r.vantage_id, r.network_profile, r.status, r.body);
        PERFORM dnscamp_rollup_page_load(sign);
    END IF;
    RETURN r;
END $$;
CREATE TRIGGER results_rollup_insert INSTEAD OF INSERT ON results FOR EACH ROW
    EXECUTE FUNCTION dnscamp_results_daily_rollups();
CREATE TRIGGER results_rollup_delete INSTEAD OF DELETE ON results FOR EACH ROW
    EXECUTE FUNCTION dnscamp_results_daily_rollups();

CREATE FUNCTION dnscamp_atlas_ping_latest() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN  -- OLD's key again from the pings left
        DELETE FROM atlas_ping_latest l WHERE l.campaign IS NOT DISTINCT FROM OLD.campaign AND l.msm_id = OLD.msm_id
            AND l.prb_id = OLD.prb_id AND l.dst_addr IS NOT DISTINCT FROM OLD.dst_addr;
        INSERT INTO atlas_ping_latest (campaign, msm_id, prb_id, dst_addr, raw_id, "timestamp", avg_ms)
        SELECT campaign, msm_id, prb_id, dst_addr, raw_id, "timestamp", avg_ms FROM atlas_ping p
        WHERE p.msm_id = OLD.msm_id AND p.prb_id = OLD.prb_id AND p.campaign IS NOT DISTINCT FROM OLD.campaign
          AND p.dst_addr IS NOT DISTINCT FROM OLD.dst_addr AND p.status = 'ok' AND p.avg_ms IS NOT NULL
        ORDER BY p."timestamp" DESC, p.raw_id DESC LIMIT 1;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status = 'ok' AND NEW.avg_ms IS NOT NULL THEN
        INSERT INTO atlas_ping_latest AS l (campaign, msm_id, prb_id, dst_addr, raw_id, "timestamp", avg_ms)
        VALUES (NEW.campaign, NEW.msm_id, NEW.prb_id, NEW.dst_addr, NEW.raw_id, NEW."timestamp", NEW.avg_ms)
        ON CONFLICT ON CONSTRAINT uq_atlas_ping_latest DO UPDATE
            SET raw_id = EXCLUDED.raw_id, "timestamp" = EXCLUDED."timestamp", avg_ms = EXCLUDED.avg_ms
            WHERE (EXCLUDED."timestamp", EXCLUDED.raw_id) > (l."timestamp", l.raw_id);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER atlas_ping_latest AFTER UPDATE OR DELETE ON atlas_ping FOR EACH ROW
    EXECUTE FUNCTION dnscamp_atlas_ping_latest();
-- Inserts (Atlas ingest COPYs a block of ~2,000 results) once per statement: one upsert per
-- key of the statement's rows instead of one per ping (the row trigger cost ~17 us of Postgres
-- a result, twice that at 2,000,000 results, where each key saw ~1,000 updates).
CREATE FUNCTION dnscamp_atlas_ping_latest_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO atlas_ping_latest AS l (campaign, msm_id, prb_id, dst_addr, raw_id, "timestamp", avg_ms)
    SELECT DISTINCT ON (campaign, msm_id, prb_id, dst_addr) campaign, msm_id, prb_id, dst_addr, raw_id, "timestamp", avg_ms
    FROM new_pings WHERE status = 'ok' AND avg_ms IS NOT NULL
    ORDER BY campaign, msm_id, prb_id, dst_addr, "timestamp" DESC, raw_id DESC
    ON CONFLICT ON CONSTRAINT uq_atlas_ping_latest DO UPDATE
        SET raw_id = EXCLUDED.raw_id, "timestamp" = EXCLUDED."timestamp", avg_ms = EXCLUDED.avg_ms
        WHERE (EXCLUDED."timestamp", EXCLUDED.raw_id) > (l."timestamp", l.raw_id);
    RETURN NULL;
END $$;
CREATE TRIGGER atlas_ping_latest_insert AFTER INSERT ON atlas_ping REFERENCING NEW TABLE AS new_pings
    FOR EACH STATEMENT EXECUTE FUNCTION dnscamp_atlas_ping_latest_insert();
"""

# What is stored, through the same functions, one month partition at a time (bounded temp size).
BACKFILL_DNS_SQL = """
INSERT INTO dnscamp_dns_in (hour, campaign, vantage_id, network_profile, resolver, transport, status, shape,
    t_start, t_connected, t_tls_done, t_query_sent, t_response, handshake_bytes_sent, handshake_bytes_received,
    query_bytes_sent, query_bytes_received, handshake_packets_sent, handshake_packets_received,
    query_packets_sent, query_packets_received)
SELECT date_trunc('hour', q.started_at, 'UTC'), c.campaign, c.vantage_id, c.network_profile, s.resolver, s.transport,
       q.status, s.sha256, q.t_start, q.t_connected, q.t_tls_done, q.t_query_sent, q.t_response,
       q.handshake_bytes_sent, q.handshake_bytes_received, q.query_bytes_sent, q.query_bytes_received,
       q.handshake_packets_sent, q.handshake_packets_received, q.query_packets_sent, q.query_packets_received
FROM {table} q JOIN contexts c ON c.id = q.ctx_id JOIN dns_shapes s ON s.id = q.shape_id;
"""
BACKFILL_GENERIC_SQL = """
INSERT INTO dnscamp_dns_in (hour, campaign, vantage_id, network_profile, resolver, transport, status, body)
SELECT date_trunc('hour', g.started_at, 'UTC'), c.campaign, c.vantage_id, c.network_profile,
       g.body ->> 'resolver', g.body ->> 'transport', g.status, g.body
FROM {table} g JOIN contexts c ON c.id = g.ctx_id WHERE g.kind = 'dns_query';
INSERT INTO dnscamp_pl_in (day, campaign, vantage_id, network_profile, status, body)
SELECT date_trunc('day', g.started_at, 'UTC'), c.campaign, c.vantage_id, c.network_profile, g.status, g.body
FROM {table} g JOIN contexts c ON c.id = g.ctx_id WHERE g.kind = 'page_load';
"""


def upgrade() -> None:
    op.execute(TABLES_SQL)
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {', '.join(TABLES)} TO {WRITER}")
    op.execute(FUNCTIONS_SQL)
    op.execute(ROLLUP_DNS_SQL)
    op.execute(ROLLUP_CONN_SQL)
    op.execute(ROLLUP_PAGE_LOAD_SQL)
    conn = op.get_bind()
    op.execute("SELECT dnscamp_rollup_temp()")
    for part in _partitions(conn, "dns_queries"):
        op.execute(BACKFILL_DNS_SQL.format(table=part))
        op.execute("SELECT dnscamp_rollup_dns(1, false)")
    for part in _partitions(conn, "generic_results"):
        op.execute(BACKFILL_GENERIC_SQL.format(table=part))
        op.execute("SELECT dnscamp_rollup_dns(1, false)")
        op.execute("SELECT dnscamp_rollup_page_load(1)")
    op.execute("""
        INSERT INTO atlas_ping_latest (campaign, msm_id, prb_id, dst_addr, raw_id, "timestamp", avg_ms)
        SELECT DISTINCT ON (campaign, msm_id, prb_id, dst_addr) campaign, msm_id, prb_id, dst_addr, raw_id, "timestamp", avg_ms
        FROM atlas_ping WHERE status = 'ok' AND avg_ms IS NOT NULL
        ORDER BY campaign, msm_id, prb_id, dst_addr, "timestamp" DESC, raw_id DESC""")
    op.execute(TRIGGERS_SQL)
    create_view(op, revision, "v_quicsocks_savings")  # CREATE OR REPLACE: same columns
    for v in NEW_VIEWS:
        create_view(op, revision, v)


def downgrade() -> None:
    for v in reversed(NEW_VIEWS):
        drop_view(op, v)
    restore_view(op, "0005_atlas", "v_quicsocks_savings")
    op.execute("DROP TRIGGER atlas_ping_latest ON atlas_ping")
    op.execute("DROP TRIGGER atlas_ping_latest_insert ON atlas_ping")
    op.execute("DROP TRIGGER results_rollup_insert ON results")
    op.execute("DROP TRIGGER results_rollup_delete ON results")
    op.execute("DROP FUNCTION dnscamp_atlas_ping_latest(), dnscamp_atlas_ping_latest_insert(), dnscamp_results_daily_rollups(), "
               "dnscamp_rollup_page_load(int), dnscamp_rollup_conn(), dnscamp_rollup_dns(int, boolean), dnscamp_rollup_temp(), "
               "dnscamp_hist_sum(smallint[], int[], smallint[], int[]), dnscamp_hist_bucket16(float8)")  # fmt: skip
    op.execute(f"DROP TABLE {', '.join(TABLES)}")
