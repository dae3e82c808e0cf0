-- The histograms of v_dns_conn_daily, one row per measure and non-empty bucket: n ok records
-- whose measure ('total_ms', 'handshake_ms', 'exchange_ms': ms; 'total_rtt_multiple';
-- 'total_ip_bytes': bytes; each as v_dns_query defines it) lies in [lower, upper), value the
-- bucket's middle (0 for bucket 0: values below 0.001). Filter one measure, sum n per bucket
-- over the rows you want, then dnscamp_hist_quantile(array_agg(bucket), array_agg(n), q).
CREATE OR REPLACE VIEW v_dns_conn_daily_hist AS
SELECT d.day, d.campaign, d.vantage_id, d.network_profile, d.resolver, d.transport, d.connection,
       m.measure, u.bucket::int AS bucket, u.n::bigint AS n,
       dnscamp_hist_value(u.bucket) AS value,
       CASE WHEN u.bucket > 0 THEN 0.001 * power(1.02::float8, u.bucket - 1) ELSE 0 END AS lower,
       0.001 * power(1.02::float8, u.bucket) AS upper
FROM dns_conn_daily d
CROSS JOIN LATERAL (VALUES ('total_ms', d.total_buckets, d.total_counts),
                           ('handshake_ms', d.handshake_buckets, d.handshake_counts),
                           ('exchange_ms', d.exchange_buckets, d.exchange_counts),
                           ('total_rtt_multiple', d.rtt_buckets, d.rtt_counts),
                           ('total_ip_bytes', d.ip_bytes_buckets, d.ip_bytes_counts)) AS m(measure, buckets, counts)
CROSS JOIN LATERAL unnest(m.buckets, m.counts) AS u(bucket, n);
