-- Failed dns_query records per hour x campaign x vantage x network profile x resolver x
-- transport (the keys of v_dns_hourly) and status other than ok (the rollup dns_hourly_status,
-- maintained by ingest): n records. Per key, sum(n) is v_dns_hourly.failures.
-- hour: start of the UTC hour of started_at.
CREATE OR REPLACE VIEW v_dns_hourly_status AS
SELECT s.hour, s.campaign, s.vantage_id, s.network_profile, s.resolver, s.transport, s.status, s.n
FROM dns_hourly_status s;
