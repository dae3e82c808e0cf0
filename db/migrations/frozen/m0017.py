"""Migration 0017_dashboard_rollups's rollup functions and its walk over the partitions,
frozen (0019_name_page_rollups extends the functions from this text and restores them on its
downgrade)."""

# dnscamp_dns_in -> dns_hourly_status and dns_conn_daily (counts times ``sign``), then emptied.
# Dynamic SQL: planned at each call for the batch (plpgsql's cached generic plan was 2x slower).
# The typed rows' shapes are fetched by sha256 first (an index probe per distinct shape).
CONN_CONFLICT = """    ON CONFLICT ON CONSTRAINT uq_dns_conn_daily DO UPDATE SET
        n = h.n + EXCLUDED.n, failures = h.failures + EXCLUDED.failures,
        total_packets = h.total_packets + EXCLUDED.total_packets,
        (total_buckets, total_counts) = (SELECT * FROM dnscamp_hist_sum(h.total_buckets, h.total_counts,
                                                                          EXCLUDED.total_buckets, EXCLUDED.total_counts)),
        (handshake_buckets, handshake_counts) = (SELECT * FROM dnscamp_hist_sum(h.handshake_buckets, h.handshake_counts,
                                                                          EXCLUDED.handshake_buckets, EXCLUDED.handshake_counts)),
        (exchange_buckets, exchange_counts) = (SELECT * FROM dnscamp_hist_sum(h.exchange_buckets, h.exchange_counts,
                                                                          EXCLUDED.exchange_buckets, EXCLUDED.exchange_counts)),
        (rtt_buckets, rtt_counts) = (SELECT * FROM dnscamp_hist_sum(h.rtt_buckets, h.rtt_counts,
                                                                      EXCLUDED.rtt_buckets, EXCLUDED.rtt_counts)),
        (ip_bytes_buckets, ip_bytes_counts) = (SELECT * FROM dnscamp_hist_sum(h.ip_bytes_buckets, h.ip_bytes_counts,
                                                                          EXCLUDED.ip_bytes_buckets, EXCLUDED.ip_bytes_counts))"""
ROLLUP_DNS_SQL = """
CREATE FUNCTION dnscamp_rollup_dns(sign int, skip_counted boolean) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE $q$
    INSERT INTO dns_hourly_status AS h (hour, campaign, vantage_id, network_profile, resolver, transport, status, n)
    SELECT hour, campaign, vantage_id, network_profile, resolver, transport, status, $1 * count(*)
    FROM dnscamp_dns_in WHERE status <> 'ok'
    GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7
    ON CONFLICT ON CONSTRAINT uq_dns_hourly_status DO UPDATE SET n = h.n + EXCLUDED.n
    $q$ USING sign;

    EXECUTE $q$
    WITH sh AS MATERIALIZED (
        SELECT * FROM dns_shapes
        WHERE sha256 = ANY (ARRAY(SELECT DISTINCT shape FROM dnscamp_dns_in WHERE shape IS NOT NULL AND NOT ($2 AND counted IS TRUE)))
    ), d AS (
        SELECT i.hour, i.campaign, i.vantage_id, i.network_profile, i.status, s.resolver, s.transport,
               s.connection_reused, s.resumed, s.access_rtt_ms, s.hdr_bytes,
               i.t_start, i.t_connected, i.t_tls_done, i.t_query_sent, i.t_response,
               i.handshake_bytes_sent, i.handshake_bytes_received, i.query_bytes_sent, i.query_bytes_received,
               i.handshake_packets_sent, i.handshake_packets_received, i.query_packets_sent, i.query_packets_received
        FROM dnscamp_dns_in i JOIN sh s ON s.sha256 = i.shape
        WHERE NOT ($2 AND i.counted IS TRUE)  -- summed by the parser already (dnscamp_rollup_conn)
        UNION ALL
        SELECT i.hour, i.campaign, i.vantage_id, i.network_profile, i.status,
               i.body ->> 'resolver', i.body ->> 'transport',
               JSON_VALUE(i.body, '$.connection_reused' RETURNING boolean),
               JSON_VALUE(i.body, '$.resumed' RETURNING boolean),
               JSON_VALUE(i.body, '$.access_rtt_ms' RETURNING float8),
               CASE WHEN i.body ->> 'transport' IN ('do53', 'doq', 'doh3') THEN 28 ELSE 52 END,
               JSON_VALUE(i.body, '$.t_start' RETURNING bigint), JSON_VALUE(i.body, '$.t_connected' RETURNING bigint),
               JSON_VALUE(i.body, '$.t_tls_done' RETURNING bigint),
               JSON_VALUE(i.body, '$.t_query_sent' RETURNING bigint),
               JSON_VALUE(i.body, '$.t_response' RETURNING bigint),
               JSON_VALUE(i.body, '$.handshake_bytes_sent' RETURNING bigint),
               JSON_VALUE(i.body, '$.handshake_bytes_received' RETURNING bigint),
               JSON_VALUE(i.body, '$.query_bytes_sent' RETURNING bigint),
               JSON_VALUE(i.body, '$.query_bytes_received' RETURNING bigint),
               JSON_VALUE(i.body, '$.handshake_packets_sent' RETURNING int),
               JSON_VALUE(i.body, '$.handshake_packets_received' RETURNING int),
               JSON_VALUE(i.body, '$.query_packets_sent' RETURNING int),
               JSON_VALUE(i.body, '$.query_packets_received' RETURNING int)
        FROM dnscamp_dns_in i WHERE i.shape IS NULL
    ), t AS (  -- v_dns_query's totals
        SELECT d.*,
               COALESCE(handshake_bytes_sent, 0)::numeric + COALESCE(handshake_bytes_received, 0)
                 + query_bytes_sent + query_bytes_received AS bytes_n,
               COALESCE(handshake_packets_sent, 0)::numeric + COALESCE(handshake_packets_received, 0)
                 + query_packets_sent + query_packets_received AS packets_n,
               CASE WHEN access_rtt_ms >= 0.001 THEN access_rtt_ms END AS rtt_divisor,
               dnscamp_ns_ms(t_response, t_start) AS total_ms
        FROM d
    ), x AS MATERIALIZED (  -- per record: its key, and the buckets of its measures when it is ok
        SELECT date_trunc('day', hour, 'UTC') AS day, campaign, vantage_id, network_profile, resolver, transport,
               CASE WHEN connection_reused THEN 'reuse' WHEN resumed THEN 'resume' ELSE 'fresh' END AS connection,
               status <> 'ok' AS failed,
               CASE WHEN status = 'ok' AND abs(packets_n) <= 2147483647 THEN packets_n END AS packets,
               CASE WHEN status = 'ok' THEN dnscamp_hist_bucket16(total_ms) END AS b_total,
               CASE WHEN status = 'ok'
                    THEN dnscamp_hist_bucket16(dnscamp_ns_ms(t_tls_done, COALESCE(t_connected, t_start))) END AS b_handshake,
               CASE WHEN status = 'ok' THEN dnscamp_hist_bucket16(dnscamp_ns_ms(t_response, t_query_sent)) END AS b_exchange,
               CASE WHEN status = 'ok' THEN dnscamp_hist_bucket16(total_ms / rtt_divisor) END AS b_rtt,
               CASE WHEN status = 'ok' AND abs(bytes_n + hdr_bytes * packets_n) <= 9223372036854775807
                    THEN dnscamp_hist_bucket16((bytes_n + hdr_bytes * packets_n)::bigint::float8) END AS b_ip_bytes
        FROM t
    ), u AS (  -- m 0: the record itself; m 1..5: a measure's bucket
        SELECT day, campaign, vantage_id, network_profile, resolver, transport, connection, v.m, v.b,
               count(*) AS c, count(*) FILTER (WHERE failed) AS f, COALESCE(sum(packets), 0) AS p
        FROM x CROSS JOIN LATERAL (VALUES (0, NULL::smallint), (1, b_total), (2, b_handshake), (3, b_exchange),
                                          (4, b_rtt), (5, b_ip_bytes)) AS v(m, b)
        WHERE v.m = 0 OR v.b IS NOT NULL
        GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
    )
    INSERT INTO dns_conn_daily AS h (day, campaign, vantage_id, network_profile, resolver, transport, connection,
        n, failures, total_packets, total_buckets, total_counts, handshake_buckets, handshake_counts,
        exchange_buckets, exchange_counts, rtt_buckets, rtt_counts, ip_bytes_buckets, ip_bytes_counts)
    SELECT day, campaign, vantage_id, network_profile, resolver, transport, connection,
           $1 * sum(c) FILTER (WHERE m = 0), $1 * sum(f) FILTER (WHERE m = 0), $1 * sum(p) FILTER (WHERE m = 0),
           COALESCE(array_agg(b ORDER BY b) FILTER (WHERE m = 1), '{{}}'), COALESCE(array_agg($1 * c ORDER BY b) FILTER (WHERE m = 1), '{{}}'),
           COALESCE(array_agg(b ORDER BY b) FILTER (WHERE m = 2), '{{}}'), COALESCE(array_agg($1 * c ORDER BY b) FILTER (WHERE m = 2), '{{}}'),
           COALESCE(array_agg(b ORDER BY b) FILTER (WHERE m = 3), '{{}}'), COALESCE(array_agg($1 * c ORDER BY b) FILTER (WHERE m = 3), '{{}}'),
           COALESCE(array_agg(b ORDER BY b) FILTER (WHERE m = 4), '{{}}'), COALESCE(array_agg($1 * c ORDER BY b) FILTER (WHERE m = 4), '{{}}'),
           COALESCE(array_agg(b ORDER BY b) FILTER (WHERE m = 5), '{{}}'), COALESCE(array_agg($1 * c ORDER BY b) FILTER (WHERE m = 5), '{{}}')
    FROM u GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7
{conflict}
    $q$ USING sign, skip_counted;
    IF sign < 0 THEN  -- a key whose records are all gone has no row (as one never seen)
        DELETE FROM dns_hourly_status WHERE n = 0 AND hour IN (SELECT hour FROM dnscamp_dns_in);
        DELETE FROM dns_conn_daily WHERE n = 0 AND day IN (SELECT date_trunc('day', hour, 'UTC') FROM dnscamp_dns_in);
    END IF;
    DELETE FROM dnscamp_dns_in;
END $$;
""".format(conflict=CONN_CONFLICT)

# dnscamp_conn_in (a batch's dns_conn_daily rows summed by ingest's parsers) -> dns_conn_daily.
ROLLUP_CONN_SQL = """
CREATE FUNCTION dnscamp_rollup_conn() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dns_conn_daily AS h (day, campaign, vantage_id, network_profile, resolver, transport, connection,
        n, failures, total_packets, total_buckets, total_counts, handshake_buckets, handshake_counts,
        exchange_buckets, exchange_counts, rtt_buckets, rtt_counts, ip_bytes_buckets, ip_bytes_counts)
    SELECT day, campaign, vantage_id, network_profile, resolver, transport, connection, n, failures, total_packets,
           total_buckets::smallint[], total_counts::int[], handshake_buckets::smallint[], handshake_counts::int[],
           exchange_buckets::smallint[], exchange_counts::int[], rtt_buckets::smallint[], rtt_counts::int[],
           ip_bytes_buckets::smallint[], ip_bytes_counts::int[]
    FROM dnscamp_conn_in ORDER BY 1, 2, 3, 4, 5, 6, 7
{conflict};
    DELETE FROM dnscamp_conn_in;
END $$;
""".format(conflict=CONN_CONFLICT)

# dnscamp_pl_in -> page_load_daily (key columns and plt_ms as v_page_load reads the body), then
# emptied. A subtraction (sign -1: a row deleted from the results view) recomputes the least
# and greatest plt_ms of its keys from the records left.
ROLLUP_PAGE_LOAD_SQL = """
CREATE FUNCTION dnscamp_rollup_page_load(sign int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH x AS (
        SELECT day, campaign, vantage_id, network_profile, body ->> 'browser' AS browser, body ->> 'dns_mode' AS dns_mode,
               body ->> 'dns_transport' AS dns_transport, body ->> 'http' AS http, status,
               JSON_VALUE(body, '$.plt_ms' RETURNING float8) AS plt
        FROM dnscamp_pl_in
    ), k AS (
        SELECT day, campaign, vantage_id, network_profile, browser, dns_mode, dns_transport, http, status,
               dnscamp_hist_bucket16(plt) AS b, count(*) AS c, min(plt) AS lo, max(plt) AS hi
        FROM x GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
    )
    INSERT INTO page_load_daily AS p (day, campaign, vantage_id, network_profile, browser, dns_mode, dns_transport, http,
                                      status, n, min_plt_ms, max_plt_ms, buckets, counts)
    SELECT day, campaign, vantage_id, network_profile, browser, dns_mode, dns_transport, http, status,
           sign * sum(c), min(lo), max(hi),
           COALESCE(array_agg(b ORDER BY b) FILTER (WHERE b IS NOT NULL), '{}'),
           COALESCE(array_agg(sign * c ORDER BY b) FILTER (WHERE b IS NOT NULL), '{}')
    FROM k GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9
    ON CONFLICT ON CONSTRAINT uq_page_load_daily DO UPDATE SET n = p.n + EXCLUDED.n,
        min_plt_ms = CASE WHEN sign > 0 THEN least(p.min_plt_ms, EXCLUDED.min_plt_ms) ELSE p.min_plt_ms END,
        max_plt_ms = CASE WHEN sign > 0 THEN greatest(p.max_plt_ms, EXCLUDED.max_plt_ms) ELSE p.max_plt_ms END,
        (buckets, counts) = (SELECT * FROM dnscamp_hist_sum(p.buckets, p.counts, EXCLUDED.buckets, EXCLUDED.counts));
    IF sign < 0 THEN
        DELETE FROM page_load_daily WHERE n = 0 AND day IN (SELECT day FROM dnscamp_pl_in);
        UPDATE page_load_daily p SET (min_plt_ms, max_plt_ms) = (
            SELECT min(v.plt_ms), max(v.plt_ms) FROM v_page_load v
            WHERE v.started_at >= p.day AND v.started_at < p.day + interval '1 day' AND v.campaign = p.campaign
              AND v.vantage_id = p.vantage_id AND v.network_profile IS NOT DISTINCT FROM p.network_profile
              AND v.browser IS NOT DISTINCT FROM p.browser AND v.dns_mode IS NOT DISTINCT FROM p.dns_mode
              AND v.dns_transport IS NOT DISTINCT FROM p.dns_transport AND v.http IS NOT DISTINCT FROM p.http
              AND v.status = p.status)
        WHERE p.day IN (SELECT day FROM dnscamp_pl_in);
    END IF;
    DELETE FROM dnscamp_pl_in;
END $$;
"""


def partitions(conn, parent: str) -> list[str]:
    rows = conn.exec_driver_sql(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        f"WHERE i.inhparent = '{parent}'::regclass ORDER BY 1").fetchall()  # fmt: skip
    return [r[0] for r in rows] or [parent]
