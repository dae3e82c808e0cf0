-- dns_query records per UTC day x campaign x vantage x network profile x resolver x transport x
-- qname x status (the rollup dns_name_daily, maintained by ingest; the columns as
-- v_dns_query has them): n records. Failures of a name: status <> 'ok'. A row of the table is a
-- day x campaign x vantage x profile with its (resolver, transport, qname, status) keys
-- (dns_name_keys) and their counts as two arrays: one row per key here.
-- day: start (midnight UTC) of the UTC day of started_at.
CREATE OR REPLACE VIEW v_dns_name_daily AS
SELECT d.day, d.campaign, d.vantage_id, d.network_profile, k.resolver, k.transport, k.qname, k.status,
       u.n::bigint AS n
FROM dns_name_daily d
CROSS JOIN LATERAL unnest(d.keys, d.counts) AS u(key, n)
JOIN dns_name_keys k ON k.id = u.key;
