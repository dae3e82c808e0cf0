-- Failure rates by campaign, kind, vantage, profile and status (Grafana's failure panel).
-- From the rollup result_counts (records per context and status, maintained by ingest).
CREATE OR REPLACE VIEW v_failures AS
SELECT c.campaign, c.kind, c.vantage_id, c.network_profile, x.status,
       sum(x.n)::bigint AS n,
       sum(x.n)::float8 / sum(sum(x.n)) OVER (PARTITION BY c.campaign, c.kind, c.vantage_id, c.network_profile) AS share
FROM result_counts x
JOIN contexts c ON c.id = x.ctx_id
GROUP BY c.campaign, c.kind, c.vantage_id, c.network_profile, x.status;
