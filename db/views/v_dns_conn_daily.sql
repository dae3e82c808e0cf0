-- dns_query records per UTC day x campaign x vantage x network profile x resolver x transport
-- x connection (the rollup dns_conn_daily, maintained by ingest). connection: 'reuse'
-- when connection_reused, else 'resume' when resumed, else 'fresh' (v_dns_query's columns).
-- n records, failures (status other than ok), timed (ok records with a total_ms),
-- total_packets (sum of v_dns_query.total_packets over the ok records), and percentiles of
-- the ok records' total_ms, handshake_ms, exchange_ms (ms), total_rtt_multiple (multiples of
-- the access RTT) and total_ip_bytes (bytes), each as v_dns_query defines it, read from
-- histograms of fixed log buckets (docs/store.md "Rollups"): within 1 % of percentile_disc.
-- For several rows at once, sum v_dns_conn_daily_hist per bucket of one measure.
-- day: start (midnight UTC) of the UTC day of started_at.
CREATE OR REPLACE VIEW v_dns_conn_daily AS
SELECT d.day, d.campaign, d.vantage_id, d.network_profile, d.resolver, d.transport, d.connection,
       d.n, d.failures, d.failures::float8 / d.n AS failure_rate,
       (SELECT COALESCE(sum(c), 0) FROM unnest(d.total_counts) AS c)::bigint AS timed,
       d.total_packets,
       dnscamp_hist_quantile(d.total_buckets::int[], d.total_counts::numeric[], 0.5) AS p50_total_ms,
       dnscamp_hist_quantile(d.total_buckets::int[], d.total_counts::numeric[], 0.9) AS p90_total_ms,
       dnscamp_hist_quantile(d.handshake_buckets::int[], d.handshake_counts::numeric[], 0.5) AS p50_handshake_ms,
       dnscamp_hist_quantile(d.handshake_buckets::int[], d.handshake_counts::numeric[], 0.9) AS p90_handshake_ms,
       dnscamp_hist_quantile(d.exchange_buckets::int[], d.exchange_counts::numeric[], 0.5) AS p50_exchange_ms,
       dnscamp_hist_quantile(d.exchange_buckets::int[], d.exchange_counts::numeric[], 0.9) AS p90_exchange_ms,
       dnscamp_hist_quantile(d.rtt_buckets::int[], d.rtt_counts::numeric[], 0.5) AS p50_total_rtt_multiple,
       dnscamp_hist_quantile(d.rtt_buckets::int[], d.rtt_counts::numeric[], 0.9) AS p90_total_rtt_multiple,
       dnscamp_hist_quantile(d.ip_bytes_buckets::int[], d.ip_bytes_counts::numeric[], 0.5) AS p50_total_ip_bytes,
       dnscamp_hist_quantile(d.ip_bytes_buckets::int[], d.ip_bytes_counts::numeric[], 0.9) AS p90_total_ip_bytes
FROM dns_conn_daily d;
