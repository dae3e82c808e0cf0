-- Records per context (campaign x run x vantage x kind), ingest batch and UTC day of started_at
-- (the rollup ingest_daily, maintained by every writer): records, failed (status
-- other than ok), the first and last started_at, the batch's ingested_at, the greatest ingest
-- lag of the row (ingested_at - first_started, seconds: exact) and its median, read from a
-- histogram of each record's lag (ingested_at - started_at) in fixed log buckets
-- (docs/store.md "Rollups"): within 1 % of percentile_disc over the records; a negative lag
-- (a clock ahead of the store's) is read as 0. day: midnight UTC of started_at's day.
CREATE OR REPLACE VIEW v_ingest_daily AS
SELECT h.day, c.campaign, c.run, c.vantage_id, c.region, c.kind, c.network_profile, h.batch_id, b.ingested_at,
       h.n::bigint AS records, h.failed::bigint AS failed, h.first_started, h.last_started,
       extract(epoch FROM b.ingested_at - h.first_started) AS lag_max_s,
       dnscamp_hist_quantile(h.lag_buckets::int[], h.lag_counts::numeric[], 0.5) AS lag_p50_s
FROM ingest_daily h
LEFT JOIN contexts c ON c.id = h.ctx_id
LEFT JOIN ingest_batches b ON b.id = h.batch_id;
