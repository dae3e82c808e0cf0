-- Failure rates by campaign, kind, vantage, profile and status (Grafana's failure panel).
CREATE OR REPLACE VIEW v_failures AS
SELECT campaign, kind, vantage_id, network_profile, status,
       count(*) AS n,
       count(*)::float8 / sum(count(*)) OVER (PARTITION BY campaign, kind, vantage_id, network_profile) AS share
FROM results
GROUP BY campaign, kind, vantage_id, network_profile, status;
