-- page_load records per UTC day x campaign x vantage x network profile x browser x dns_mode x
-- dns_transport x http x status (the rollup page_load_daily, maintained by ingest;
-- the key columns as v_page_load has them): n loads, timed (loads with a plt_ms), the least
-- and greatest plt_ms, and percentiles of plt_ms read from a histogram of fixed log buckets
-- (docs/store.md "Rollups"): within 1 % of percentile_disc. Every load with a plt_ms is in
-- the histogram whatever its status: filter status = 'ok' for successful loads.
-- day: start (midnight UTC) of the UTC day of started_at.
CREATE OR REPLACE VIEW v_page_load_daily AS
SELECT p.day, p.campaign, p.vantage_id, p.network_profile, p.browser, p.dns_mode, p.dns_transport, p.http, p.status,
       p.n, (SELECT COALESCE(sum(c), 0) FROM unnest(p.counts) AS c)::bigint AS timed,
       p.min_plt_ms, p.max_plt_ms,
       dnscamp_hist_quantile(p.buckets::int[], p.counts::numeric[], 0.5) AS p50_plt_ms,
       dnscamp_hist_quantile(p.buckets::int[], p.counts::numeric[], 0.9) AS p90_plt_ms
FROM page_load_daily p;
