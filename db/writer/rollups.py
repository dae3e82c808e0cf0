"""The rollups (docs/store.md "Rollups"): a batch's new records added to them in the batch's
transaction, and their VACUUM between batches. The one place in live code where rollup SQL is
written; the migrations keep frozen copies of the SQL of their revision.

The rollup rows and sums come from the parsers (`db.writer.batch.Parsed`); the writer COPYs them
into the session's temporary tables and upserts them with set-based statements.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import psycopg

from db.writer.batch import Parsed
from db.writer.encode import (CONN_COLUMNS, DAY_US, HOURLY_COLUMNS, HOURLY_START, PAGE_LOAD_COLUMNS, PG_EPOCH,
                              SUM_COLUMNS, US, bucket16, copy_rows, copy_sql)  # fmt: skip

# A batch's rollup rows are COPYed into the session's temporary tables (migration 0017's
# dnscamp_rollup_temp) and summed by Postgres: dns_hourly here, the rollups of 0017 by
# dnscamp_rollup_dns / dnscamp_rollup_page_load (which empty the tables: a batch stored row by
# row adds each row once). The result_counts increments (few keys) are summed here. %b: binary
# parameters (psycopg's text array dumper quotes every element with a regex).
# dns_hourly (migration 0022_hourly_keys) is keyed by (hour, key_id): the batch's keys missing
# from dns_hourly_keys are inserted in key order and read back in the statement that upserts the
# rows (ON CONFLICT DO UPDATE returns a key another ingest inserted meanwhile, which this
# statement's snapshot does not see; 0019's dns_name_keys do the same). Keys compare as text
# arrays (NULL equals NULL, and hashes); the keys table is read for the batch's campaigns only.
HOURLY_UPSERT = """
WITH summed AS (DELETE FROM dnscamp_hourly_sum RETURNING *  -- consumed: a batch stored row by row adds each once
), k AS MATERIALIZED (
    SELECT hour, ARRAY[campaign, vantage_id, network_profile, resolver, transport] AS key, bucket, sum(n)::int AS n,
           sum(f)::int AS f
    FROM (SELECT hour, campaign, vantage_id, network_profile, resolver, transport, bucket, 1 AS n,
                 CASE WHEN status <> 'ok' THEN 1 ELSE 0 END AS f
          FROM dnscamp_dns_in
          UNION ALL
          SELECT hour, campaign, vantage_id, network_profile, resolver, transport, bucket, n, failures
          FROM summed) AS u
    GROUP BY 1, 2, 3
), known AS MATERIALIZED (
    SELECT id, ARRAY[campaign, vantage_id, network_profile, resolver, transport] AS key FROM dns_hourly_keys
    WHERE campaign = ANY (ARRAY(SELECT DISTINCT key[1] FROM k))
), new AS (
    INSERT INTO dns_hourly_keys AS d (campaign, vantage_id, network_profile, resolver, transport)
    SELECT key[1], key[2], key[3], key[4], key[5] FROM (SELECT key FROM k EXCEPT SELECT key FROM known) AS m
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT ON CONSTRAINT uq_dns_hourly_keys DO UPDATE SET campaign = EXCLUDED.campaign
    RETURNING d.id, ARRAY[d.campaign, d.vantage_id, d.network_profile, d.resolver, d.transport] AS key
), ids AS (
    SELECT * FROM known UNION ALL SELECT * FROM new
)
INSERT INTO dns_hourly AS h (hour, key_id, n, failures, buckets, counts)
SELECT k.hour, ids.id, sum(k.n), sum(k.f),
       COALESCE(array_agg(k.bucket ORDER BY k.bucket) FILTER (WHERE k.bucket IS NOT NULL), '{}'),
       COALESCE(array_agg(k.n ORDER BY k.bucket) FILTER (WHERE k.bucket IS NOT NULL), '{}')
FROM k JOIN ids ON ids.key = k.key
GROUP BY 1, 2 ORDER BY 1, 2
ON CONFLICT ON CONSTRAINT pk_dns_hourly DO UPDATE SET n = h.n + EXCLUDED.n, failures = h.failures + EXCLUDED.failures,
    (buckets, counts) = (SELECT m.buckets, m.counts
                         FROM dnscamp_hist_sum(h.buckets, h.counts, EXCLUDED.buckets, EXCLUDED.counts) m)
"""
# The parsers' sums (`Parsed.finish`): the session's temporary tables, created once per
# connection (`db.writer.store.Store.prepare`), emptied at every commit.
SUM_TABLES = """
SET LOCAL client_min_messages = warning;  -- no NOTICE when they exist
CREATE TEMPORARY TABLE IF NOT EXISTS dnscamp_hourly_sum (hour timestamptz, campaign text, vantage_id text,
    network_profile text, resolver text, transport text, bucket int, n int, failures int) ON COMMIT DELETE ROWS;
CREATE TEMPORARY TABLE IF NOT EXISTS dnscamp_status_sum (hour timestamptz, campaign text, vantage_id text,
    network_profile text, resolver text, transport text, status text, n int) ON COMMIT DELETE ROWS;
CREATE TEMPORARY TABLE IF NOT EXISTS dnscamp_name_sum (day timestamptz, campaign text, vantage_id text,
    network_profile text, resolver text, transport text, qname text, status text, n int) ON COMMIT DELETE ROWS;
"""
SUM_COPY = {t: copy_sql(f"dnscamp_{ {'hourly': 'hourly', 'status': 'status', 'names': 'name'}[t]}_sum", c)
            for t, c in SUM_COLUMNS.items()}  # fmt: skip
_COPY_DNS_IN = copy_sql("dnscamp_dns_in", HOURLY_COLUMNS)
_COPY_CONN_IN = copy_sql("dnscamp_conn_in", CONN_COLUMNS)
_COPY_PL_IN = copy_sql("dnscamp_pl_in", PAGE_LOAD_COLUMNS)
# As 0017's dnscamp_rollup_dns and 0019's dnscamp_rollup_dns_names add a batch's rows (sign 1);
# each statement empties the table it reads (as those functions do).
STATUS_SUM_UPSERT = """
WITH summed AS (DELETE FROM dnscamp_status_sum RETURNING *)
INSERT INTO dns_hourly_status AS h (hour, campaign, vantage_id, network_profile, resolver, transport, status, n)
SELECT * FROM summed ORDER BY 1, 2, 3, 4, 5, 6, 7
ON CONFLICT ON CONSTRAINT uq_dns_hourly_status DO UPDATE SET n = h.n + EXCLUDED.n
"""
NAME_SUM_UPSERT = """
WITH summed AS (DELETE FROM dnscamp_name_sum RETURNING *
), n AS MATERIALIZED (
    SELECT day, campaign, vantage_id, network_profile, ARRAY[resolver, transport, qname, status] AS key, n AS c
    FROM summed
), new AS (
    INSERT INTO dns_name_keys AS k (resolver, transport, qname, status)
    SELECT key[1], key[2], key[3], key[4]
    FROM (SELECT key FROM n EXCEPT SELECT ARRAY[resolver, transport, qname, status] FROM dns_name_keys) AS m
    ORDER BY 1, 2, 3, 4
    ON CONFLICT ON CONSTRAINT uq_dns_name_keys DO UPDATE SET status = EXCLUDED.status
    RETURNING k.id, ARRAY[k.resolver, k.transport, k.qname, k.status] AS key
), k AS (
    SELECT id, ARRAY[resolver, transport, qname, status] AS key FROM dns_name_keys
    UNION ALL SELECT id, key FROM new
)
INSERT INTO dns_name_daily AS d (day, campaign, vantage_id, network_profile, keys, counts)
SELECT n.day, n.campaign, n.vantage_id, n.network_profile, array_agg(k.id ORDER BY k.id), array_agg(n.c ORDER BY k.id)
FROM n JOIN k ON k.key = n.key
GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
ON CONFLICT ON CONSTRAINT uq_dns_name_daily DO UPDATE
    SET (keys, counts) = (SELECT * FROM dnscamp_count_sum(d.keys, d.counts, EXCLUDED.keys, EXCLUDED.counts))
"""
# result_counts (records per context and status) and migration 0018's rollups of every record
# kind (ingest_daily, unit_daily; docs/store.md "Rollups"): the batch's records summed here per
# context and status, per context and UTC day (and unit; their ingest lags bucketed against the
# batch's ingested_at), upserted by one statement (data-modifying CTEs: one round trip). The
# histograms go as array texts.
_BATCH_OF = "SELECT b.id, b.ingested_at FROM result_ids r JOIN ingest_batches b ON b.id = r.batch_id WHERE r.id = %s::uuid"
COUNTS_UPSERT = """
WITH counts AS (
    INSERT INTO result_counts AS rc (ctx_id, status, n) SELECT * FROM unnest(%b::int[], %b::text[], %b::bigint[])
    ORDER BY 1, 2 ON CONFLICT ON CONSTRAINT pk_result_counts DO UPDATE SET n = rc.n + EXCLUDED.n
), days AS (
    INSERT INTO ingest_daily AS h (day, ctx_id, batch_id, n, failed, first_started, last_started, lag_buckets, lag_counts)
    SELECT g.day, g.ctx, %b, g.n, g.f, g.lo, g.hi, g.b::smallint[], g.c::int[]
    FROM unnest(%b::timestamptz[], %b::int[], %b::int[], %b::int[], %b::timestamptz[], %b::timestamptz[], %b::text[],
                %b::text[]) AS g(day, ctx, n, f, lo, hi, b, c)
    ORDER BY 1, 2
    ON CONFLICT ON CONSTRAINT pk_ingest_daily DO UPDATE SET
        n = h.n + EXCLUDED.n, failed = h.failed + EXCLUDED.failed,
        first_started = least(h.first_started, EXCLUDED.first_started),
        last_started = greatest(h.last_started, EXCLUDED.last_started),
        (lag_buckets, lag_counts) = (SELECT * FROM dnscamp_hist_sum(h.lag_buckets, h.lag_counts,
                                                                    EXCLUDED.lag_buckets, EXCLUDED.lag_counts))
)
INSERT INTO unit_daily AS u (day, campaign, vantage_id, region, kind, units, unit_counts)
SELECT day, campaign, vantage_id, region, kind, array_agg(unit ORDER BY unit COLLATE "C"), array_agg(n ORDER BY unit COLLATE "C")
FROM (SELECT x.day, c.campaign, c.vantage_id, c.region, c.kind, x.unit, sum(x.n)::int AS n
      FROM unnest(%b::timestamptz[], %b::int[], %b::text[], %b::bigint[]) AS x(day, ctx, unit, n) JOIN contexts c ON c.id = x.ctx
      GROUP BY 1, 2, 3, 4, 5, 6) AS k
GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
ON CONFLICT ON CONSTRAINT uq_unit_daily DO UPDATE SET
    (units, unit_counts) = (SELECT * FROM dnscamp_units_sum(u.units, u.unit_counts, EXCLUDED.units, EXCLUDED.unit_counts))
"""


def _ts(us: int) -> datetime:
    return PG_EPOCH + timedelta(microseconds=us)


def _lag_hist(starts: list[int], lo: int, hi: int, at: int) -> tuple[str, str]:
    """The ingest lags (``at`` - started_at, seconds: what extract(epoch ...) gives, as float8) of a
    group as a histogram (`bucket16`'s buckets, array texts). When the greatest and least lag
    share a bucket (a run's minute against a lag of minutes or more), every lag does."""
    first, last = bucket16((at - hi) / 1e6), bucket16((at - lo) / 1e6)
    if first == last:
        return "{%d}" % first, "{%d}" % len(starts)
    h: dict[int, int] = {}
    for s in starts:
        b = bucket16((at - s) / 1e6)
        h[b] = h.get(b, 0) + 1
    bs = sorted(h)
    return "{" + ",".join(map(str, bs)) + "}", "{" + ",".join([str(h[b]) for b in bs]) + "}"


def _health_params(cur: psycopg.Cursor, p: Parsed, idx: list[int], groups: dict[tuple, list[int]]) -> list:
    """The ingest_daily and unit_daily parameters of `COUNTS_UPSERT` for the batch's records
    ``idx`` grouped by (context id, UTC day): the batch (from the registry row of its first
    record, COPYed just before) and its ingested_at, then per group its sums and per (group, unit)
    its count."""
    batch, at = cur.execute(_BATCH_OF, (p.ids[idx[0]],)).fetchone()
    at_us = (at - PG_EPOCH) // US
    starts, statuses, units = p.starts, p.statuses, p.units
    days: list[list] = [[] for _ in range(8)]
    per_unit: list[list] = [[], [], [], []]
    for (ctx, day), members in groups.items():
        sts = [starts[i] for i in members]
        lo, hi = min(sts), max(sts)
        b, c = _lag_hist(sts, lo, hi, at_us)
        d = _ts(day * DAY_US)
        for col, v in zip(days, (d, ctx, len(sts), len(sts) - [statuses[i] for i in members].count("ok"), _ts(lo), _ts(hi),
                                 b, c)):  # fmt: skip
            col.append(v)
        un: dict[str | None, int] = {}
        for i in members:
            u = units[i]
            un[u] = un.get(u, 0) + 1
        for u, n in un.items():
            for col, v in zip(per_unit, (d, ctx, u, n)):
                col.append(v)
    return [batch, *days, *per_unit]


def add_rollups(cur: psycopg.Cursor, p: Parsed, idx: list[int], ctx_ids: dict[bytes, int], reparse) -> None:
    """The batch's new records into the rollups (dns_hourly, result_counts, 0017's
    dns_hourly_status, dns_conn_daily, page_load_daily, 0018's ingest_daily and unit_daily, 0019's
    dns_name_daily and page_load_url_daily), in the batch's transaction; keys in one order so that
    two ingests cannot deadlock. The parsers' rows and sums cover the whole chunk: a batch that
    stores some of its records only has its new records parsed again for them (``reparse(idx)``,
    the caller's: the writer keeps no lines)."""
    counts: dict[tuple, int] = {}
    groups: dict[tuple, list[int]] = {}  # (context id, UTC day) -> the records
    ctxs, statuses, starts = p.ctxs, p.statuses, p.starts
    for i in idx:
        c = ctx_ids[ctxs[i]]
        k = (c, statuses[i])
        counts[k] = counts.get(k, 0) + 1
        g = (c, starts[i] // DAY_US)
        members = groups.get(g)
        if members is None:
            groups[g] = [i]
        else:
            members.append(i)
    r = p if len(idx) == len(p.ids) else reparse(idx)
    dns, page_loads = [], []
    for h in r.hourly:
        if h is not None:
            (dns if h[:2] == HOURLY_START else page_loads).append(h)  # the field count says which
    sums = {t: rows for t, rows in r.sums.items() if rows}
    if dns or page_loads or sums:
        cur.execute("SELECT dnscamp_rollup_temp()")
    for t in ("hourly", "status", "names"):
        if t in sums:
            copy_rows(cur, SUM_COPY[t], sums[t])
    if dns:
        copy_rows(cur, _COPY_DNS_IN, dns)
    if dns or "hourly" in sums:
        cur.execute(HOURLY_UPSERT)
    if "status" in sums:
        cur.execute(STATUS_SUM_UPSERT)
    if "names" in sums:
        cur.execute(NAME_SUM_UPSERT)
    if "conn" in sums:
        copy_rows(cur, _COPY_CONN_IN, sums["conn"])
        cur.execute("SELECT dnscamp_rollup_conn()")
    if dns:  # dns_hourly_status, dns_conn_daily and dns_name_daily of the per-record rows
        cur.execute("SELECT dnscamp_rollup_dns(1, false)")
    if page_loads:
        copy_rows(cur, _COPY_PL_IN, page_loads)
        cur.execute("SELECT dnscamp_rollup_page_load(1)")
    cur.execute(COUNTS_UPSERT, [*(list(c) for c in zip(*((*k, n) for k, n in counts.items()))),
                                *_health_params(cur, p, idx, groups)])  # fmt: skip






# The rollup tables ingest updates (migration 0020_compact_rollups lets the writer VACUUM them):
# vacuumed every few batches (collectors.ingest.VACUUM_EVERY), so that the space of the row
# versions the batches left dead is reused by the next batches instead of growing the tables.
# Autovacuum does the same over the weeks a campaign's records take to come in, but looks once
# a minute: a backlog of a month ingested in minutes left dns_conn_daily at 4-7x its live rows
# (docs/store.md "Footprint").
# VACUUM skips a table it may not vacuum (PostgreSQL before 17) with a warning.
ROLLUP_TABLES = ("dns_hourly", "result_counts", "dns_hourly_status", "dns_conn_daily", "page_load_daily",
                 "ingest_daily", "unit_daily", "dns_name_daily", "page_load_url_daily")  # fmt: skip


def vacuum_rollups(url: str, vacuum: tuple | None) -> tuple[psycopg.Connection, list[str]]:
    """VACUUM the rollup tables on an autocommit connection (VACUUM cannot run in the batches'
    transactions), opened on first use with the list of the rollup tables this store's schema
    has (a store at an older revision lacks the newer ones); returns both for the next call."""
    if vacuum is None:
        conn = psycopg.connect(url, autocommit=True)
        tables = [t for (t,) in conn.execute("SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NOT NULL",
                                             (list(ROLLUP_TABLES),))]  # fmt: skip
        vacuum = conn, tables
    if vacuum[1]:
        vacuum[0].execute(f"VACUUM (SKIP_LOCKED) {', '.join(vacuum[1])}")
    return vacuum

