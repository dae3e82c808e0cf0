-- What a campaign holds, per where it was measured: one row per campaign x kind x vantage x
-- provider x region x network profile, with its runs, records, failed records (status other than
-- ok) and the first and last started_at. Read from the contexts and the rollup ingest_daily
-- (never the records), so it is cheap at any size: the dashboards' campaign, region and vantage
-- variables and the public dashboards' time window come from here.
CREATE OR REPLACE VIEW v_contexts AS
SELECT c.campaign, c.kind, c.vantage_id, c.provider, c.region, c.network_profile,
       count(DISTINCT c.run)::bigint AS runs, sum(h.n)::bigint AS records, sum(h.failed)::bigint AS failed,
       min(h.first_started) AS first_started, max(h.last_started) AS last_started
FROM contexts c
JOIN ingest_daily h ON h.ctx_id = c.id
GROUP BY c.campaign, c.kind, c.vantage_id, c.provider, c.region, c.network_profile;
