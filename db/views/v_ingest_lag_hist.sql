-- The ingest-lag histograms of v_ingest_daily, one row per non-empty bucket: n records whose
-- lag (ingested_at - started_at, seconds) lies in [lower_s, upper_s), lag_s the bucket's
-- middle (0 for bucket 0: below 0.001 s, negative lags included).
CREATE OR REPLACE VIEW v_ingest_lag_hist AS
SELECT h.day, c.campaign, c.run, c.vantage_id, c.region, c.kind, h.batch_id, b.ingested_at, h.first_started, h.last_started,
       u.bucket::int AS bucket, u.n::bigint AS n,
       dnscamp_hist_value(u.bucket) AS lag_s,
       CASE WHEN u.bucket > 0 THEN 0.001 * power(1.02::float8, u.bucket - 1) ELSE 0 END AS lower_s,
       0.001 * power(1.02::float8, u.bucket) AS upper_s
FROM ingest_daily h
LEFT JOIN contexts c ON c.id = h.ctx_id
LEFT JOIN ingest_batches b ON b.id = h.batch_id
CROSS JOIN LATERAL unnest(h.lag_buckets, h.lag_counts) AS u(bucket, n);
