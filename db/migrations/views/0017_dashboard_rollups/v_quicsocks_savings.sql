-- QuicSocks savings per probe (001_3c494309ab66be23.txt Table I and §IV-B).
-- RTT_DNS = probe -> its resolver (the address that reached our authoritative server),
-- RTT_Server = server -> that resolver, RTT_direct = probe -> server; each the mean of the
-- replies of the latest successful ping (five packets). isp_resolver: same AS as the probe.
-- The pings are read from atlas_ping_latest (0017): the latest successful ping per campaign,
-- measurement, probe and destination, kept by a trigger on atlas_ping; the latest per role
-- is the latest of those, so the rows are the same as over every ping.
CREATE OR REPLACE VIEW v_quicsocks_savings AS
WITH pings AS (
    SELECT COALESCE(p.campaign, m.campaign) AS campaign,
           m.role,
           p.prb_id,
           p.dst_addr,
           p.avg_ms,
           row_number() OVER (
               PARTITION BY COALESCE(p.campaign, m.campaign), m.role,
                            CASE WHEN m.role = 'server_resolver' THEN 0 ELSE p.prb_id END,
                            CASE WHEN m.role = 'probe_server' THEN '' ELSE p.dst_addr END
               ORDER BY p."timestamp" DESC, p.raw_id DESC) AS rn
    FROM atlas_ping_latest p
    JOIN atlas_measurements m ON m.msm_id = p.msm_id
), latest AS (
    SELECT * FROM pings WHERE rn = 1
)
SELECT d.campaign,
       d.prb_id,
       d.probe_addr,
       d.resolver,
       d.configured_resolver,
       d.probe_asn,
       d.resolver_asn,
       (d.probe_asn IS NOT NULL AND d.probe_asn = d.resolver_asn) AS isp_resolver,
       dns.avg_ms AS rtt_dns_ms,
       srv.avg_ms AS rtt_server_ms,
       dir.avg_ms AS rtt_direct_ms,
       dns.avg_ms + dir.avg_ms AS status_quo_ms,
       dns.avg_ms + srv.avg_ms AS proposal_ms,
       dns.avg_ms + 2 * dir.avg_ms AS status_quo_retry_ms,
       dns.avg_ms + 2 * srv.avg_ms AS proposal_retry_ms,
       dir.avg_ms - srv.avg_ms AS saving_ms,
       2 * (dir.avg_ms - srv.avg_ms) AS saving_retry_ms
FROM atlas_discovery d
LEFT JOIN latest dns ON dns.campaign = d.campaign AND dns.role = 'probe_resolver'
                    AND dns.prb_id = d.prb_id AND dns.dst_addr = d.resolver
LEFT JOIN latest dir ON dir.campaign = d.campaign AND dir.role = 'probe_server' AND dir.prb_id = d.prb_id
LEFT JOIN latest srv ON srv.campaign = d.campaign AND srv.role = 'server_resolver' AND srv.dst_addr = d.resolver;
