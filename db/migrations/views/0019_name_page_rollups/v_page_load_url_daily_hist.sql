-- Successful page loads (status 'ok') per UTC day x campaign x vantage x network profile x
-- browser x dns_mode x dns_transport x http x page url (the rollup page_load_url_daily,
-- maintained by ingest; the columns as v_page_load has them), one row per non-empty
-- bucket of their plt_ms histogram: n loads whose plt_ms lies in [lower_ms, upper_ms), plt_ms the
-- bucket's value (geometric middle; 0 for bucket 0). Sum n per bucket over the rows you want,
-- then dnscamp_hist_quantile(array_agg(bucket), array_agg(n), q): within 1 % of percentile_disc.
-- A row of the table is a day x campaign x vantage x profile with its (browser, dns_mode,
-- dns_transport, http, url) keys (page_load_url_keys), buckets and counts as three arrays.
-- day: start (midnight UTC) of the UTC day of started_at.
CREATE OR REPLACE VIEW v_page_load_url_daily_hist AS
SELECT p.day, p.campaign, p.vantage_id, p.network_profile, k.browser, k.dns_mode, k.dns_transport, k.http, k.url,
       u.bucket::int AS bucket, u.n::bigint AS n,
       dnscamp_hist_value(u.bucket) AS plt_ms,
       CASE WHEN u.bucket > 0 THEN 0.001 * power(1.02::float8, u.bucket - 1) ELSE 0 END AS lower_ms,
       0.001 * power(1.02::float8, u.bucket) AS upper_ms
FROM page_load_url_daily p
CROSS JOIN LATERAL unnest(p.keys, p.buckets, p.counts) AS u(key, bucket, n)
JOIN page_load_url_keys k ON k.id = u.key;
