-- RIPE Atlas ping results (any firmware), one row per result, parsed with sagan.
-- rtts_ms: per-packet RTTs in order (NULL = lost, duplicates left out); avg_ms: mean of the
-- replies (001_3c494309ab66be23.txt §IV-B uses the average of five pings).
-- role: what the measurement is for in a QuicSocks campaign (probe_server, probe_resolver,
-- server_resolver), NULL for measurements dnscamp did not create.
CREATE OR REPLACE VIEW v_atlas_ping AS
SELECT p.raw_id,
       COALESCE(p.campaign, m.campaign) AS campaign,
       m.role,
       p.msm_id,
       p.prb_id,
       p."timestamp",
       p.fw,
       p.af,
       p.src_addr,
       p.from_addr,
       p.dst_addr,
       p.dst_name,
       p.sent,
       p.received,
       p.duplicates,
       p.rtts_ms,
       p.avg_ms,
       p.min_ms,
       p.max_ms,
       p.status,
       p.error
FROM atlas_ping p
LEFT JOIN atlas_measurements m ON m.msm_id = p.msm_id;
