-- dns_query records per hour x campaign x vantage x network profile x resolver x transport
-- (the rollup dns_hourly, maintained by ingest): n records, failures (status other
-- than ok), timed (ok records with both t_start and t_response: the histogram's), percentiles
-- of total_ms (as v_dns_query's: t_response - t_start, ms) read from a histogram of fixed log
-- buckets (docs/store.md "Rollups"): within 1 % of the exact percentile_disc of the same
-- records. For several rows at once, aggregate v_dns_hourly_hist (bucket, n) and read the
-- percentile with dnscamp_hist_quantile(array_agg(bucket), array_agg(n), q).
-- hour: start of the UTC hour of started_at.
CREATE OR REPLACE VIEW v_dns_hourly AS
SELECT h.hour, h.campaign, h.vantage_id, h.network_profile, h.resolver, h.transport,
       h.n, h.failures, h.failures::float8 / h.n AS failure_rate,
       (SELECT COALESCE(sum(c), 0) FROM unnest(h.counts) AS c)::bigint AS timed,
       dnscamp_hist_quantile(h.buckets::int[], h.counts::numeric[], 0.5) AS p50_total_ms,
       dnscamp_hist_quantile(h.buckets::int[], h.counts::numeric[], 0.9) AS p90_total_ms,
       dnscamp_hist_quantile(h.buckets::int[], h.counts::numeric[], 0.99) AS p99_total_ms
FROM dns_hourly h;
