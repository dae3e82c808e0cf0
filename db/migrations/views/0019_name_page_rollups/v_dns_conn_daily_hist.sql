-- The histograms of v_dns_conn_daily, one row per measure and non-empty bucket: n ok records
-- whose measure ('total_ms', 'handshake_ms', 'exchange_ms': ms; 'total_rtt_multiple';
-- 'total_ip_bytes': bytes; each as v_dns_query defines it) lies in [lower, upper), value the
-- bucket's middle (0 for bucket 0: values below 0.001). Filter one measure, sum n per bucket
-- over the rows you want, then dnscamp_hist_quantile(array_agg(bucket), array_agg(n), q).
-- (0019: each measure's unnest reads the row's columns directly, a UNION ALL per row: a filter
-- on measure drops the other branches, and the planner no longer caches the unnests by their
-- arrays, which cost a quarter of the time over every measure.)
CREATE OR REPLACE VIEW v_dns_conn_daily_hist AS
SELECT d.day, d.campaign, d.vantage_id, d.network_profile, d.resolver, d.transport, d.connection,
       u.measure, u.bucket::int AS bucket, u.n::bigint AS n,
       dnscamp_hist_value(u.bucket) AS value,
       CASE WHEN u.bucket > 0 THEN 0.001 * power(1.02::float8, u.bucket - 1) ELSE 0 END AS lower,
       0.001 * power(1.02::float8, u.bucket) AS upper
FROM dns_conn_daily d
CROSS JOIN LATERAL (
    SELECT 'total_ms' AS measure, b AS bucket, c AS n FROM unnest(d.total_buckets, d.total_counts) AS x(b, c)
    UNION ALL SELECT 'handshake_ms', b, c FROM unnest(d.handshake_buckets, d.handshake_counts) AS x(b, c)
    UNION ALL SELECT 'exchange_ms', b, c FROM unnest(d.exchange_buckets, d.exchange_counts) AS x(b, c)
    UNION ALL SELECT 'total_rtt_multiple', b, c FROM unnest(d.rtt_buckets, d.rtt_counts) AS x(b, c)
    UNION ALL SELECT 'total_ip_bytes', b, c FROM unnest(d.ip_bytes_buckets, d.ip_bytes_counts) AS x(b, c)) AS u;
