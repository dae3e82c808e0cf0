-- Failure rates by campaign, kind, vantage, profile and status (Grafana's failure panel).
CREATE OR REPLACE VIEW v_failures AS
SELECT c.campaign, c.kind, c.vantage_id, c.network_profile, x.status,
       count(*) AS n,
       count(*)::float8 / sum(count(*)) OVER (PARTITION BY c.campaign, c.kind, c.vantage_id, c.network_profile) AS share
FROM (SELECT ctx_id, status FROM dns_queries UNION ALL SELECT ctx_id, status FROM generic_results) x
JOIN contexts c ON c.id = x.ctx_id
GROUP BY c.campaign, c.kind, c.vantage_id, c.network_profile, x.status;
