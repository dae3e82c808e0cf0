-- RIPE Atlas DNS results, one row per response (a probe asking its own resolvers gives one
-- row per resolver). answers: the answer section decoded from the abuf by sagan.
CREATE OR REPLACE VIEW v_atlas_dns AS
SELECT d.id,
       d.raw_id,
       COALESCE(d.campaign, m.campaign) AS campaign,
       m.role,
       d.msm_id,
       d.prb_id,
       d."timestamp",
       d.fw,
       d.subid,
       d.af,
       d.resolver,
       d.src_addr,
       d.from_addr,
       d.proto,
       d.rcode,
       d.qname,
       d.qtype,
       d.answers,
       d.response_time_ms,
       d.response_size,
       d.status,
       d.error
FROM atlas_dns d
LEFT JOIN atlas_measurements m ON m.msm_id = d.msm_id;
