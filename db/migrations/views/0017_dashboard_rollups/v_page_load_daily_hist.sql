-- The histograms of v_page_load_daily, one row per non-empty bucket: n loads whose plt_ms lies
-- in [lower_ms, upper_ms), plt_ms the bucket's middle (0 for bucket 0: below 0.001 ms).
CREATE OR REPLACE VIEW v_page_load_daily_hist AS
SELECT p.day, p.campaign, p.vantage_id, p.network_profile, p.browser, p.dns_mode, p.dns_transport, p.http, p.status,
       u.bucket::int AS bucket, u.n::bigint AS n,
       dnscamp_hist_value(u.bucket) AS plt_ms,
       CASE WHEN u.bucket > 0 THEN 0.001 * power(1.02::float8, u.bucket - 1) ELSE 0 END AS lower_ms,
       0.001 * power(1.02::float8, u.bucket) AS upper_ms
FROM page_load_daily p
CROSS JOIN LATERAL unnest(p.buckets, p.counts) AS u(bucket, n);
