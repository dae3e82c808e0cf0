-- RIPE Atlas probe metadata per campaign (where each probe of the campaign stood when its results
-- were fetched): country, IPv4 AS, coordinates and status from the Atlas probe API
-- (source 'atlas_api'), or the documented site of a testbed Atlas-like probe (source
-- 'testbed', testbed/atlas_probes/sites.json). Join v_quicsocks_savings on (campaign, prb_id) to place
-- the savings on a map.
CREATE OR REPLACE VIEW v_atlas_probes AS
SELECT p.campaign,
       p.prb_id,
       p.country_code,
       p.asn_v4,
       p.lat,
       p.lon,
       p.status,
       p.source,
       p.fetched_at
FROM atlas_probes p;
