-- The histograms of v_dns_hourly, one row per non-empty bucket: n ok records whose total_ms
-- lies in [lower_ms, upper_ms), total_ms the bucket's value (geometric middle; 0 for bucket 0,
-- values below 0.001 ms). Sum n per bucket over the rows you want, then
-- dnscamp_hist_quantile(array_agg(bucket), array_agg(n), q) gives the q-quantile.
CREATE OR REPLACE VIEW v_dns_hourly_hist AS
SELECT h.hour, k.campaign, k.vantage_id, k.network_profile, k.resolver, k.transport,
       u.bucket::int AS bucket, u.n::bigint AS n,
       dnscamp_hist_value(u.bucket) AS total_ms,
       CASE WHEN u.bucket > 0 THEN 0.001 * power(1.02::float8, u.bucket - 1) ELSE 0 END AS lower_ms,
       0.001 * power(1.02::float8, u.bucket) AS upper_ms
FROM dns_hourly h
JOIN dns_hourly_keys k ON k.id = h.key_id
CROSS JOIN LATERAL unnest(h.buckets, h.counts) AS u(bucket, n);
